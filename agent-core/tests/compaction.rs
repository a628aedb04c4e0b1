//! Compaction (`Compaction`): a long run under a small history budget ends answered,
//! with its compactions counted in its usage and observed as events; every request it
//! sends is a valid history (each call answered once, in order); a summary names no
//! call id the history lost; a failed summary falls back to clearing; bad settings are
//! `ConfigError`s at build.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::{Arc, Mutex};

use agent_core::testing::{ScriptStep, ScriptedModel};
use agent_core::{
    ConfigError,
    config::Compaction,
    llm::{LlmError, LlmRequest, LlmResponse, Message, TokenUsage},
    observe::RunEvent,
    pricing::ContextWindow,
    run_agent,
};
use common::*;

/// A tool result of about 2 KB (about 500 tokens by the bytes / 4 rule).
fn big_result() -> &'static str {
    Box::leak(format!("{{\"log\": \"{}\"}}", "x".repeat(2_000)).into_boxed_str())
}

/// `turns` tool turns calling `lookup`, then a valid submission. The turns report no
/// usage, so the runner counts them (and decides compactions) from its estimate.
fn long_script(turns: usize) -> ScriptedModel {
    let model = ScriptedModel::new();
    let mut steps = Vec::new();
    for i in 0..turns {
        let call = model.call("lookup", order(&format!("NW-{i:05}")));
        steps.push(ScriptStep::Respond(
            LlmResponse::tool_calls(vec![call]).with_usage(TokenUsage::new(0, 0)),
        ));
    }
    steps.push(ScriptStep::Respond(LlmResponse::tool_calls(vec![
        model.call("submit_output", valid()),
    ])));
    drop(model);
    ScriptedModel::from_steps(steps)
}

/// A summarizer that answers every request with `text`, reporting 200 + 40 tokens.
fn summarizer(n: usize, text: &str) -> ScriptedModel {
    ScriptedModel::from_steps(
        (0..n).map(|_| {
            ScriptStep::Respond(LlmResponse::text(text).with_usage(TokenUsage::new(200, 40)))
        }),
    )
}

/// The `Compacted` events seen: strategy, tokens before, tokens after.
type Seen = Arc<Mutex<Vec<(String, u64, u64)>>>;

