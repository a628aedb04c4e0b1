//! The sweeper: an unfinished run no job brings back (run in-process under a run id,
//! its process gone mid-run) is found once its lease lapsed and put back on the queue;
//! a worker resumes it and its finished tool does not run again. A run whose lease is
//! held is left alone; one of an agent no worker here has is reported (`orphans`).
//! Real NATS and real stores, through the harness of `durable.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::{
    AgentConfig, CancellationToken, Ending, RunOptions, durable::CheckpointStore, run_agent_with,
    store::FeedbackStore,
};
use agent_worker::{META_RESUMED, Registry, Worker, WorkerOptions};
use serde_json::json;

use super::durable::{Answer, Env, config, config_named, meta, on_both};

/// Starts a run of `config` in this process that hangs after its first tool (its
/// model's second turn never answers) and drops it there: the run's process is gone.
async fn abandoned(config: &AgentConfig<Answer>, run_id: &str, lease: Duration, env: &Env) {
    let options = RunOptions::new().run_id(run_id).lease(lease);
    let run = tokio::spawn({
        let config = config.clone();
        async move { run_agent_with(&config, "append", options).await }
    });
    let start = Instant::now();
    while env
        .store
        .load(run_id)
        .await
        .unwrap()
        .is_none_or(|c| c.seq < 3)
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{run_id} did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    run.abort();
    let _ = run.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_resumes_a_run_whose_lease_lapsed_and_reports_one_it_cannot() {
    on_both(|env| async move {
        let hanging = config(Some(&env.store), &env.effects, "after_tool");
        // Lapses 300 ms after its process is gone.
        abandoned(&hanging, "swept-1", Duration::from_millis(300), &env).await;
        // Held for a minute: not the sweeper's.
        abandoned(&hanging, "held-1", Duration::from_secs(60), &env).await;
        // Of an agent this worker does not have.
        let other = config_named("other", Some(&env.store), &env.effects, "after_tool");
        abandoned(&other, "other-1", Duration::from_millis(300), &env).await;
        assert_eq!(env.lines().len(), 3, "each run's append ran");
        let worker = Worker::new(
            env.queue.clone(),
            Arc::new(env.store.clone()),
            // The same tools as the runs had (refund too: its config checkpoints).
            Registry::new().with(config(Some(&env.store), &env.effects, "")),
            WorkerOptions::new().sweep_every(Some(Duration::from_millis(200))),
        );
        let shutdown = CancellationToken::new();
        let running = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { worker.run(shutdown).await }
        });
        let record = env.record("swept-1").await;
        // A few more looks: the held run and the other agent's stay where they are.
        tokio::time::sleep(Duration::from_millis(800)).await;
        shutdown.cancel();
        let report = running.await.unwrap().unwrap();
        assert_eq!(record.ending, Ending::Answered);
        assert_eq!(record.output, json!({"ok": true}));
        assert_eq!(meta(&record, META_RESUMED), Some("true"));
        assert_eq!(record.usage.llm_calls, 2);
        assert_eq!(record.usage.tool_calls, 1);
        let mut lines = env.lines();
        lines.sort();
        assert_eq!(
            lines,
            ["append held-1:c1", "append other-1:c1", "append swept-1:c1"],
            "each append once"
        );
        assert_eq!(report.runs, 1);
        assert!(report.swept >= 1, "{report:?}");
        assert_eq!(report.orphans, 1);
        assert_eq!(env.store.run("held-1").await.unwrap(), None);
        assert_eq!(env.store.run("other-1").await.unwrap(), None);
        assert!(!env.store.load("held-1").await.unwrap().unwrap().finished);
        assert!(env.store.load("swept-1").await.unwrap().unwrap().finished);
        env
    })
    .await;
}
