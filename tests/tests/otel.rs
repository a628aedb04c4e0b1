//! OpenTelemetry export (agent-core's `otel` feature, enabled for this package's tests):
//! the GenAI spans and metrics as the SDK's in-memory exporters receive them, the run's
//! trace id, and content capture off by default.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use agent_core::otel::{DURATION_BUCKETS, GenAiMetrics, TOKEN_BUCKETS};
use agent_core::providers::ProviderOptions;
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentError, AgentResult, agent_output,
    llm::{LlmError, LlmResponse, TokenUsage},
    run_agent, tool, tools,
};
use opentelemetry::metrics::MeterProvider;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{KeyValue, Value as OtelValue};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, HistogramDataPoint, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

/// The run's answer.
#[agent_output]
#[derive(Debug, PartialEq)]
pub struct Answer {
    /// The order's status.
    pub status: String,
}

/// Looks an order up.
#[tool]
async fn lookup_order(order_id: String) -> String {
    format!("{{\"order_id\":\"{order_id}\",\"status\":\"in transit\"}}")
}

const INPUT: &str = "Where is parcel A-1001? My card is 4111-1111-1111-1111.";
const SECRET: &str = "sk-secret-never-captured-93f1";

/// A tracer and a meter with in-memory exporters, installed for this thread.
struct Telemetry {
    spans: InMemorySpanExporter,
    metrics: InMemoryMetricExporter,
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Telemetry {
    fn install() -> Self {
        let spans = InMemorySpanExporter::default();
        let tracer_provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let metrics = InMemoryMetricExporter::default();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics.clone()).build())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(agent_core::otel::layer(tracer_provider.tracer("otel-test")))
            .with(GenAiMetrics::new(&meter_provider.meter("otel-test")));
        let guard = tracing::subscriber::set_default(subscriber);
        Self {
            spans,
            metrics,
            tracer_provider,
            meter_provider,
            _guard: guard,
        }
    }

    fn spans(&self) -> Vec<SpanData> {
        self.tracer_provider.force_flush().unwrap();
        self.spans.get_finished_spans().unwrap()
    }

    /// The data points of a histogram, as `(attributes, count, sum as f64, bounds)`.
    fn histogram(&self, name: &str) -> Vec<(Vec<KeyValue>, u64, f64, Vec<f64>)> {
        self.meter_provider.force_flush().unwrap();
        let mut out = Vec::new();
        // Cumulative temporality: the last export holds every point so far.
        let exports = self.metrics.get_finished_metrics().unwrap();
        let Some(resource) = exports.last() else {
            return out;
        };
        for scope in resource.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name() == name) {
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Histogram(h)) => {
                        out.extend(h.data_points().map(|p| point(p, |v| v as f64)));
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        out.extend(h.data_points().map(|p| point(p, |v| v)));
                    }
                    other => panic!("{name}: not a histogram: {other:?}"),
                }
            }
        }
        out
    }
}

fn point<T: Copy>(
    p: &HistogramDataPoint<T>,
    to_f64: impl Fn(T) -> f64,
) -> (Vec<KeyValue>, u64, f64, Vec<f64>) {
    (
        p.attributes().cloned().collect(),
        p.count(),
        to_f64(p.sum()),
        p.bounds().collect(),
    )
}

fn attr<'s>(span: &'s SpanData, key: &str) -> Option<&'s OtelValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn attr_str(span: &SpanData, key: &str) -> Option<String> {
    attr(span, key).map(|v| v.as_str().into_owned())
}

fn has(attributes: &[KeyValue], key: &str, value: &str) -> bool {
    attributes
        .iter()
        .any(|kv| kv.key.as_str() == key && kv.value.as_str() == value)
}

fn named<'s>(spans: &'s [SpanData], prefix: &str) -> Vec<&'s SpanData> {
    spans
        .iter()
        .filter(|s| s.name.starts_with(prefix))
        .collect()
}

/// A model that calls `lookup_order`, then submits; both turns report usage.
fn scripted() -> ScriptedModel {
    let model = ScriptedModel::new();
    let call = model
        .call("lookup_order", json!({"order_id": "A-1001"}))
        .with_thought_signature("OPAQUE-SIGNATURE-7d2");
    let mut first = LlmResponse::tool_calls(vec![call]).with_usage(TokenUsage::new(100, 20));
    first.model = Some("scripted-model-001".to_owned());
    let submit = model.call("submit_output", json!({"status": "in transit"}));
    let second = LlmResponse::tool_calls(vec![submit]).with_usage(TokenUsage::new(150, 10));
    model.respond(first).respond(second)
}

