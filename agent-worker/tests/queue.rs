//! The queue against the real NATS JetStream server and PostgreSQL: each test uses its
//! own namespace (streams, subjects) and its own schema, removed afterwards. Servers:
//! `NATS_URL` (default `nats://127.0.0.1:4222`) and `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`). Without them the tests that need them
//! are skipped with a message, except under `CI=true`, where that is a failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use agent_core::store::RunRecord;
use agent_core::{
    AgentConfig, Ending,
    eval::{Receipt, run_batch},
};
use agent_store::{Store, StoreOptions};
use agent_worker::demo::DemoModel;
use agent_worker::{
    BatchOptions, Job, Pipeline, PipelineReceipt, Queue, QueueOptions, RateLimited, RateLimiter,
    Step, Verdict, demo, receipt_of, record_of, run_batch_queued,
};

fn nats_url() -> String {
    std::env::var("NATS_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "nats://127.0.0.1:4222".to_owned())
}

fn pg_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A namespace and a schema of this test alone, and handles on both.
struct Env {
    ns: String,
    schema: String,
    queue: Queue,
    store: Store,
    ack_wait: Duration,
    max_deliveries: u64,
}

impl Env {
    /// `None` (test skipped) when a server is unreachable outside CI.
    async fn new(ack_wait: Duration, max_deliveries: u64) -> Option<Env> {
        let id = format!("{}_{:012x}", std::process::id(), fastrand::u64(..) >> 16);
        let ns = format!("aw_{id}");
        let schema = format!("aw_{id}");
        let queue = Queue::connect(
            QueueOptions::new()
                .url(nats_url())
                .namespace(ns.clone())
                .ack_wait(ack_wait)
                .max_deliveries(max_deliveries),
        )
        .await;
        let store = Store::open_with(&pg_url(), StoreOptions::new().schema(schema.clone())).await;
        match (queue, store) {
            (Ok(queue), Ok(store)) => Some(Env {
                ns,
                schema,
                queue,
                store,
                ack_wait,
                max_deliveries,
            }),
            (q, s) => {
                let why = format!("nats: {:?}; postgres: {:?}", q.err(), s.err());
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!("the queue tests need NATS JetStream and PostgreSQL: {why}");
                }
                eprintln!("skipped: NATS JetStream or PostgreSQL unreachable ({why})");
                None
            }
        }
    }

    fn worker(&self, extra: &[&str]) -> Child {
        Command::new(env!("CARGO_BIN_EXE_agent-worker"))
            .args(["--store", &pg_url(), "--schema", &self.schema])
            .args(["--nats", &nats_url(), "--namespace", &self.ns])
            .args(["--ack-wait-ms", &self.ack_wait.as_millis().to_string()])
            .args(["--max-deliveries", &self.max_deliveries.to_string()])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the worker binary starts")
    }

    async fn remove(self) {
        self.queue.delete().await.unwrap();
        self.store.close().await.unwrap();
        drop_schema(&self.schema).await;
    }
}

async fn drop_schema(schema: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&pg_url()).await.unwrap();
    sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .execute(&mut conn)
        .await
        .unwrap();
}

