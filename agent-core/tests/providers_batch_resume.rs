//! `run_batch` over the provider batch APIs, killed while a job is in flight (the
//! provider accepted it, its results not read) and resumed from the checkpoints: the
//! resumed runs wait on that job instead of sending their calls again; a job the
//! provider no longer knows, or whose lines expired, falls back live.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeSet;
use std::time::Duration;

use agent_core::AgentError;
use agent_core::durable::{CheckpointStore, InMemoryCheckpoints};
use agent_core::eval::run_batch;
use agent_core::providers::BatchReport;
use serde_json::Value;

use crate::common::{Behaviour, TestTool};
use crate::providers_batch::{
    LIVE_RUN_USD, assert_answered, builder, fast, inputs, rounds, tool_results,
};
use crate::providers_support::batch_server::{BatchServer, Mode};

/// The batched call run `{prefix}-{i}`'s checkpoint records, if any.
async fn batch_call(store: &InMemoryCheckpoints, prefix: &str, i: usize) -> Option<Value> {
    let record = store.load(&format!("{prefix}-{i}")).await.unwrap()?;
    let state: Value = serde_json::from_str(&record.state).ok()?;
    let call = state["state"].get("batch_call")?.clone();
    Some(call)
}

/// Waits until each of the `n` runs' checkpoints records its call in job `job`: the
/// moment to "kill" the batch (the job accepted, its results not read).
async fn recorded_in(store: &InMemoryCheckpoints, prefix: &str, n: usize, job: &str) {
    loop {
        let mut count = 0;
        for i in 0..n {
            if batch_call(store, prefix, i)
                .await
                .is_some_and(|c| c["job"] == job)
            {
                count += 1;
            }
        }
        if count == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Runs a batch of `n` (`prefix`) until round 2's job (`batch_1`) is in flight and
/// every run recorded its call in it, then drops it (the crash). Checks what the
/// checkpoints hold: each run's line of that job, once.
async fn crash_in_flight(
    fake: &BatchServer,
    config: &agent_core::AgentConfig<String>,
    store: &InMemoryCheckpoints,
    prefix: &str,
    n: usize,
    body: &str,
) {
    tokio::select! {
        _ = run_batch(config, inputs(n), n) => panic!("round 2's job is held in progress"),
        () = recorded_in(store, prefix, n, "batch_1") => {}
    }
    assert_eq!(rounds(fake, body), [vec![0; n], vec![1; n]]);
    let in_job: BTreeSet<String> = fake.state().jobs[1]
        .lines
        .iter()
        .map(|l| l["custom_id"].as_str().unwrap().to_owned())
        .collect();
    let mut stored = BTreeSet::new();
    for i in 0..n {
        let call = batch_call(store, prefix, i).await.unwrap();
        let id = call["custom_id"].as_str().unwrap().to_owned();
        assert!(in_job.contains(&id), "run {i}: {id} is a line of the job");
        assert_eq!(call["requests"], n);
        assert!(call["submitted_at_ms"].as_u64().unwrap() > 0);
        stored.insert(id);
    }
    assert_eq!(stored, in_job, "each run names its own line");
}

/// A report's counts: jobs, requests, answered, unanswered, sent live, unknown
/// results, deadline cancelled, resumed jobs.
fn counts(r: &BatchReport) -> [u64; 8] {
    [
        u64::from(r.jobs),
        r.requests,
        r.answered,
        r.unanswered,
        r.sent_live,
        r.unknown_results,
        u64::from(r.deadline_cancelled),
        u64::from(r.resumed_jobs),
    ]
}

/// Each (run, round) line once over every job.
fn assert_each_line_once(fake: &BatchServer, body: &str, lines: usize) {
    let s = fake.state();
    let sent: Vec<(String, usize)> = s
        .jobs
        .iter()
        .flat_map(|j| &j.lines)
        .map(|l| (l[body]["messages"].to_string(), tool_results(&l[body])))
        .collect();
    assert_eq!(sent.len(), lines);
    assert_eq!(sent.iter().collect::<BTreeSet<_>>().len(), lines);
}

#[tokio::test]
async fn a_crash_while_a_job_is_in_flight_resumes_waiting_on_that_job() {
    let fake = BatchServer::start(Mode::Hold { at: 2 }).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let store = InMemoryCheckpoints::new();
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .checkpoints(store.clone())
        .provider_batch(fast().run_ids("inflight"))
        .build()
        .unwrap();
    crash_in_flight(&fake, &config, &store, "inflight", 20, "body").await;
    assert_eq!(lookup.runs(), 20, "round 1's tools ran");
    // The provider finishes the job meanwhile.
    fake.set_mode(Mode::Normal);
    let batch = run_batch(&config, inputs(20), 20).await;
    assert_answered(&batch, LIVE_RUN_USD / 2.0);
    assert_eq!(
        rounds(&fake, "body"),
        [vec![0; 20], vec![1; 20], vec![2; 20]],
        "no new job for round 2: the resumed runs read the held one"
    );
    assert_each_line_once(&fake, "body", 60);
    assert_eq!(fake.state().live_calls, 0);
    assert_eq!(lookup.runs(), 40, "no tool ran twice");
    let report = batch.provider_batch.unwrap();
    assert_eq!(counts(&report), [1, 20, 40, 0, 0, 0, 0, 1]);
    // The answers were applied: no checkpoint names a job any more.
    for i in 0..20 {
        assert!(batch_call(&store, "inflight", i).await.is_none(), "run {i}");
    }
}

#[tokio::test]
async fn a_stored_job_the_provider_no_longer_knows_falls_back_live() {
    let fake = BatchServer::start(Mode::Hold { at: 2 }).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let store = InMemoryCheckpoints::new();
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .checkpoints(store.clone())
        .provider_batch(fast().run_ids("lost"))
        .build()
        .unwrap();
    crash_in_flight(&fake, &config, &store, "lost", 12, "body").await;
    // The job reads 404 now (expired from the provider's records, another account).
    fake.set_mode(Mode::Lost { at: 2 });
    let batch = run_batch(&config, inputs(12), 12).await;
    // Two calls at the batch price, round 2's live.
    assert_answered(&batch, LIVE_RUN_USD / 3.0 * (0.5 + 1.0 + 0.5));
    assert_eq!(fake.state().live_calls, 12);
    assert_eq!(
        rounds(&fake, "body"),
        [vec![0; 12], vec![1; 12], vec![2; 12]],
        "round 2 went live, not in a new job"
    );
    assert_eq!(lookup.runs(), 24, "no tool ran twice");
    let report = batch.provider_batch.unwrap();
    assert_eq!(counts(&report), [1, 12, 12, 12, 12, 0, 0, 1]);
}

#[tokio::test]
async fn anthropic_resumed_calls_read_the_stored_batch_and_its_expired_lines_go_live() {
    let fake = BatchServer::start(Mode::Hold { at: 2 }).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let store = InMemoryCheckpoints::new();
    let config = builder("claude-sonnet-4-5", &fake.server.uri(), &lookup)
        .checkpoints(store.clone())
        .provider_batch(fast().run_ids("claude"))
        .build()
        .unwrap();
    crash_in_flight(&fake, &config, &store, "claude", 15, "params").await;
    // The batch ended meanwhile with its last 5 requests expired.
    fake.set_mode(Mode::Expire {
        at: 2,
        answered: 10,
    });
    let batch = run_batch(&config, inputs(15), 15).await;
    assert!(
        batch
            .results
            .iter()
            .enumerate()
            .all(|(i, r)| r.outcome.as_deref() == Ok(format!("done: ticket-{i}").as_str())),
        "every run answered"
    );
    assert_eq!(fake.state().live_calls, 5);
    assert_eq!(
        rounds(&fake, "params"),
        [vec![0; 15], vec![1; 15], vec![2; 15]]
    );
    assert_each_line_once(&fake, "params", 45);
    assert_eq!(lookup.runs(), 30, "no tool ran twice");
    let report = batch.provider_batch.unwrap();
    assert_eq!(
        (report.resumed_jobs, report.jobs, report.answered),
        (1, 1, 25)
    );
    assert_eq!((report.unanswered, report.sent_live), (5, 5));
    // The custom_ids of the resumed batch's job are not the stored job's.
    let s = fake.state();
    let ids = |job: usize| -> BTreeSet<String> {
        s.jobs[job]
            .lines
            .iter()
            .map(|l| l["custom_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(ids(1).is_disjoint(&ids(2)));
    let prefix = |id: &String| id.split('-').next().unwrap().to_owned();
    let gates: BTreeSet<String> = ids(1).iter().chain(&ids(2)).map(prefix).collect();
    assert_eq!(gates.len(), 2, "one nonce per gate: {gates:?}");
}

#[tokio::test]
async fn a_stored_job_past_its_deadline_counted_from_its_submission_is_cancelled() {
    let fake = BatchServer::start(Mode::Hold { at: 2 }).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let store = InMemoryCheckpoints::new();
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .checkpoints(store.clone())
        .provider_batch(fast().run_ids("late"))
        .build()
        .unwrap();
    crash_in_flight(&fake, &config, &store, "late", 10, "body").await;
    // Resumed with a 2 ms deadline, at least 5 ms after the job's submission: it is
    // past it already, and still in progress at its one status read.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let limit = Duration::from_millis(2);
    let config = builder("gpt-4o-mini", &fake.openai_url(), &lookup)
        .checkpoints(store.clone())
        .provider_batch(fast().deadline(limit).run_ids("late"))
        .build()
        .unwrap();
    let batch = run_batch(&config, inputs(10), 10).await;
    for result in &batch.results {
        match &result.outcome {
            Err(AgentError::DeadlineExceeded { limit: l }) => assert_eq!(*l, limit),
            other => panic!("{other:?}"),
        }
    }
    let s = fake.state();
    assert_eq!(s.cancels, ["batch_1"]);
    assert_eq!((s.jobs.len(), s.live_calls), (2, 0));
    drop(s);
    let report = batch.provider_batch.unwrap();
    assert_eq!(counts(&report), [0, 0, 0, 10, 0, 0, 1, 1]);
}
