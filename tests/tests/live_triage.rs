//! Live tests: the triage agent against a real OpenAI-compatible server.
//!
//! Ignored by default (they need a model server); run them by name with
//! `AGENT_LIVE_BASE_URL` set (for example to the URL printed by `scripts/local-llm.sh`,
//! `http://127.0.0.1:8080/v1`). Asked to run without the variable, they fail, saying so.
//! The model is `AGENT_LIVE_MODEL` when set, else each test's default below.
//!
//! - `live_triage_runs_always_end_typed`: 20 runs in native output mode on any model,
//!   the tiny base model included (default `dispatch/gemma`): every run ends typed,
//!   within its budgets, no request is ever rejected as malformed, and native output
//!   (the schema as a grammar) makes at least 90% of the runs answer.
//! - `live_tool_mode_looks_orders_up_and_ends_typed`: 10 runs in tool mode with a
//!   `lookup_order` tool, on an instruction-tuned model that makes tool calls (default
//!   `dispatch/qwen`; serve it with `scripts/local-llm.sh --model qwen-1.5b`): every run
//!   typed, at least 90% answered, and at least half of the runs on a ticket that names
//!   an order look it up (a small model skips a lookup now and then).
//! - `live_streamed_run_matches_the_plain_run`: one ticket in tool mode at temperature 0,
//!   run plainly and streamed (default `dispatch/qwen`): the events come in order (each
//!   call started before it finished, each result after its call, `Finished` last and
//!   once) and the streamed run ends with the plain run's value, calls and tool calls.
//!
//! Each prints what it saw:
//!
//! ```text
//! AGENT_LIVE_BASE_URL=http://127.0.0.1:8080/v1 \
//!   cargo test -p agent-tests --test integration -- --ignored --nocapture live_triage::live_triage_runs
//! AGENT_LIVE_BASE_URL=$(scripts/local-llm.sh --model qwen-1.5b) \
//!   cargo test -p agent-tests --test integration live_triage:: -- --ignored --nocapture --test-threads 1
//! ```
//!
//! On 2 CPU cores with qwen-1.5b the tool-mode test takes about 5 minutes and the
//! streamed one about 1.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use agent_core::providers::ProviderOptions;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use agent_core::{
    AgentConfig, AgentConfigBuilder, AgentOutput, Ending, OutputMode,
    config::Backoff,
    output::SUBMIT_OUTPUT,
    run_agent, run_agent_stream,
    schema::{SchemaValidator, ValidationErrors},
    stream::StreamEvent,
    tool,
    tool::ToolDefinition,
    tools,
};
use serde::Deserialize;
use serde_json::{Value, json};

const RUNS: usize = 20;
const MAX_LLM_CALLS: u32 = 4;

/// Where a ticket goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Queue {
    Billing,
    Shipping,
    Technical,
    Account,
}

/// Triage decision for one support ticket.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct Triage {
    severity: u8,
    queue: Queue,
    summary: String,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "severity": {"type": "integer", "minimum": 1, "maximum": 4,
                          "description": "Severity from 1 (lowest) to 4 (critical)."},
            "queue": {"type": "string", "enum": ["billing", "shipping", "technical", "account"],
                       "description": "The team that handles the ticket."},
            "summary": {"type": "string", "minLength": 1, "maxLength": 160,
                         "description": "The problem in one sentence."}
        },
        "required": ["severity", "queue", "summary"],
        "additionalProperties": false
    })
}

// Written by hand: the #[agent_output] macro would generate the same.
impl AgentOutput for Triage {
    fn output_tool() -> Option<ToolDefinition> {
        Some(ToolDefinition::new(
            SUBMIT_OUTPUT,
            "Triage decision for one support ticket.",
            schema(),
        ))
    }

    fn from_arguments(arguments: &Value) -> Result<Self, ValidationErrors> {
        static VALIDATOR: OnceLock<SchemaValidator> = OnceLock::new();
        VALIDATOR
            .get_or_init(|| SchemaValidator::new(&schema()).unwrap())
            .validate_into(arguments)
    }
}

const TICKETS: [&str; 5] = [
    "My parcel A-1001 was due a week ago and tracking has not moved since Monday.",
    "I was charged twice for invoice INV-2207 this month. Please refund one charge.",
    "The app crashes every time I open the settings page on Android 14.",
    "I cannot log in: the password reset email never arrives.",
    "Your checkout page is down for all customers, we are losing sales right now!",
];

/// The only order the shop has.
const ORDER: &str = "A-1001";

/// Look up an order by its id: its status, carrier and dates.
#[tool(params(order_id = "The order id, like A-1001."))]
async fn lookup_order(order_id: String) -> Result<String, String> {
    if order_id.trim().eq_ignore_ascii_case(ORDER) {
        Ok(format!(
            r#"{{"order_id": "{ORDER}", "status": "shipped", "carrier": "Larkspur", "shipped_on": "2026-05-04", "expected_by": "2026-05-09", "last_scan": "2026-05-05"}}"#
        ))
    } else {
        Err(format!("no order with id {order_id:?}"))
    }
}

