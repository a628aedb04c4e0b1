//! `agent-worker`: a worker process serving a queue with the demo agents.
//!
//! Agent configs are code, so a real deployment writes its own small `main` that builds
//! its configs into a [`Registry`](agent_worker::Registry) and calls
//! [`Worker::run`](agent_worker::Worker::run), as this one does for the deterministic
//! demo agents ([`agent_worker::demo`]). It drains on SIGTERM or SIGINT (finishes the
//! jobs it holds, takes no more) and prints its report as one JSON line on stdout.
//!
//! ```text
//! agent-worker --store URL [--schema NAME] [--nats URL] [--namespace NS]
//!              [--max-in-flight N] [--ack-wait-ms MS] [--max-deliveries N]
//!              [--no-checkpoints] [--lease-ms MS] [--sweep-every-ms MS | --no-sweeper]
//!              [--crash-on MARKER] [--mock-url URL]
//! agent-worker --store URL [--schema NAME] [--nats URL] [--namespace NS] --resume RUN_ID
//! ```
//!
//! `--resume RUN_ID` serves nothing: it puts the job of a paused run back on the queue
//! (`Queue::resume`, the job made from the run's stored `paused` record) once its
//! decisions are recorded (the `runs` example's `approve` / `deny` / `edit` / `result`,
//! or `agent_core::durable::record_decisions`), prints `{"resumed":"RUN_ID"}` and exits. It fails
//! when the store has no record of the run or the record is not `paused`.
//!
//! Runs are checkpointed into the store (`--store`) when their agent's config has no
//! checkpoint store, so a job redelivered after its worker died continues its run
//! instead of running it again; `--no-checkpoints` turns that off
//! (`WorkerOptions::checkpoints`). `--lease-ms` sets the runs' lease (default 60000)
//! and `--sweep-every-ms` how often the sweeper puts unfinished runs whose lease
//! lapsed back on the queue (default 30000); `--no-sweeper` turns it off.
//!
//! `--crash-on MARKER` adds the agent `crash`, which answers like `echo` but aborts the
//! whole process (no unwinding, no ack) when its input contains MARKER: a stand-in for a
//! run that kills its worker, to show dead-lettering. `--mock-url URL` adds the agent
//! `triage`, the peer benchmarks' scenario against their mock server (bench/worker).

mod triage;

use std::sync::Arc;
use std::time::Duration;

use agent_core::{
    AgentConfig, CancellationToken,
    llm::{LlmClient, LlmFuture, LlmRequest},
};
use agent_store::{Store, StoreOptions};
use agent_worker::demo::DemoModel;
use agent_worker::{Queue, QueueOptions, Registry, Worker, WorkerOptions};

struct Args {
    store: String,
    schema: Option<String>,
    queue: QueueOptions,
    worker: WorkerOptions,
    crash_on: Option<String>,
    mock_url: Option<String>,
    resume: Option<String>,
}

