//! Live test: the triage agent against a real OpenAI-compatible server, 20 runs in
//! native output mode.
//!
//! Ignored by default (it needs a model server); run it by name with
//! `AGENT_LIVE_BASE_URL` set (for example to the URL printed by `scripts/local-llm.sh`,
//! `http://127.0.0.1:8080/v1`). The model is `dispatch/gemma` (override with
//! `AGENT_LIVE_MODEL`). Asked to run without the variable, it fails, saying so.
//!
//! The local model is a tiny base model: the test is that every run ends typed, within
//! its budgets, that no request is ever rejected as malformed, and that native output
//! (the schema as a grammar) makes at least 90% of the runs answer. It prints the
//! distribution of endings and categories:
//!
//! ```text
//! AGENT_LIVE_BASE_URL=http://127.0.0.1:8080/v1 \
//!   cargo test -p agent-tests --test live_triage -- --ignored --nocapture
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use agent_core::{
    AgentConfig, AgentOutput, Backoff, Ending, OutputMode, SUBMIT_OUTPUT, SchemaValidator,
    ToolDefinition, ValidationErrors, run_agent,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live OpenAI-compatible server: set AGENT_LIVE_BASE_URL and run with --ignored"]
async fn live_triage_runs_always_end_typed() {
    let base_url = std::env::var("AGENT_LIVE_BASE_URL").expect(
        "AGENT_LIVE_BASE_URL must name a running OpenAI-compatible server (see \
         scripts/local-llm.sh), for example http://127.0.0.1:8080/v1",
    );
    let model = std::env::var("AGENT_LIVE_MODEL").unwrap_or_else(|_| "dispatch/gemma".into());
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .model(&model)
        .output_mode(OutputMode::Native)
        .base_url(&base_url)
        .system_prompt(
            "You triage customer support tickets. Decide the severity (1 lowest to 4 \
             critical), the queue (billing, shipping, technical or account) and a one-sentence \
             summary.",
        )
        .max_llm_calls(MAX_LLM_CALLS)
        .max_tokens(160)
        .temperature(0.7)
        .request_timeout(Duration::from_secs(180))
        .backoff(Backoff::exponential(
            Duration::from_millis(200),
            Duration::from_secs(2),
        ))
        .build()
        .expect("the live config builds");

    let mut endings: BTreeMap<Ending, usize> = BTreeMap::new();
    let mut categories: BTreeMap<&'static str, usize> = BTreeMap::new();
    let started = Instant::now();
    for run in 0..RUNS {
        let ticket = TICKETS[run % TICKETS.len()];
        let result = run_agent(&config, ticket).await;
        let ending = result.ending();
        let category = result.category().unwrap_or("answered");
        *endings.entry(ending).or_default() += 1;
        *categories.entry(category).or_default() += 1;
        let excerpt: String = result.output.chars().take(90).collect();
        eprintln!(
            "run {run:2}: {ending:9} {category:26} llm_calls={} tokens={}+{} {:>6.1}s {excerpt:?}",
            result.usage.llm_calls,
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

        // Typed and bounded, always.
        assert!(result.usage.llm_calls >= 1 && result.usage.llm_calls <= MAX_LLM_CALLS);
        assert_eq!(result.outcome.is_ok(), ending == Ending::Answered);
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
