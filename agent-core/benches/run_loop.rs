//! The scripted two-call run: one tool call, then a valid `submit_output`.
//!
//! ```text
//! cargo bench -p agent-core --bench run_loop
//! ```
//!
//! The model is a stateless scripted client (turn 1: a `lookup_order` call; turn 2, once
//! a tool result is in the conversation: a valid `submit_output`), so one iteration is one
//! whole run: two requests built, the tool's arguments validated against its schema, the
//! tool run, the submission validated and deserialized, usage and transcript kept.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::OnceLock;

use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentOutput, Tool, ToolContext,
    llm::{LlmClient, LlmFuture, LlmRequest, LlmResponse, Message, ToolCall},
    run_agent,
    schema::{SchemaValidator, ValidationErrors},
    tool::{ToolDefinition, ToolFuture},
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)]
struct Triage {
    severity: u8,
    queue: String,
    summary: String,
}

fn triage_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "severity": {"type": "integer", "minimum": 1, "maximum": 4},
            "queue": {"type": "string", "enum": ["billing", "shipping", "technical", "account"]},
            "summary": {"type": "string", "minLength": 1}
        },
        "required": ["severity", "queue", "summary"],
        "additionalProperties": false
    })
}

impl AgentOutput for Triage {
    fn output_tool() -> Option<ToolDefinition> {
        Some(ToolDefinition::new(
            "submit_output",
            "Submit the triage.",
            triage_schema(),
        ))
    }
    fn from_arguments(arguments: &Value) -> Result<Self, ValidationErrors> {
        static V: OnceLock<SchemaValidator> = OnceLock::new();
        V.get_or_init(|| SchemaValidator::new(&triage_schema()).unwrap())
            .validate_into(arguments)
    }
}

struct LookupOrder;

impl Tool for LookupOrder {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup_order",
            "Look up an order by its id.",
            json!({
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"]
            }),
        )
    }
    fn call<'a>(&'a self, arguments: Value, _ctx: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let id = arguments["order_id"].as_str().unwrap_or_default();
            Ok(format!(
                r#"{{"order_id":"{id}","status":"shipped","carrier":"DHL"}}"#
            ))
        })
    }
}

/// Turn 1: a tool call; turn 2 (a tool result is present): a valid submission.
struct TwoTurns {
    tool_turn: LlmResponse,
    submit_turn: LlmResponse,
}

impl LlmClient for TwoTurns {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let answered = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }));
        let response = if answered {
            &self.submit_turn
        } else {
            &self.tool_turn
        };
        let response = response.clone();
        Box::pin(async move { Ok(response) })
    }
}

fn two_turns() -> TwoTurns {
    TwoTurns {
        tool_turn: LlmResponse::tool_calls(vec![ToolCall::new(
            "call_1",
            "lookup_order",
            json!({"order_id": "A-1001"}),
        )]),
        submit_turn: LlmResponse::tool_calls(vec![ToolCall::new(
            "call_2",
            "submit_output",
            json!({"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is late; carrier DHL."}),
        )]),
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let config: AgentConfig<Triage> = AgentConfig::builder("bench")
        .llm(two_turns())
        .tool(LookupOrder)
        .build()
        .unwrap();
    // Sanity: the run answers, with two round trips and one tool call.
    let r = runtime.block_on(run_agent(&config, "ticket"));
    assert!(r.is_ok() && r.usage.llm_calls == 2 && r.usage.tool_calls == 1);

    c.bench_function("two_call_run", |b| {
        b.iter(|| {
            let r = runtime.block_on(run_agent(&config, black_box("My parcel A-1001 is late.")));
            black_box(r)
        })
    });

    // The same run with the recording ScriptedModel (a fresh script per run, built once
    // per config outside the timed part would be unfair: here the script and config are
    // built per iteration, so this figure includes config build and request recording).
    c.bench_function("two_call_run_scripted_with_config_build", |b| {
        b.iter(|| {
            let model = ScriptedModel::new()
                .tool_call("lookup_order", json!({"order_id": "A-1001"}))
                .submit(json!({"severity": 2, "queue": "shipping", "summary": "late"}));
            let config: AgentConfig<Triage> = AgentConfig::builder("bench")
                .llm(model)
                .tool(LookupOrder)
                .build()
                .unwrap();
            black_box(runtime.block_on(run_agent(&config, "ticket")))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
