//! Queued runs over the OpenAI Batch API: a worker running an agent whose config has
//! `.provider_batch(..)` gives every job's run a seat at the agent's gate, so
//! `run_batch_queued` and `Pipeline::run_queued` steps go out as batch jobs at the batch
//! price. Real NATS JetStream and PostgreSQL (a namespace and a schema of each test's
//! own), and a wiremock fake of OpenAI's files, batches and chat completions endpoints.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agent_core::config::Backoff;
use agent_core::durable::CheckpointStore;
use agent_core::pricing::ModelPrice;
use agent_core::providers::{ProviderBatch, ProviderOptions};
use agent_core::tool::{ToolDefinition, ToolFuture};
use agent_core::{AgentConfig, CancellationToken, Ending, Tool, ToolContext};
use agent_store::{Store, StoreOptions};
use agent_worker::{
    BatchOptions, Pipeline, Queue, QueueOptions, Registry, Step, Verdict, Worker, WorkerOptions,
    WorkerReport, run_batch_queued,
};
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One LLM call of the fake: 1,000 input and 100 output tokens, at $2.50 / $10 per
/// MTok: $0.0035 live, $0.00175 at the batch price.
const LIVE_CALL_USD: f64 = (1000.0 * 2.5 + 100.0 * 10.0) / 1e6;

// ---------------------------------------------------------------------------------
// The fake OpenAI server.

#[derive(Default)]
struct State {
    files: HashMap<String, Vec<u8>>,
    /// Each job's lines as sent (`{custom_id, method, url, body}`).
    jobs: Vec<Vec<Value>>,
    live_calls: u32,
    /// Job creations received (a hung one included).
    creates: usize,
    /// Creating job number `n` (1-based) never returns.
    hang_create: Option<usize>,
    /// Job `batch_{n}` reads `in_progress` while this is `Some(n)`.
    hold: Option<usize>,
}

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<State>>);

impl Fake {
    async fn start() -> (MockServer, Fake) {
        let server = MockServer::start().await;
        let fake = Fake::default();
        Mock::given(wiremock::matchers::any())
            .respond_with(fake.clone())
            .mount(&server)
            .await;
        (server, fake)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    /// The tool results in each line of each job: the round each line belongs to.
    fn rounds(&self) -> Vec<Vec<usize>> {
        self.state()
            .jobs
            .iter()
            .map(|lines| lines.iter().map(|l| read(&l["body"]).1).collect())
            .collect()
    }
}

/// The first user message and the number of tool results of a request body.
fn read(body: &Value) -> (String, usize) {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    (user, results)
}

/// The scripted model: `lookup` once, then `done: {input}` (two LLM calls a run).
fn reply(body: &Value) -> Value {
    let (user, results) = read(body);
    let (message, finish) = if results == 0 {
        let args = json!({"order_id": user}).to_string();
        (
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_0",
                "type": "function", "function": {"name": "lookup", "arguments": args}}]}),
            "tool_calls",
        )
    } else {
        (
            json!({"role": "assistant", "content": format!("done: {user}")}),
            "stop",
        )
    };
    json!({"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}})
}

fn ok(body: &Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

/// The JSONL file of a multipart upload.
fn uploaded(body: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(body);
    let start = text.find("filename=\"batch.jsonl\"").unwrap();
    let from = start + text[start..].find("\r\n\r\n").unwrap() + 4;
    let to = from + text[from..].find("\r\n--").unwrap();
    text[from..to].as_bytes().to_vec()
}

impl Respond for Fake {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut s = self.state();
        let path = request.url.path().to_owned();
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let post = request.method.as_str() == "POST";
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        match (post, segments.as_slice()) {
            (true, ["v1", "chat", "completions"]) => {
                s.live_calls += 1;
                ok(&reply(&body))
            }
            (true, ["v1", "files"]) => {
                let id = format!("file-in-{}", s.files.len());
                s.files.insert(id.clone(), uploaded(&request.body));
                ok(&json!({"id": id, "object": "file", "purpose": "batch"}))
            }
            (true, ["v1", "batches"]) => {
                s.creates += 1;
                if s.hang_create == Some(s.creates) {
                    return ResponseTemplate::new(200).set_delay(Duration::from_secs(3600));
                }
                let file = body["input_file_id"].as_str().unwrap();
                let lines: Vec<Value> = String::from_utf8_lossy(&s.files[file])
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
                let id = format!("batch_{}", s.jobs.len());
                s.jobs.push(lines);
                ok(&json!({"id": id, "object": "batch", "status": "validating"}))
            }
            // Every job has completed by its first poll.
            (false, ["v1", "batches", id]) => {
                let index: usize = id.trim_start_matches("batch_").parse().unwrap();
                if s.hold == Some(index) {
                    return ok(&json!({"id": id, "object": "batch", "status": "in_progress"}));
                }
                let mut out = Vec::new();
                for line in &s.jobs[index] {
                    let result = json!({"id": "batch_req", "custom_id": line["custom_id"],
                        "response": {"status_code": 200, "request_id": "req",
                            "body": reply(&line["body"])}, "error": null});
                    out.extend_from_slice(result.to_string().as_bytes());
                    out.push(b'\n');
                }
                let file = format!("file-out-{index}");
                s.files.insert(file.clone(), out);
                ok(&json!({"id": id, "object": "batch", "status": "completed",
                    "output_file_id": file}))
            }
            (false, ["v1", "files", id, "content"]) => {
                ResponseTemplate::new(200).set_body_raw(s.files[*id].clone(), "application/jsonl")
            }
            _ => ResponseTemplate::new(404).set_body_string(format!("no route {path}")),
        }
    }
}

// ---------------------------------------------------------------------------------
// Agents, queue, store.

/// Looks an order up (echoes its id), counting its runs.
#[derive(Clone, Default)]
struct Lookup(Arc<AtomicUsize>);

impl Tool for Lookup {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup",
            "Looks an order up.",
            json!({"type": "object", "properties": {"order_id": {"type": "string"}},
                   "required": ["order_id"], "additionalProperties": false}),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Ok(format!("order {} shipped", arguments["order_id"])) })
    }
}

