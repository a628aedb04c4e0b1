//! OpenTelemetry export of the GenAI spans and metrics (feature `otel`, off by default).
//!
//! The runner already emits `tracing` spans named and attributed after the OpenTelemetry
//! GenAI semantic conventions (<https://opentelemetry.io/docs/specs/semconv/gen-ai/>):
//! `invoke_agent {name}`, one `chat {model}` per LLM call (span kind client), one
//! `execute_tool {tool}` per tool execution. This module is the glue to export them:
//!
//! - [`layer`]: a `tracing-opentelemetry` layer for your tracer, set up for these spans;
//! - [`GenAiMetrics`]: a `tracing` layer that records the GenAI client metrics
//!   (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`) with your meter;
//! - with a tracing-opentelemetry layer installed, [`AgentResult::trace_id`] is the
//!   OpenTelemetry trace id of the run's `invoke_agent` span (a run inside an OTel
//!   context, such as an HTTP server's span, joins that trace); without one it stays a
//!   random 32-hex-digit id.
//!
//! Prompt and response content is not recorded unless the config says so
//! ([`capture_content`](crate::AgentConfigBuilder::capture_content)). The crates this
//! glue is built on are re-exported ([`opentelemetry`], [`tracing_opentelemetry`]) so
//! your versions agree with ours; the SDK and an exporter come from your own
//! dependencies (`opentelemetry_sdk` 0.33, `opentelemetry-otlp` 0.33). A whole OTLP setup
//! is in `docs/observability.md`:
//!
//! ```ignore
//! let provider = SdkTracerProvider::builder().with_batch_exporter(otlp_exporter).build();
//! let meter_provider = SdkMeterProvider::builder().with_periodic_exporter(otlp_metrics).build();
//! tracing_subscriber::registry()
//!     .with(agent_core::otel::layer(provider.tracer("agent-core")))
//!     .with(agent_core::otel::GenAiMetrics::new(&meter_provider.meter("agent-core")))
//!     .init();
//! ```
//!
//! [`AgentResult::trace_id`]: crate::AgentResult::trace_id

use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};
use opentelemetry::trace::TraceContextExt;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Span, Subscriber};
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

pub use opentelemetry;
pub use tracing_opentelemetry;

/// The explicit bucket boundaries of `gen_ai.client.token.usage` (tokens), as the GenAI
/// metrics conventions give them
/// (<https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-metrics/>).
pub const TOKEN_BUCKETS: [f64; 14] = [
    1.0,
    4.0,
    16.0,
    64.0,
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];

/// The explicit bucket boundaries of `gen_ai.client.operation.duration` (seconds), as the
/// GenAI metrics conventions give them.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// A `tracing-opentelemetry` layer exporting the runner's spans through `tracer`
/// (for example `SdkTracerProvider::tracer("agent-core")`).
///
/// It is `tracing_opentelemetry::layer().with_tracer(tracer)` without the attributes the
/// bridge adds by default to every span (source location, thread, busy/idle times), so
/// the exported spans carry the GenAI attributes and little else. Use
/// `tracing_opentelemetry::layer()` yourself for other settings: everything here works
/// with any tracing-opentelemetry layer.
pub fn layer<S, T>(tracer: T) -> OpenTelemetryLayer<S, T>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
    T: opentelemetry::trace::Tracer + 'static,
    T::Span: Send + Sync,
{
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
}