fn config(model: &ScriptedModel, capture: bool) -> AgentConfig<Answer> {
    AgentConfig::<Answer>::builder("orders")
        .llm(model.clone())
        .model("scripted-model")
        .provider(ProviderOptions::default().with_api_key(SECRET))
        .state(SECRET.to_owned())
        .system_prompt("You answer questions about orders.")
        .tools(tools![lookup_order])
        .capture_content(capture)
        .build()
        .unwrap()
}

fn answered(result: &AgentResult<Answer>) {
    assert_eq!(
        result.outcome,
        Ok(Answer {
            status: "in transit".to_owned()
        })
    );
}

#[tokio::test]
async fn exported_spans_follow_the_genai_conventions_and_carry_the_runs_trace_id() {
    let telemetry = Telemetry::install();
    let model = scripted();
    let result = run_agent(&config(&model, false), INPUT).await;
    answered(&result);
    let spans = telemetry.spans();

    let agents = named(&spans, "invoke_agent");
    assert_eq!(agents.len(), 1, "{spans:#?}");
    let agent = agents[0];
    assert_eq!(agent.name, "invoke_agent orders");
    // The run's trace id is the exported trace id, on every span of the run.
    assert_eq!(result.trace_id, agent.span_context.trace_id().to_string());
    assert_eq!(
        attr_str(agent, "trace_id").as_deref(),
        Some(result.trace_id.as_str())
    );
    assert!(
        spans
            .iter()
            .all(|s| s.span_context.trace_id() == agent.span_context.trace_id())
    );
    assert_eq!(
        attr_str(agent, "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(
        attr_str(agent, "gen_ai.agent.name").as_deref(),
        Some("orders")
    );
    assert_eq!(
        attr_str(agent, "gen_ai.provider.name").as_deref(),
        Some("scripted")
    );
    assert_eq!(
        attr_str(agent, "gen_ai.request.model").as_deref(),
        Some("scripted-model")
    );
    assert!(attr(agent, "error.type").is_none());
    assert_eq!(agent.status, Status::Unset);

    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 2);
    for chat in &chats {
        assert_eq!(chat.name, "chat scripted-model");
        assert_eq!(chat.span_kind, SpanKind::Client);
        assert_eq!(chat.parent_span_id, agent.span_context.span_id());
        assert_eq!(
            attr_str(chat, "gen_ai.operation.name").as_deref(),
            Some("chat")
        );
        assert_eq!(
            attr_str(chat, "gen_ai.provider.name").as_deref(),
            Some("scripted")
        );
        assert_eq!(
            attr(chat, "gen_ai.request.max_tokens"),
            Some(&OtelValue::I64(4096))
        );
        // A string array, as the conventions type it.
        assert_eq!(
            attr(chat, "gen_ai.response.finish_reasons"),
            Some(&OtelValue::Array(
                vec![opentelemetry::StringValue::from("tool_calls")].into()
            ))
        );
    }
    assert_eq!(
        attr(chats[0], "gen_ai.usage.input_tokens"),
        Some(&OtelValue::I64(100))
    );
    assert_eq!(
        attr(chats[0], "gen_ai.usage.output_tokens"),
        Some(&OtelValue::I64(20))
    );
    assert_eq!(
        attr_str(chats[0], "gen_ai.response.model").as_deref(),
        Some("scripted-model-001")
    );
    assert_eq!(
        attr(chats[1], "gen_ai.usage.input_tokens"),
        Some(&OtelValue::I64(150))
    );

    let tools = named(&spans, "execute_tool");
    assert_eq!(tools.len(), 1);
    let tool = tools[0];
    assert_eq!(tool.name, "execute_tool lookup_order");
    assert_eq!(tool.parent_span_id, agent.span_context.span_id());
    assert_eq!(
        attr_str(tool, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(
        attr_str(tool, "gen_ai.tool.name").as_deref(),
        Some("lookup_order")
    );
    assert_eq!(
        attr_str(tool, "gen_ai.tool.type").as_deref(),
        Some("function")
    );
    assert_eq!(
        attr_str(tool, "gen_ai.tool.call.id").as_deref(),
        Some("call_1")
    );
    // Tool, then the second round trip, in time.
    assert!(chats[0].end_time <= tool.start_time && tool.end_time <= chats[1].start_time);

    // Content is off by default: no content attribute, the prompt nowhere.
    for span in &spans {
        for key in [
            "gen_ai.system_instructions",
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert!(attr(span, key).is_none(), "{key} on {}", span.name);
        }
        let everything = format!("{:?} {:?}", span.attributes, span.events);
        assert!(!everything.contains("A-1001"), "{everything}");
        assert!(!everything.contains(SECRET), "{everything}");
    }
}

#[tokio::test]
async fn token_usage_and_durations_are_recorded_as_genai_metrics() {
    let telemetry = Telemetry::install();
    let model = scripted();
    let result = run_agent(&config(&model, false), INPUT).await;
    answered(&result);

    // Two round trips; the first names its response model, so it is a series of its own.
    let tokens = telemetry.histogram("gen_ai.client.token.usage");
    assert_eq!(tokens.len(), 4, "{tokens:?}");
    for (kind, first, second) in [("input", 100.0, 150.0), ("output", 20.0, 10.0)] {
        let points: Vec<_> = tokens
            .iter()
            .filter(|(a, ..)| has(a, "gen_ai.token.type", kind))
            .collect();
        assert_eq!(points.len(), 2, "{kind}: {points:?}");
        let with_model = |model: bool| {
            points
                .iter()
                .find(|(a, ..)| has(a, "gen_ai.response.model", "scripted-model-001") == model)
                .unwrap()
        };
        assert_eq!(
            (with_model(true).1, with_model(true).2),
            (1, first),
            "{kind}"
        );
        assert_eq!(
            (with_model(false).1, with_model(false).2),
            (1, second),
            "{kind}"
        );
        for (attributes, _, _, bounds) in points {
            assert_eq!(bounds, &TOKEN_BUCKETS.to_vec());
            assert!(has(attributes, "gen_ai.operation.name", "chat"));
            assert!(has(attributes, "gen_ai.provider.name", "scripted"));
            assert!(has(attributes, "gen_ai.request.model", "scripted-model"));
        }
    }

    let durations = telemetry.histogram("gen_ai.client.operation.duration");
    let count_of = |operation: &str| -> u64 {
        durations
            .iter()
            .filter(|(a, ..)| has(a, "gen_ai.operation.name", operation))
            .map(|(_, count, ..)| count)
            .sum()
    };
    assert_eq!(count_of("chat"), 2, "{durations:?}");
    assert_eq!(count_of("invoke_agent"), 1, "{durations:?}");
    assert!(durations.iter().all(|(_, _, sum, bounds)| {
        *sum >= 0.0 && *sum < 60.0 && bounds == &DURATION_BUCKETS.to_vec()
    }));
    assert!(
        durations
            .iter()
            .all(|(a, ..)| !a.iter().any(|kv| kv.key.as_str() == "error.type"))
    );
}

#[tokio::test]
async fn content_is_captured_when_the_config_says_so_and_secrets_never() {
    let telemetry = Telemetry::install();
    let model = scripted();
    let result = run_agent(&config(&model, true), INPUT).await;
    answered(&result);
    let spans = telemetry.spans();

    let chats = named(&spans, "chat ");
    let system: serde_json::Value =
        serde_json::from_str(&attr_str(chats[0], "gen_ai.system_instructions").unwrap()).unwrap();
    assert_eq!(
        system,
        json!([{"type": "text", "content": "You answer questions about orders."}])
    );
    let input: serde_json::Value =
        serde_json::from_str(&attr_str(chats[0], "gen_ai.input.messages").unwrap()).unwrap();
    assert_eq!(
        input,
        json!([{"role": "user", "parts": [{"type": "text", "content": INPUT}]}])
    );
    let output: serde_json::Value =
        serde_json::from_str(&attr_str(chats[0], "gen_ai.output.messages").unwrap()).unwrap();
    assert_eq!(
        output,
        json!([{"role": "assistant", "finish_reason": "tool_calls", "parts": [
            {"type": "tool_call", "id": "call_1", "name": "lookup_order", "arguments": {"order_id": "A-1001"}}
        ]}])
    );
    // The second round trip sends the whole conversation, the tool's answer included.
    let second: serde_json::Value =
        serde_json::from_str(&attr_str(chats[1], "gen_ai.input.messages").unwrap()).unwrap();
    assert_eq!(second.as_array().unwrap().len(), 3);
    assert_eq!(
        second[2],
        json!({"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1",
            "response": "{\"order_id\":\"A-1001\",\"status\":\"in transit\"}"}]})
    );

    let tool = named(&spans, "execute_tool")[0];
    assert_eq!(
        attr_str(tool, "gen_ai.tool.call.arguments").as_deref(),
        Some(r#"{"order_id":"A-1001"}"#)
    );
    assert_eq!(
        attr_str(tool, "gen_ai.tool.call.result").as_deref(),
        Some(r#"{"order_id":"A-1001","status":"in transit"}"#)
    );

    // Never the key, the request state or the provider's opaque signature.
    for span in &spans {
        let everything = format!("{:?} {:?}", span.attributes, span.events);
        assert!(!everything.contains(SECRET), "{everything}");
        assert!(!everything.contains("OPAQUE-SIGNATURE"), "{everything}");
    }
}

#[tokio::test]
async fn a_failed_run_marks_its_spans_and_duration_with_the_error_type() {
    let telemetry = Telemetry::install();
    let model = ScriptedModel::new().fail(LlmError::permanent("HTTP 400: bad request"));
    let result = run_agent(&config(&model, false), INPUT).await;
    assert!(matches!(
        result.outcome,
        Err(AgentError::LlmPermanent { .. })
    ));
    let spans = telemetry.spans();
    let chat = named(&spans, "chat ")[0];
    assert_eq!(
        attr_str(chat, "error.type").as_deref(),
        Some("llm_permanent_error")
    );
    assert!(
        matches!(chat.status, Status::Error { .. }),
        "{:?}",
        chat.status
    );
    assert!(attr(chat, "gen_ai.usage.input_tokens").is_none());
    let agent = named(&spans, "invoke_agent")[0];
    assert_eq!(
        attr_str(agent, "error.type").as_deref(),
        Some("llm_permanent_error")
    );
    assert!(matches!(agent.status, Status::Error { .. }));
    assert_eq!(result.trace_id, agent.span_context.trace_id().to_string());

    assert!(telemetry.histogram("gen_ai.client.token.usage").is_empty());
    let durations = telemetry.histogram("gen_ai.client.operation.duration");
    assert_eq!(durations.len(), 2, "{durations:?}");
    assert!(
        durations
            .iter()
            .all(|(a, ..)| has(a, "error.type", "llm_permanent_error"))
    );
}

#[tokio::test]
async fn a_run_inside_an_otel_span_joins_its_trace() {
    let telemetry = Telemetry::install();
    let tracer = telemetry.tracer_provider.tracer("server");
    let outer = tracer.start("POST /tickets");
    let outer_trace = outer.span_context().trace_id();
    let cx = opentelemetry::Context::current_with_span(outer);
    let parent = tracing::info_span!("handler");
    use agent_core::otel::tracing_opentelemetry::OpenTelemetrySpanExt;
    parent.set_parent(cx).unwrap();
    let model = scripted();
    let result = {
        use tracing::Instrument;
        run_agent(&config(&model, false), INPUT)
            .instrument(parent)
            .await
    };
    answered(&result);
    assert_eq!(result.trace_id, outer_trace.to_string());
    let spans = telemetry.spans();
    let agent = named(&spans, "invoke_agent")[0];
    assert_eq!(agent.span_context.trace_id(), outer_trace);
}

#[tokio::test]
async fn without_an_otel_layer_the_trace_id_stays_random() {
    let ids: Vec<String> = {
        let mut ids = Vec::new();
        for _ in 0..2 {
            let model = scripted();
            let result = run_agent(&config(&model, true), INPUT).await;
            answered(&result);
            ids.push(result.trace_id);
        }
        ids
    };
    assert_ne!(ids[0], ids[1]);
    for id in &ids {
        assert_eq!(id.len(), 32);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }
    // A tracing subscriber without OpenTelemetry: random too, and the run is unchanged.
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry());
    let model = scripted();
    let result = run_agent(&config(&model, false), INPUT).await;
    answered(&result);
    assert_eq!(result.trace_id.len(), 32);
}