fn parse() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_env();
    let mut store = None;
    let mut schema = None;
    let mut queue = QueueOptions::new();
    let mut worker = WorkerOptions::new();
    let mut crash_on = None;
    let mut mock_url = None;
    let mut resume = None;
    while let Some(arg) = parser.next()? {
        match arg {
            Long("store") => store = Some(parser.value()?.string()?),
            Long("schema") => schema = Some(parser.value()?.string()?),
            Long("nats") => queue = queue.url(parser.value()?.string()?),
            Long("namespace") => queue = queue.namespace(parser.value()?.string()?),
            Long("max-in-flight") => worker = worker.max_in_flight(parser.value()?.parse()?),
            Long("ack-wait-ms") => {
                queue = queue.ack_wait(Duration::from_millis(parser.value()?.parse()?));
            }
            Long("max-deliveries") => queue = queue.max_deliveries(parser.value()?.parse()?),
            Long("no-checkpoints") => worker = worker.checkpoints(false),
            Long("lease-ms") => {
                worker = worker.lease(Duration::from_millis(parser.value()?.parse()?));
            }
            Long("sweep-every-ms") => {
                let every = Duration::from_millis(parser.value()?.parse()?);
                worker = worker.sweep_every(Some(every));
            }
            Long("no-sweeper") => worker = worker.sweep_every(None),
            Long("crash-on") => crash_on = Some(parser.value()?.string()?),
            Long("mock-url") => mock_url = Some(parser.value()?.string()?),
            Long("resume") => resume = Some(parser.value()?.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let store = store.ok_or("--store URL is required")?;
    Ok(Args {
        store,
        schema,
        queue,
        worker,
        crash_on,
        mock_url,
        resume,
    })
}

/// Answers like the demo model, but aborts the process on inputs holding the marker.
struct CrashModel {
    marker: String,
    inner: DemoModel,
}

impl LlmClient for CrashModel {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let poisoned = request.messages.iter().any(|m| match m {
            agent_core::llm::Message::User { content, .. } => content.contains(&self.marker),
            _ => false,
        });
        if poisoned {
            eprintln!("agent-worker: crash marker seen, aborting");
            std::process::abort();
        }
        self.inner.complete(request)
    }
}

fn registry(
    crash_on: Option<String>,
    mock_url: Option<&str>,
) -> Result<Registry, agent_core::ConfigError> {
    let mut registry = agent_worker::demo::registry()?;
    if let Some(url) = mock_url {
        registry = registry.with(triage::config(url)?);
    }
    if let Some(marker) = crash_on {
        let crash: AgentConfig<String> = AgentConfig::builder("crash")
            .llm(CrashModel {
                marker,
                inner: DemoModel::new("echo: "),
            })
            .build()?;
        registry = registry.with(crash);
    }
    Ok(registry)
}

/// Opens the store, trying again a few times: workers started together against a new
/// PostgreSQL schema race to create it, and all but one get a unique-key error.
async fn open_store(
    target: &str,
    options: StoreOptions,
) -> Result<Store, agent_core::store::StoreError> {
    let mut attempt = 0;
    loop {
        match Store::open_with(target, options.clone()).await {
            Ok(store) => return Ok(store),
            Err(e) if attempt < 5 => {
                attempt += 1;
                eprintln!("agent-worker: cannot open the store ({e}); trying again");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse()?;
    let mut options = StoreOptions::new();
    if let Some(schema) = &args.schema {
        options = options.schema(schema.clone());
    }
    let store = open_store(&args.store, options).await?;
    let queue = Queue::connect(args.queue).await?;
    if let Some(run_id) = &args.resume {
        use agent_core::store::FeedbackStore;
        let record = store
            .run(run_id)
            .await?
            .ok_or_else(|| format!("the store has no record of run {run_id}"))?;
        if record.ending != agent_core::Ending::Paused {
            return Err(format!("run {run_id} is {}, not paused", record.ending.as_str()).into());
        }
        let job = agent_worker::Job::new(record.agent, record.input, record.trace_id);
        queue.resume(&job).await?;
        store.close().await?;
        println!("{}", serde_json::json!({ "resumed": run_id }));
        return Ok(());
    }
    let worker = Worker::new(
        queue,
        Arc::new(store.clone()),
        registry(args.crash_on, args.mock_url.as_deref())?,
        args.worker,
    );
    let shutdown = CancellationToken::new();
    let signals = shutdown.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                signals.cancel();
            }
            _ => eprintln!("agent-worker: cannot listen for signals; stop it with SIGKILL"),
        }
    });
    eprintln!("agent-worker: ready");
    let report = worker.run(shutdown).await?;
    store.close().await?;
    println!(
        "{{\"runs\":{},\"duplicates\":{},\"dead_lettered\":{},\"retried\":{},\"waiting\":{},\"swept\":{},\"orphans\":{}}}",
        report.runs,
        report.duplicates,
        report.dead_lettered,
        report.retried,
        report.waiting,
        report.swept,
        report.orphans
    );
    Ok(())
}
