//! Token, cost, deadline and cancellation budgets: each fires before the call that would
//! pass it, at an exact request count.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_core::testing::{ScriptStep, ScriptedModel};
use agent_core::{
    AgentError, CancellationToken, ConfigError, Ending, Tool, ToolContext,
    error::Budget,
    llm::{LlmResponse, TokenUsage, ToolChoice},
    pricing::ModelPrice,
    run_agent,
    tool::{ToolDefinition, ToolFuture},
};
use common::*;
use serde_json::{Value, json};

/// A tool-call turn that used 100 input and 50 output tokens.
fn costly_tool_turn(model: &ScriptedModel, id: &str) -> LlmResponse {
    LlmResponse::tool_calls(vec![model.call("lookup", order(id))])
        .with_usage(TokenUsage::new(100, 50))
}

#[tokio::test]
async fn token_budget_stops_before_the_call_that_would_pass_it() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let (t1, t2, t3) = (
        costly_tool_turn(&model, "A1"),
        costly_tool_turn(&model, "A2"),
        costly_tool_turn(&model, "A3"),
    );
    let model = model.respond(t1).respond(t2).respond(t3).submit(valid());
    // 150 tokens a call: after two calls 300 are used; a third would reach 450 > 400.
    let config = builder(&model, &[&lookup])
        .max_total_tokens(400)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "budget_exhausted");
    assert_eq!(err.ending(), Ending::Exhausted);
    assert_eq!(
        err,
        AgentError::BudgetExhausted {
            budget: Budget::TotalTokens {
                limit: 400,
                used: 300
            }
        }
    );
    assert_eq!(model.request_count(), 2);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (200, 100));
}

#[tokio::test]
async fn token_budget_offers_a_wrap_up_turn_when_one_more_ordinary_turn_would_pass_it() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let t1 = costly_tool_turn(&model, "A1");
    let model = model.respond(t1).submit(valid());
    let config = builder(&model, &[&lookup])
        .wrap_up(true)
        .max_total_tokens(400)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    let reqs = model.requests();
    assert_eq!(reqs[0].tools.len(), 2);
    // 150 used; this call (~150) fits, the one after would not: wrap up now.
    let names: Vec<&str> = reqs[1].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["submit_output"]);
    assert_eq!(
        reqs[1].tool_choice,
        ToolChoice::Tool("submit_output".into())
    );
}

#[tokio::test]
async fn cost_budget_stops_before_the_call_that_would_pass_it() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let (t1, t2, t3) = (
        costly_tool_turn(&model, "A1"),
        costly_tool_turn(&model, "A2"),
        costly_tool_turn(&model, "A3"),
    );
    let model = model.respond(t1).respond(t2).respond(t3).submit(valid());
    // 100 in * $1000/M + 50 out * $2000/M = $0.20 a call.
    let config = builder(&model, &[&lookup])
        .model("priced-model")
        .price("priced-", ModelPrice::new(1000.0, 2000.0))
        .max_cost_usd(0.5)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    match r.outcome.unwrap_err() {
        AgentError::BudgetExhausted {
            budget: Budget::CostUsd { limit, spent },
        } => {
            assert_eq!(limit, 0.5);
            assert!((spent - 0.4).abs() < 1e-9, "{spent}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(model.request_count(), 2);
    assert!((r.usage.cost_usd.unwrap() - 0.4).abs() < 1e-9);
}

#[test]
fn a_cost_cap_on_a_model_without_a_price_is_a_config_error() {
    let model = ScriptedModel::new();
    let err = builder(&model, &[])
        .model("dispatch/gemma")
        .max_cost_usd(1.0)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::MissingPrice {
            model: "dispatch/gemma".into()
        }
    );
    assert!(err.to_string().contains(".price("), "{err}");
}

#[test]
fn zero_and_nonsense_budgets_are_config_errors() {
    let model = ScriptedModel::new();
    let cases: Vec<(&str, agent_core::AgentConfigBuilder<Triage>)> = vec![
        ("max_llm_calls", builder(&model, &[]).max_llm_calls(0)),
        ("max_llm_retries", builder(&model, &[]).max_llm_retries(0)),
        ("max_tokens", builder(&model, &[]).max_tokens(0)),
        ("max_total_tokens", builder(&model, &[]).max_total_tokens(0)),
        (
            "max_cost_usd",
            builder(&model, &[]).model("test").max_cost_usd(f64::NAN),
        ),
        ("deadline", builder(&model, &[]).deadline(Duration::ZERO)),
        ("temperature", builder(&model, &[]).temperature(3.5)),
        (
            "tool_timeout",
            builder(&model, &[]).tool_timeout(Duration::ZERO),
        ),
        ("tool_concurrency", builder(&model, &[]).tool_concurrency(0)),
        (
            "llm_timeout",
            builder(&model, &[]).llm_timeout(Duration::ZERO),
        ),
        (
            "grader_timeout",
            builder(&model, &[]).grader_timeout(Duration::ZERO),
        ),
        (
            "repeated_call_limit",
            builder(&model, &[]).repeated_call_limit(1),
        ),
        (
            "no_progress_turns",
            builder(&model, &[]).no_progress_turns(0),
        ),
    ];
    for (setting, b) in cases {
        match b.build() {
            Err(ConfigError::InvalidSetting { setting: s, .. }) => assert_eq!(s, setting),
            other => panic!("{setting}: {other:?}"),
        }
    }
    assert_eq!(model.request_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_run_waiting_on_the_model() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let t1 = LlmResponse::tool_calls(vec![model.call("lookup", order("A1"))]);
    let model = model
        .step(ScriptStep::Delayed(
            Duration::from_secs(2),
            Box::new(ScriptStep::Respond(t1)),
        ))
        .step(ScriptStep::Hang);
    let config = builder(&model, &[&lookup])
        .deadline(Duration::from_secs(5))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    let err = r.outcome.unwrap_err();
    assert_eq!(
        err,
        AgentError::DeadlineExceeded {
            limit: Duration::from_secs(5)
        }
    );
    assert_eq!(err.category(), "deadline_exceeded");
    assert_eq!(err.ending(), Ending::Exhausted);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 1));
    assert_eq!(r.transcript.len(), 3, "the partial transcript is kept");
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_token_ends_the_run_as_cancelled() {
    let model = ScriptedModel::new().step(ScriptStep::Hang);
    let token = CancellationToken::new();
    let config = builder(&model, &[])
        .cancellation(token.clone())
        .build()
        .unwrap();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        token.cancel();
    });
    let started = tokio::time::Instant::now();
    let r = run_agent(&config, "ticket").await;
    canceller.await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert_eq!(r.outcome.unwrap_err(), AgentError::Cancelled);
    assert_eq!(r.usage.llm_calls, 1);
}

