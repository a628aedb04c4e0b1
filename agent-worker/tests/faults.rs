//! The queue under faults, against a `nats-server -js` process of each test's own (a
//! free port, a temporary store dir), which the test kills with SIGKILL and restarts
//! with the same store dir, and a PostgreSQL schema of its own in `DATABASE_URL`
//! (default `postgres://postgres@127.0.0.1:5432/test`). Without `nats-server` (set
//! `NATS_SERVER` to its path; default `/usr/sbin/nats-server`, else the `PATH`) or
//! PostgreSQL the tests are skipped with a message, except under `CI=true`, where that
//! is a failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use agent_core::store::StoreError;
use agent_core::store::{
    EvalExample, EvalFilter, Feedback, FeedbackStore, RunQuery, RunRecord, StoreFuture,
};
use agent_store::{Store, StoreOptions};
use agent_worker::{
    BatchOptions, DEFAULT_STALL_TIMEOUT, Job, Queue, QueueError, QueueOptions, RateLimiter, Worker,
    WorkerOptions, demo, record_of, run_batch_queued, run_jobs_queued,
};

fn skip_or_fail(why: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("the queue fault tests need this under CI=true: {why}");
    }
    eprintln!("skipped: {why}");
}

fn pg_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A port nothing listens on now (the OS's pick for a bound port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `nats-server -js` of this test's own; killed and its store dir removed on drop.
struct Nats {
    exe: PathBuf,
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Nats {
    /// `None` (test skipped, with a message) when there is no `nats-server` outside CI.
    fn start() -> Option<Nats> {
        let exe = std::env::var("NATS_SERVER")
            .map(PathBuf::from)
            .ok()
            .or_else(|| {
                let default = PathBuf::from("/usr/sbin/nats-server");
                default.exists().then_some(default)
            })
            .unwrap_or_else(|| PathBuf::from("nats-server"));
        if Command::new(&exe)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            skip_or_fail(&format!("no nats-server ({})", exe.display()));
            return None;
        }
        let dir = std::env::temp_dir().join(format!(
            "agent_worker_nats_{}_{:016x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut nats = Nats {
            exe,
            port: free_port(),
            dir,
            child: None,
        };
        nats.up();
        Some(nats)
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server on its port and store dir, and waits until it listens.
    fn up(&mut self) {
        let child = Command::new(&self.exe)
            .args(["-js", "-a", "127.0.0.1", "-p", &self.port.to_string()])
            .arg("-sd")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `kill -9`: no shutdown, no flush.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A NATS server, a queue on it and a PostgreSQL schema of this test alone.
struct Env {
    nats: Nats,
    ns: String,
    schema: String,
    queue: Queue,
    store: Store,
    ack_wait: Duration,
}

impl Env {
    async fn new(ack_wait: Duration) -> Option<Env> {
        let nats = Nats::start()?;
        let id = format!("{}_{:012x}", std::process::id(), fastrand::u64(..) >> 16);
        let ns = format!("af_{id}");
        let schema = format!("af_{id}");
        let store =
            match Store::open_with(&pg_url(), StoreOptions::new().schema(schema.clone())).await {
                Ok(store) => store,
                Err(e) => {
                    skip_or_fail(&format!("PostgreSQL at DATABASE_URL: {e}"));
                    return None;
                }
            };
        let queue = Queue::connect(
            QueueOptions::new()
                .url(nats.url())
                .namespace(ns.clone())
                .ack_wait(ack_wait),
        )
        .await
        .unwrap();
        Some(Env {
            nats,
            ns,
            schema,
            queue,
            store,
            ack_wait,
        })
    }

    fn worker(&self) -> Child {
        Command::new(env!("CARGO_BIN_EXE_agent-worker"))
            .args(["--store", &pg_url(), "--schema", &self.schema])
            .args(["--nats", &self.nats.url(), "--namespace", &self.ns])
            .args(["--ack-wait-ms", &self.ack_wait.as_millis().to_string()])
            .args(["--max-in-flight", "16"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the worker binary starts")
    }

    async fn remove(self) {
        self.store.close().await.unwrap();
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&pg_url()).await.unwrap();
        sqlx::query(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            self.schema
        ))
        .execute(&mut conn)
        .await
        .unwrap();
    }
}

/// Stops a worker with SIGTERM (it drains) and checks it exits 0.
fn terminate(child: Child) {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "a drained worker exits 0: {:?}",
        out.status
    );
}

/// C43: NATS is killed (`kill -9`) and restarted with the same store dir while
/// `run_batch_queued` waits on 1,000 jobs: the call returns the full receipt, every run
/// stored once. C44: afterwards `Queue::pending()` counts no job, even when the
/// restarted server kept acked job messages (their number is printed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c43_the_producer_rides_out_a_broker_kill_and_restart() {
    let Some(mut env) = Env::new(Duration::from_secs(2)).await else {
        return;
    };
    let workers: Vec<Child> = (0..2).map(|_| env.worker()).collect();
    let inputs: Vec<String> = (0..1000).map(|i| format!("ticket {i}")).collect();
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
                &BatchOptions::new().batch_id("c43"),
            )
            .await
        })
    };
    while env.store.stats().await.unwrap().runs < 300 {
        assert!(!batch.is_finished(), "the batch ended before the kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    env.nats.kill();
    let stored_at_kill = env.store.stats().await.unwrap().runs;
    env.nats.up();
    let batch = batch
        .await
        .unwrap()
        .expect("the producer rides out the restart");

    assert!(batch.missing.is_empty(), "missing: {:?}", batch.missing);
    assert!(batch.dead.is_empty(), "dead: {:?}", batch.dead);
    assert!(!batch.stalled);
    assert_eq!(batch.receipt.runs, 1000);
    assert_eq!(batch.receipt.count(agent_core::Ending::Failed), 100);
    for (i, record) in batch.records.iter().enumerate() {
        let record = record
            .as_ref()
            .unwrap_or_else(|| panic!("run {i} not stored"));
        assert_eq!(record.trace_id, format!("c43-{i}"));
        assert_eq!(record.input, inputs[i]);
    }
    assert_eq!(env.store.stats().await.unwrap().runs, 1000);
    for worker in workers {
        terminate(worker);
    }
    // C44: no job is pending once all are stored and acked, whatever the server kept.
    assert_eq!(env.queue.pending().await.unwrap(), 0);
    eprintln!(
        "killed with {stored_at_kill} of 1000 stored; the restarted server kept {} acked job messages",
        env.queue.stored_jobs().await.unwrap()
    );
    env.remove().await;
}

/// C44: results stored whose `Done` never came (the broker lost it) finish the batch
/// from the store; `Queue::pending()` counts no job once acked; and a batch that makes
/// no progress ends after its stall timeout with every missing run id listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c44_stored_results_finish_a_batch_whose_done_events_never_came() {
    let Some(env) = Env::new(Duration::from_secs(5)).await else {
        return;
    };
    let config = demo::echo().unwrap();
    let jobs: Vec<Job> = (0..20)
        .map(|i| Job::new("echo", format!("ticket {i}"), format!("c44-{i}")))
        .collect();
    let batch = {
        let (queue, store, jobs) = (env.queue.clone(), env.store.clone(), jobs.clone());
        tokio::spawn(async move {
            let options = BatchOptions::new().stall_timeout(Duration::from_secs(60));
            run_jobs_queued(&queue, &store, &jobs, &options).await
        })
    };
    // A worker that stores each result and acks its job, but publishes no `Done`.
    let consumer_queue = env.queue.clone();
    let mut taken = 0;
    while taken < jobs.len() {
        let mut messages = consumer_queue_messages(&consumer_queue).await;
        while let Some(message) = futures::StreamExt::next(&mut messages).await {
            let message = message.unwrap();
            let job: Job = serde_json::from_slice(&message.payload).unwrap();
            let result = agent_core::run_agent(&config, &job.input).await;
            let record = record_of(&config, &job, &result, 0).unwrap();
            env.store.record(&record).await.unwrap();
            // Acked and confirmed by the server before the next job.
            message.double_ack().await.unwrap();
            taken += 1;
        }
    }
    let batch = batch.await.unwrap().unwrap();
    assert!(batch.missing.is_empty(), "{:?}", batch.missing);
    assert!(!batch.stalled);
    assert_eq!(batch.receipt.runs, 20);
    assert_eq!(
        batch.records[3].as_ref().unwrap().output,
        agent_core::json!("echo: ticket 3")
    );
    assert_eq!(env.queue.pending().await.unwrap(), 0);

    // No worker at all: the batch ends after its stall timeout, listing every run.
    let stuck: Vec<Job> = (0..5)
        .map(|i| Job::new("echo", format!("stuck {i}"), format!("c44-stuck-{i}")))
        .collect();
    let options = BatchOptions::new().stall_timeout(Duration::from_millis(1500));
    let batch = run_jobs_queued(&env.queue, &env.store, &stuck, &options)
        .await
        .unwrap();
    assert!(batch.stalled);
    let ids: Vec<String> = stuck.iter().map(|j| j.run_id.clone()).collect();
    assert_eq!(batch.missing, ids);
    assert!(batch.records.iter().all(Option::is_none));
    assert_eq!(batch.receipt.runs, 0);
    assert_eq!(env.queue.pending().await.unwrap(), 5);
    // The default is bounded and documented.
    assert_eq!(BatchOptions::new().stall_timeout, DEFAULT_STALL_TIMEOUT);
    assert_eq!(DEFAULT_STALL_TIMEOUT, Duration::from_secs(600));
    env.remove().await;
}