fn events() -> (Seen, impl Fn(&RunEvent<'_>) + Send + Sync) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let observer = move |event: &RunEvent<'_>| {
        if let RunEvent::Compacted {
            strategy,
            before_tokens,
            after_tokens,
            ..
        } = event
        {
            sink.lock()
                .unwrap()
                .push(((*strategy).to_owned(), *before_tokens, *after_tokens));
        }
    };
    (seen, observer)
}

/// `assert_requests_well_formed`, and from the other side: every tool message answers
/// the assistant turn right before it, call for call (no result whose call is gone).
fn assert_valid(requests: &[LlmRequest]) {
    assert_requests_well_formed(requests);
    for r in requests {
        for (i, m) in r.messages.iter().enumerate() {
            let Message::Tool { results } = m else {
                continue;
            };
            let Some(Message::Assistant { tool_calls, .. }) =
                i.checked_sub(1).map(|j| &r.messages[j])
            else {
                panic!("message {i}: results without the turn that called them");
            };
            let called: Vec<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
            let answered: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
            assert_eq!(called, answered, "message {i}");
        }
    }
}

fn summaries(request: &LlmRequest) -> Vec<&str> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content, .. } if content.starts_with("Summary of the earlier") => {
                Some(content.as_str())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_200_turn_run_under_a_small_budget_is_summarized_and_ends_answered() {
    let model = long_script(200);
    let writer = summarizer(200, "Looked up orders NW-00000 onward; all shipped.");
    let tool = TestTool::new("lookup", Behaviour::Fixed(big_result()));
    let (seen, observer) = events();
    let config = builder(&model, &[&tool])
        .max_llm_calls(210)
        .max_tool_calls(210)
        .repeated_call_limit(u32::MAX)
        .no_progress_turns(u32::MAX)
        .compaction(
            Compaction::summarize_with(writer.clone(), "summarizer")
                .max_history_tokens(3_000)
                .keep_recent_turns(2),
        )
        .observer(observer)
        .build()
        .unwrap();
    let result = run_agent(&config, "Where are my 200 orders?").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(result.usage.llm_calls, 201);
    assert_eq!(tool.runs(), 200);
    let compactions = result.usage.compactions;
    // Each summary folds the old turns into one message; with 2 turns kept and about
    // 500 tokens per turn, one is needed every few turns.
    assert!(compactions >= 40, "{compactions} compactions");
    assert_eq!(result.usage.compaction_failures, 0);
    assert_eq!(writer.request_count(), compactions as usize);
    assert_eq!(seen.lock().unwrap().len(), compactions as usize);
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|(s, before, after)| s == "summarize" && after < before)
    );
    // The summaries' tokens are the run's: 240 each (the main model reports none, so
    // its calls are estimates).
    assert!(result.usage.total_tokens() >= 240 * u64::from(compactions));
    // Every request is a valid history, keeps the input first, holds one summary at
    // most, and stays near the budget (the trigger plus one turn).
    let requests = model.requests();
    assert_valid(&requests);
    for r in &requests {
        assert_eq!(
            r.messages.first(),
            Some(&Message::user("Where are my 200 orders?"))
        );
        assert!(summaries(r).len() <= 1);
        assert!(
            r.estimated_input_tokens() < 3_000 + 1_200,
            "{}",
            r.estimated_input_tokens()
        );
    }
    assert_well_formed(&result.transcript);
    // The summarizer saw old turns as text, without ids or tools.
    let asked = &writer.requests()[0];
    assert!(asked.tools.is_empty());
    let Message::User { content, .. } = &asked.messages[0] else {
        panic!("{:?}", asked.messages);
    };
    assert!(
        content.contains("assistant called lookup with"),
        "{content}"
    );
    assert!(!content.contains("call_1"), "{content}");
}

#[tokio::test]
async fn clearing_tool_results_keeps_every_pair_and_the_newest_results() {
    let model = long_script(30);
    let tool = TestTool::new("lookup", Behaviour::Fixed(big_result()));
    let config = builder(&model, &[&tool])
        .max_llm_calls(40)
        .max_tool_calls(40)
        .repeated_call_limit(u32::MAX)
        .no_progress_turns(u32::MAX)
        // 8,000-token window, 1,000 of output: compact past half of the 7,000 left.
        .context_window(ContextWindow::new(8_000, 1_000))
        .max_tokens(1_000)
        .compaction(
            Compaction::clear_tool_results()
                .at_share(0.5)
                .keep_recent_turns(3),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert!(result.usage.compactions > 0);
    let requests = model.requests();
    assert_valid(&requests);
    let last = requests.last().unwrap();
    let results: Vec<&str> = last
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { results } => Some(results[0].content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 30);
    // The three newest results are whole; the older ones are markers.
    assert!(results[27..].iter().all(|r| *r == big_result()));
    let marker = format!(
        "[compacted: {} bytes of lookup output removed to fit the context window]",
        big_result().len()
    );
    assert!(
        results[..20].iter().all(|r| *r == marker),
        "{:?}",
        &results[..3]
    );
    assert!(
        last.estimated_input_tokens() < 3_500,
        "{}",
        last.estimated_input_tokens()
    );
}

#[tokio::test]
async fn a_failed_summary_falls_back_to_clearing_and_is_counted() {
    let model = long_script(12);
    let writer = ScriptedModel::from_steps(
        (0..20).map(|_| ScriptStep::Fail(LlmError::transient("503 overloaded").with_status(503))),
    );
    let tool = TestTool::new("lookup", Behaviour::Fixed(big_result()));
    let (seen, observer) = events();
    let config = builder(&model, &[&tool])
        .max_llm_calls(20)
        .max_tool_calls(20)
        .repeated_call_limit(u32::MAX)
        .no_progress_turns(u32::MAX)
        .compaction(
            Compaction::summarize_with(writer.clone(), "summarizer").max_history_tokens(2_000),
        )
        .observer(observer)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let usage = &result.usage;
    assert!(usage.compaction_failures >= 1);
    assert_eq!(usage.compaction_failures as usize, writer.request_count());
    // Every failure fell back to clearing (which compacts while results are left).
    assert!(usage.compactions >= 1);
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|(s, _, _)| s == "clear_tool_results")
    );
    assert_valid(&model.requests());
    assert!(model.requests().iter().all(|r| summaries(r).is_empty()));
}