/// An agent named `name` on the fake's `gpt-4o-mini`, batched or live.
fn agent(name: &str, server: &MockServer, batched: bool) -> AgentConfig<String> {
    agent_with(name, server, batched, Lookup::default())
}

fn agent_with(
    name: &str,
    server: &MockServer,
    batched: bool,
    lookup: Lookup,
) -> AgentConfig<String> {
    let builder = AgentConfig::<String>::builder(name)
        .model("gpt-4o-mini")
        .provider(
            ProviderOptions::default()
                .with_api_key("sk-test")
                .with_base_url(format!("{}/v1", server.uri())),
        )
        .tool(lookup)
        .price("gpt-4o-mini", ModelPrice::new(2.5, 10.0))
        .backoff(Backoff::none());
    let builder = if batched {
        // Rounds form when every run holding a seat waits (the window never closes one
        // here); the fake's jobs complete at their first poll.
        builder.provider_batch(
            ProviderBatch::new()
                .collect_window(Duration::from_secs(600))
                .poll(Backoff::exponential(
                    Duration::from_millis(1),
                    Duration::from_millis(5),
                )),
        )
    } else {
        builder
    };
    builder.build().unwrap()
}

fn url(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// A namespace and a schema of this test alone; `None` (skipped) when NATS or
/// PostgreSQL is unreachable outside CI.
struct Env {
    schema: String,
    queue: Queue,
    store: Store,
}

impl Env {
    async fn new() -> Option<Env> {
        Self::with_ack_wait(Duration::from_secs(30)).await
    }

    async fn with_ack_wait(ack_wait: Duration) -> Option<Env> {
        let id = format!("{}_{:012x}", std::process::id(), fastrand::u64(..) >> 16);
        let (ns, schema) = (format!("awpb_{id}"), format!("awpb_{id}"));
        let queue = Queue::connect(
            QueueOptions::new()
                .url(url("NATS_URL", "nats://127.0.0.1:4222"))
                .namespace(ns)
                .ack_wait(ack_wait),
        )
        .await;
        let pg = url("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test");
        let store = Store::open_with(&pg, StoreOptions::new().schema(schema.clone())).await;
        match (queue, store) {
            (Ok(queue), Ok(store)) => Some(Env {
                schema,
                queue,
                store,
            }),
            (q, s) => {
                let why = format!("nats: {:?}; postgres: {:?}", q.err(), s.err());
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!("these tests need NATS JetStream and PostgreSQL: {why}");
                }
                eprintln!("skipped: NATS JetStream or PostgreSQL unreachable ({why})");
                None
            }
        }
    }

    /// A worker in this process over `registry`, with room for every job at once.
    fn worker(&self, registry: Registry) -> Worker {
        self.worker_with(registry, WorkerOptions::new())
    }

    fn worker_with(&self, registry: Registry, options: WorkerOptions) -> Worker {
        Worker::new(
            self.queue.clone(),
            Arc::new(self.store.clone()),
            registry,
            options.max_in_flight(64).sweep_every(None),
        )
    }

    /// Waits until `n` jobs are on the queue (so a worker started now finds them all).
    async fn wait_pending(&self, n: u64) {
        while self.queue.pending().await.unwrap() < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn remove(self) {
        use sqlx::Connection;
        self.queue.delete().await.unwrap();
        self.store.close().await.unwrap();
        let pg = url("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test");
        let mut conn = sqlx::PgConnection::connect(&pg).await.unwrap();
        sqlx::query(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            self.schema
        ))
        .execute(&mut conn)
        .await
        .unwrap();
    }
}