/// Up to 10 jobs from the workers' consumer (waiting at most 1 s for them).
async fn consumer_queue_messages(queue: &Queue) -> async_nats::jetstream::consumer::pull::Batch {
    let js = async_nats::jetstream::new(
        async_nats::connect(queue.options().url.as_str())
            .await
            .unwrap(),
    );
    let consumer: async_nats::jetstream::consumer::PullConsumer = js
        .get_consumer_from_stream("workers", queue.stream_name("JOBS"))
        .await
        .unwrap();
    consumer
        .batch()
        .max_messages(10)
        .expires(Duration::from_secs(1))
        .messages()
        .await
        .unwrap()
}

/// C45: `run_batch_queued` with the batch id of a batch that finished: the stored
/// records at once, with no worker running (nothing is waited on), the same receipt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c45_a_finished_batch_run_again_returns_its_stored_records_at_once() {
    let Some(env) = Env::new(Duration::from_secs(5)).await else {
        return;
    };
    let inputs: Vec<String> = (0..50).map(|i| format!("ticket {i}")).collect();
    let options = BatchOptions::new()
        .batch_id("c45")
        .stall_timeout(Duration::from_secs(30));
    let worker = env.worker();
    let first = run_batch_queued(&env.queue, &env.store, "echo", inputs.clone(), &options)
        .await
        .unwrap();
    terminate(worker);
    assert_eq!(first.receipt.runs, 50);
    assert_eq!(first.already_stored, 0);

    // No worker now: any job waited on would stall the batch.
    let again = run_batch_queued(&env.queue, &env.store, "echo", inputs.clone(), &options)
        .await
        .unwrap();
    assert!(!again.stalled);
    assert!(again.missing.is_empty(), "{:?}", again.missing);
    assert_eq!(again.already_stored, 50);
    assert_eq!(again.run_ids, first.run_ids);
    for (a, b) in again.records.iter().zip(&first.records) {
        assert_eq!(a.as_ref().unwrap().trace_id, b.as_ref().unwrap().trace_id);
        assert_eq!(a.as_ref().unwrap().output, b.as_ref().unwrap().output);
    }
    assert_eq!(again.receipt.runs, 50);
    assert_eq!(again.receipt.endings, first.receipt.endings);
    assert_eq!(
        env.queue.pending().await.unwrap(),
        0,
        "nothing was queued again"
    );

    // A longer batch under the same id: only the new runs are queued and run.
    let more: Vec<String> = (0..60).map(|i| format!("ticket {i}")).collect();
    let worker = env.worker();
    let grown = run_batch_queued(&env.queue, &env.store, "echo", more, &options)
        .await
        .unwrap();
    terminate(worker);
    assert_eq!(grown.already_stored, 50);
    assert_eq!(grown.receipt.runs, 60);
    assert!(grown.missing.is_empty());
    assert_eq!(env.store.stats().await.unwrap().runs, 60);
    env.remove().await;
}

