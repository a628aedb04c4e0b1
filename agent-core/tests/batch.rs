//! `run_batch` and its receipt: 10,000 scripted runs, every one accounted for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use agent_core::{
    Ending,
    config::Backoff,
    eval::{Receipt, run_batch},
    llm::{LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, Message, TokenUsage, ToolCall},
};
use common::*;
use serde_json::json;

/// Behaves by the input's number modulo 7, so every ending and several categories occur.
struct ByInput;

impl LlmClient for ByInput {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let n: u64 = match &request.messages[0] {
            Message::User { content, .. } => content.parse().unwrap(),
            _ => unreachable!(),
        };
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let call = |name: &str, args| {
            LlmResponse::tool_calls(vec![ToolCall::new(format!("c{turn}"), name, args)])
        };
        let out = match (n % 7, turn) {
            (0, _) => Ok(call("submit_output", valid())),
            (1, _) => Ok(LlmResponse::text("no idea")),
            (2, _) => Err(LlmError::permanent("bad request").with_status(400)),
            (3, _) => Err(LlmError::transient("overloaded").with_status(529)),
            (4, 0) => Ok(call("lookup", order(&format!("A{n}")))),
            (4, _) => Ok(call("submit_output", valid())),
            (5, _) => Ok(call(
                "escalate_to_human",
                json!({"reason": "r", "summary": "s"}),
            )),
            (6, _) => Ok(call("lookup", order("same"))),
            _ => unreachable!(),
        };
        Box::pin(async move { out.map(|r| r.with_usage(TokenUsage::new(10, 2))) })
    }
}

#[tokio::test]
async fn ten_thousand_runs_are_all_accounted_for_in_input_order() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = agent_core::AgentConfig::<Triage>::builder("batch")
        .llm(ByInput)
        .tool(lookup.clone())
        .escalation(true)
        .backoff(Backoff::none())
        .build()
        .unwrap();
    let inputs: Vec<String> = (0..10_000u64).map(|n| n.to_string()).collect();
    let batch = run_batch(&config, inputs, 64).await;
    assert_eq!(batch.results.len(), 10_000);
    for (n, r) in batch.results.iter().enumerate() {
        assert_eq!(r.transcript[0], Message::user(n.to_string()), "input order");
        let expected = match n % 7 {
            0 | 4 => None,
            1 => Some("schema_not_called"),
            2 => Some("llm_permanent_error"),
            3 => Some("max_llm_retries"),
            5 => Some("escalated"),
            6 => Some("stuck"),
            _ => unreachable!(),
        };
        assert_eq!(r.category(), expected, "input {n}");
    }
    let receipt = &batch.receipt;
    let per_class = |k: u64| (0..10_000u64).filter(|n| n % 7 == k).count();
    assert_eq!(receipt.runs, 10_000);
    assert_eq!(receipt.count(Ending::Answered), per_class(0) + per_class(4));
    assert_eq!(receipt.count(Ending::Exhausted), per_class(1));
    assert_eq!(receipt.count(Ending::Failed), per_class(2) + per_class(3));
    assert_eq!(receipt.count(Ending::Escalated), per_class(5));
    assert_eq!(receipt.count(Ending::Stuck), per_class(6));
    assert_eq!(receipt.endings.values().sum::<usize>(), 10_000);
    assert_eq!(receipt.categories["max_llm_retries"], per_class(3));
    assert_eq!(
        receipt.categories.values().sum::<usize>(),
        10_000 - per_class(0) - per_class(4)
    );
    // Round trips: 1 (answer), 3 (text x3), 1 (permanent), 3 (transient x3), 2, 1, 2 (stuck on the repeat).
    let calls: u64 = [1u64, 3, 1, 3, 2, 1, 2]
        .iter()
        .enumerate()
        .map(|(k, c)| c * per_class(k as u64) as u64)
        .sum();
    assert_eq!(receipt.llm_calls, calls);
    // Class 6 runs its repeat too: the second identical call is stuck only once its
    // result is the same as the first's.
    assert_eq!(receipt.tool_calls, (per_class(4) + 2 * per_class(6)) as u64);
    assert_eq!(u64::from(lookup.runs()), receipt.tool_calls);
    assert!(receipt.p50 <= receipt.p95);
    assert!(receipt.cost_usd.is_none());

    let table = receipt.to_string();
    assert!(table.contains("answered"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("stuck") && l.contains(&per_class(6).to_string())),
        "{table}"
    );
}

#[tokio::test]
async fn an_empty_batch_and_zero_concurrency_are_fine() {
    let config = agent_core::AgentConfig::<Triage>::builder("b")
        .model("test")
        .build()
        .unwrap();
    let batch = run_batch(&config, Vec::<String>::new(), 0).await;
    assert!(batch.results.is_empty());
    assert_eq!(batch.receipt.runs, 0);
    let batch = run_batch(&config, ["a", "b"], 0).await;
    assert_eq!(batch.receipt.count(Ending::Answered), 2);
    assert_eq!(Receipt::from_results(&batch.results).runs, 2);
    assert_eq!(
        batch.receipt.cost_usd,
        Some(0.0),
        "the test model is priced at zero"
    );
}

