//! Round-3 field reports through the loop without a network: C38 with a memory that
//! keeps the default (in-process) thread claim. The store backends' claims, across
//! handles and processes, are in `agent-store/tests/threads.rs`; the wire cases in
//! `providers_field_reports_3.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::store::{Memory, StoreFuture, ThreadEntry, ThreadState};
use agent_core::{
    AgentConfig, AgentError, RunOptions,
    llm::{LlmClient, LlmFuture, LlmRequest, LlmResponse, TokenUsage},
    run_agent_with,
};

/// Threads in a map; `claim` and `release` are the trait's defaults.
#[derive(Default)]
struct MapMemory(Mutex<HashMap<String, ThreadState>>);

impl Memory for MapMemory {
    fn load<'a>(&'a self, thread: &'a str, _max: usize) -> StoreFuture<'a, ThreadState> {
        let state = self.0.lock().unwrap().get(thread).cloned();
        Box::pin(async move { Ok(state.unwrap_or_default()) })
    }

    fn append<'a>(&'a self, thread: &'a str, entry: &'a ThreadEntry) -> StoreFuture<'a, ()> {
        let mut threads = self.0.lock().unwrap();
        let state = threads.entry(thread.to_owned()).or_default();
        state.messages.extend(entry.messages.iter().cloned());
        state.llm_calls += entry.llm_calls;
        state.runs += 1;
        Box::pin(async { Ok(()) })
    }
}

/// A model that takes `delay` per call and records how many messages each request held.
#[derive(Clone)]
struct SlowModel {
    delay: Duration,
    seen: Arc<Mutex<Vec<usize>>>,
}

impl SlowModel {
    fn new(delay: Duration) -> Self {
        Self {
            delay,
            seen: Arc::default(),
        }
    }
}

impl LlmClient for SlowModel {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.seen.lock().unwrap().push(request.messages.len());
            Ok(LlmResponse::text("noted").with_usage(TokenUsage::new(10, 2)))
        })
    }
}

fn config(memory: &Arc<MapMemory>, model: &SlowModel) -> AgentConfig<String> {
    AgentConfig::builder("threads")
        .llm(model.clone())
        .memory(Arc::clone(memory) as Arc<dyn Memory>)
        .build()
        .unwrap()
}

#[tokio::test]
async fn c38_two_runs_on_one_thread_at_once_run_one_after_the_other() {
    let memory = Arc::new(MapMemory::default());
    let model = SlowModel::new(Duration::from_millis(400));
    let config = config(&memory, &model);
    let (a, b) = tokio::join!(
        run_agent_with(&config, "first", RunOptions::new().thread("T")),
        run_agent_with(&config, "second", RunOptions::new().thread("T")),
    );
    assert_eq!(a.outcome.as_deref(), Ok("noted"));
    assert_eq!(b.outcome.as_deref(), Ok("noted"));
    // The second run's request holds the first's exchange: never both only their input.
    assert_eq!(*model.seen.lock().unwrap(), [1, 3]);
    assert_eq!(memory.0.lock().unwrap()["T"].runs, 2);
    // Another thread is not held up by either.
    let other = run_agent_with(&config, "elsewhere", RunOptions::new().thread("U")).await;
    assert_eq!(other.outcome.as_deref(), Ok("noted"));
}

#[tokio::test]
async fn c38_a_run_that_cannot_wait_for_its_thread_ends_typed_before_any_request() {
    let memory = Arc::new(MapMemory::default());
    let slow = SlowModel::new(Duration::from_secs(2));
    let quick = SlowModel::new(Duration::ZERO);
    let (holder, waiter) = (config(&memory, &slow), config(&memory, &quick));
    let first = run_agent_with(&holder, "first", RunOptions::new().thread("T"));
    let second = async {
        // Start once the first run holds the thread.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let options = RunOptions::new()
            .thread("T")
            .deadline(Duration::from_millis(300));
        run_agent_with(&waiter, "second", options).await
    };
    let (a, b) = tokio::join!(first, second);
    assert_eq!(a.outcome.as_deref(), Ok("noted"));
    assert!(matches!(
        b.outcome,
        Err(AgentError::DeadlineExceeded { limit }) if limit == Duration::from_millis(300)
    ));
    assert_eq!(b.usage.llm_calls, 0);
    assert!(quick.seen.lock().unwrap().is_empty(), "no request was sent");
    // The run that never held the thread added nothing to it.
    assert_eq!(memory.0.lock().unwrap()["T"].runs, 1);
}

#[tokio::test]
async fn c38_a_run_dropped_before_its_end_gives_its_thread_up() {
    let memory = Arc::new(MapMemory::default());
    let slow = SlowModel::new(Duration::from_secs(30));
    let quick = SlowModel::new(Duration::ZERO);
    let holder = config(&memory, &slow);
    let dropped = tokio::time::timeout(
        Duration::from_millis(200),
        run_agent_with(&holder, "first", RunOptions::new().thread("T")),
    )
    .await;
    assert!(dropped.is_err(), "the first run was dropped mid-call");
    // Without the release on drop, this run would wait out the first one's lease
    // (15 minutes) and end with its deadline.
    let options = RunOptions::new()
        .thread("T")
        .deadline(Duration::from_secs(5));
    let r = run_agent_with(&config(&memory, &quick), "second", options).await;
    assert_eq!(r.outcome.as_deref(), Ok("noted"));
    assert_eq!(*quick.seen.lock().unwrap(), [1]);
}