/// A store that holds nothing; its reads fail when it is `Fake(false)`.
struct Fake(bool);

impl FeedbackStore for Fake {
    fn record<'a>(&'a self, _: &'a RunRecord) -> StoreFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn attach_feedback<'a>(&'a self, _: &'a str, _: &'a Feedback) -> StoreFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn run<'a>(&'a self, _: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        let readable = self.0;
        Box::pin(async move {
            if readable {
                Ok(None)
            } else {
                Err(StoreError::unavailable("the store is down"))
            }
        })
    }
    fn runs<'a>(&'a self, _: &'a RunQuery) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn eval_set<'a>(&'a self, _: &'a EvalFilter) -> StoreFuture<'a, Vec<EvalExample>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn flush(&self) -> StoreFuture<'_, u64> {
        Box::pin(async { Ok(0) })
    }
}

/// Every documented `# Errors` line of the queue's API, checked against a server of
/// the test's own (and, for `Nats`, that server gone or its streams deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_errors_are_as_documented() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let options = QueueOptions::new().url(nats.url());
    // connect: Invalid for a bad namespace, Nats when the server cannot be reached.
    for ns in ["", "a.b", "a b", "a*"] {
        let error = Queue::connect(options.clone().namespace(ns))
            .await
            .unwrap_err();
        assert!(
            matches!(error, QueueError::Invalid { .. }),
            "{ns:?}: {error:?}"
        );
    }
    let nowhere = QueueOptions::new().url(format!("nats://127.0.0.1:{}", free_port()));
    let error = Queue::connect(nowhere).await.unwrap_err();
    assert!(matches!(error, QueueError::Nats { .. }), "{error:?}");

