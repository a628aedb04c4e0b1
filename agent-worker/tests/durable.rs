//! Durable jobs: a worker process killed (SIGKILL) or stalled (SIGSTOP) mid-run, its job
//! redelivered to another worker, which continues the run from its checkpoint. Real
//! NATS JetStream (`NATS_URL`, default `nats://127.0.0.1:4222`, a namespace per test)
//! and real stores: PostgreSQL (`DATABASE_URL`, a schema per test) and an SQLite file,
//! each test on both. Without NATS or PostgreSQL the cases that need them are skipped
//! with a message, except under `CI=true`.
//!
//! - `c47_a_killed_workers_job_resumes_and_its_tool_does_not_run_again`: the worker is
//!   killed after `append` (a tool that appends a line to a file) completed; the next
//!   delivery resumes, the file keeps one line, the record says `answered`, delivery 2,
//!   resumed, no store failure.
//! - `c47_an_irreversible_call_killed_mid_flight_is_outcome_unknown_in_the_record`: killed
//!   inside `send_email` (irreversible) after it appended its line; the next delivery
//!   does not send again, the model hands over, the record lists `send_email` as
//!   `outcome_unknown`.
//! - `c48_a_stalled_worker_whose_run_was_taken_over_is_fenced_and_lets_the_job_go`: the
//!   worker is stopped mid-run; after the ack wait another worker takes the job and
//!   finishes the run; the stalled one, continued, is fenced at its next write, stores
//!   nothing and lets the job go.
//!
//! The child worker is this test binary run again on `durable::child_worker`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::store::RunRecord;
use agent_core::{
    AgentConfig, CancellationToken, Ending, Tool, ToolContext,
    llm::{LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, Message, ToolCall},
    store::FeedbackStore,
    tool::{ToolDefinition, ToolFuture},
};
use agent_store::{Store, StoreOptions};
use agent_worker::{
    Job, META_DELIVERY, META_OUTCOME_UNKNOWN, META_RESUMED, META_STORE_FAILURES, Queue,
    QueueOptions, Registry, Worker, WorkerOptions, WorkerReport,
};
use serde_json::{Value, json};

const TARGET: &str = "AGENT_WORKER_DURABLE_TARGET";
const SCHEMA: &str = "AGENT_WORKER_DURABLE_SCHEMA";
const NS: &str = "AGENT_WORKER_DURABLE_NS";
const ACK_WAIT: &str = "AGENT_WORKER_DURABLE_ACK_WAIT_MS";
const EFFECTS: &str = "AGENT_WORKER_DURABLE_EFFECTS";
const MODE: &str = "AGENT_WORKER_DURABLE_MODE";
/// `plain`: the agent's config has no checkpoint store (the worker's default
/// checkpointing applies, C62); `optout`: neither (`WorkerOptions::checkpoints(false)`).
const PLAIN: &str = "AGENT_WORKER_DURABLE_PLAIN";

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

fn skip_or_fail(why: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("the durable worker tests need {why}");
    }
    eprintln!("skipped: {why}");
}

/// Prints a marker line for the parent and flushes it.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// Where the hang is, in a child: `after_tool` (the model's second turn never comes
/// back), `mid_tool` (send_email appended its line and never returns), `slow` (the
/// model's second turn takes 4 s), or none.
fn mode() -> String {
    std::env::var(MODE).unwrap_or_default()
}

/// Answers by turn (assistant turns in the request): the input `append` calls
/// `append`, then submits; `email` calls `send_email`, then hands over.
struct ByTurn {
    mode: String,
}

impl LlmClient for ByTurn {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let input = |text: &str| {
            request
                .messages
                .iter()
                .any(|m| matches!(m, Message::User { content, .. } if content == text))
        };
        let email = input("email");
        let refund = input("refund");
        Box::pin(async move {
            if refund {
                return match turn {
                    0 => Ok(LlmResponse::tool_calls(vec![ToolCall::new(
                        "c1",
                        "refund",
                        json!({"line": "refund"}),
                    )])),
                    1 => Ok(LlmResponse::tool_calls(vec![ToolCall::new(
                        "c2",
                        "submit_output",
                        json!({"ok": true}),
                    )])),
                    _ => Err(LlmError::permanent("script used up")),
                };
            }
            match (turn, email) {
                (0, false) => Ok(LlmResponse::tool_calls(vec![ToolCall::new(
                    "c1",
                    "append",
                    json!({"line": "one"}),
                )])),
                (0, true) => Ok(LlmResponse::tool_calls(vec![ToolCall::new(
                    "c1",
                    "send_email",
                    json!({"line": "mail"}),
                )])),
                (1, false) => {
                    match self.mode.as_str() {
                        "after_tool" => {
                            say("hanging");
                            std::future::pending::<()>().await;
                        }
                        "slow" => {
                            say("slow");
                            tokio::time::sleep(Duration::from_secs(4)).await;
                        }
                        _ => {}
                    }
                    Ok(LlmResponse::tool_calls(vec![ToolCall::new(
                        "c2",
                        "submit_output",
                        json!({"ok": true}),
                    )]))
                }
                (1, true) => Ok(LlmResponse::tool_calls(vec![ToolCall::new(
                    "c2",
                    "escalate_to_human",
                    json!({"reason": "the email may or may not have gone out",
                           "summary": "send_email was interrupted; check the outbox"}),
                )])),
                _ => Err(LlmError::permanent("script used up")),
            }
        })
    }

    fn provider(&self) -> &str {
        "scripted"
    }
}