/// The OpenTelemetry trace id of `span` (32 lowercase hex digits), when a
/// tracing-opentelemetry layer with a real tracer is installed; `None` otherwise.
pub(crate) fn trace_id(span: &Span) -> Option<String> {
    let context = span.context();
    let otel_span = context.span();
    let span_context = otel_span.span_context();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

/// Records `gen_ai.response.finish_reasons` as a string-array attribute, as the
/// conventions type it, when the span is exported through OpenTelemetry; returns `false`
/// (nothing recorded) otherwise, and the caller records the `tracing` field instead.
pub(crate) fn record_finish_reasons(span: &Span, reasons: &[&str]) -> bool {
    if !span.context().span().span_context().is_valid() {
        return false;
    }
    let values: Vec<opentelemetry::StringValue> = reasons
        .iter()
        .map(|r| opentelemetry::StringValue::from((*r).to_owned()))
        .collect();
    span.set_attribute(
        "gen_ai.response.finish_reasons",
        opentelemetry::Value::Array(values.into()),
    );
    true
}

/// A `tracing` layer that records the OpenTelemetry GenAI client metrics from the
/// runner's spans, with any [`Meter`]:
///
/// - `gen_ai.client.token.usage` (histogram, `{token}`): per `chat` span, its
///   `gen_ai.usage.input_tokens` (`gen_ai.token.type = "input"`) and
///   `gen_ai.usage.output_tokens` (`"output"`), as the provider reported them; a round
///   trip that failed, or whose provider reported no usage, records none;
/// - `gen_ai.client.operation.duration` (histogram, seconds): per `chat` span (one round
///   trip) and per `invoke_agent` span (one run), from the span's creation to its close,
///   with `error.type` when it failed.
///
/// Attributes: `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
/// `gen_ai.response.model` (when the provider named one), and `error.type` on failures.
/// Bucket boundaries are the conventions' ([`TOKEN_BUCKETS`], [`DURATION_BUCKETS`]).
/// Spans of other crates are ignored. It needs no tracing-opentelemetry layer: metrics
/// and traces can be exported separately.
#[derive(Clone, Debug)]
pub struct GenAiMetrics {
    token_usage: Histogram<u64>,
    duration: Histogram<f64>,
}

impl GenAiMetrics {
    /// The instruments, created on `meter` (for example
    /// `SdkMeterProvider::meter("agent-core")`).
    pub fn new(meter: &Meter) -> Self {
        Self {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Measures number of input and output tokens used")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
        }
    }
}

/// What a `chat` or `invoke_agent` span said, kept in its extensions until it closes.
#[derive(Debug)]
struct Operation {
    started: Instant,
    operation: String,
    provider: Option<String>,
    request_model: Option<String>,
    response_model: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    error_type: Option<String>,
}

impl Visit for Operation {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "gen_ai.operation.name" => {
                self.operation = value.to_owned();
                return;
            }
            "gen_ai.provider.name" => &mut self.provider,
            "gen_ai.request.model" => &mut self.request_model,
            "gen_ai.response.model" => &mut self.response_model,
            "error.type" => &mut self.error_type,
            _ => return,
        };
        *slot = Some(value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "gen_ai.usage.input_tokens" => self.input_tokens = Some(value),
            "gen_ai.usage.output_tokens" => self.output_tokens = Some(value),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields (Display) arrive here.
        self.record_str(field, &format!("{value:?}"));
    }
}

impl Operation {
    fn attributes(&self) -> Vec<KeyValue> {
        let mut out = vec![KeyValue::new(
            "gen_ai.operation.name",
            self.operation.clone(),
        )];
        let optional = [
            ("gen_ai.provider.name", &self.provider),
            ("gen_ai.request.model", &self.request_model),
            ("gen_ai.response.model", &self.response_model),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                out.push(KeyValue::new(key, value.clone()));
            }
        }
        out
    }
}

/// Whether a span is one of the runner's operations that have metrics.
fn is_operation(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.target().starts_with("agent_core")
        && matches!(metadata.name(), "chat" | "invoke_agent")
}

impl<S> Layer<S> for GenAiMetrics
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !is_operation(attrs.metadata()) {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut operation = Operation {
            started: Instant::now(),
            operation: attrs.metadata().name().to_owned(),
            provider: None,
            request_model: None,
            response_model: None,
            input_tokens: None,
            output_tokens: None,
            error_type: None,
        };
        attrs.record(&mut operation);
        span.extensions_mut().insert(operation);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(operation) = span.extensions_mut().get_mut::<Operation>()
        {
            values.record(operation);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(operation) = span.extensions_mut().remove::<Operation>() else {
            return;
        };
        let mut attributes = operation.attributes();
        if operation.operation == "chat" && operation.error_type.is_none() {
            let reported = (operation.input_tokens, operation.output_tokens);
            if let (Some(input), Some(output)) = reported
                && (input, output) != (0, 0)
            {
                for (kind, count) in [("input", input), ("output", output)] {
                    let mut with_type = attributes.clone();
                    with_type.push(KeyValue::new("gen_ai.token.type", kind));
                    self.token_usage.record(count, &with_type);
                }
            }
        }
        if let Some(error) = &operation.error_type {
            attributes.push(KeyValue::new("error.type", error.clone()));
        }
        self.duration
            .record(operation.started.elapsed().as_secs_f64(), &attributes);
    }
}