#[tokio::test]
async fn a_cancelled_token_means_no_request_at_all() {
    let model = ScriptedModel::new().submit(valid());
    let token = CancellationToken::new();
    token.cancel();
    let config = builder(&model, &[]).cancellation(token).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("cancelled"));
    assert_eq!(model.request_count(), 0);
}

/// A tool that notes when it finishes and when its future is dropped.
#[derive(Clone)]
struct Watched {
    finished: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Tool for Watched {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new("watched", "Sleeps a long time.", json!({"type": "object"}))
    }
    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        let guard = SetOnDrop(Arc::clone(&self.dropped));
        let finished = Arc::clone(&self.finished);
        Box::pin(async move {
            let _guard = guard;
            tokio::time::sleep(Duration::from_secs(30)).await;
            finished.store(true, Ordering::SeqCst);
            Ok("done".to_owned())
        })
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_the_run_future_stops_its_in_flight_tools() {
    let tool = Watched {
        finished: Arc::default(),
        dropped: Arc::default(),
    };
    let model = ScriptedModel::new()
        .tool_call("watched", json!({}))
        .submit(valid());
    let config = agent_core::AgentConfig::<Triage>::builder("drop")
        .llm(model.clone())
        .tool(tool.clone())
        .build()
        .unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(1), run_agent(&config, "ticket")).await;
    assert!(outcome.is_err(), "the caller gave up after 1 s");
    assert!(
        tool.dropped.load(Ordering::SeqCst),
        "the tool's future was dropped"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(
        !tool.finished.load(Ordering::SeqCst),
        "the tool never finished"
    );
}

#[tokio::test(start_paused = true)]
async fn a_model_call_that_never_answers_times_out_as_a_transient_failure() {
    let model = ScriptedModel::new()
        .step(ScriptStep::Hang)
        .step(ScriptStep::Hang)
        .step(ScriptStep::Hang)
        .submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let started = tokio::time::Instant::now();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(1800),
        "3 x the 600 s default"
    );
    match r.outcome.unwrap_err() {
        AgentError::MaxLlmRetries { failures } => {
            assert_eq!(failures.len(), 3);
            assert!(
                failures[0].message.contains("timed out after 600000 ms"),
                "{}",
                failures[0]
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(model.request_count(), 3);

    let model = ScriptedModel::new().step(ScriptStep::Hang).submit(valid());
    let config = builder(&model, &[])
        .llm_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(r.usage.llm_calls, 2);
}

#[tokio::test(start_paused = true)]
async fn a_grader_that_never_finishes_is_cut_off_and_the_value_kept() {
    struct Forever;
    impl agent_core::eval::Grader<Triage> for Forever {
        fn grade<'a>(
            &'a self,
            _output: &'a Triage,
            _input: &'a str,
        ) -> agent_core::eval::GradeFuture<'a> {
            Box::pin(std::future::pending())
        }
    }
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[]).grader(Forever).build().unwrap();
    let started = tokio::time::Instant::now();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(60),
        "the default grader_timeout"
    );
    assert!(r.is_ok());
    assert_eq!(r.scores, None);
}

