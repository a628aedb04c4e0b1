//! Memory across runs on both backends: earlier turns loaded before a run and trimmed
//! by the window (a tool call never separated from its result), the run's turns
//! appended after it, the thread's round-trip cap ending a run before any request,
//! idempotent and concurrent appends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use agent_core::conformance;
use common::Place;

/// Memory across runs (the conformance kit's test), then the store closes cleanly.
async fn memory_across_runs(place: &Place) {
    conformance::memory_across_runs(place).await;
    place.open().await.close().await.unwrap();
}

/// Concurrent appends (the conformance kit's test).
async fn appends_are_idempotent_and_ordered_under_concurrency(place: &Place) {
    conformance::appends_are_idempotent_and_ordered_under_concurrency(place).await;
}

both_backends!(
    memory_across_runs,
    appends_are_idempotent_and_ordered_under_concurrency
);
