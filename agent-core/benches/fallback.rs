//! The cost of a fallback chain that never falls back: the scripted two-call run of
//! `run_loop` (a `lookup_order` call, then a valid `submit_output`) on an in-process
//! primary model, without fallback models and with two (`fallback_model_with`, routed
//! to an OpenAI-compatible server that is never called: the primary always answers).
//!
//! ```text
//! cargo bench -p agent-core --bench fallback                      # wall clock, both
//! target/release/deps/fallback-HASH without|with RUNS             # one pass, for callgrind
//! ```
//!
//! One pass: one sanity run, then RUNS runs on a current-thread runtime. Under
//! `valgrind --tool=callgrind`, (Ir(RUNS = N2) - Ir(RUNS = N1)) / (N2 - N1) is the
//! instructions per run, the setup (config build, runtime, routing the fallbacks)
//! cancelling out (see `bench/HISTORY.md`, "Fallback chain that never falls back").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Instant;

use agent_core::providers::ProviderOptions;
use agent_core::{
    AgentConfig, AgentOutput, Tool, ToolContext,
    llm::{LlmClient, LlmFuture, LlmRequest, LlmResponse, Message, ToolCall},
    run_agent,
    schema::{SchemaValidator, ValidationErrors},
    tool::{ToolDefinition, ToolFuture},
};
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

/// The config: the in-process primary, with or without two fallback models (an
/// unreachable OpenAI-compatible address: a call to them would fail the run).
fn config(with_chain: bool) -> AgentConfig<Triage> {
    let mut builder = AgentConfig::builder("bench")
        .llm(two_turns())
        .tool(LookupOrder);
    if with_chain {
        let at = || {
            ProviderOptions::default()
                .with_api_key("bench-key")
                .with_base_url("http://127.0.0.1:9/v1")
        };
        builder = builder
            .fallback_model_with("gpt-5-mini", at())
            .fallback_model_with("gpt-4.1-mini", at());
    }
    builder.build().unwrap()
}

/// `runs` runs; the wall time per run (ns).
fn pass(runtime: &tokio::runtime::Runtime, config: &AgentConfig<Triage>, runs: usize) -> f64 {
    // Sanity: the run answers with two round trips and one tool call, all on the primary.
    let r = runtime.block_on(run_agent(config, "ticket"));
    assert!(r.is_ok() && r.usage.llm_calls == 2 && r.usage.tool_calls == 1);
    assert!(r.usage.by_model.len() <= 1, "{:?}", r.usage.by_model);
    let start = Instant::now();
    for _ in 0..runs {
        let r = runtime.block_on(run_agent(config, black_box("My parcel A-1001 is late.")));
        black_box(r);
    }
    start.elapsed().as_nanos() as f64 / runs.max(1) as f64
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [which, runs] if !runs.starts_with('-') => {
            let with_chain = match which.as_str() {
                "with" => true,
                "without" => false,
                other => panic!("expected `with` or `without`, got {other:?}"),
            };
            let runs: usize = runs.parse().expect("RUNS: a number of runs");
            let config = config(with_chain);
            let ns = pass(&runtime, &config, runs);
            println!("{which}: {runs} runs, {ns:.0} ns/run");
        }
        // `cargo bench` passes `--bench`: wall clock, both, alternated.
        _ => {
            let (without, with) = (config(false), config(true));
            for round in 1..=3 {
                let a = pass(&runtime, &without, 20_000);
                let b = pass(&runtime, &with, 20_000);
                println!(
                    "round {round}: without {a:.0} ns/run, with a never-used chain of two {b:.0} ns/run ({:+.1} %)",
                    (b / a - 1.0) * 100.0
                );
            }
        }
    }
}