/// A model that answers at once, forever, with a call to a tool that does not exist
/// (new arguments each time): the loop never waits on anything.
struct Instant;

impl agent_core::llm::LlmClient for Instant {
    fn complete<'a>(
        &'a self,
        request: &'a agent_core::llm::LlmRequest,
    ) -> agent_core::llm::LlmFuture<'a> {
        let n = request.messages.len();
        let call = agent_core::llm::ToolCall::new(format!("c{n}"), "nope", json!({ "n": n }));
        Box::pin(std::future::ready(Ok(LlmResponse::tool_calls(vec![call]))))
    }
}

fn endless() -> agent_core::AgentConfigBuilder<Triage> {
    agent_core::AgentConfig::<Triage>::builder("endless")
        .llm(Instant)
        .max_llm_calls(u32::MAX)
        .no_progress_turns(u32::MAX)
        .repeated_call_limit(u32::MAX)
}

#[tokio::test]
async fn the_deadline_holds_even_when_the_loop_never_waits() {
    let config = endless()
        .deadline(Duration::from_millis(50))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("deadline_exceeded"));
    assert!(r.usage.llm_calls > 1 && r.usage.llm_calls < u32::MAX);
}

#[tokio::test]
async fn cancellation_holds_even_when_the_loop_never_waits() {
    let token = CancellationToken::new();
    let config = endless().cancellation(token.clone()).build().unwrap();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        token.cancel();
    });
    let r = run_agent(&config, "ticket").await;
    canceller.join().unwrap();
    assert_eq!(r.category(), Some("cancelled"));
}

#[tokio::test(start_paused = true)]
async fn a_slow_grader_never_turns_an_answer_into_a_deadline_error() {
    struct Slow;
    impl agent_core::eval::Grader<Triage> for Slow {
        fn grade<'a>(&'a self, _o: &'a Triage, _i: &'a str) -> agent_core::eval::GradeFuture<'a> {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(Default::default())
            })
        }
    }
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[])
        .grader(Slow)
        .deadline(Duration::from_secs(5))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(r.scores, None);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "grading stopped at the deadline"
    );
}

#[tokio::test]
async fn absurd_token_counts_saturate_instead_of_wrapping_past_the_budget() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let t1 = LlmResponse::tool_calls(vec![model.call("lookup", order("A1"))])
        .with_usage(TokenUsage::new(u64::MAX, 10));
    let model = model.respond(t1).submit(valid());
    let config = builder(&model, &[&lookup])
        .max_total_tokens(1000)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("budget_exhausted"));
    assert_eq!(r.usage.total_tokens(), u64::MAX);
    assert_eq!(model.request_count(), 1);
    let receipt = agent_core::eval::Receipt::from_results(&[r.clone(), r]);
    assert_eq!(receipt.input_tokens, u64::MAX);
}

#[tokio::test]
async fn a_deadline_too_far_to_represent_is_no_deadline() {
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[])
        .deadline(Duration::MAX)
        .build()
        .unwrap();
    assert!(run_agent(&config, "ticket").await.is_ok());
}

#[test]
fn a_price_that_is_not_a_finite_non_negative_number_is_a_config_error() {
    let model = ScriptedModel::new();
    for bad in [f64::NAN, -1.0, f64::INFINITY] {
        let err = builder(&model, &[])
            .model("m")
            .price("m", ModelPrice::new(bad, 1.0))
            .max_cost_usd(1.0)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::InvalidSetting {
                    setting: "price",
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn calls_cut_off_by_the_deadline_are_answered_in_the_transcript() {
    let slow = TestTool::new("slow", Behaviour::Sleep(Duration::from_secs(30)));
    let model = ScriptedModel::new()
        .tool_call("slow", order("S"))
        .submit(valid());
    let config = builder(&model, &[&slow])
        .deadline(Duration::from_secs(5))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("deadline_exceeded"));
    let Some(agent_core::llm::Message::Tool { results }) = r.transcript.last() else {
        panic!("{:?}", r.transcript)
    };
    assert_eq!(results.len(), 1);
    assert!(
        results[0].is_error && results[0].content.contains("deadline_exceeded"),
        "{results:?}"
    );
    assert_well_formed(&r.transcript);
}

#[tokio::test]
async fn a_huge_tool_result_is_cut_before_it_reaches_the_model() {
    struct Huge;
    impl Tool for Huge {
        fn definition(&self) -> ToolDefinition {
            ToolDefinition::new("huge", "Returns a lot.", json!({"type": "object"}))
        }
        fn call<'a>(&'a self, _a: Value, _c: ToolContext) -> ToolFuture<'a> {
            Box::pin(async { Ok("x".repeat(5_000_000)) })
        }
    }
    let model = ScriptedModel::new()
        .tool_call("huge", json!({}))
        .submit(valid());
    let config = builder(&model, &[])
        .tool(Huge)
        .max_tool_result_bytes(1_000)
        .build()
        .unwrap();
    assert!(run_agent(&config, "ticket").await.is_ok());
    let res = &last_results(&model.requests()[1])[0];
    assert!(res.content.len() < 1_250, "{}", res.content.len());
    assert!(res.content.contains(
        "[cut: the result had 5000000 bytes (about 1250000 tokens); the first 1000 are shown."
    ));
}