/// The model under test: `AGENT_LIVE_MODEL`, else `default`.
fn live_model(default: &str) -> String {
    std::env::var("AGENT_LIVE_MODEL").unwrap_or_else(|_| default.into())
}

/// The config every live test starts from: the server, the prompt, the budgets.
fn live_config(model: &str, mode: OutputMode) -> AgentConfigBuilder<Triage> {
    let base_url = std::env::var("AGENT_LIVE_BASE_URL").expect(
        "AGENT_LIVE_BASE_URL must name a running OpenAI-compatible server (see \
         scripts/local-llm.sh), for example http://127.0.0.1:8080/v1",
    );
    AgentConfig::builder("triage")
        .model(model)
        .output_mode(mode)
        .provider(
            ProviderOptions::default()
                .with_base_url(&base_url)
                .with_request_timeout(Duration::from_secs(180)),
        )
        .system_prompt(
            "You triage customer support tickets. Decide the severity (1 lowest to 4 \
             critical), the queue (billing, shipping, technical or account) and a one-sentence \
             summary.",
        )
        .max_llm_calls(MAX_LLM_CALLS)
        .max_tokens(160)
        .temperature(0.7)
        .backoff(Backoff::exponential(
            Duration::from_millis(200),
            Duration::from_secs(2),
        ))
}

/// The checks every live run passes, answered or not: typed, within its budgets, never
/// a malformed request or a runner fault.
fn assert_typed(result: &agent_core::AgentResult<Triage>, max_llm_calls: u32) {
    assert!(result.usage.llm_calls >= 1 && result.usage.llm_calls <= max_llm_calls);
    assert_eq!(result.outcome.is_ok(), result.ending() == Ending::Answered);
    match &result.outcome {
        Ok(triage) => {
            assert!((1..=4).contains(&triage.severity), "{triage:?}");
            assert!(!triage.summary.is_empty());
        }
        Err(error) => {
            // The adapter's requests are well-formed: the server never rejects one,
            // and the runner never faults.
            assert_ne!(error.category(), "llm_permanent_error", "{error}");
            assert_ne!(error.category(), "internal_error", "{error}");
        }
    }
}

