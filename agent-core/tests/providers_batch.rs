//! `run_batch` over the provider batch APIs (`.provider_batch(..)`), on a fake of
//! OpenAI's Batch API and Anthropic's Message Batches: one job per round, the batch
//! price, resuming after a crash between rounds without paying twice, expired jobs,
//! unknown result ids, a job that never finishes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeSet;
use std::time::Duration;

use agent_core::config::Backoff;
use agent_core::durable::InMemoryCheckpoints;
use agent_core::eval::{Batch, run_batch};
use agent_core::pricing::ModelPrice;
use agent_core::providers::{BatchFallback, ProviderBatch, ProviderOptions};
use agent_core::testing::ScriptedModel;
use agent_core::{AgentConfig, AgentConfigBuilder, AgentError, ConfigError, run_agent};
use serde_json::Value;

use crate::common::{Behaviour, TestTool};
use crate::providers_support::KEY;
use crate::providers_support::batch_server::{BatchServer, Mode};

/// Per LLM call of the fake (1,000 input and 100 output tokens) at $2.50 / $10 per
/// MTok: $0.0035 live; three calls a run.
pub(crate) const LIVE_RUN_USD: f64 = 3.0 * (1000.0 * 2.5 + 100.0 * 10.0) / 1e6;

pub(crate) fn fast() -> ProviderBatch {
    // Rounds form when every run waits (the window is never what closes one here).
    ProviderBatch::new()
        .collect_window(Duration::from_secs(600))
        .poll(Backoff::exponential(
            Duration::from_millis(1),
            Duration::from_millis(5),
        ))
}

pub(crate) fn builder(model: &str, base: &str, lookup: &TestTool) -> AgentConfigBuilder<String> {
    AgentConfig::<String>::builder("batched")
        .model(model)
        .provider(
            ProviderOptions::default()
                .with_api_key(KEY)
                .with_base_url(base),
        )
        .tool(lookup.clone())
        .price(model, ModelPrice::new(2.5, 10.0))
        .backoff(Backoff::none())
}

pub(crate) fn inputs(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("ticket-{i}")).collect()
}

/// Every run answered `done: ticket-i` in 3 LLM calls, at `run_usd`.
pub(crate) fn assert_answered(batch: &Batch<String>, run_usd: f64) {
    for (i, result) in batch.results.iter().enumerate() {
        assert_eq!(
            result.outcome.as_deref(),
            Ok(format!("done: ticket-{i}").as_str())
        );
        assert_eq!(result.usage.llm_calls, 3, "run {i}");
        let cost = result.usage.cost_usd.unwrap();
        assert!((cost - run_usd).abs() < 1e-12, "run {i}: {cost} USD");
    }
}

/// The tool results of each line of each job (one number per line): the round a line
/// belongs to.
pub(crate) fn rounds(fake: &BatchServer, body: &str) -> Vec<Vec<usize>> {
    let s = fake.state();
    s.jobs
        .iter()
        .map(|job| {
            job.lines
                .iter()
                .map(|line| tool_results(&line[body]))
                .collect()
        })
        .collect()
}

pub(crate) fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m["content"].as_array() {
            _ if m["role"] == "tool" => 1,
            Some(blocks) => blocks.iter().filter(|b| b["type"] == "tool_result").count(),
            None => 0,
        })
        .sum()
}

