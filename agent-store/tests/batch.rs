//! 10,000 runs through `run_batch` at concurrency 64 into each backend: exactly 10,000
//! records and traces, none lost or duplicated, no store failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::collections::HashSet;
use std::time::Instant;

use agent_core::store::{FeedbackStore, RunQuery};
use agent_core::testing::TestModel;
use agent_core::{AgentConfig, Ending, eval::run_batch};
use common::Place;

const RUNS: usize = 10_000;

async fn ten_thousand_runs_exactly_once(place: &Place) {
    let store = place.open().await;
    ten_thousand_into(place, store, "group commit").await;
}

async fn ten_thousand_runs_exactly_once_write_behind(place: &Place) {
    let store = place.open_with(place.options().write_behind(true)).await;
    ten_thousand_into(place, store, "write-behind").await;
}

async fn ten_thousand_into(place: &Place, store: agent_store::Store, mode: &str) {
    let config: AgentConfig<String> = AgentConfig::builder("bulk")
        .llm(TestModel::new())
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .build()
        .unwrap();
    let inputs: Vec<String> = (0..RUNS).map(|i| format!("input {i}")).collect();
    let started = Instant::now();
    let batch = run_batch(&config, inputs.clone(), 64).await;
    let elapsed = started.elapsed();
    assert_eq!(batch.receipt.runs, RUNS);
    assert_eq!(batch.receipt.count(Ending::Answered), RUNS);
    assert_eq!(batch.receipt.store_failures, 0, "{}", batch.receipt);

    // Right after run_batch: every record is there, once.
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.runs, stats.traces), (RUNS as u64, RUNS as u64));
    let records = store.runs(&RunQuery::new().limit(2 * RUNS)).await.unwrap();
    assert_eq!(records.len(), RUNS);
    let stored: HashSet<&str> = records.iter().map(|r| r.trace_id.as_str()).collect();
    let returned: HashSet<&str> = batch.results.iter().map(|r| r.trace_id.as_str()).collect();
    assert_eq!(returned.len(), RUNS, "trace ids are unique");
    assert_eq!(stored, returned);
    let stored_inputs: HashSet<&str> = records.iter().map(|r| r.input.as_str()).collect();
    assert_eq!(stored_inputs, inputs.iter().map(String::as_str).collect());
    eprintln!(
        "{} ({mode}): {RUNS} runs recorded at concurrency 64 in {:.2} s (debug build)",
        place.target().split('@').next_back().unwrap_or_default(),
        elapsed.as_secs_f64()
    );
    store.close().await.unwrap();
}

both_backends!(
    ten_thousand_runs_exactly_once,
    ten_thousand_runs_exactly_once_write_behind
);
