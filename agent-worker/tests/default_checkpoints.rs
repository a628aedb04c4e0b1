//! C62: a queued job is durable whatever its agent's config says. The worker
//! checkpoints runs into its own store when the config has no checkpoint store, so a
//! job redelivered after its worker was killed continues its run and a tool that
//! completed does not run again; `WorkerOptions::checkpoints(false)` is the opt-out
//! (the job then runs again from the start). Real NATS and real stores (PostgreSQL in
//! a schema of its own, and SQLite), through the harness of `durable.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use agent_core::{Ending, durable::CheckpointStore, store::FeedbackStore};
use agent_worker::{
    Job, META_DELIVERY, META_RESUMED, META_STORE_FAILURES, Registry, Worker, WorkerOptions,
};
use serde_json::json;

use super::durable::{Env, config, meta, on_both, signal, take_over_with, wait_for};

/// A worker in this process whose agent's config has no checkpoint store.
fn plain_worker(env: &Env, options: WorkerOptions) -> Worker {
    Worker::new(
        env.queue.clone(),
        Arc::new(env.store.clone()),
        Registry::new().with(config(None, &env.effects, "")),
        options,
    )
}

// C62.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c62_a_job_whose_config_has_no_checkpoints_resumes_and_its_tool_does_not_run_again() {
    on_both(|env| async move {
        let (mut child, mut out) = env.child_with("after_tool", "plain");
        wait_for(&mut out, "ready");
        env.queue
            .submit(&Job::new("effects", "append", "job-62"))
            .await
            .unwrap();
        // append completed; the model's next turn never comes back: killed there.
        wait_for(&mut out, "hanging");
        signal(&child, "-KILL");
        assert!(!child.wait().unwrap().success());
        assert_eq!(env.lines(), ["append job-62:c1"]);
        // The worker's own store holds the run's checkpoint, held by a lease.
        let checkpoint = env.store.load("job-62").await.unwrap().unwrap();
        assert!(!checkpoint.finished);
        assert!(checkpoint.lease_until_ms > checkpoint.updated_at_ms);
        assert_eq!(env.store.run("job-62").await.unwrap(), None);

        let worker = plain_worker(&env, WorkerOptions::new());
        let (record, report) = take_over_with(&env, worker, "job-62").await;
        assert_eq!(env.lines(), ["append job-62:c1"], "append ran once");
        assert_eq!(record.ending, Ending::Answered);
        assert_eq!(record.output, json!({"ok": true}));
        assert_eq!(meta(&record, META_DELIVERY), Some("2"));
        assert_eq!(meta(&record, META_RESUMED), Some("true"));
        assert_eq!(meta(&record, META_STORE_FAILURES), Some("0"));
        assert_eq!(record.usage.llm_calls, 2);
        assert_eq!(record.usage.tool_calls, 1);
        assert_eq!((report.runs, report.fenced), (1, 0));
        let checkpoint = env.store.load("job-62").await.unwrap().unwrap();
        assert!(checkpoint.finished);
        assert_eq!(
            checkpoint.lease_until_ms, 0,
            "a finished run holds no lease"
        );
        env
    })
    .await;
}

// C62: the opt-out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c62_with_worker_checkpoints_off_a_redelivered_job_runs_again() {
    on_both(|env| async move {
        let (mut child, mut out) = env.child_with("after_tool", "optout");
        wait_for(&mut out, "ready");
        env.queue
            .submit(&Job::new("effects", "append", "job-62o"))
            .await
            .unwrap();
        wait_for(&mut out, "hanging");
        signal(&child, "-KILL");
        assert!(!child.wait().unwrap().success());
        assert_eq!(env.store.load("job-62o").await.unwrap(), None);

        let worker = plain_worker(&env, WorkerOptions::new().checkpoints(false));
        let (record, report) = take_over_with(&env, worker, "job-62o").await;
        assert_eq!(
            env.lines(),
            ["append job-62o:c1", "append job-62o:c1"],
            "not durable: the run started again"
        );
        assert_eq!(record.ending, Ending::Answered);
        assert_eq!(meta(&record, META_DELIVERY), Some("2"));
        assert_eq!(meta(&record, META_RESUMED), None);
        assert_eq!(report.runs, 1);
        assert_eq!(env.store.load("job-62o").await.unwrap(), None);
        env
    })
    .await;
}