/// Appends `"{name} {idempotency key}"` to the effects file.
struct Effect {
    name: &'static str,
    irreversible: bool,
    approval: bool,
    file: PathBuf,
    mode: String,
}

impl Tool for Effect {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name,
            "Appends a line.",
            json!({"type": "object", "properties": {"line": {"type": "string"}},
                   "required": ["line"], "additionalProperties": false}),
        )
    }

    fn call<'a>(&'a self, _arguments: Value, context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.file)
                .unwrap();
            writeln!(f, "{} {}", self.name, context.idempotency_key()).unwrap();
            f.sync_data().unwrap();
            if self.irreversible && self.mode == "mid_tool" {
                say("mid-flight");
                std::future::pending::<()>().await;
            }
            Ok(format!("{} done", self.name))
        })
    }

    fn irreversible(&self) -> bool {
        self.irreversible
    }

    fn requires_approval(&self) -> bool {
        self.approval
    }
}

/// The run's answer.
#[agent_core::agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Whether it is done.
    pub ok: bool,
}

fn registry(store: &Store, effects: &Path, mode: &str) -> Registry {
    Registry::new().with(config(Some(store), effects, mode))
}

/// The `effects` agent, checkpointing into `store` when given.
pub fn config(store: Option<&Store>, effects: &Path, mode: &str) -> AgentConfig<Answer> {
    config_named("effects", store, effects, mode)
}

/// [`config`] under another name.
pub fn config_named(
    name: &str,
    store: Option<&Store>,
    effects: &Path,
    mode: &str,
) -> AgentConfig<Answer> {
    let tool = |name, irreversible| Effect {
        name,
        irreversible,
        approval: name == "refund",
        file: effects.to_owned(),
        mode: mode.to_owned(),
    };
    let builder = AgentConfig::builder(name)
        .llm(ByTurn {
            mode: mode.to_owned(),
        })
        .escalation(true)
        .tool(tool("append", false))
        .tool(tool("send_email", true));
    match store {
        Some(store) => builder
            .tool(tool("refund", false))
            .checkpoints(store.clone())
            .build()
            .unwrap(),
        // A tool that needs approval needs a checkpoint store at build time: without
        // one, no refund.
        None => builder.build().unwrap(),
    }
}

fn queue_options(ns: &str, ack_wait: Duration) -> QueueOptions {
    QueueOptions::new()
        .url(nats_url())
        .namespace(ns.to_owned())
        .ack_wait(ack_wait)
        .max_deliveries(4)
}

async fn open_store(target: &str, schema: Option<&str>) -> Store {
    let mut options = StoreOptions::new();
    if let Some(schema) = schema {
        options = options.schema(schema.to_owned());
    }
    Store::open_with(target, options).await.unwrap()
}

/// The child: a worker serving `effects` until SIGTERM, then `report {json}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child worker of the durable tests; it runs only when they start it"]
async fn child_worker() {
    let Ok(target) = std::env::var(TARGET) else {
        return;
    };
    let schema = std::env::var(SCHEMA).ok();
    let store = open_store(&target, schema.as_deref()).await;
    let ack_wait = Duration::from_millis(std::env::var(ACK_WAIT).unwrap().parse().unwrap());
    let queue = Queue::connect(queue_options(&std::env::var(NS).unwrap(), ack_wait))
        .await
        .unwrap();
    let effects = PathBuf::from(std::env::var(EFFECTS).unwrap());
    let plain = std::env::var(PLAIN).unwrap_or_default();
    let (registry, options) = match plain.as_str() {
        "plain" => (
            Registry::new().with(config(None, &effects, &mode())),
            WorkerOptions::new(),
        ),
        "optout" => (
            Registry::new().with(config(None, &effects, &mode())),
            WorkerOptions::new().checkpoints(false),
        ),
        _ => (registry(&store, &effects, &mode()), WorkerOptions::new()),
    };
    let worker = Worker::new(queue, Arc::new(store.clone()), registry, options);
    let shutdown = CancellationToken::new();
    let signals = shutdown.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).unwrap();
        term.recv().await;
        signals.cancel();
    });
    say("ready");
    let report = worker.run(shutdown).await.unwrap();
    say(&format!(
        "report {}",
        json!({"runs": report.runs, "duplicates": report.duplicates,
               "retried": report.retried, "fenced": report.fenced})
    ));
}

