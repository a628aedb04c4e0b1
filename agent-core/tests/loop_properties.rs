//! Property test of the run loop over random scripts of model behaviour (fatal tool
//! errors, refusals, cut-off turns and a dynamic tool set among them) and random
//! budgets: every run returns; exactly one of value or error; `llm_calls <=
//! max_llm_calls`; tool executions `<= max_tool_calls`; every call id answered in every
//! request; and the error's category is the one the last transition implies, computed by
//! an independent reference model of the tables in `docs/loop.md`.
//!
//! 10,000 cases by default (CI). For 1,000,000:
//!
//! ```text
//! PROPTEST_CASES=1000000 cargo test --release -p agent-core --test loop_properties
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::time::Duration;

use agent_core::testing::{ScriptStep, ScriptedModel};
use agent_core::{AgentResult, LlmError, LlmResponse, StopReason, ToolCall, run_agent};
use common::*;
use proptest::prelude::*;
use serde_json::json;

/// One call inside a tool-call turn.
#[derive(Clone, Copy, Debug)]
enum Call {
    Echo,
    Failing,
    Panicking,
    Slow,
    Unknown,
    BadArguments,
    /// A tool that fails fatally: the run stops after the turn (`tool_fatal`).
    Fatal,
}

impl Call {
    /// Whether the runner executes it in round trip `turn` (given budget left). The
    /// config's `tools_for` offers `slow` only in odd turns: a call to it in an even
    /// turn is answered as unknown.
    fn executes(self, turn: u32) -> bool {
        match self {
            Call::Echo | Call::Failing | Call::Panicking | Call::Fatal => true,
            Call::Slow => turn % 2 == 1,
            Call::Unknown | Call::BadArguments => false,
        }
    }
}

/// One step of the model's behaviour.
#[derive(Clone, Debug)]
enum Step {
    ValidSubmit,
    InvalidSubmit,
    TruncatedSubmit,
    DoubleSubmit,
    SubmitWithTool,
    Text,
    Empty,
    Tools(Vec<Call>),
    /// A tool turn whose last call was cut by `max_tokens` (C28): the others run.
    CutTools(Vec<Call>),
    /// A valid-looking submission cut by `max_tokens` (C28): a validation retry.
    CutSubmit,
    /// A refusal (C27): the run ends.
    Refusal,
    Transient,
    Permanent,
}

fn call_strategy() -> impl Strategy<Value = Call> {
    prop_oneof![
        4 => Just(Call::Echo),
        2 => Just(Call::Failing),
        1 => Just(Call::Panicking),
        1 => Just(Call::Slow),
        1 => Just(Call::Fatal),
        1 => Just(Call::Unknown),
        1 => Just(Call::BadArguments),
    ]
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::ValidSubmit),
        2 => Just(Step::InvalidSubmit),
        1 => Just(Step::TruncatedSubmit),
        1 => Just(Step::DoubleSubmit),
        1 => Just(Step::SubmitWithTool),
        2 => Just(Step::Text),
        1 => Just(Step::Empty),
        4 => prop::collection::vec(call_strategy(), 1..4).prop_map(Step::Tools),
        1 => prop::collection::vec(call_strategy(), 1..3).prop_map(Step::CutTools),
        1 => Just(Step::CutSubmit),
        1 => Just(Step::Refusal),
        2 => Just(Step::Transient),
        1 => Just(Step::Permanent),
    ]
}

#[derive(Clone, Copy, Debug)]
struct Budgets {
    max_llm_calls: u32,
    max_tool_calls: u32,
    max_llm_retries: u32,
    max_parse_retries: u32,
    tool_concurrency: usize,
}

fn budgets_strategy() -> impl Strategy<Value = Budgets> {
    (1u32..10, 0u32..6, 1u32..5, 0u32..4, 1usize..4).prop_map(|(c, t, r, p, k)| Budgets {
        max_llm_calls: c,
        max_tool_calls: t,
        max_llm_retries: r,
        max_parse_retries: p,
        tool_concurrency: k,
    })
}

/// What the reference model expects.
#[derive(Debug, PartialEq)]
struct Expected {
    category: Option<&'static str>,
    llm_calls: u32,
    tool_calls: u32,
}