#[tokio::test]
async fn openai_hundred_runs_of_three_turns_are_three_batch_jobs_at_half_the_live_price() {
    let fake = BatchServer::start(Mode::Normal).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let batched = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .provider_batch(fast())
        .build()
        .unwrap();
    let batch = run_batch(&batched, inputs(100), 100).await;
    assert_answered(&batch, LIVE_RUN_USD / 2.0);
    assert_eq!(
        rounds(&fake, "body"),
        [vec![0; 100], vec![1; 100], vec![2; 100]],
        "job k holds the k-th call of every run"
    );
    {
        let s = fake.state();
        assert_eq!(s.live_calls, 0);
        for line in s.jobs.iter().flat_map(|j| &j.lines) {
            assert_eq!(line["method"], "POST");
            assert_eq!(line["url"], "/v1/chat/completions");
            assert_eq!(line["body"]["model"], "gpt-4o-mini");
        }
    }
    let report = batch.provider_batch.clone().unwrap();
    assert_eq!(
        (report.jobs, report.requests, report.answered),
        (3, 300, 300)
    );
    assert_eq!(
        (report.unanswered, report.sent_live, report.unknown_results),
        (0, 0, 0)
    );
    assert_eq!(lookup.runs(), 200);

    // The same scripted batch with live calls: the library's cost accounting, twice.
    let live = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .build()
        .unwrap();
    let live_batch = run_batch(&live, inputs(100), 100).await;
    assert_answered(&live_batch, LIVE_RUN_USD);
    assert_eq!(fake.state().live_calls, 300);
    assert!(live_batch.provider_batch.is_none());
    let (b, l) = (
        batch.receipt.cost_usd.unwrap(),
        live_batch.receipt.cost_usd.unwrap(),
    );
    assert!(
        (b - 0.525).abs() < 1e-9 && (l - 1.05).abs() < 1e-9,
        "{b} {l}"
    );
    println!(
        "100 runs x 3 turns, gpt-4o-mini at $2.50/$10 per MTok: batch API {:.5} USD a run \
         ({b:.4} USD, 3 jobs), live {:.5} USD a run ({l:.4} USD, 300 calls)",
        b / 100.0,
        l / 100.0
    );
}

#[tokio::test]
async fn anthropic_runs_go_as_one_message_batch_per_round() {
    let fake = BatchServer::start(Mode::Normal).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = builder("claude-sonnet-4-5", &fake.server.uri(), &lookup)
        .provider_batch(fast())
        .build()
        .unwrap();
    let batch = run_batch(&config, inputs(10), 10).await;
    assert_answered(&batch, LIVE_RUN_USD / 2.0);
    assert_eq!(
        rounds(&fake, "params"),
        [vec![0; 10], vec![1; 10], vec![2; 10]]
    );
    let s = fake.state();
    assert_eq!(s.live_calls, 0);
    for line in s.jobs.iter().flat_map(|j| &j.lines) {
        assert_eq!(line["params"]["model"], "claude-sonnet-4-5");
        assert!(line["params"].get("stream").is_none());
        let id = line["custom_id"].as_str().unwrap();
        assert!(
            (1..=64).contains(&id.len())
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{id}"
        );
    }
}

#[tokio::test]
async fn a_crash_between_rounds_resumes_from_the_checkpoints_without_paying_twice() {
    let fake = BatchServer::start(Mode::HangCreate { at: 2 }).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .checkpoints(InMemoryCheckpoints::new())
        .provider_batch(fast().run_ids("nightly-7"))
        .build()
        .unwrap();
    tokio::select! {
        _ = run_batch(&config, inputs(20), 20) => panic!("the second job's creation hangs"),
        () = fake.creates_reach(2) => {}
    }
    // The process "died" submitting round 2: round 1 was answered and checkpointed.
    assert_eq!(rounds(&fake, "body"), [vec![0; 20]]);
    assert_eq!(lookup.runs(), 20);
    fake.set_mode(Mode::Normal);
    let batch = run_batch(&config, inputs(20), 20).await;
    assert_answered(&batch, LIVE_RUN_USD / 2.0);
    assert_eq!(
        rounds(&fake, "body"),
        [vec![0; 20], vec![1; 20], vec![2; 20]],
        "after the resume, only rounds 2 and 3 are submitted"
    );
    // No line was sent twice: each (run, round) once over every job.
    let s = fake.state();
    let lines: Vec<(String, usize)> = s
        .jobs
        .iter()
        .flat_map(|j| &j.lines)
        .map(|l| (l["body"]["messages"].to_string(), tool_results(&l["body"])))
        .collect();
    assert_eq!(lines.iter().collect::<BTreeSet<_>>().len(), 60);
    assert_eq!(s.live_calls, 0);
    assert_eq!(lookup.runs(), 40, "no tool ran twice");
}