/// One slow run (a long Retry-After, scripted as a 60 s delay) and 30 fast ones at
/// concurrency 4: every fast run finishes while the slow one still waits, and the
/// results still come back in input order. (Tokio's paused clock: virtual time.)
#[tokio::test(start_paused = true)]
async fn one_slow_run_does_not_hold_back_the_others() {
    struct SlowFirst;
    impl LlmClient for SlowFirst {
        fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
            let slow =
                matches!(&request.messages[0], Message::User { content, .. } if content == "0");
            let delay = if slow {
                std::time::Duration::from_secs(60)
            } else {
                std::time::Duration::from_millis(100)
            };
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(LlmResponse::tool_calls(vec![ToolCall::new(
                    "c1",
                    "submit_output",
                    valid(),
                )]))
            })
        }
    }
    let finished: std::sync::Arc<std::sync::Mutex<Vec<std::time::Duration>>> =
        std::sync::Arc::default();
    let record = std::sync::Arc::clone(&finished);
    let started = tokio::time::Instant::now();
    let config = agent_core::AgentConfig::<Triage>::builder("slow")
        .llm(SlowFirst)
        .observer(move |e: &agent_core::observe::RunEvent<'_>| {
            if let agent_core::observe::RunEvent::RunEnded { .. } = e {
                record.lock().unwrap().push(started.elapsed());
            }
        })
        .build()
        .unwrap();
    let inputs: Vec<String> = (0..31).map(|n| n.to_string()).collect();
    let batch = run_batch(&config, inputs, 4).await;
    assert_eq!(batch.receipt.count(Ending::Answered), 31);
    for (n, r) in batch.results.iter().enumerate() {
        assert_eq!(r.transcript[0], Message::user(n.to_string()), "input order");
    }
    let finished = finished.lock().unwrap().clone();
    // 30 fast runs on the 3 free slots: 10 waves of 100 ms, all done by 1 s.
    assert_eq!(finished.len(), 31);
    assert!(
        finished[..30]
            .iter()
            .all(|t| *t <= std::time::Duration::from_secs(1)),
        "{finished:?}"
    );
    assert_eq!(finished[30], std::time::Duration::from_secs(60));
    assert_eq!(started.elapsed(), std::time::Duration::from_secs(60));
}

/// Round trips per input: "k" answers on round trip k, "never" keeps looking up. With a
/// cap of 4: answered runs at 1, 1, 2, 2, 2, 3 and 4 round trips, one run cut off at 4.
#[tokio::test]
async fn the_receipt_has_a_turn_histogram_and_suggests_a_cap() {
    use common::planned::{Planned, Step, answer_at};
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = agent_core::AgentConfig::<Triage>::builder("turns")
        .llm(Planned(|input: &str, turn| match input.parse::<usize>() {
            Ok(k) => answer_at(k, turn, valid()),
            Err(_) => Step::Lookup,
        }))
        .tool(lookup)
        .max_llm_calls(4)
        .build()
        .unwrap();
    let inputs = ["1", "1", "2", "2", "2", "3", "4", "never"];
    let batch = run_batch(&config, inputs, 3).await;
    let turns = &batch.receipt.turns;
    assert_eq!(turns.count(Ending::Answered, 1), 2);
    assert_eq!(turns.count(Ending::Answered, 2), 3);
    assert_eq!(turns.count(Ending::Answered, 3), 1);
    assert_eq!(turns.count(Ending::Answered, 4), 1);
    assert_eq!(turns.count(Ending::Exhausted, 4), 1);
    assert_eq!(turns.histogram.len(), 2, "{turns:?}");
    // Answered: [1, 1, 2, 2, 2, 3, 4]; nearest rank ceil(0.95 * 7) = 7 -> 4; plus one.
    assert_eq!(turns.answered_p95, Some(4));
    assert_eq!(turns.suggested_max_llm_calls, Some(5));
    // The run cut off, and the run that answered in the wrap-up turn (4 of 4).
    assert_eq!(turns.max_llm_calls, Some(4));
    assert_eq!(turns.hit_cap, 2);
    // Without the cap known, only the cut-off run counts.
    let unknown = Receipt::from_results(&batch.results);
    assert_eq!(unknown.turns.hit_cap, 1);
    assert_eq!(unknown.turns.max_llm_calls, None);

    let table = batch.receipt.to_string();
    assert!(
        table
            .lines()
            .any(|l| l.trim_start().starts_with("answered") && l.ends_with("1x2 2x3 3x1 4x1")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("suggested max_llm_calls")
                && l.contains("5 (answered p95 4 + 1)")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("runs that hit the cap") && l.ends_with("2 (cap 4)")),
        "{table}"
    );
}