/// The transition tables and counting rules of `docs/loop.md` (with the wrap-up turn on),
/// written independently of the runner.
fn reference(script: &[Step], b: Budgets) -> Expected {
    let (mut llm_calls, mut tool_calls, mut failures, mut malformed) = (0u32, 0u32, 0u32, 0u32);
    let mut steps = script.iter();
    let end = |category, llm_calls, tool_calls| Expected {
        category,
        llm_calls,
        tool_calls,
    };
    loop {
        if llm_calls >= b.max_llm_calls {
            return end(Some("max_llm_calls"), llm_calls, tool_calls);
        }
        llm_calls += 1;
        let Some(step) = steps.next() else {
            return end(Some("llm_permanent_error"), llm_calls, tool_calls);
        };
        if let Step::Transient = step {
            failures += 1;
            if failures >= b.max_llm_retries {
                return end(Some("max_llm_retries"), llm_calls, tool_calls);
            }
            continue;
        }
        failures = 0;
        let malformed_kind = match step {
            Step::ValidSubmit => return end(None, llm_calls, tool_calls),
            Step::Permanent => return end(Some("llm_permanent_error"), llm_calls, tool_calls),
            Step::Refusal => return end(Some("refused"), llm_calls, tool_calls),
            Step::InvalidSubmit | Step::TruncatedSubmit | Step::CutSubmit => {
                Some("schema_validation_failed")
            }
            Step::DoubleSubmit | Step::SubmitWithTool => Some("ambiguous_tool_turn"),
            Step::Text | Step::Empty => Some("schema_not_called"),
            // The last round trip is a wrap-up turn: only submit_output is offered, and
            // nothing else runs.
            Step::Tools(_) | Step::CutTools(_) if llm_calls == b.max_llm_calls => None,
            // The cut call (the last) never runs; the ones before it are complete.
            Step::Tools(calls) | Step::CutTools(calls) => {
                let runnable = match step {
                    Step::CutTools(_) => &calls[..calls.len() - 1],
                    _ => &calls[..],
                };
                let mut fatal = false;
                for call in runnable {
                    if call.executes(llm_calls) && tool_calls < b.max_tool_calls {
                        tool_calls += 1;
                        fatal |= matches!(call, Call::Fatal);
                    }
                }
                // A fatal error ends the run once the whole turn is answered.
                if fatal {
                    return end(Some("tool_fatal"), llm_calls, tool_calls);
                }
                None
            }
            Step::Transient => unreachable!(),
        };
        if let Some(kind) = malformed_kind {
            malformed += 1;
            if malformed > b.max_parse_retries {
                return end(Some(kind), llm_calls, tool_calls);
            }
        }
    }
}

struct Tools {
    echo: TestTool,
    failing: TestTool,
    panicking: TestTool,
    slow: TestTool,
    fatal: TestTool,
}

fn script_model(script: &[Step]) -> ScriptedModel {
    let model = ScriptedModel::new();
    let mut n = 0u32;
    let mut steps = Vec::new();
    for step in script {
        n += 1;
        let unique = format!("O{n}");
        let response = match step {
            Step::ValidSubmit => {
                LlmResponse::tool_calls(vec![model.call("submit_output", valid())])
            }
            Step::InvalidSubmit => {
                LlmResponse::tool_calls(vec![model.call("submit_output", invalid())])
            }
            Step::TruncatedSubmit => LlmResponse::tool_calls(vec![ToolCall::from_wire(
                format!("t{n}"),
                "submit_output",
                Some(&json!("{\"severity\": 2, \"sum")),
            )]),
            Step::DoubleSubmit => LlmResponse::tool_calls(vec![
                model.call("submit_output", invalid()),
                model.call("submit_output", valid()),
            ]),
            Step::SubmitWithTool => LlmResponse::tool_calls(vec![
                model.call("lookup", order(&unique)),
                model.call("submit_output", valid()),
            ]),
            Step::Text => LlmResponse::text("thinking out loud"),
            Step::Empty => LlmResponse::text(""),
            Step::Tools(calls) => LlmResponse::tool_calls(tool_turn(&model, calls, &unique)),
            Step::CutTools(calls) => LlmResponse::tool_calls(tool_turn(&model, calls, &unique))
                .with_stop_reason(StopReason::MaxTokens),
            Step::CutSubmit => LlmResponse::tool_calls(vec![model.call("submit_output", valid())])
                .with_stop_reason(StopReason::MaxTokens),
            Step::Refusal => {
                LlmResponse::text("I can't help with that.").with_stop_reason(StopReason::Refusal)
            }
            Step::Transient => {
                steps.push(ScriptStep::Fail(
                    LlmError::transient("503 overloaded").with_status(503),
                ));
                continue;
            }
            Step::Permanent => {
                steps.push(ScriptStep::Fail(
                    LlmError::permanent("400 bad request").with_status(400),
                ));
                continue;
            }
        };
        steps.push(ScriptStep::Respond(response));
    }
    let scripted = ScriptedModel::from_steps(steps);
    // Keep ids unique across the script: `model` numbered them; `scripted` replays them.
    drop(model);
    scripted
}

