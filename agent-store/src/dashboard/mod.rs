//! Aggregate queries for a dashboard over stored runs (the `agent-dashboard` crate): the
//! counts per day and ending, latency buckets, LLM calls per run, and a filtered page of
//! runs. No query loads the runs it counts. The whole UTC days of a range are read from
//! two daily rollup tables (migration 5: `runs_daily` per agent, day, variant, ending
//! and latency bucket; `runs_daily_turns` per agent, day, variant, ending and LLM
//! calls), which triggers on `runs` keep in the transaction that inserts, replaces or
//! deletes a run; the parts of days at either end of a range are a `GROUP BY` over the
//! covering index `runs_dash_agent` (with the generated columns `tokens`, `partial`
//! and `store_failures`). Only [`Store::runs_page`](crate::Store::runs_page) decodes records, at most one page
//! of them.
//!
//! This file holds what the queries take and give; `queries.rs` holds the queries.

mod queries;

use agent_core::Ending;
use agent_core::store::RunRecord;

/// One day in milliseconds.
pub const DAY_MS: u64 = 86_400_000;

/// The runs an aggregate covers: one agent, optionally one variant, started in
/// `from_ms..to_ms` (ms since the Unix epoch, half open).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunScope {
    /// The agent (config name).
    pub agent: String,
    /// Only this variant label; `None`: every variant (and runs without one).
    pub variant: Option<String>,
    /// The first millisecond (since the Unix epoch) included.
    pub from_ms: u64,
    /// The first millisecond (since the Unix epoch) not included.
    pub to_ms: u64,
}

impl RunScope {
    /// The runs of `agent` started in `from_ms..to_ms` (ms since the Unix epoch).
    pub fn new(agent: impl Into<String>, from_ms: u64, to_ms: u64) -> Self {
        Self {
            agent: agent.into(),
            variant: None,
            from_ms,
            to_ms,
        }
    }

    /// Only runs of this variant.
    #[must_use]
    pub fn variant(mut self, variant: impl Into<String>) -> Self {
        self.variant = Some(variant.into());
        self
    }
}

/// Runs of one day, variant and ending (a row of [`Overview::counts`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct DayCount {
    /// The UTC day: days since the Unix epoch (`started_at_ms / 86_400_000`).
    pub day: i64,
    /// The variant label (`None`: runs without one).
    pub variant: Option<String>,
    /// The ending.
    pub ending: Ending,
    /// Runs.
    pub runs: u64,
    /// Runs whose metadata has `partial` = `true` (partial answers).
    pub partial: u64,
    /// Failed store calls, summed over the runs' metadata `store_failures`.
    pub store_failures: u64,
    /// Input plus output tokens, summed.
    pub tokens: u64,
    /// Cost in USD, summed over the priced runs.
    pub cost_usd: f64,
}

/// Runs of one day and variant in one latency bucket (a row of
/// [`Overview::latency`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencyCount {
    /// The UTC day: days since the Unix epoch (`started_at_ms / 86_400_000`).
    pub day: i64,
    /// The variant label (`None`: runs without one).
    pub variant: Option<String>,
    /// The latency bucket: the run's duration (ms) rounded down to two significant
    /// digits (0-99 ms exactly, then 100, 110, ..., 990, 1000, 1100, ...).
    pub latency_floor_ms: u64,
    /// Runs.
    pub runs: u64,
}

/// What [`Store::overview`](crate::Store::overview) returns: the runs of a scope per day, variant and ending,
/// and their latency histogram per day and variant; both ordered by day.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Overview {
    /// Runs per day, variant and ending, with their sums.
    pub counts: Vec<DayCount>,
    /// Runs per day, variant and latency bucket.
    pub latency: Vec<LatencyCount>,
}

/// Runs by ending and LLM calls (a row of [`Store::turn_counts`](crate::Store::turn_counts)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TurnCount {
    /// The ending.
    pub ending: Ending,
    /// LLM calls (round trips) of each run.
    pub llm_calls: u32,
    /// Whether these runs ended with category `max_llm_calls`.
    pub max_llm_calls_category: bool,
    /// Runs.
    pub runs: u64,
}

/// Which runs [`Store::runs_page`](crate::Store::runs_page) lists; every filter is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFilter {
    /// The agent.
    pub agent: Option<String>,
    /// The variant label.
    pub variant: Option<String>,
    /// The ending.
    pub ending: Option<Ending>,
    /// The error category (for example `max_llm_calls`).
    pub category: Option<String>,
    /// The memory thread.
    pub thread: Option<String>,
    /// Started at or after (ms since the Unix epoch).
    pub from_ms: Option<u64>,
    /// Started before (ms since the Unix epoch).
    pub to_ms: Option<u64>,
    /// Text anywhere in the record (input, output, error, metadata); case-insensitive
    /// for ASCII letters. A scan of the rows in the other filters' range.
    pub text: Option<String>,
    /// The page after this cursor (from [`RunsPage::next`]).
    pub after: Option<PageCursor>,
    /// Runs per page (default 50, at most 500).
    pub limit: usize,
}

impl RunFilter {
    /// No filter, 50 runs per page.
    pub fn new() -> Self {
        Self {
            limit: 50,
            ..Self::default()
        }
    }
}

/// Where a page of runs ends: the last run's start (ms since the Unix epoch) and trace
/// id. Pages go from the newest run to the oldest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PageCursor {
    /// The last listed run's start (ms since the Unix epoch).
    pub started_at_ms: u64,
    /// The last listed run's trace id.
    pub trace_id: String,
}

impl PageCursor {
    /// A cursor after the run that started at `started_at_ms` with `trace_id`.
    pub fn new(started_at_ms: u64, trace_id: impl Into<String>) -> Self {
        Self {
            started_at_ms,
            trace_id: trace_id.into(),
        }
    }
}

/// One page of [`Store::runs_page`](crate::Store::runs_page).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunsPage {
    /// The runs, newest first, with their feedback.
    pub runs: Vec<RunRecord>,
    /// The cursor of the next page, when there are more runs.
    pub next: Option<PageCursor>,
}