/// Runs `worker` until `done` resolves, then stops it and returns its report.
async fn with_worker<F: std::future::Future>(worker: Worker, done: F) -> (F::Output, WorkerReport) {
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.run(shutdown).await }
    });
    let out = done.await;
    shutdown.cancel();
    (out, running.await.unwrap().unwrap())
}

fn inputs(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("ticket-{i}")).collect()
}

// ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_batch_queued_of_twenty_two_turn_runs_over_one_worker_is_two_batch_jobs_at_half_price()
{
    let Some(env) = Env::new().await else { return };
    let (server, fake) = Fake::start().await;
    let registry = Registry::new().with(agent("triage", &server, true));
    // The jobs are on the queue before the worker starts: it takes all 20 at once, so
    // the first round holds every run.
    let batch = tokio::spawn({
        let (queue, store) = (env.queue.clone(), env.store.clone());
        async move { run_batch_queued(&queue, &store, "triage", inputs(20), &BatchOptions::new()).await }
    });
    env.wait_pending(20).await;
    let (batch, report) = with_worker(env.worker(registry), batch).await;
    let batch = batch.unwrap().unwrap();

    assert_eq!(
        fake.rounds(),
        [vec![0; 20], vec![1; 20]],
        "job k holds call k of every run"
    );
    assert_eq!(fake.state().live_calls, 0);
    for (i, record) in batch.records.iter().enumerate() {
        let record = record.as_ref().unwrap();
        assert_eq!(record.ending, Ending::Answered);
        assert_eq!(record.output, json!(format!("done: ticket-{i}")));
        assert_eq!(record.usage.llm_calls, 2);
        let cost = record.usage.cost_usd.unwrap();
        assert!((cost - LIVE_CALL_USD).abs() < 1e-12, "run {i}: {cost} USD");
    }
    let cost = batch.receipt.cost_usd.unwrap();
    assert!((cost - 0.07).abs() < 1e-9, "{cost} USD");
    assert_eq!(batch.receipt.llm_calls, 40);
    let gate = &report.provider_batch["triage"];
    assert_eq!((gate.jobs, gate.requests, gate.answered), (2, 40, 40));
    assert_eq!((gate.unanswered, gate.sent_live), (0, 0));
    assert_eq!(report.runs, 20);
    println!(
        "run_batch_queued, 20 runs x 2 turns, one worker, gpt-4o-mini at $2.50/$10 per MTok: \
         {} batch jobs, {cost:.4} USD ({:.5} USD a run; live: {:.4} USD)",
        gate.jobs,
        cost / 20.0,
        40.0 * LIVE_CALL_USD
    );
    env.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_pipeline_batches_its_first_step_and_calls_live_in_the_second() {
    let Some(env) = Env::new().await else { return };
    let (server, fake) = Fake::start().await;
    let registry = Registry::new()
        .with(agent("triage", &server, true))
        .with(agent("review", &server, false));
    let pipeline = Pipeline::new()
        .step(Step::new("triage"))
        .step(Step::new("review"));
    let worker = env.worker(registry);
    let options = BatchOptions::new();
    let run = pipeline.run_queued(&env.queue, &env.store, inputs(8), &options);
    let (run, report) = with_worker(worker, run).await;
    let run = run.unwrap();

    assert_eq!(run.receipt.completed, 8);
    for (i, output) in run.outputs.iter().enumerate() {
        assert_eq!(
            output.as_deref(),
            Some(format!("done: done: ticket-{i}").as_str())
        );
        assert_eq!(run.verdicts[i], [Verdict::Promoted, Verdict::Promoted]);
    }
    // Step 1: every call in a batch job (the number of jobs depends on how the worker
    // pulled the jobs; every line is there once); step 2: live.
    let lines: usize = fake.rounds().iter().map(Vec::len).sum();
    assert_eq!(lines, 16);
    assert_eq!(fake.state().live_calls, 16);
    let triage = &run.receipt.steps[0].receipt;
    let review = &run.receipt.steps[1].receipt;
    assert!((triage.cost_usd.unwrap() - 8.0 * LIVE_CALL_USD).abs() < 1e-9);
    assert!((review.cost_usd.unwrap() - 16.0 * LIVE_CALL_USD).abs() < 1e-9);
    let gate = &report.provider_batch["triage"];
    assert_eq!((gate.requests, gate.answered, gate.sent_live), (16, 16, 0));
    assert!(!report.provider_batch.contains_key("review"));
    env.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_pipeline_batches_its_batched_step_too() {
    let (server, fake) = Fake::start().await;
    let registry = Registry::new()
        .with(agent("triage", &server, true))
        .with(agent("review", &server, false));
    let pipeline = Pipeline::new()
        .step(Step::new("triage"))
        .step(Step::new("review"));
    let run = pipeline
        .run_in_process(&registry, inputs(6), 6)
        .await
        .unwrap();
    assert_eq!(run.receipt.completed, 6);
    assert_eq!(fake.rounds(), [vec![0; 6], vec![1; 6]]);
    assert_eq!(fake.state().live_calls, 12);
    let triage = &run.receipt.steps[0].receipt;
    assert!((triage.cost_usd.unwrap() - 6.0 * LIVE_CALL_USD).abs() < 1e-9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_between_rounds_leaves_runs_that_the_next_worker_resumes_into_its_gate() {
    let Some(env) = Env::with_ack_wait(Duration::from_secs(1)).await else {
        return;
    };
    let (server, fake) = Fake::start().await;
    fake.state().hang_create = Some(2);
    let lookup = Lookup::default();
    let registry = Registry::new().with(agent_with("triage", &server, true, lookup.clone()));
    let batch = tokio::spawn({
        let (queue, store) = (env.queue.clone(), env.store.clone());
        async move {
            let options = BatchOptions::new().batch_id("resumed");
            run_batch_queued(&queue, &store, "triage", inputs(10), &options).await
        }
    });
    env.wait_pending(10).await;
    // Worker A: round 1 answered, each run's tool ran and its checkpoint holds the
    // second call; the second job's creation hangs. The worker is killed there (its
    // task aborted: runs and the gate's driver dropped, nothing acked).
    let short = WorkerOptions::new().lease(Duration::from_millis(200));
    let first = env.worker_with(registry.clone(), short.clone());
    let running = tokio::spawn(async move { first.run(CancellationToken::new()).await });
    while fake.state().creates < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert_eq!(fake.rounds(), [vec![0; 10]]);
    assert_eq!(lookup.0.load(Ordering::SeqCst), 10);

    // Worker B gets the redelivered jobs (after the 1 s ack wait), resumes each run
    // from its checkpoint with a seat at its own gate: only round 2 is sent.
    let (batch, report) = with_worker(env.worker_with(registry, short), batch).await;
    let batch = batch.unwrap().unwrap();
    let rounds = fake.rounds();
    assert_eq!(rounds[0], vec![0; 10]);
    let later: Vec<usize> = rounds[1..].iter().flatten().copied().collect();
    assert_eq!(
        later,
        vec![1; 10],
        "every run's second call once, in a batch job"
    );
    assert_eq!(fake.state().live_calls, 0);
    assert_eq!(lookup.0.load(Ordering::SeqCst), 10, "no tool ran twice");
    for (i, record) in batch.records.iter().enumerate() {
        let record = record.as_ref().unwrap();
        assert_eq!(record.output, json!(format!("done: ticket-{i}")));
        assert_eq!(
            record.metadata.get("resumed").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            record.metadata.get("delivery").map(String::as_str),
            Some("2")
        );
        assert_eq!(record.usage.llm_calls, 2);
        let cost = record.usage.cost_usd.unwrap();
        assert!(
            (cost - LIVE_CALL_USD).abs() < 1e-12,
            "both calls at the batch price: {cost}"
        );
    }
    let gate = &report.provider_batch["triage"];
    assert_eq!((gate.requests, gate.answered, gate.sent_live), (10, 10, 0));
    assert_eq!(report.runs, 10);
    env.remove().await;
}

/// The job run `run_id`'s checkpoint names as holding its batched call, if any.
async fn recorded_job(store: &Store, run_id: &str) -> Option<String> {
    let record = store.load(run_id).await.unwrap()?;
    let state: Value = serde_json::from_str(&record.state).ok()?;
    state["state"]["batch_call"]["job"]
        .as_str()
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_while_a_job_is_in_flight_leaves_runs_the_next_worker_resumes_on_that_job()
{
    let Some(env) = Env::with_ack_wait(Duration::from_secs(1)).await else {
        return;
    };
    let (server, fake) = Fake::start().await;
    fake.state().hold = Some(1);
    let lookup = Lookup::default();
    let registry = Registry::new().with(agent_with("triage", &server, true, lookup.clone()));
    let batch = tokio::spawn({
        let (queue, store) = (env.queue.clone(), env.store.clone());
        async move {
            let options = BatchOptions::new().batch_id("inflight");
            run_batch_queued(&queue, &store, "triage", inputs(10), &options).await
        }
    });
    env.wait_pending(10).await;
    // Worker A: round 1 answered, each run's tool ran; round 2's job `batch_1` was
    // accepted and each run's checkpoint names it; the job stays in progress. The
    // worker is killed there (nothing acked, the job's results never read).
    let short = WorkerOptions::new().lease(Duration::from_millis(200));
    let first = env.worker_with(registry.clone(), short.clone());
    let running = tokio::spawn(async move { first.run(CancellationToken::new()).await });
    for i in 0..10 {
        let id = format!("inflight-{i}");
        while recorded_job(&env.store, &id).await.as_deref() != Some("batch_1") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert_eq!(fake.rounds(), [vec![0; 10], vec![1; 10]]);

    // The provider finishes the job; worker B gets the redelivered jobs and each
    // resumed run waits on `batch_1` at B's gate instead of sending its call again.
    fake.state().hold = None;
    let (batch, report) = with_worker(env.worker_with(registry, short), batch).await;
    let batch = batch.unwrap().unwrap();
    assert_eq!(
        fake.rounds(),
        [vec![0; 10], vec![1; 10]],
        "no job beyond the two rounds"
    );
    assert_eq!(fake.state().live_calls, 0);
    assert_eq!(lookup.0.load(Ordering::SeqCst), 10, "no tool ran twice");
    for (i, record) in batch.records.iter().enumerate() {
        let record = record.as_ref().unwrap();
        assert_eq!(record.output, json!(format!("done: ticket-{i}")));
        assert_eq!(record.usage.llm_calls, 2);
        let cost = record.usage.cost_usd.unwrap();
        assert!(
            (cost - LIVE_CALL_USD).abs() < 1e-12,
            "both calls at the batch price: {cost}"
        );
        assert_eq!(
            recorded_job(&env.store, &format!("inflight-{i}")).await,
            None
        );
    }
    let gate = &report.provider_batch["triage"];
    assert_eq!(
        (gate.jobs, gate.resumed_jobs, gate.answered, gate.sent_live),
        (0, 1, 10, 0)
    );
    env.remove().await;
}