#[tokio::test]
async fn a_summary_names_no_call_id_the_history_no_longer_has() {
    let model = long_script(10);
    // A summarizer that quotes the first call's id (as a model might).
    let writer = summarizer(10, "call_1 looked up NW-00000: shipped.");
    let tool = TestTool::new("lookup", Behaviour::Fixed(big_result()));
    let config = builder(&model, &[&tool])
        .max_llm_calls(20)
        .max_tool_calls(20)
        .repeated_call_limit(u32::MAX)
        .no_progress_turns(u32::MAX)
        .compaction(Compaction::summarize_with(writer, "summarizer").max_history_tokens(1_500))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert!(result.usage.compactions > 0);
    for r in model.requests() {
        for s in summaries(&r) {
            assert!(!s.contains("call_1 "), "{s}");
            assert!(s.contains("[call] looked up NW-00000"), "{s}");
        }
    }
}

#[tokio::test]
async fn an_unpriced_summarizer_under_a_cost_cap_is_not_called() {
    let model = long_script(8);
    let writer = summarizer(10, "summary");
    let tool = TestTool::new("lookup", Behaviour::Fixed(big_result()));
    // The run's model is priced (the free `test` row); "summarizer" is not.
    let config = builder(&model, &[&tool])
        .model("test")
        .llm(model.clone())
        .max_llm_calls(20)
        .max_tool_calls(20)
        .repeated_call_limit(u32::MAX)
        .no_progress_turns(u32::MAX)
        .max_cost_usd(1.0)
        .compaction(
            Compaction::summarize_with(writer.clone(), "summarizer").max_history_tokens(1_500),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(writer.request_count(), 0);
    assert!(result.usage.compaction_failures >= 1);
    assert_eq!(result.usage.compactions, result.usage.compaction_failures);
}

#[test]
fn bad_compaction_settings_are_config_errors() {
    let model = ScriptedModel::new();
    let err = |c: Compaction| {
        builder(&model, &[])
            .compaction(c)
            .build()
            .map(|_| ())
            .unwrap_err()
    };
    // The scripted model's window is unknown: a share needs one.
    let e = err(Compaction::clear_tool_results());
    assert!(
        matches!(
            &e,
            ConfigError::InvalidSetting {
                setting: "compaction",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("context window is unknown"), "{e}");
    let e = err(Compaction::clear_tool_results().at_share(1.5));
    assert!(e.to_string().contains("between 0.05 and 1.0"), "{e}");
    let e = err(Compaction::summarize().max_history_tokens(0));
    assert!(e.to_string().contains("max_history_tokens(0)"), "{e}");
    let e = err(Compaction::summarize()
        .max_history_tokens(10)
        .keep_recent_turns(0));
    assert!(e.to_string().contains("keep_recent_turns(0)"), "{e}");
    // A window set on the builder, or a budget, is enough; none needs nothing.
    for c in [
        Compaction::clear_tool_results(),
        Compaction::summarize().max_history_tokens(5_000),
        Compaction::none(),
    ] {
        builder(&model, &[])
            .context_window(ContextWindow::new(32_000, 4_000))
            .compaction(c)
            .build()
            .unwrap();
    }
    assert_eq!(
        ContextWindow::of("claude-sonnet-4-5"),
        Some(ContextWindow::new(200_000, 64_000))
    );
}