/// Where the store of one case lives.
#[derive(Debug)]
enum Backend {
    Postgres { schema: String },
    Sqlite { dir: PathBuf },
}

impl Backend {
    fn target(&self) -> String {
        match self {
            Backend::Postgres { .. } => pg_url(),
            Backend::Sqlite { dir } => dir.join("runs.db").display().to_string(),
        }
    }

    fn schema(&self) -> Option<&str> {
        match self {
            Backend::Postgres { schema } => Some(schema),
            Backend::Sqlite { .. } => None,
        }
    }
}

/// One case: its namespace, its store, its effects file.
#[derive(Debug)]
pub struct Env {
    ns: String,
    backend: Backend,
    /// The case's queue.
    pub queue: Queue,
    /// The case's store.
    pub store: Store,
    /// The file the tools append to.
    pub effects: PathBuf,
    dir: PathBuf,
    ack_wait: Duration,
}

impl Env {
    pub async fn new(postgres: bool) -> Option<Env> {
        let id = format!("{}_{:012x}", std::process::id(), fastrand::u64(..) >> 16);
        let dir = std::env::temp_dir().join(format!("aw_durable_{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let backend = if postgres {
            Backend::Postgres {
                schema: format!("awd_{id}"),
            }
        } else {
            Backend::Sqlite { dir: dir.clone() }
        };
        let mut options = StoreOptions::new();
        if let Some(schema) = backend.schema() {
            options = options.schema(schema.to_owned());
        }
        let store = match Store::open_with(&backend.target(), options).await {
            Ok(store) => store,
            Err(e) => {
                skip_or_fail(&format!("PostgreSQL at DATABASE_URL: {e}"));
                return None;
            }
        };
        let ns = format!("awd_{id}");
        let ack_wait = Duration::from_secs(1);
        let queue = match Queue::connect(queue_options(&ns, ack_wait)).await {
            Ok(queue) => queue,
            Err(e) => {
                skip_or_fail(&format!("NATS JetStream at NATS_URL: {e}"));
                return None;
            }
        };
        Some(Env {
            ns,
            backend,
            queue,
            store,
            effects: dir.join("effects.txt"),
            dir,
            ack_wait,
        })
    }

    /// A child worker hanging where `mode` says; returns it and its stdout.
    pub fn child(&self, mode: &str) -> (Child, BufReader<ChildStdout>) {
        self.child_with(mode, "")
    }

    /// [`child`](Self::child), its agent's config with no checkpoint store (`plain`)
    /// or neither that nor the worker's (`optout`).
    pub fn child_with(&self, mode: &str, plain: &str) -> (Child, BufReader<ChildStdout>) {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "durable::child_worker",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .args(["--test-threads", "1"])
            .env(TARGET, self.backend.target())
            .env(NS, &self.ns)
            .env(ACK_WAIT, self.ack_wait.as_millis().to_string())
            .env(EFFECTS, &self.effects)
            .env(MODE, mode)
            .env(PLAIN, plain)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(schema) = self.backend.schema() {
            command.env(SCHEMA, schema);
        }
        let mut child = command.spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        (child, out)
    }

    /// A worker in this process (no hang), until `shutdown`.
    pub fn worker(&self) -> Worker {
        Worker::new(
            self.queue.clone(),
            Arc::new(self.store.clone()),
            registry(&self.store, &self.effects, ""),
            WorkerOptions::new(),
        )
    }

    /// Waits (up to 30 s) for the run's stored record.
    pub async fn record(&self, run_id: &str) -> RunRecord {
        let start = Instant::now();
        loop {
            if let Some(record) = self.store.run(run_id).await.unwrap() {
                return record;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no record of {run_id}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.effects)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    async fn remove(self) {
        self.queue.delete().await.unwrap();
        self.store.close().await.unwrap();
        if let Backend::Postgres { schema } = &self.backend {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&pg_url()).await.unwrap();
            sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads a child's output until a line holds `marker`; panics when it ends first.
pub fn wait_for(out: &mut BufReader<ChildStdout>, marker: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child ended before {marker:?}"
        );
        if let Some(at) = line.find(marker) {
            return line[at..].trim_end().to_owned();
        }
    }
}

pub fn signal(child: &Child, name: &str) {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap()
            .success()
    );
}

/// Runs `check` on PostgreSQL, then on SQLite.
pub async fn on_both<F, Fut>(check: F)
where
    F: Fn(Env) -> Fut,
    Fut: std::future::Future<Output = Env>,
{
    for postgres in [true, false] {
        let Some(env) = Env::new(postgres).await else {
            continue;
        };
        let env = check(env).await;
        env.remove().await;
    }
}

pub fn meta<'r>(record: &'r RunRecord, key: &str) -> Option<&'r str> {
    record.metadata.get(key).map(String::as_str)
}