    let queue = Queue::connect(options.clone().namespace("errs"))
        .await
        .unwrap();
    // submit: Invalid for an empty run id (or one with NUL).
    for id in ["", "a\0b"] {
        let error = queue.submit(&Job::new("echo", "x", id)).await.unwrap_err();
        assert!(matches!(error, QueueError::Invalid { .. }), "{error:?}");
    }
    // run_jobs_queued: Invalid for two jobs with one run id; Store when the store
    // cannot be read.
    let twice = [Job::new("echo", "a", "r1"), Job::new("echo", "b", "r1")];
    let error = run_jobs_queued(&queue, &Fake(false), &twice, &BatchOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(error, QueueError::Invalid { .. }), "{error:?}");
    let error = run_batch_queued(&queue, &Fake(false), "echo", ["a"], &BatchOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, QueueError::Store(StoreError::Unavailable { message }) if message == "the store is down"),
        "{error:?}"
    );
    // RateLimiter::open: Invalid for a bad name.
    let error = RateLimiter::open(&queue, "a.b", 10).await.unwrap_err();
    assert!(matches!(error, QueueError::Invalid { .. }), "{error:?}");

    // The streams deleted: submit, pending and Worker::run fail with Nats; deleting
    // again is refused (Nats).
    queue.delete().await.unwrap();
    let error = queue
        .submit(&Job::new("echo", "x", "r2"))
        .await
        .unwrap_err();
    assert!(matches!(error, QueueError::Nats { .. }), "{error:?}");
    let error = queue.pending().await.unwrap_err();
    assert!(matches!(error, QueueError::Nats { .. }), "{error:?}");
    let error = queue.delete().await.unwrap_err();
    assert!(matches!(error, QueueError::Nats { .. }), "{error:?}");
    let worker = Worker::results_only(
        queue.clone(),
        Arc::new(Fake(true)),
        demo::registry().unwrap(),
        WorkerOptions::new(),
    );
    let error = worker
        .run(agent_core::CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(error, QueueError::Nats { .. }), "{error:?}");

    // The server gone: a batch cannot start (Nats), and the submit of one that did
    // start gives up after its stall timeout without one job taken.
    let queue = Queue::connect(options.namespace("errs2")).await.unwrap();
    nats.kill();
    let quick = BatchOptions::new().stall_timeout(Duration::from_millis(500));
    let error = run_batch_queued(&queue, &Fake(true), "echo", ["a"], &quick)
        .await
        .unwrap_err();
    assert!(matches!(error, QueueError::Nats { .. }), "{error:?}");
}
