//! [`receipt_of`]: agent-core's [`Receipt`] from stored run records.

use std::time::Duration;

use agent_core::store::RunRecord;
use agent_core::{
    Category,
    eval::{Receipt, RunTally},
};

use crate::registry::{META_MAX_LLM_CALLS, META_PARTIAL, META_STORE_FAILURES};

/// The receipt of these records, tallied by agent-core's own [`Receipt::from_tallies`],
/// the code `run_batch` tallies its results with: the same counts, categories, tokens, cost, turn histogram, cap hits and
/// suggestion. Records made by [`record_of`](crate::record_of) carry what the receipt
/// needs beyond agent-core's record (partial answers, failed store calls, the cap);
/// the cap is known when every record has the same one. Durations come from
/// `duration_ms`, so `p50` and `p95` are whole milliseconds; `wall_time` is zero (the
/// caller sets it).
pub fn receipt_of(records: &[RunRecord]) -> Receipt {
    let meta_u64 = |r: &RunRecord, key: &str| {
        r.metadata
            .get(key)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let tallies: Vec<RunTally> = records
        .iter()
        .map(|r| {
            RunTally::new(
                r.ending,
                r.usage.clone(),
                Duration::from_millis(r.duration_ms),
            )
            .with_category(r.category.as_deref().and_then(Category::from_tag))
            .with_partial(r.metadata.get(META_PARTIAL).map(String::as_str) == Some("true"))
            .with_store_failures(meta_u64(r, META_STORE_FAILURES))
        })
        .collect();
    let caps: Vec<u64> = records
        .iter()
        .map(|r| meta_u64(r, META_MAX_LLM_CALLS))
        .collect();
    let cap = match caps.first() {
        Some(first) if *first > 0 && caps.iter().all(|c| c == first) => u32::try_from(*first).ok(),
        _ => None,
    };
    Receipt::from_tallies(&tallies, cap)
}