#[tokio::test]
async fn requests_an_expired_job_left_unanswered_are_sent_live_at_the_live_price() {
    let fake = BatchServer::start(Mode::ExpireFirst { answered: 6 }).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .provider_batch(fast())
        .build()
        .unwrap();
    let batch = run_batch(&config, inputs(10), 10).await;
    for (i, result) in batch.results.iter().enumerate() {
        assert_eq!(
            result.outcome.as_deref(),
            Ok(format!("done: ticket-{i}").as_str())
        );
    }
    assert_eq!(fake.state().live_calls, 4);
    assert_eq!(rounds(&fake, "body").len(), 3);
    let report = batch.provider_batch.unwrap();
    assert_eq!(
        (report.answered, report.unanswered, report.sent_live),
        (26, 4, 4)
    );
    // 26 calls at the batch price, 4 live.
    let want = 26.0 * LIVE_RUN_USD / 6.0 + 4.0 * LIVE_RUN_USD / 3.0;
    let cost = batch.receipt.cost_usd.unwrap();
    assert!((cost - want).abs() < 1e-9, "{cost} != {want}");
}

#[tokio::test]
async fn with_the_fail_fallback_unanswered_requests_retry_in_the_next_job() {
    let fake = BatchServer::start(Mode::ExpireFirst { answered: 6 }).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .provider_batch(fast().fallback(BatchFallback::Fail))
        .build()
        .unwrap();
    let batch = run_batch(&config, inputs(10), 10).await;
    assert!(batch.results.iter().all(|r| r.outcome.is_ok()));
    assert_eq!(fake.state().live_calls, 0);
    // Round 2 holds the 6 answered runs' second calls and the 4 retries.
    let rounds = rounds(&fake, "body");
    let sizes: Vec<usize> = rounds.iter().map(Vec::len).collect();
    assert_eq!(sizes, [10, 10, 10, 4]);
    assert_eq!(batch.provider_batch.unwrap().sent_live, 0);
}

#[tokio::test]
async fn result_lines_for_unknown_or_repeated_ids_are_counted_and_never_applied() {
    let fake = BatchServer::start(Mode::Unknown).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .provider_batch(fast())
        .build()
        .unwrap();
    let batch = run_batch(&config, inputs(5), 5).await;
    assert_answered(&batch, LIVE_RUN_USD / 2.0);
    let report = batch.provider_batch.unwrap();
    assert_eq!(
        (report.jobs, report.answered, report.unknown_results),
        (3, 15, 6)
    );
}

#[tokio::test]
async fn a_job_that_never_finishes_is_cancelled_and_its_runs_end_deadline_exceeded() {
    let fake = BatchServer::start(Mode::Never).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let limit = Duration::from_millis(150);
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .provider_batch(fast().deadline(limit))
        .build()
        .unwrap();
    let batch = run_batch(&config, inputs(3), 3).await;
    for result in &batch.results {
        match &result.outcome {
            Err(AgentError::DeadlineExceeded { limit: l }) => assert_eq!(*l, limit),
            other => panic!("{other:?}"),
        }
        assert_eq!(result.category(), Some("deadline_exceeded"));
    }
    let s = fake.state();
    assert_eq!(s.cancels, ["batch_0"]);
    assert_eq!((s.jobs.len(), s.live_calls), (1, 0));
    drop(s);
    let report = batch.provider_batch.unwrap();
    assert_eq!((report.deadline_cancelled, report.unanswered), (1, 3));
}

#[tokio::test]
async fn a_batched_config_calls_live_outside_run_batch() {
    let fake = BatchServer::start(Mode::Normal).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .provider_batch(fast())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket-0").await;
    assert_eq!(result.outcome.as_deref(), Ok("done: ticket-0"));
    let s = fake.state();
    assert_eq!((s.live_calls, s.jobs.len()), (3, 0));
}

#[test]
fn routes_without_a_batch_api_are_refused_at_build_naming_the_model() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    for model in [
        "gemini-2.5-flash",
        "dispatch/qwen3",
        "ollama/llama3.2",
        "openai-responses/gpt-5",
    ] {
        let error = builder(model, "http://127.0.0.1:9/v1", &lookup)
            .provider_batch(ProviderBatch::new())
            .build()
            .unwrap_err();
        match error {
            ConfigError::InvalidSetting { setting, value, .. } => {
                assert_eq!((setting, value.as_str()), ("provider_batch", model));
            }
            other => panic!("{model}: {other:?}"),
        }
    }
    let own = AgentConfig::<String>::builder("own")
        .llm(ScriptedModel::new().text("hi"))
        .provider_batch(ProviderBatch::new())
        .build()
        .unwrap_err();
    assert!(
        matches!(
            &own,
            ConfigError::InvalidSetting {
                setting: "provider_batch",
                ..
            }
        ),
        "{own:?}"
    );
}
