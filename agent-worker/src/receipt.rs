//! [`receipt_of`]: agent-core's [`Receipt`] from stored run records.

use std::time::Duration;

use agent_core::store::RunRecord;
use agent_core::{AgentError, Ending, Receipt, TurnStats};

use crate::registry::{META_MAX_LLM_CALLS, META_PARTIAL, META_STORE_FAILURES};

/// The receipt of these records, computed as agent-core's `run_batch` computes it from
/// its results: the same counts, categories, tokens, cost, turn histogram, cap hits and
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
    let mut receipt = Receipt::default();
    receipt.runs = records.len();
    receipt.endings = Ending::ALL.iter().map(|e| (*e, 0)).collect();
    let mut durations = Vec::with_capacity(records.len());
    for r in records {
        *receipt.endings.entry(r.ending).or_insert(0) += 1;
        receipt.partial +=
            usize::from(r.metadata.get(META_PARTIAL).map(String::as_str) == Some("true"));
        if let Some(category) = r.category.as_deref().and_then(static_category) {
            *receipt.categories.entry(category).or_insert(0) += 1;
        }
        receipt.llm_calls = receipt
            .llm_calls
            .saturating_add(u64::from(r.usage.llm_calls));
        receipt.tool_calls = receipt
            .tool_calls
            .saturating_add(u64::from(r.usage.tool_calls));
        receipt.input_tokens = receipt.input_tokens.saturating_add(r.usage.input_tokens);
        receipt.output_tokens = receipt.output_tokens.saturating_add(r.usage.output_tokens);
        if let Some(cost) = r.usage.cost_usd {
            receipt.cost_usd = Some(receipt.cost_usd.unwrap_or(0.0) + cost);
        }
        receipt.store_failures = receipt
            .store_failures
            .saturating_add(meta_u64(r, META_STORE_FAILURES));
        durations.push(Duration::from_millis(r.duration_ms));
    }
    durations.sort_unstable();
    receipt.p50 = nearest_rank(&durations, 0.50).unwrap_or_default();
    receipt.p95 = nearest_rank(&durations, 0.95).unwrap_or_default();
    let caps: Vec<u64> = records
        .iter()
        .map(|r| meta_u64(r, META_MAX_LLM_CALLS))
        .collect();
    let cap = match caps.first() {
        Some(first) if *first > 0 && caps.iter().all(|c| c == first) => u32::try_from(*first).ok(),
        _ => None,
    };
    receipt.turns = turn_stats(records, cap);
    receipt
}

/// agent-core's category string as its `&'static str` (unknown ones are not counted).
fn static_category(category: &str) -> Option<&'static str> {
    AgentError::CATEGORIES
        .iter()
        .copied()
        .find(|c| *c == category)
}

fn turn_stats(records: &[RunRecord], cap: Option<u32>) -> TurnStats {
    let mut stats = TurnStats::default();
    stats.max_llm_calls = cap;
    let mut answered = Vec::new();
    for r in records {
        let calls = r.usage.llm_calls;
        *stats
            .histogram
            .entry(r.ending)
            .or_default()
            .entry(calls)
            .or_insert(0) += 1;
        let capped =
            r.category.as_deref() == Some("max_llm_calls") || cap.is_some_and(|c| calls >= c);
        stats.hit_cap += usize::from(capped);
        if r.ending == Ending::Answered {
            answered.push(calls);
        }
    }
    answered.sort_unstable();
    stats.answered_p95 = nearest_rank(&answered, 0.95);
    stats.suggested_max_llm_calls = stats.answered_p95.map(|p| p.saturating_add(1));
    stats
}

/// Nearest-rank percentile of sorted values (`None` for none), as agent-core computes it.
fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    sorted.get(rank - 1).copied()
}