/// A tool whose result is `lines` lines of 50 bytes.
struct Rows {
    lines: usize,
}

impl Tool for Rows {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new("rows", "Returns rows.", json!({"type": "object"}))
    }
    fn call<'a>(&'a self, _a: Value, _c: ToolContext) -> ToolFuture<'a> {
        let text: String = (0..self.lines)
            .map(|i| format!("{i:08} {}\n", "r".repeat(40)))
            .collect();
        Box::pin(async move { Ok(text) })
    }
}

#[tokio::test]
async fn issue49_a_result_that_would_overflow_the_context_window_is_cut_to_fit_and_the_run_answers()
{
    // 60,000 bytes of rows (about 15,000 tokens) for a model with 8,000 tokens of
    // window and 1,000 of output: without the cut the request passes the window and
    // the provider ends the run `context_window_exceeded`.
    let model = ScriptedModel::new()
        .tool_call("rows", json!({}))
        .submit(valid());
    let config = builder(&model, &[])
        .tool(Rows { lines: 1_200 })
        .max_tokens(1_000)
        .context_window(agent_core::pricing::ContextWindow::new(8_000, 1_000))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let second = &model.requests()[1];
    let res = &last_results(second)[0];
    // Cut at a line break, with its full size, under the room of 7,000 tokens.
    assert!(res.content.len() < 28_000, "{}", res.content.len());
    assert!(res.content.len() > 20_000, "{}", res.content.len());
    let (rows, note) = res.content.split_once("\n[cut: ").unwrap();
    assert!(rows.lines().all(|l| l.len() == 49), "a half row was kept");
    assert!(
        note.starts_with("the result had 60000 bytes (about 15000 tokens); the first "),
        "{note}"
    );
}

#[tokio::test]
async fn issue49_a_tools_own_result_cap_binds_below_the_configs() {
    struct Capped;
    impl Tool for Capped {
        fn definition(&self) -> ToolDefinition {
            ToolDefinition::new("rows", "Returns rows.", json!({"type": "object"}))
        }
        fn call<'a>(&'a self, a: Value, c: ToolContext) -> ToolFuture<'a> {
            Rows { lines: 100 }.call(a, c)
        }
        fn max_result_tokens(&self) -> Option<u32> {
            Some(100)
        }
    }
    let model = ScriptedModel::new()
        .tool_call("rows", json!({}))
        .submit(valid());
    let config = builder(&model, &[]).tool(Capped).build().unwrap();
    assert!(run_agent(&config, "ticket").await.is_ok());
    let res = &last_results(&model.requests()[1])[0];
    // 100 tokens = 400 bytes: 8 whole rows of 50 bytes (the cut is at a line break).
    let (rows, _) = res.content.split_once("\n[cut: ").unwrap();
    assert_eq!(rows.lines().count(), 8, "{rows}");
    assert!(rows.lines().all(|l| l.len() == 49), "{rows}");
    assert!(
        res.content.contains("the result had 5000 bytes"),
        "{}",
        res.content
    );
    // A cap of 0 tokens is a ConfigError at build.
    struct Zero;
    impl Tool for Zero {
        fn definition(&self) -> ToolDefinition {
            ToolDefinition::new("zero", "Nothing.", json!({"type": "object"}))
        }
        fn call<'a>(&'a self, _a: Value, _c: ToolContext) -> ToolFuture<'a> {
            Box::pin(async { Ok(String::new()) })
        }
        fn max_result_tokens(&self) -> Option<u32> {
            Some(0)
        }
    }
    let err = builder(&model, &[]).tool(Zero).build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "max_result_tokens = 0 (tool zero) is invalid: a result of no tokens tells the model \
         nothing; use at least 1"
    );
}
