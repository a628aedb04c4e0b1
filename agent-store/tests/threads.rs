//! C38: runs on one thread at the same time go one after the other, each seeing the
//! other's turns, on both backends: in one process on one store handle, through two
//! handles (each its own pool, as two processes have), and across processes (the child
//! is this test binary run again on `child_runs_on_the_thread`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::store::Memory;
use agent_core::{
    AgentConfig, RunOptions,
    llm::{LlmClient, LlmFuture, LlmRequest, LlmResponse, TokenUsage},
    run_agent_with,
};
use agent_store::{Store, StoreOptions};
use common::Place;

const TARGET: &str = "AGENT_STORE_THREAD_TARGET";
const SCHEMA: &str = "AGENT_STORE_THREAD_SCHEMA";

/// A model that takes 0.4 s per call and records how many messages each request held.
#[derive(Clone, Default)]
struct SlowModel {
    seen: Arc<Mutex<Vec<usize>>>,
}

impl LlmClient for SlowModel {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            self.seen.lock().unwrap().push(request.messages.len());
            Ok(LlmResponse::text("noted").with_usage(TokenUsage::new(10, 2)))
        })
    }
}

fn config(store: &Store, model: &SlowModel) -> AgentConfig<String> {
    AgentConfig::builder("threads")
        .llm(model.clone())
        .memory(store.clone())
        .build()
        .unwrap()
}

fn on_thread() -> RunOptions {
    RunOptions::new().thread("T")
}

/// Two runs at once on thread `T`, through `a` and `b` (the same handle or two): the
/// first request of one holds only its input, the other's holds the first's exchange
/// too; never both only their input.
async fn two_runs_at_once(a: &Store, b: &Store) {
    let (ma, mb) = (SlowModel::default(), SlowModel::default());
    let (ca, cb) = (config(a, &ma), config(b, &mb));
    let (ra, rb) = tokio::join!(
        run_agent_with(&ca, "first", on_thread()),
        run_agent_with(&cb, "second", on_thread()),
    );
    assert_eq!(ra.outcome.as_deref(), Ok("noted"));
    assert_eq!(rb.outcome.as_deref(), Ok("noted"));
    assert_eq!(ra.store_failures + rb.store_failures, 0);
    let mut seen = [ma.seen.lock().unwrap()[0], mb.seen.lock().unwrap()[0]];
    seen.sort_unstable();
    assert_eq!(
        seen,
        [1, 3],
        "one after the other, the second seeing the first"
    );
    let state = a.load("T", 100).await.unwrap();
    assert_eq!((state.messages.len(), state.runs), (4, 2));
}

async fn c38_concurrent_runs_on_one_store_go_one_after_the_other(place: &Place) {
    let store = place.open().await;
    two_runs_at_once(&store, &store).await;
    store.close().await.unwrap();
}

async fn c38_runs_through_two_store_handles_wait_for_each_other(place: &Place) {
    let (a, b) = (place.open().await, place.open().await);
    two_runs_at_once(&a, &b).await;
    a.close().await.unwrap();
    b.close().await.unwrap();
}

async fn a_claim_is_held_until_released_or_its_lease_runs_out(place: &Place) {
    let store = place.open().await;
    let lease = Duration::from_secs(60);
    assert!(store.claim("C", "run-1", lease).await.unwrap());
    assert!(
        store.claim("C", "run-1", lease).await.unwrap(),
        "held already"
    );
    assert!(!store.claim("C", "run-2", lease).await.unwrap());
    store.release("C", "run-2").await.unwrap();
    assert!(
        !store.claim("C", "run-2", lease).await.unwrap(),
        "not its claim"
    );
    store.release("C", "run-1").await.unwrap();
    assert!(store.claim("C", "run-2", Duration::ZERO).await.unwrap());
    // A lease that ran out is free (a process that died holding the thread).
    assert!(store.claim("C", "run-3", lease).await.unwrap());
    store.close().await.unwrap();
}

both_backends!(
    c38_concurrent_runs_on_one_store_go_one_after_the_other,
    c38_runs_through_two_store_handles_wait_for_each_other,
    a_claim_is_held_until_released_or_its_lease_runs_out,
);

/// The child: one run on thread `T` of the store at `$AGENT_STORE_THREAD_TARGET`; prints
/// `ready`, then how many messages its first request held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of c38_runs_of_two_processes_on_one_thread; it runs only when that test starts it"]
async fn child_runs_on_the_thread() {
    let Ok(target) = std::env::var(TARGET) else {
        return;
    };
    let options = match std::env::var(SCHEMA) {
        Ok(schema) => StoreOptions::new().schema(schema),
        Err(_) => StoreOptions::new(),
    };
    let store = Store::open_with(&target, options).await.unwrap();
    let model = SlowModel::default();
    let config = config(&store, &model);
    println!("ready");
    let r = run_agent_with(&config, "from the child", on_thread()).await;
    assert_eq!(r.outcome.as_deref(), Ok("noted"));
    println!("seen {}", model.seen.lock().unwrap()[0]);
    store.close().await.unwrap();
}

async fn c38_runs_of_two_processes_on_one_thread(place: &Place) {
    let store = place.open().await;
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--ignored",
            "--exact",
            "threads::child_runs_on_the_thread",
            "--nocapture",
        ])
        .env(TARGET, place.target())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Place::Postgres { schema, .. } = place {
        command.env(SCHEMA, schema);
    }
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Start when the child is about to start its run.
    let ready = lines.by_ref().map_while(Result::ok).any(|l| l == "ready");
    assert!(ready, "the child never got ready");
    let model = SlowModel::default();
    let config = config(&store, &model);
    let ours = run_agent_with(&config, "from the parent", on_thread()).await;
    assert_eq!(ours.outcome.as_deref(), Ok("noted"));
    let theirs = tokio::task::spawn_blocking(move || {
        // Read to the end: a pipe closed early fails the child's last writes.
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let seen = rest
            .iter()
            .find_map(|l| l.strip_prefix("seen ").map(|n| n.parse::<usize>().unwrap()));
        (seen, child.wait().unwrap())
    })
    .await
    .unwrap();
    assert!(theirs.1.success(), "the child failed");
    let mut seen = [model.seen.lock().unwrap()[0], theirs.0.unwrap()];
    seen.sort_unstable();
    assert_eq!(seen, [1, 3], "one after the other, across processes");
    let state = store.load("T", 100).await.unwrap();
    assert_eq!((state.messages.len(), state.runs), (4, 2));
    store.close().await.unwrap();
}

both_backends!(c38_runs_of_two_processes_on_one_thread);