/// Prints one run's line (and its error).
fn print_run(run: usize, result: &agent_core::AgentResult<Triage>) {
    let excerpt: String = result.output.chars().take(90).collect();
    eprintln!(
        "run {run:2}: {:9} {:26} llm_calls={} tool_calls={} tokens={}+{} {:>6.1}s {excerpt:?}",
        result.ending(),
        result.category().unwrap_or("answered"),
        result.usage.llm_calls,
        result.usage.tool_calls,
        result.usage.input_tokens,
        result.usage.output_tokens,
        result.duration.as_secs_f64(),
    );
    if let Err(error) = &result.outcome {
        eprintln!(
            "        {}",
            error.to_string().chars().take(300).collect::<String>()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live OpenAI-compatible server: set AGENT_LIVE_BASE_URL and run with --ignored"]
async fn live_triage_runs_always_end_typed() {
    let model = live_model("dispatch/gemma");
    let config = live_config(&model, OutputMode::Native)
        .build()
        .expect("the live config builds");

    let mut endings: BTreeMap<Ending, usize> = BTreeMap::new();
    let mut categories: BTreeMap<&'static str, usize> = BTreeMap::new();
    let started = Instant::now();
    for run in 0..RUNS {
        let ticket = TICKETS[run % TICKETS.len()];
        let result = run_agent(&config, ticket).await;
        *endings.entry(result.ending()).or_default() += 1;
        *categories
            .entry(result.category().unwrap_or("answered"))
            .or_default() += 1;
        print_run(run, &result);
        assert_typed(&result, MAX_LLM_CALLS);
    }
    eprintln!(
        "\nlive_triage: {RUNS} runs of {model} in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    eprintln!("endings:    {endings:?}");
    eprintln!("categories: {categories:?}");
    assert_eq!(endings.values().sum::<usize>(), RUNS);
    let answered = endings.get(&Ending::Answered).copied().unwrap_or(0);
    assert!(
        answered * 10 >= RUNS * 9,
        "native output mode must answer at least 90% of runs: {answered} of {RUNS}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live OpenAI-compatible server: set AGENT_LIVE_BASE_URL and run with --ignored"]
async fn live_tool_mode_looks_orders_up_and_ends_typed() {
    const TOOL_RUNS: usize = 10;
    let model = live_model("dispatch/qwen");
    let config = live_config(&model, OutputMode::Tool)
        .tools(tools![lookup_order])
        .system_prompt(
            "You triage customer support tickets. When a ticket names an order id, look the \
             order up with lookup_order first. Then submit the severity (1 lowest to 4 \
             critical), the queue (billing, shipping, technical or account) and a one-sentence \
             summary with submit_output.",
        )
        .build()
        .expect("the live config builds");
    let mut answered = 0;
    let mut looked_up = 0;
    let started = Instant::now();
    for run in 0..TOOL_RUNS {
        let ticket = TICKETS[run % TICKETS.len()];
        let result = run_agent(&config, ticket).await;
        print_run(run, &result);
        assert_typed(&result, MAX_LLM_CALLS);
        answered += usize::from(result.outcome.is_ok());
        if ticket.contains(ORDER) {
            looked_up += usize::from(result.usage.tool_calls > 0);
        }
    }
    let naming = (0..TOOL_RUNS)
        .filter(|run| TICKETS[run % TICKETS.len()].contains(ORDER))
        .count();
    eprintln!(
        "\nlive tool mode: {TOOL_RUNS} runs of {model} in {:.0} s: {answered} answered, \
         {looked_up} of {naming} runs naming {ORDER} looked it up",
        started.elapsed().as_secs_f64()
    );
    assert!(
        answered * 10 >= TOOL_RUNS * 9,
        "tool mode must answer at least 90% of runs on an instruction-tuned model: {answered} of {TOOL_RUNS}"
    );
    // At least half, not all: at temperature 0 qwen-1.5b still answers a ticket that
    // names the order without looking it up now and then (1 of 2 such runs on
    // 2026-12-04, 2 of 2 the day before); a model that never calls the tool fails here.
    assert!(
        naming > 0 && looked_up * 2 >= naming,
        "at least half of the runs whose ticket names {ORDER} call lookup_order: {looked_up} of {naming}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live OpenAI-compatible server: set AGENT_LIVE_BASE_URL and run with --ignored"]
async fn live_streamed_run_matches_the_plain_run() {
    let model = live_model("dispatch/qwen");
    let config = live_config(&model, OutputMode::Tool)
        .tools(tools![lookup_order])
        .system_prompt(
            "You triage customer support tickets. Look the order up with lookup_order first, \
             then submit the severity (1 lowest to 4 critical), the queue (billing, shipping, \
             technical or account) and a one-sentence summary with submit_output.",
        )
        .temperature(0.0)
        .build()
        .expect("the live config builds");
    let ticket = TICKETS[0];
    let plain = run_agent(&config, ticket).await;
    print_run(0, &plain);
    assert_typed(&plain, MAX_LLM_CALLS);

    let mut stream = run_agent_stream(&config, ticket);
    let mut log: Vec<String> = Vec::new();
    let mut turn = 0;
    let mut started: Vec<(u32, usize)> = Vec::new();
    let mut finished: Vec<String> = Vec::new();
    let mut result = None;
    while let Some(event) = stream.next().await {
        assert!(result.is_none(), "an event after Finished: {event:?}");
        match event {
            StreamEvent::TurnStarted { llm_call } => {
                assert_eq!(llm_call, turn + 1, "turns are numbered in order");
                turn = llm_call;
                log.push(format!("turn {llm_call}"));
            }
            StreamEvent::TextDelta { llm_call, .. }
            | StreamEvent::ReasoningDelta { llm_call, .. }
            | StreamEvent::PartialOutput { llm_call, .. } => assert_eq!(llm_call, turn),
            StreamEvent::ToolCallStarted {
                llm_call,
                index,
                name,
                ..
            } => {
                assert_eq!(llm_call, turn);
                started.push((llm_call, index));
                log.push(format!("start {name}"));
            }
            StreamEvent::ToolCallFinished {
                llm_call, id, name, ..
            } => {
                assert_eq!(llm_call, turn);
                assert!(
                    started.iter().any(|(call, _)| *call == llm_call),
                    "{name} finished without a start in call {llm_call}"
                );
                finished.push(id);
                log.push(format!("call {name}"));
            }
            StreamEvent::ToolResult { id, name, .. } => {
                assert!(finished.contains(&id), "a result before its call: {id}");
                log.push(format!("result {name}"));
            }
            StreamEvent::Finished(r) => result = Some(*r),
            other => log.push(format!("{other:?}")),
        }
    }
    eprintln!("streamed events: {log:?}");
    let streamed = result.expect("Finished is the last event");
    print_run(1, &streamed);
    assert_typed(&streamed, MAX_LLM_CALLS);
    assert_eq!(
        streamed.outcome, plain.outcome,
        "the same value as the plain run"
    );
    assert_eq!(streamed.usage.llm_calls, plain.usage.llm_calls);
    assert_eq!(streamed.usage.tool_calls, plain.usage.tool_calls);
    assert_eq!(turn, streamed.usage.llm_calls);
}
