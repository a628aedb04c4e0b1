//! Observability: OpenTelemetry GenAI spans through `tracing`.
//!
//! One test function; its subscriber is set through `common::traced`, which keeps the
//! process-wide callsite interest cache from hiding the run's spans (see there).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agent_core::testing::ScriptedModel;
use agent_core::{
    llm::{LlmError, LlmResponse, TokenUsage},
    run_agent,
};
use common::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[derive(Clone, Debug, Default)]
struct SpanData {
    name: &'static str,
    fields: BTreeMap<String, String>,
    parent: Option<String>,
}

#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<(u64, SpanData)>>>,
}

struct FieldVisitor<'a>(&'a mut BTreeMap<String, String>);

impl Visit for FieldVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

impl<S> tracing_subscriber::Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut data = SpanData {
            name: attrs.metadata().name(),
            ..SpanData::default()
        };
        attrs.record(&mut FieldVisitor(&mut data.fields));
        data.parent = ctx
            .span(id)
            .and_then(|s| s.parent())
            .map(|p| p.name().to_owned());
        self.spans.lock().unwrap().push((id.into_u64(), data));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut spans = self.spans.lock().unwrap();
        if let Some((_, data)) = spans.iter_mut().rev().find(|(i, _)| *i == id.into_u64()) {
            values.record(&mut FieldVisitor(&mut data.fields));
        }
    }
}

impl Capture {
    fn named(&self, name: &str) -> Vec<SpanData> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, d)| d.name == name)
            .map(|(_, d)| d.clone())
            .collect()
    }
}

fn run_traced<T>(f: impl std::future::Future<Output = T>) -> (T, Capture) {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = {
        let _guard = common::traced::set_default(subscriber);
        runtime.block_on(f)
    };
    (out, capture)
}

fn spans_follow_the_genai_conventions() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let failing = TestTool::new("failing", Behaviour::Fail);
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("lookup", order("A1")),
        model.call("failing", order("A2")),
    ];
    let model = model
        .respond(
            LlmResponse::tool_calls(calls)
                .with_usage(TokenUsage::new(120, 30))
                .with_request_id("req_1"),
        )
        .respond(LlmResponse::text("hmm").with_usage(TokenUsage::new(200, 5)))
        .respond(LlmResponse::text("hmm").with_usage(TokenUsage::new(210, 5)))
        .respond(LlmResponse::text("hmm").with_usage(TokenUsage::new(220, 5)));
    let config = builder(&model, &[&lookup, &failing])
        .model("gpt-test")
        .build()
        .unwrap();
    let (r, capture) = run_traced(run_agent(&config, "ticket"));
    assert_eq!(r.category(), Some("schema_not_called"));

    let root = capture.named("invoke_agent");
    assert_eq!(root.len(), 1);
    let root = &root[0].fields;
    assert_eq!(root["trace_id"], r.trace_id);
    assert_eq!(root["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(root["gen_ai.agent.name"], "test-agent");
    assert_eq!(root["error.type"], "schema_not_called");
    assert_eq!(root["agent.ending"], "exhausted");

    let chats = capture.named("chat");
    assert_eq!(chats.len() as u32, r.usage.llm_calls);
    assert_eq!(chats[0].parent.as_deref(), Some("invoke_agent"));
    let first = &chats[0].fields;
    assert_eq!(first["gen_ai.request.model"], "gpt-test");
    assert_eq!(first["gen_ai.usage.input_tokens"], "120");
    assert_eq!(first["gen_ai.usage.output_tokens"], "30");
    assert_eq!(first["gen_ai.response.finish_reasons"], r#"["tool_calls"]"#);
    assert_eq!(first["gen_ai.response.id"], "req_1");
    assert_eq!(
        chats[1].fields["gen_ai.response.finish_reasons"],
        r#"["stop"]"#
    );

    let tools = capture.named("execute_tool");
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0].fields["gen_ai.tool.name"], "lookup");
    assert_eq!(tools[0].fields["gen_ai.tool.call.id"], "call_1");
    assert!(!tools[0].fields.contains_key("error.type"));
    assert_eq!(tools[1].fields["gen_ai.tool.name"], "failing");
    assert_eq!(tools[1].fields["error.type"], "tool_error");
    assert_eq!(tools[1].parent.as_deref(), Some("invoke_agent"));
}

fn a_failed_provider_call_marks_its_chat_span() {
    let model = ScriptedModel::new()
        .fail(LlmError::transient("overloaded").with_status(529))
        .submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let (r, capture) = run_traced(run_agent(&config, "ticket"));
    assert!(r.is_ok());
    let chats = capture.named("chat");
    assert_eq!(chats.len(), 2);
    assert_eq!(chats[0].fields["error.type"], "llm_transient_error");
    assert!(!chats[1].fields.contains_key("error.type"));
    assert!(
        !capture.named("invoke_agent")[0]
            .fields
            .contains_key("error.type")
    );
}

#[test]
fn spans() {
    spans_follow_the_genai_conventions();
    a_failed_provider_call_marks_its_chat_span();
}

/// A callsite only this test uses, so its first hit is the one below.
fn probe() {
    tracing::info_span!("traced_probe").in_scope(|| {});
}

#[test]
fn a_callsite_first_hit_by_a_thread_without_a_subscriber_still_reaches_the_test_subscriber() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = common::traced::set_default(subscriber);
    // Another thread, whose default is no subscriber, registers the callsite first.
    std::thread::spawn(probe).join().unwrap();
    probe();
    assert_eq!(capture.named("traced_probe").len(), 1);
}