/// Stops a worker with SIGTERM and returns its report line (it drains first).
fn terminate(child: Child) -> String {
    let pid = child.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "a drained worker exits 0: {:?}",
        out.status
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The receipt without its timings (run durations and wall time differ between runs).
fn counts(receipt: &Receipt) -> Receipt {
    let mut r = receipt.clone();
    r.p50 = Duration::ZERO;
    r.p95 = Duration::ZERO;
    r.wall_time = Duration::ZERO;
    r
}

fn pipeline_counts(receipt: &PipelineReceipt) -> PipelineReceipt {
    let mut r = receipt.clone();
    for step in &mut r.steps {
        step.receipt = counts(&step.receipt);
    }
    r
}

#[tokio::test]
async fn stored_records_give_the_receipt_run_batch_gives() {
    let config = demo::echo().unwrap();
    let inputs: Vec<String> = (0..200).map(|i| format!("ticket {i}")).collect();
    let batch = run_batch(&config, inputs.clone(), 8).await;
    let records: Vec<RunRecord> = batch
        .results
        .iter()
        .zip(&inputs)
        .enumerate()
        .map(|(i, (result, input))| {
            record_of(
                &config,
                &Job::new("echo", input.clone(), format!("r-{i}")),
                result,
                0,
            )
            .unwrap()
        })
        .collect();
    let receipt = receipt_of(&records);
    assert_eq!(counts(&receipt), counts(&batch.receipt));
    assert_eq!(receipt.count(Ending::Failed), 20);
    assert_eq!(receipt.categories.get("llm_permanent_error"), Some(&20));
    assert_eq!(receipt.turns.max_llm_calls, Some(config.max_llm_calls()));
    assert_eq!(records[3].output, agent_core::json!("echo: ticket 3"));
    assert_eq!(records[3].trace_id, "r-3");
    assert_eq!(
        records[3].metadata.get("trace_id"),
        Some(&batch.results[3].trace_id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_runs_over_four_workers_one_killed_store_each_result_once() {
    let Some(env) = Env::new(Duration::from_millis(1500), 3).await else {
        return;
    };
    let inputs: Vec<String> = (0..5000).map(|i| format!("ticket {i}")).collect();
    let mut workers: Vec<Child> = (0..4)
        .map(|_| env.worker(&["--max-in-flight", "16"]))
        .collect();

    let batch = {
        let queue = env.queue.clone();
        let store = env.store.clone();
        let inputs = inputs.clone();
        tokio::spawn(async move {
            run_batch_queued(
                &queue,
                &store,
                "echo",
                inputs,
                &BatchOptions::new().batch_id("kill"),
            )
            .await
        })
    };
    // Kill one worker (SIGKILL: no drain, no acks) once a fifth of the runs is stored.
    loop {
        let stored = env.store.stats().await.unwrap().runs;
        if stored >= 1000 {
            break;
        }
        assert!(!batch.is_finished(), "the batch ended before the kill");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut killed = workers.remove(0);
    killed.kill().unwrap();
    killed.wait().unwrap();
    let batch = batch.await.unwrap().unwrap();

    assert!(batch.dead.is_empty(), "dead letters: {:?}", batch.dead);
    assert!(batch.missing.is_empty(), "missing: {:?}", batch.missing);
    // Every run id has exactly one stored result: 5,000 rows, one per run id.
    assert_eq!(env.store.stats().await.unwrap().runs, 5000);
    for (i, record) in batch.records.iter().enumerate() {
        let record = record
            .as_ref()
            .unwrap_or_else(|| panic!("run {i} not stored"));
        assert_eq!(record.trace_id, format!("kill-{i}"));
        assert_eq!(record.input, inputs[i]);
        if i % 10 != 7 {
            assert_eq!(
                record.output,
                agent_core::json!(format!("echo: {}", inputs[i]))
            );
        }
    }
    // Jobs the killed worker held were delivered again and run by the others.
    let redelivered = batch
        .records
        .iter()
        .flatten()
        .filter(|r| r.metadata.get("delivery").is_some_and(|d| d != "1"))
        .count();
    let mut duplicates = 0;
    // The same receipt as the in-process run_batch on the same inputs.
    let local = run_batch(&demo::echo().unwrap(), inputs.clone(), 16).await;
    assert_eq!(counts(&batch.receipt), counts(&local.receipt));
    assert_eq!(batch.receipt.runs, 5000);
    assert_eq!(batch.receipt.count(Ending::Failed), 500);

    // The others drain on SIGTERM and leave nothing on the queue.
    for worker in workers {
        let report: agent_core::Value = serde_json::from_str(&terminate(worker)).unwrap();
        duplicates += report["duplicates"].as_u64().unwrap();
        assert_eq!(report["dead_lettered"], 0);
    }
    eprintln!("after the kill: {redelivered} runs redelivered, {duplicates} duplicates");
    assert!(
        redelivered + duplicates as usize > 0,
        "the killed worker held no job (redelivered {redelivered}, duplicates {duplicates})"
    );
    assert_eq!(env.queue.pending().await.unwrap(), 0);
    env.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_crashes_its_workers_is_dead_lettered_after_max_deliveries() {
    let Some(env) = Env::new(Duration::from_millis(400), 2).await else {
        return;
    };
    let inputs = ["fine 1", "POISON 2", "fine 3"];
    let batch = {
        let queue = env.queue.clone();
        let store = env.store.clone();
        tokio::spawn(async move {
            run_batch_queued(
                &queue,
                &store,
                "crash",
                inputs,
                &BatchOptions::new().batch_id("p"),
            )
            .await
        })
    };
    // One worker at a time, one job at a time; a crashed worker is replaced.
    let args = ["--crash-on", "POISON", "--max-in-flight", "1"];
    let mut worker = env.worker(&args);
    let mut crashes = 0;
    while !batch.is_finished() {
        if let Some(status) = worker.try_wait().unwrap() {
            assert!(!status.success(), "only the poison run ends a worker");
            crashes += 1;
            worker = env.worker(&args);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let batch = batch.await.unwrap().unwrap();
    terminate(worker);

    assert_eq!(crashes, 2, "two deliveries crashed a worker each");
    assert_eq!(batch.dead.len(), 1);
    let letter = &batch.dead[0];
    assert_eq!(letter.run_id(), Some("p-1"));
    assert_eq!(letter.job.as_ref().unwrap().input, "POISON 2");
    assert_eq!(letter.deliveries, 3);
    assert!(batch.records[1].is_none());
    assert_eq!(
        batch.records[0].as_ref().unwrap().output,
        agent_core::json!("echo: fine 1")
    );
    assert_eq!(
        batch.records[2].as_ref().unwrap().output,
        agent_core::json!("echo: fine 3")
    );
    assert_eq!(batch.receipt.runs, 2);
    assert!(batch.missing.is_empty());
    env.remove().await;
}

fn pipeline() -> Pipeline {
    Pipeline::new()
        .step(Step::new("generate"))
        .step(
            Step::new("check")
                .skip_when(|input| input.contains("trusted"))
                .min_score(0.5),
        )
        .step(Step::new("promote"))
}

fn pipeline_inputs() -> Vec<String> {
    (0..30)
        .map(|i| {
            if i % 5 == 4 {
                format!("item {i} trusted")
            } else {
                format!("item {i}")
            }
        })
        .collect()
}

#[tokio::test]
async fn a_pipeline_promotes_rejects_fails_and_skips_per_step() {
    let registry = demo::registry().unwrap();
    let run = pipeline()
        .run_in_process(&registry, pipeline_inputs(), 4)
        .await
        .unwrap();
    let r = &run.receipt;
    // generate: items ending in 7 fail (0..30: 7, 17, 27).
    assert_eq!((r.steps[0].promoted, r.steps[0].failed), (27, 3));
    // check: skipped for trusted items (4, 9, 14, 19, 24, 29); rejected for multiples
    // of 3 (0, 3, 6, 12, 15, 18, 21); item 27 never got here.
    assert_eq!(r.steps[1].skipped, 6);
    assert_eq!(r.steps[1].rejected, 7);
    assert_eq!(r.steps[1].promoted, 27 - 6 - 7);
    assert_eq!(r.steps[1].failed, 0);
    assert_eq!(r.steps[2].promoted, 20);
    assert_eq!(r.completed, 20);
    assert_eq!(
        run.verdicts[4],
        [Verdict::Promoted, Verdict::Skipped, Verdict::Promoted]
    );
    assert_eq!(run.verdicts[3], [Verdict::Promoted, Verdict::Rejected]);
    assert_eq!(run.verdicts[7], [Verdict::Failed]);
    assert_eq!(
        run.outputs[1].as_deref(),
        Some("promoted checked draft item 1")
    );
    assert_eq!(
        run.outputs[4].as_deref(),
        Some("promoted draft item 4 trusted")
    );
    assert_eq!(run.outputs[3], None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_over_the_queue_gives_the_in_process_receipt() {
    let Some(env) = Env::new(Duration::from_secs(5), 3).await else {
        return;
    };
    let workers: Vec<Child> = (0..2).map(|_| env.worker(&[])).collect();
    let queued = pipeline()
        .run_queued(
            &env.queue,
            &env.store,
            pipeline_inputs(),
            &BatchOptions::new(),
        )
        .await
        .unwrap();
    let local = pipeline()
        .run_in_process(&demo::registry().unwrap(), pipeline_inputs(), 4)
        .await
        .unwrap();
    assert_eq!(
        pipeline_counts(&queued.receipt),
        pipeline_counts(&local.receipt)
    );
    assert_eq!(queued.verdicts, local.verdicts);
    assert_eq!(queued.outputs, local.outputs);
    assert_eq!(queued.receipt.completed, 20);
    for worker in workers {
        terminate(worker);
    }
    env.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_is_shared_by_every_worker() {
    let Some(env) = Env::new(Duration::from_secs(5), 3).await else {
        return;
    };
    // Two workers' limiters: separate connections, one budget of 25 per second.
    let other = Queue::connect(
        QueueOptions::new()
            .url(nats_url())
            .namespace(env.ns.clone()),
    )
    .await
    .unwrap();
    let a = RateLimiter::open(&env.queue, "demo", 25).await.unwrap();
    let b = RateLimiter::open(&other, "demo", 25).await.unwrap();
    let takes: Vec<_> = (0..60)
        .map(|i| {
            let limiter = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { limiter.acquire().await.unwrap() })
        })
        .collect();
    let mut per_window: BTreeMap<u64, u32> = BTreeMap::new();
    for take in takes {
        *per_window.entry(take.await.unwrap()).or_insert(0) += 1;
    }
    assert_eq!(per_window.values().sum::<u32>(), 60);
    assert!(
        per_window.values().all(|n| *n <= 25),
        "a window granted more than the limit: {per_window:?}"
    );

    // A rate-limited client is still a client: runs through it answer as before.
    let limited = RateLimited::new(Arc::new(DemoModel::new("echo: ")), a.clone());
    let config: AgentConfig<String> = AgentConfig::builder("limited")
        .llm(limited)
        .build()
        .unwrap();
    let result = agent_core::run_agent(&config, "ticket 1").await;
    assert_eq!(result.outcome.as_deref(), Ok("echo: ticket 1"));

    // ... and says what its inner client says: parts it takes, reasoning it refuses, and
    // a streamed call streams (two deltas, not the turn replayed in one piece).
    let limited = RateLimited::new(Arc::new(Pieces), a.clone());
    use agent_core::llm::{ContentCapabilities, LlmClient, LlmRequest, Reasoning};
    assert_eq!(limited.content_capabilities("m"), ContentCapabilities::ANY);
    assert_eq!(
        limited.check_reasoning("m", &Reasoning::budget(1024), 4096),
        Err("Pieces reasons not")
    );
    let mut deltas = Deltas::default();
    let turn = limited
        .complete_streaming(&LlmRequest::new("m"), &mut deltas)
        .await
        .unwrap();
    assert_eq!(turn.text, "ab");
    assert_eq!(deltas.0, ["a", "b"]);
    env.remove().await;
}

/// A client whose streamed call sends its text in two pieces, that takes every part and
/// refuses reasoning: what a wrapper must pass through.
struct Pieces;

impl agent_core::llm::LlmClient for Pieces {
    fn complete<'a>(
        &'a self,
        _request: &'a agent_core::llm::LlmRequest,
    ) -> agent_core::llm::LlmFuture<'a> {
        Box::pin(async { Ok(agent_core::llm::LlmResponse::text("ab")) })
    }

    fn complete_streaming<'a>(
        &'a self,
        _request: &'a agent_core::llm::LlmRequest,
        sink: &'a mut dyn agent_core::llm::StreamSink,
    ) -> agent_core::llm::LlmFuture<'a> {
        Box::pin(async move {
            sink.on_delta(agent_core::llm::StreamDelta::Text("a"));
            sink.on_delta(agent_core::llm::StreamDelta::Text("b"));
            Ok(agent_core::llm::LlmResponse::text("ab"))
        })
    }

    fn check_reasoning(
        &self,
        _model: &str,
        _reasoning: &agent_core::llm::Reasoning,
        _max_tokens: u32,
    ) -> Result<(), &'static str> {
        Err("Pieces reasons not")
    }

    fn content_capabilities(&self, _model: &str) -> agent_core::llm::ContentCapabilities {
        agent_core::llm::ContentCapabilities::ANY
    }
}

/// The text deltas a streamed call sent.
#[derive(Default)]
struct Deltas(Vec<String>);

impl agent_core::llm::StreamSink for Deltas {
    fn on_delta(&mut self, delta: agent_core::llm::StreamDelta<'_>) {
        if let agent_core::llm::StreamDelta::Text(text) = delta {
            self.0.push(text.to_owned());
        }
    }
}