/// Runs an in-process worker until the record of `run_id` is stored; returns both.
async fn take_over(env: &Env, run_id: &str) -> (RunRecord, WorkerReport) {
    take_over_with(env, env.worker(), run_id).await
}

/// [`take_over`] with `worker`.
pub async fn take_over_with(env: &Env, worker: Worker, run_id: &str) -> (RunRecord, WorkerReport) {
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.run(shutdown).await }
    });
    let record = env.record(run_id).await;
    // Let the worker ack after its publish.
    tokio::time::sleep(Duration::from_millis(300)).await;
    shutdown.cancel();
    let report = running.await.unwrap().unwrap();
    (record, report)
}

// C47.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c47_a_killed_workers_job_resumes_and_its_tool_does_not_run_again() {
    on_both(|env| async move {
        let (mut child, mut out) = env.child("after_tool");
        wait_for(&mut out, "ready");
        env.queue
            .submit(&Job::new("effects", "append", "job-1"))
            .await
            .unwrap();
        // append completed (ledger `completed`, then the before_call checkpoint); the
        // model's next turn never comes back: the worker is killed there.
        wait_for(&mut out, "hanging");
        signal(&child, "-KILL");
        assert!(!child.wait().unwrap().success());
        assert_eq!(env.lines(), ["append job-1:c1"]);
        assert_eq!(env.store.run("job-1").await.unwrap(), None);

        let (record, report) = take_over(&env, "job-1").await;
        assert_eq!(env.lines(), ["append job-1:c1"], "append ran once");
        assert_eq!(record.ending, Ending::Answered);
        assert_eq!(record.category, None);
        assert_eq!(record.output, json!({"ok": true}));
        assert_eq!(meta(&record, META_DELIVERY), Some("2"));
        assert_eq!(meta(&record, META_RESUMED), Some("true"));
        assert_eq!(meta(&record, META_STORE_FAILURES), Some("0"));
        assert_eq!(meta(&record, META_OUTCOME_UNKNOWN), None);
        // Both LLM calls and the one tool execution, counted once across the processes.
        assert_eq!(record.usage.llm_calls, 2);
        assert_eq!(record.usage.tool_calls, 1);
        assert_eq!(report.runs, 1);
        assert_eq!(report.fenced, 0);
        assert_eq!(env.queue.pending().await.unwrap(), 0);
        env
    })
    .await;
}

// C47.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c47_an_irreversible_call_killed_mid_flight_is_outcome_unknown_in_the_record() {
    on_both(|env| async move {
        let (mut child, mut out) = env.child("mid_tool");
        wait_for(&mut out, "ready");
        env.queue
            .submit(&Job::new("effects", "email", "job-2"))
            .await
            .unwrap();
        // send_email wrote its line and is killed before it returns.
        wait_for(&mut out, "mid-flight");
        signal(&child, "-KILL");
        assert!(!child.wait().unwrap().success());
        assert_eq!(env.lines(), ["send_email job-2:c1"]);

        let (record, report) = take_over(&env, "job-2").await;
        assert_eq!(env.lines(), ["send_email job-2:c1"], "not sent again");
        assert_eq!(record.ending, Ending::Escalated);
        assert_eq!(record.category.as_deref(), Some("escalated"));
        assert_eq!(meta(&record, META_OUTCOME_UNKNOWN), Some("send_email"));
        assert_eq!(meta(&record, META_DELIVERY), Some("2"));
        assert_eq!(meta(&record, META_RESUMED), Some("true"));
        assert_eq!(meta(&record, META_STORE_FAILURES), Some("0"));
        assert_eq!(record.usage.tool_calls, 1);
        assert_eq!(report.runs, 1);
        env
    })
    .await;
}

