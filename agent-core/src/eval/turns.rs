//! [`TurnStats`]: how many LLM calls runs took, per ending, and the `max_llm_calls`
//! the answered runs suggest.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Category, Ending};
use crate::eval::tally::RunTally;
use crate::result::AgentResult;

/// LLM calls per run: a histogram per ending, the cap hits, and a suggested
/// `max_llm_calls`.
///
/// The suggestion is the rule: **the 95th percentile (nearest rank) of `llm_calls` over
/// the answered runs, plus one**. The plus one is for the wrap-up turn: the last round
/// trip a cap allows offers only `submit_output` (docs/loop.md, "Wrap-up turn"), so at a
/// cap of exactly the p95 the slowest of those runs would answer in the forced turn; one
/// more lets them finish as they did. It is `None` when no run answered. Answered runs
/// that used the whole cap were cut short by it, so a suggestion above the current cap
/// says: raise it and run again (a sweep with the raised cap as a variant shows what it
/// buys). With fewer than 20 answered runs the p95 is their maximum.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TurnStats {
    /// `histogram[ending][llm_calls]` = the runs with that ending and that many round
    /// trips (only endings and counts that occurred).
    pub histogram: BTreeMap<Ending, BTreeMap<u32, usize>>,
    /// The runs' cap (`max_llm_calls`), when known: `run_batch` and `sweep` know it,
    /// `Receipt::from_results` does not.
    pub max_llm_calls: Option<u32>,
    /// Runs that hit the cap: ended with category `max_llm_calls`, or, with the cap
    /// known, used all of it whatever their ending (an answer in the wrap-up turn).
    pub hit_cap: usize,
    /// The 95th percentile (nearest rank) of `llm_calls` over the answered runs.
    pub answered_p95: Option<u32>,
    /// The suggested `max_llm_calls`: `answered_p95 + 1` (see the type's docs).
    pub suggested_max_llm_calls: Option<u32>,
}

impl TurnStats {
    /// The turn data of these runs; `cap` is their `max_llm_calls` when known.
    pub fn from_results<T>(results: &[AgentResult<T>], cap: Option<u32>) -> Self {
        let runs: Vec<RunTally> = results.iter().map(RunTally::from).collect();
        Self::from_tallies(&runs, cap)
    }

    /// The turn data of runs as tallied ([`RunTally`]); `cap` is their
    /// `max_llm_calls` when known.
    pub fn from_tallies(runs: &[RunTally], cap: Option<u32>) -> Self {
        Self::from_counts(
            runs.iter().map(|r| {
                let capped = r.category == Some(Category::MaxLlmCalls);
                (r.ending, r.usage.llm_calls, capped, 1)
            }),
            cap,
        )
    }

    /// The turn data of runs counted elsewhere (a database's `GROUP BY`): each item is
    /// `(ending, llm_calls, ended with category max_llm_calls, runs)`; `cap` is their
    /// `max_llm_calls` when known. The same rule as [`from_tallies`](Self::from_tallies)
    /// (which calls this), without one value per run.
    pub fn from_counts(
        counts: impl IntoIterator<Item = (Ending, u32, bool, usize)>,
        cap: Option<u32>,
    ) -> Self {
        let mut stats = TurnStats {
            max_llm_calls: cap,
            ..TurnStats::default()
        };
        let mut answered: BTreeMap<u32, usize> = BTreeMap::new();
        for (ending, calls, max_llm_calls_category, runs) in counts {
            if runs == 0 {
                continue;
            }
            *stats
                .histogram
                .entry(ending)
                .or_default()
                .entry(calls)
                .or_insert(0) += runs;
            let capped = max_llm_calls_category || cap.is_some_and(|c| calls >= c);
            if capped {
                stats.hit_cap += runs;
            }
            if ending == Ending::Answered {
                *answered.entry(calls).or_insert(0) += runs;
            }
        }
        stats.answered_p95 = nearest_rank_counted(&answered, 0.95);
        stats.suggested_max_llm_calls = stats.answered_p95.map(|p| p.saturating_add(1));
        stats
    }

    /// The runs with this ending and this many LLM calls.
    pub fn count(&self, ending: Ending, llm_calls: u32) -> usize {
        self.histogram
            .get(&ending)
            .and_then(|h| h.get(&llm_calls))
            .copied()
            .unwrap_or(0)
    }

    /// One line per ending that occurred: `answered   1x3 2x20 3x5` (LLM calls x runs).
    pub fn histogram_lines(&self) -> Vec<(Ending, String)> {
        self.histogram
            .iter()
            .map(|(ending, h)| {
                let cells: Vec<String> = h.iter().map(|(c, n)| format!("{c}x{n}")).collect();
                (*ending, cells.join(" "))
            })
            .collect()
    }
}

/// As [`nearest_rank`], over values with their counts (`value -> how many`).
fn nearest_rank_counted(counts: &BTreeMap<u32, usize>, q: f64) -> Option<u32> {
    let n: usize = counts.values().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    let mut seen = 0;
    for (value, count) in counts {
        seen += count;
        if seen >= rank {
            return Some(*value);
        }
    }
    counts.keys().next_back().copied()
}

/// The value at quantile `q` (`0.0..=1.0`) of sorted values, by nearest rank: the
/// `ceil(q × n)`-th smallest (at least the first). `None` for no values.
pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::usage::Usage;

    #[test]
    fn counts_give_what_tallies_give() {
        let mut runs = Vec::new();
        for i in 0..57u32 {
            let ending = [Ending::Answered, Ending::Exhausted, Ending::Stuck][(i % 3) as usize];
            let usage = Usage {
                llm_calls: 1 + (i * 7) % 9,
                ..Usage::default()
            };
            let category = i.is_multiple_of(11).then_some(Category::MaxLlmCalls);
            runs.push(RunTally::new(ending, usage, Duration::ZERO).with_category(category));
        }
        let from_tallies = TurnStats::from_tallies(&runs, Some(8));
        let mut counts: BTreeMap<(Ending, u32, bool), usize> = BTreeMap::new();
        for r in &runs {
            let capped = r.category == Some(Category::MaxLlmCalls);
            *counts
                .entry((r.ending, r.usage.llm_calls, capped))
                .or_insert(0) += 1;
        }
        let from_counts = TurnStats::from_counts(
            counts.into_iter().map(|((e, c, m), n)| (e, c, m, n)),
            Some(8),
        );
        assert_eq!(from_counts, from_tallies);
        assert_eq!(from_counts.answered_p95, Some(7));
        assert_eq!(from_counts.suggested_max_llm_calls, Some(8));
    }
}