fn tool_turn(model: &ScriptedModel, calls: &[Call], unique: &str) -> Vec<ToolCall> {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let id = format!("{unique}-{i}");
            match c {
                Call::Echo => model.call("lookup", order(&id)),
                Call::Failing => model.call("failing", order(&id)),
                Call::Panicking => model.call("panicking", order(&id)),
                Call::Slow => model.call("slow", order(&id)),
                Call::Unknown => model.call("no_such_tool", order(&id)),
                Call::BadArguments => model.call("lookup", json!({"id": id})),
                Call::Fatal => model.call("fatal", order(&id)),
            }
        })
        .collect()
}

fn run_case(script: &[Step], b: Budgets) -> (AgentResult<Triage>, ScriptedModel, Tools) {
    quiet_tool_panics();
    let tools = Tools {
        echo: TestTool::new("lookup", Behaviour::Echo),
        failing: TestTool::new("failing", Behaviour::Fail),
        panicking: TestTool::new("panicking", Behaviour::Panic),
        slow: TestTool::new("slow", Behaviour::Sleep(Duration::from_secs(30))),
        fatal: TestTool::new("fatal", Behaviour::Fatal),
    };
    let model = script_model(script);
    let config = builder(
        &model,
        &[
            &tools.echo,
            &tools.failing,
            &tools.panicking,
            &tools.slow,
            &tools.fatal,
        ],
    )
    // A dynamic tool set: `slow` is offered in odd round trips only.
    .tools_for(|state, tool| tool.name != "slow" || state.turn % 2 == 1)
    .wrap_up(true)
    .max_llm_calls(b.max_llm_calls)
    .max_tool_calls(b.max_tool_calls)
    .max_llm_retries(b.max_llm_retries)
    .max_parse_retries(b.max_parse_retries)
    .tool_concurrency(b.tool_concurrency)
    .tool_timeout(Duration::from_secs(1))
    // Guards are tested on their own (loop_guards.rs); here they stay out of the way.
    .repeated_call_limit(u32::MAX)
    .no_progress_turns(u32::MAX)
    .build()
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let result = runtime.block_on(run_agent(&config, "ticket"));
    (result, model, tools)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_run_ends_typed_within_budgets(
        script in prop::collection::vec(step_strategy(), 0..12),
        b in budgets_strategy(),
    ) {
        let (result, model, tools) = run_case(&script, b);
        let expected = reference(&script, b);

        // Exactly one of value or error, and the category the last transition implies.
        prop_assert_eq!(result.category(), expected.category, "script {:?}", script);
        if let Ok(value) = &result.outcome {
            prop_assert_eq!(value, &Triage { severity: 2, summary: "parcel late".into() });
            prop_assert!(!result.output.is_empty());
        }
        // Budgets.
        prop_assert!(result.usage.llm_calls <= b.max_llm_calls);
        prop_assert!(result.usage.tool_calls <= b.max_tool_calls);
        prop_assert_eq!(result.usage.llm_calls, expected.llm_calls);
        prop_assert_eq!(result.usage.tool_calls, expected.tool_calls);
        let executed = tools.echo.runs() + tools.failing.runs() + tools.panicking.runs()
            + tools.slow.runs() + tools.fatal.runs();
        prop_assert_eq!(executed, result.usage.tool_calls);
        prop_assert_eq!(model.request_count() as u32, result.usage.llm_calls);
        // Every call id answered in every request, and in the transcript.
        assert_requests_well_formed(&model.requests());
        assert_well_formed(&result.transcript);
    }
}

#[test]
fn the_reference_model_agrees_with_hand_computed_cases() {
    let b = Budgets {
        max_llm_calls: 5,
        max_tool_calls: 1,
        max_llm_retries: 2,
        max_parse_retries: 1,
        tool_concurrency: 1,
    };
    let e = reference(
        &[
            Step::Text,
            Step::Tools(vec![Call::Echo, Call::Echo]),
            Step::ValidSubmit,
        ],
        b,
    );
    assert_eq!(
        e,
        Expected {
            category: None,
            llm_calls: 3,
            tool_calls: 1
        }
    );
    let e = reference(&[Step::Transient, Step::Transient, Step::ValidSubmit], b);
    assert_eq!(
        e,
        Expected {
            category: Some("max_llm_retries"),
            llm_calls: 2,
            tool_calls: 0
        }
    );
    let e = reference(&[Step::Text, Step::DoubleSubmit], b);
    assert_eq!(
        e,
        Expected {
            category: Some("ambiguous_tool_turn"),
            llm_calls: 2,
            tool_calls: 0
        }
    );
    let e = reference(&[], b);
    assert_eq!(e.category, Some("llm_permanent_error"));
}