// C48.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c48_a_stalled_worker_whose_run_was_taken_over_is_fenced_and_lets_the_job_go() {
    on_both(|env| async move {
        let (child, mut out) = env.child("slow");
        wait_for(&mut out, "ready");
        env.queue
            .submit(&Job::new("effects", "append", "job-3"))
            .await
            .unwrap();
        // Mid-run (append done, the model's second turn under way): stopped, so no
        // in-progress ack; the job comes back after the ack wait.
        wait_for(&mut out, "slow");
        signal(&child, "-STOP");
        let (record, report) = take_over(&env, "job-3").await;
        assert_eq!(record.ending, Ending::Answered);
        assert_eq!(meta(&record, META_DELIVERY), Some("2"));
        assert_eq!(meta(&record, META_RESUMED), Some("true"));
        assert_eq!(report.runs, 1);
        // The stalled worker goes on: its model answers, its finished checkpoint is
        // fenced, so it stores nothing and does not ack.
        signal(&child, "-CONT");
        tokio::time::sleep(Duration::from_secs(5)).await;
        signal(&child, "-TERM");
        let line = wait_for(&mut out, "report ");
        let stalled: Value = serde_json::from_str(line.trim_start_matches("report ")).unwrap();
        assert_eq!(
            stalled,
            json!({"runs": 0, "duplicates": 0, "retried": 0, "fenced": 1})
        );
        let mut child = child;
        assert!(child.wait().unwrap().success());
        assert_eq!(env.lines(), ["append job-3:c1"], "append ran once");
        let again = env.store.run("job-3").await.unwrap().unwrap();
        assert_eq!(again, record, "the stored record is the taker's");
        assert_eq!(env.queue.pending().await.unwrap(), 0);
        env
    })
    .await;
}

// Paused jobs on the queue.

/// Runs an in-process worker until `done` holds of the run's record (up to 30 s) and
/// the queue has nothing pending; returns the record and the worker's report.
async fn serve_until(
    env: &Env,
    run_id: &str,
    done: impl Fn(&RunRecord) -> bool,
) -> (RunRecord, WorkerReport) {
    let worker = env.worker();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.run(shutdown).await }
    });
    let start = Instant::now();
    let record = loop {
        let stored = env.store.run(run_id).await.unwrap();
        if let Some(record) = stored.filter(|r| done(r))
            && env.queue.pending().await.unwrap() == 0
        {
            break record;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the worker did not get {run_id} there"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    shutdown.cancel();
    let report = running.await.unwrap().unwrap();
    (record, report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_frees_its_slot_and_resume_puts_it_back() {
    on_both(|env| async move {
        let job = Job::new("effects", "refund", "job-p");
        env.queue.submit(&job).await.unwrap();
        let (paused, report) = serve_until(&env, "job-p", |r| r.ending == Ending::Paused).await;
        assert_eq!(paused.agent, "effects");
        assert_eq!(paused.input, "refund");
        assert!(env.lines().is_empty(), "refund waits for approval");
        assert_eq!((report.runs, report.waiting), (1, 0));
        assert_eq!(env.queue.pending().await.unwrap(), 0, "the job was acked");

        // Too early: no decision yet. Acked, nothing run, the record kept.
        let back = Job::new(
            paused.agent.clone(),
            paused.input.clone(),
            paused.trace_id.clone(),
        );
        env.queue.resume(&back).await.unwrap();
        let (still, report) = serve_until(&env, "job-p", |r| r.ending == Ending::Paused).await;
        assert_eq!((report.runs, report.waiting), (0, 1));
        assert_eq!(still, paused);
        assert!(env.lines().is_empty());

        let left = agent_core::durable::record_decisions(
            &env.store,
            "job-p",
            agent_core::durable::Decisions::new().approve("c1"),
        )
        .await
        .unwrap();
        assert!(left.is_empty());
        env.queue.resume(&back).await.unwrap();
        let (record, report) = serve_until(&env, "job-p", |r| r.ending == Ending::Answered).await;
        assert_eq!((report.runs, report.waiting), (1, 0));
        assert_eq!(env.lines(), ["refund job-p:c1"], "refund ran once");
        assert_eq!(record.output, json!({"ok": true}));
        assert_eq!(meta(&record, META_RESUMED), Some("true"));
        assert_eq!(record.usage.llm_calls, 2);
        assert_eq!(record.usage.tool_calls, 1);

        // A resume of a finished run only acks.
        env.queue.resume(&back).await.unwrap();
        let (again, report) = serve_until(&env, "job-p", |r| r.ending == Ending::Answered).await;
        assert_eq!(again, record);
        assert_eq!((report.runs, report.duplicates), (0, 1));
        assert_eq!(env.lines(), ["refund job-p:c1"]);
        env
    })
    .await;
}
