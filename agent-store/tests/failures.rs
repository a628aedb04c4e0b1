//! A failing store never changes a run's outcome: a locked SQLite file, a full disk
//! (SQLite `max_page_count`), a PostgreSQL server that refuses connections, a locked
//! PostgreSQL table, and stores that fail, hang or panic. Every failure is counted in
//! the result and the receipt and reported to the observer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::store::{
    FeedbackStore, Memory, RunRecord, StoreFuture, StoreKind, ThreadEntry, ThreadState,
    TraceRecord, TraceStore,
};
use agent_core::testing::TestModel;
use agent_core::{
    AgentConfig, AgentConfigBuilder, Ending, RunOptions, eval::run_batch, observe::RunEvent,
    run_agent_with, store::StoreError,
};
use agent_store::{Store, StoreOptions};
use sqlx::Connection;

const ANSWER: &str = "This is the built-in test model's answer.";

/// One `StoreFailed` event: (trace id, store, operation, error).
type Failure = (String, StoreKind, &'static str, StoreError);

/// Every `StoreFailed` event.
#[derive(Clone, Default)]
struct Failures(Arc<Mutex<Vec<Failure>>>);

impl Failures {
    fn observer(&self) -> impl Fn(&RunEvent<'_>) + Send + Sync + 'static {
        let seen = Arc::clone(&self.0);
        move |event| {
            if let RunEvent::StoreFailed {
                trace_id,
                store,
                operation,
                error,
            } = event
            {
                seen.lock().unwrap().push((
                    (*trace_id).to_owned(),
                    *store,
                    operation,
                    (*error).clone(),
                ));
            }
        }
    }

    fn all(&self) -> Vec<Failure> {
        self.0.lock().unwrap().clone()
    }

    fn ids(&self, kind: StoreKind) -> HashSet<String> {
        self.all()
            .into_iter()
            .filter(|(_, k, _, _)| *k == kind)
            .map(|(id, ..)| id)
            .collect()
    }
}

fn recorded(store: &Store, failures: &Failures) -> AgentConfigBuilder<String> {
    AgentConfig::<String>::builder("fragile")
        .llm(TestModel::new())
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .observer(failures.observer())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_locked_file_changes_no_outcome() {
    let place = common::sqlite_place();
    let store = place
        .open_with(StoreOptions::new().busy_timeout(Duration::from_millis(100)))
        .await;
    // Another process holds the write lock.
    let mut locker = sqlx::SqliteConnection::connect(&format!("sqlite://{}", place.target()))
        .await
        .unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();

    let failures = Failures::default();
    let config = recorded(&store, &failures)
        .store_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let batch = run_batch(&config, (0..20).map(|i| format!("q{i}")), 8).await;
    assert_eq!(batch.receipt.count(Ending::Answered), 20);
    assert!(
        batch
            .results
            .iter()
            .all(|r| r.outcome.as_deref() == Ok(ANSWER))
    );
    assert!(batch.results.iter().all(|r| r.store_failures == 2));
    assert_eq!(batch.receipt.store_failures, 40);
    assert!(batch.receipt.to_string().contains("store failures"));
    let seen = failures.all();
    assert_eq!(seen.len(), 40);
    for (_, _, _, error) in &seen {
        assert!(
            matches!(error, StoreError::Unavailable { message } if message.contains("locked")),
            "{error}"
        );
    }

    // The lock goes away: the next runs are recorded.
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    let batch = run_batch(&config, (0..20).map(|i| format!("r{i}")), 8).await;
    assert_eq!(batch.receipt.store_failures, 0);
    assert_eq!(store.stats().await.unwrap().runs, 20);
    store.close().await.unwrap();
    place.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_full_disk_changes_no_outcome() {
    let place = common::sqlite_place();
    // About 160 KiB: the schema fits, a few dozen runs do, the rest do not.
    let store = place
        .open_with(StoreOptions::new().pragma("max_page_count", "40"))
        .await;
    let failures = Failures::default();
    let config = recorded(&store, &failures).build().unwrap();
    let batch = run_batch(
        &config,
        (0..200).map(|i| format!("ticket {i} {}", "x".repeat(300))),
        16,
    )
    .await;
    assert_eq!(batch.receipt.count(Ending::Answered), 200);
    assert!(
        batch
            .results
            .iter()
            .all(|r| r.outcome.as_deref() == Ok(ANSWER))
    );
    assert!(batch.receipt.store_failures > 0, "{}", batch.receipt);
    let per_run: u64 = batch
        .results
        .iter()
        .map(|r| u64::from(r.store_failures))
        .sum();
    assert_eq!(per_run, batch.receipt.store_failures);
    let seen = failures.all();
    assert_eq!(seen.len() as u64, per_run);
    assert!(
        seen.iter()
            .all(|(_, _, _, e)| e.to_string().contains("full")),
        "{seen:?}"
    );

    // Exactly the runs whose record did not fail are stored.
    let all: HashSet<String> = batch.results.iter().map(|r| r.trace_id.clone()).collect();
    let lost = failures.ids(StoreKind::Feedback);
    for id in &all {
        let stored = store.run(id).await.unwrap().is_some();
        assert_eq!(stored, !lost.contains(id), "{id}");
    }
    let lost_traces = failures.ids(StoreKind::Trace);
    let stats = store.stats().await.unwrap();
    assert_eq!(stats.runs as usize, all.len() - lost.len());
    assert_eq!(stats.traces as usize, all.len() - lost_traces.len());
    store.close().await.unwrap();
    // Without the cap the file opens cleanly and is intact.
    let reopened = place.open().await;
    reopened.check_integrity().await.unwrap();
    reopened.close().await.unwrap();
    place.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_write_behind_failures_are_counted_by_the_flush() {
    let place = common::sqlite_place();
    let store = place
        .open_with(
            StoreOptions::new()
                .pragma("max_page_count", "40")
                .write_behind(true),
        )
        .await;
    let failures = Failures::default();
    let config = recorded(&store, &failures).build().unwrap();
    let batch = run_batch(
        &config,
        (0..200).map(|i| format!("ticket {i} {}", "x".repeat(300))),
        16,
    )
    .await;
    assert_eq!(batch.receipt.count(Ending::Answered), 200);
    // Queued writes do not fail their runs...
    assert!(batch.results.iter().all(|r| r.store_failures == 0));
    // ...the flush in run_batch counts every write that did not land, and says so to
    // the config's observer.
    let stats = store.stats().await.unwrap();
    let lost = (200 - stats.runs) + (200 - stats.traces);
    assert!(lost > 0, "{stats:?}");
    assert_eq!(batch.receipt.store_failures, lost, "{}", batch.receipt);
    let seen = failures.all();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let (trace_id, _, operation, error) = &seen[0];
    assert_eq!((trace_id.as_str(), *operation), ("", "flush"));
    assert!(
        error
            .to_string()
            .contains(&format!("{lost} queued writes failed")),
        "{error}"
    );
    // Counted once: the next flush starts from zero.
    assert_eq!(store.flush().await.unwrap(), 0);
    store.close().await.unwrap();
    place.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_server_that_refuses_changes_no_outcome() {
    // Port 1 on loopback: nothing listens, the connection is refused.
    let url = "postgres://postgres@127.0.0.1:1/test";
    let quick = StoreOptions::new().connect_timeout(Duration::from_millis(200));
    assert!(matches!(
        Store::open_with(url, quick.clone()).await,
        Err(StoreError::Unavailable { .. })
    ));
    let store = Store::open_with(url, quick.lazy(true)).await.unwrap();
    let failures = Failures::default();
    let docs = store.documents("faq", Arc::new(agent_core::store::HashEmbedder::new(32)));
    let config = recorded(&store, &failures)
        .memory(store.clone())
        .retriever(docs)
        .build()
        .unwrap();
    let control: AgentConfig<String> = AgentConfig::builder("control")
        .llm(TestModel::new())
        .build()
        .unwrap();
    let expected = run_agent_with(&control, "q", RunOptions::new()).await;

    let threaded = run_agent_with(&config, "q", RunOptions::new().thread("t1")).await;
    assert_eq!(threaded.outcome, expected.outcome);
    assert_eq!(threaded.usage.llm_calls, expected.usage.llm_calls);
    // claim (the thread, C38; never made, so never released), load, retrieve, append,
    // record, record_trace.
    assert_eq!(threaded.store_failures, 6);
    let ops: Vec<&str> = failures.all().iter().map(|(_, _, op, _)| *op).collect();
    assert_eq!(ops[..3], ["claim", "load", "retrieve"]);
    let mut after: Vec<&str> = ops[3..].to_vec();
    after.sort_unstable();
    assert_eq!(after, ["append", "record", "record_trace"]);
    assert!(
        failures
            .all()
            .iter()
            .all(|(_, _, _, e)| matches!(e, StoreError::Unavailable { .. }))
    );

    let batch = run_batch(&config, (0..10).map(|i| format!("q{i}")), 4).await;
    assert_eq!(batch.receipt.count(Ending::Answered), 10);
    // retrieve, record and record_trace per run; the final flushes succeed (every
    // write already failed, nothing is queued).
    assert_eq!(batch.receipt.store_failures, 30, "{}", batch.receipt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_locked_table_times_out_and_the_writes_land_later_once() {
    let Some(place) = common::postgres_place().await else {
        return;
    };
    let common::Place::Postgres { url, schema } = &place else {
        unreachable!()
    };
    let store = place.open().await;
    let mut locker = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut locker).await.unwrap();
    sqlx::query(&format!(
        "LOCK TABLE \"{schema}\".runs IN ACCESS EXCLUSIVE MODE"
    ))
    .execute(&mut locker)
    .await
    .unwrap();
    let failures = Failures::default();
    let config = recorded(&store, &failures)
        .store_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let batch = run_batch(&config, (0..10).map(|i| format!("q{i}")), 10).await;
    assert_eq!(batch.receipt.count(Ending::Answered), 10);
    assert!(batch.results.iter().all(|r| r.store_failures == 2));
    // 20 timed-out writes, and the two flushes behind them time out too.
    assert_eq!(batch.receipt.store_failures, 22, "{}", batch.receipt);
    assert!(
        failures
            .all()
            .iter()
            .all(|(_, _, _, e)| matches!(e, StoreError::Timeout { .. }))
    );

    // The lock goes away: the queued writes commit, once each.
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    store.flush().await.unwrap();
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.runs, stats.traces), (10, 10));
    store.close().await.unwrap();
    place.remove().await;
}

/// Stores that fail in every way a store can: an error, a hang, a panic.
struct Broken;

impl Memory for Broken {
    fn load<'a>(&'a self, _: &'a str, _: usize) -> StoreFuture<'a, ThreadState> {
        Box::pin(async { Err(StoreError::backend("no such table: threads")) })
    }
    fn append<'a>(&'a self, _: &'a str, _: &'a ThreadEntry) -> StoreFuture<'a, ()> {
        panic!("append panicked before returning a future")
    }
}

impl FeedbackStore for Broken {
    fn record<'a>(&'a self, _: &'a RunRecord) -> StoreFuture<'a, ()> {
        Box::pin(async { panic!("record panicked") })
    }
    fn attach_feedback<'a>(
        &'a self,
        _: &'a str,
        _: &'a agent_core::store::Feedback,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn run<'a>(&'a self, _: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async { Ok(None) })
    }
    fn runs<'a>(&'a self, _: &'a agent_core::store::RunQuery) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn eval_set<'a>(
        &'a self,
        _: &'a agent_core::store::EvalFilter,
    ) -> StoreFuture<'a, Vec<agent_core::store::EvalExample>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn flush(&self) -> StoreFuture<'_, u64> {
        Box::pin(async { Ok(0) })
    }
}

impl TraceStore for Broken {
    fn record_trace<'a>(&'a self, _: &'a TraceRecord) -> StoreFuture<'a, ()> {
        Box::pin(std::future::pending())
    }
    fn trace<'a>(&'a self, _: &'a str) -> StoreFuture<'a, Option<TraceRecord>> {
        Box::pin(async { Ok(None) })
    }
    fn flush(&self) -> StoreFuture<'_, u64> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn stores_that_fail_hang_or_panic_change_no_outcome() {
    let failures = Failures::default();
    let config: AgentConfig<String> = AgentConfig::builder("broken")
        .llm(TestModel::new())
        .memory(Broken)
        .feedback_store(Broken)
        .trace_store(Broken)
        .store_timeout(Duration::from_millis(50))
        .observer(failures.observer())
        .build()
        .unwrap();
    let result = run_agent_with(&config, "q", RunOptions::new().thread("t")).await;
    assert_eq!(result.outcome.as_deref(), Ok(ANSWER));
    assert_eq!(result.store_failures, 4);
    let seen = failures.all();
    let find = |op: &str| seen.iter().find(|(_, _, o, _)| *o == op).unwrap().3.clone();
    assert!(matches!(find("load"), StoreError::Backend { .. }));
    assert!(
        matches!(find("append"), StoreError::Panicked { message } if message.contains("before returning"))
    );
    assert!(matches!(find("record"), StoreError::Panicked { .. }));
    assert_eq!(
        find("record_trace"),
        StoreError::Timeout {
            limit: Duration::from_millis(50)
        }
    );
    // A batch: 3 failures per run (the failed load leaves no thread), plus the trace
    // store's flush that hangs.
    let batch = run_batch(&config, ["a", "b"], 2).await;
    assert_eq!(batch.receipt.count(Ending::Answered), 2);
    assert_eq!(batch.receipt.store_failures, 2 * 2 + 1);
}
