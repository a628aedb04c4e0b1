//! Aggregate queries for a dashboard over stored runs (the `agent-dashboard` crate): the
//! counts per day and ending, latency buckets, LLM calls per run, and a filtered page of
//! runs. No query loads the runs it counts. The whole UTC days of a range are read from
//! two daily rollup tables (migration 5: `runs_daily` per agent, day, variant, ending
//! and latency bucket; `runs_daily_turns` per agent, day, variant, ending and LLM
//! calls), which triggers on `runs` keep in the transaction that inserts, replaces or
//! deletes a run; the parts of days at either end of a range are a `GROUP BY` over the
//! covering index `runs_dash_agent` (with the generated columns `tokens`, `partial`
//! and `store_failures`). Only [`Store::runs_page`] decodes records, at most one page
//! of them.

use std::collections::BTreeMap;

use agent_core::store::RunRecord;
use agent_core::{Ending, StoreError};
use sqlx::{QueryBuilder, Row};

use crate::Store;
use crate::db::{Backend, column, db_error, db_ms, on_read_pool};

/// One day in milliseconds.
pub const DAY_MS: u64 = 86_400_000;

/// Migration 5 on SQLite: virtual columns computed from the record's JSON (stored only
/// in the index), the indexes of the dashboard's queries, and the daily rollups with
/// their triggers (`{add NEW 1}` and `{add OLD -1}` are filled in by [`migration_5`]).
pub(crate) const MIGRATION_5_SQLITE: &str = "
ALTER TABLE runs ADD COLUMN tokens BIGINT GENERATED ALWAYS AS (
    CASE WHEN json_valid(record) THEN
        COALESCE(json_extract(record, '$.usage.input_tokens'), 0)
        + COALESCE(json_extract(record, '$.usage.output_tokens'), 0)
    END) VIRTUAL;
ALTER TABLE runs ADD COLUMN partial BIGINT GENERATED ALWAYS AS (
    CASE WHEN json_valid(record) THEN
        json_extract(record, '$.metadata.partial') = 'true'
    END) VIRTUAL;
ALTER TABLE runs ADD COLUMN store_failures BIGINT GENERATED ALWAYS AS (
    CASE WHEN json_valid(record) THEN
        CAST(COALESCE(json_extract(record, '$.metadata.store_failures'), 0) AS INTEGER)
    END) VIRTUAL;
CREATE INDEX IF NOT EXISTS runs_dash_agent ON runs (agent, started_at_ms, variant, ending,
    duration_ms, cost_usd, tokens, partial, store_failures, llm_calls, category);
CREATE INDEX IF NOT EXISTS runs_dash_ending ON runs (ending, started_at_ms);
CREATE INDEX IF NOT EXISTS runs_dash_thread ON runs (thread_id, started_at_ms);
CREATE INDEX IF NOT EXISTS runs_dash_category ON runs (category, started_at_ms);
CREATE TABLE IF NOT EXISTS runs_daily (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    ending TEXT NOT NULL,
    runs BIGINT NOT NULL,
    partial BIGINT NOT NULL,
    store_failures BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent, day, variant_key, ending)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs_daily_latency (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    latency_floor_ms BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    PRIMARY KEY (agent, day, variant_key, latency_floor_ms)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs_daily_turns (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    ending TEXT NOT NULL,
    llm_calls BIGINT NOT NULL,
    capped BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    PRIMARY KEY (agent, day, variant_key, ending, llm_calls, capped)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS runs_rollup_insert AFTER INSERT ON runs BEGIN
    {add NEW 1}
END;
CREATE TRIGGER IF NOT EXISTS runs_rollup_update AFTER UPDATE ON runs
WHEN OLD.agent IS NOT NEW.agent OR OLD.variant IS NOT NEW.variant
    OR OLD.ending IS NOT NEW.ending OR OLD.category IS NOT NEW.category
    OR OLD.started_at_ms IS NOT NEW.started_at_ms OR OLD.duration_ms IS NOT NEW.duration_ms
    OR OLD.llm_calls IS NOT NEW.llm_calls OR OLD.cost_usd IS NOT NEW.cost_usd
    OR OLD.record IS NOT NEW.record
BEGIN
    {add OLD -1}
    {add NEW 1}
END;
CREATE TRIGGER IF NOT EXISTS runs_rollup_delete AFTER DELETE ON runs BEGIN
    {add OLD -1}
END;
";

/// Migration 5 on PostgreSQL: stored generated columns through functions that never
/// fail: PostgreSQL's JSON cannot hold `\u0000`, so it is replaced (by `\ufffd`, in
/// string values only) before the cast, and any other failure gives NULL instead of
/// failing the insert. The same indexes and rollups as on SQLite; one trigger function.
pub(crate) const MIGRATION_5_POSTGRES: &str = "
CREATE OR REPLACE FUNCTION runs_json_bigint(record TEXT, path TEXT[]) RETURNS BIGINT
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF record IS NULL THEN RETURN NULL; END IF;
    RETURN (replace(record, '\\u0000', '\\ufffd')::json #>> path)::bigint;
EXCEPTION WHEN others THEN RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION runs_json_text(record TEXT, path TEXT[]) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF record IS NULL THEN RETURN NULL; END IF;
    RETURN replace(record, '\\u0000', '\\ufffd')::json #>> path;
EXCEPTION WHEN others THEN RETURN NULL;
END $$;
ALTER TABLE runs ADD COLUMN tokens BIGINT GENERATED ALWAYS AS (
    COALESCE(runs_json_bigint(record, '{usage,input_tokens}'), 0)
    + COALESCE(runs_json_bigint(record, '{usage,output_tokens}'), 0)) STORED;
ALTER TABLE runs ADD COLUMN partial BIGINT GENERATED ALWAYS AS (
    CASE WHEN runs_json_text(record, '{metadata,partial}') = 'true' THEN 1 ELSE 0 END) STORED;
ALTER TABLE runs ADD COLUMN store_failures BIGINT GENERATED ALWAYS AS (
    COALESCE(runs_json_bigint(record, '{metadata,store_failures}'), 0)) STORED;
CREATE INDEX IF NOT EXISTS runs_dash_agent ON runs (agent, started_at_ms, variant, ending,
    duration_ms, cost_usd, tokens, partial, store_failures, llm_calls, category);
CREATE INDEX IF NOT EXISTS runs_dash_ending ON runs (ending, started_at_ms);
CREATE INDEX IF NOT EXISTS runs_dash_thread ON runs (thread_id, started_at_ms);
CREATE INDEX IF NOT EXISTS runs_dash_category ON runs (category, started_at_ms);
CREATE TABLE IF NOT EXISTS runs_daily (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    ending TEXT NOT NULL,
    runs BIGINT NOT NULL,
    partial BIGINT NOT NULL,
    store_failures BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent, day, variant_key, ending)
);
CREATE TABLE IF NOT EXISTS runs_daily_latency (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    latency_floor_ms BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    PRIMARY KEY (agent, day, variant_key, latency_floor_ms)
);
CREATE TABLE IF NOT EXISTS runs_daily_turns (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    ending TEXT NOT NULL,
    llm_calls BIGINT NOT NULL,
    capped BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    PRIMARY KEY (agent, day, variant_key, ending, llm_calls, capped)
);
CREATE OR REPLACE FUNCTION runs_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND (OLD.agent, OLD.variant, OLD.ending, OLD.category,
        OLD.started_at_ms, OLD.duration_ms, OLD.llm_calls, OLD.cost_usd, OLD.tokens,
        OLD.partial, OLD.store_failures) IS NOT DISTINCT FROM (NEW.agent, NEW.variant,
        NEW.ending, NEW.category, NEW.started_at_ms, NEW.duration_ms, NEW.llm_calls,
        NEW.cost_usd, NEW.tokens, NEW.partial, NEW.store_failures) THEN
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        {add OLD -1}
    END IF;
    IF TG_OP <> 'DELETE' THEN
        {add NEW 1}
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_rollup AFTER INSERT OR UPDATE OR DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_rollup();
";

/// The statements that add one run (`{row}` = `NEW`, `{sign}` = `1`) to the rollups
/// or take it away (`OLD`, `-1`), in the triggers of both backends.
const ROLLUP_ADD: &str =
    "INSERT INTO runs_daily VALUES ({row}.agent, {row}.started_at_ms / 86400000,
        {variant_key}, {row}.ending, {sign}, {sign} * COALESCE({row}.partial, 0),
        {sign} * COALESCE({row}.store_failures, 0), {sign} * COALESCE({row}.tokens, 0),
        {sign} * COALESCE({row}.cost_usd, 0))
    ON CONFLICT (agent, day, variant_key, ending) DO UPDATE SET
        runs = runs_daily.runs + excluded.runs,
        partial = runs_daily.partial + excluded.partial,
        store_failures = runs_daily.store_failures + excluded.store_failures,
        tokens = runs_daily.tokens + excluded.tokens,
        cost_usd = runs_daily.cost_usd + excluded.cost_usd;
    INSERT INTO runs_daily_latency VALUES ({row}.agent, {row}.started_at_ms / 86400000,
        {variant_key}, {bucket}, {sign})
    ON CONFLICT (agent, day, variant_key, latency_floor_ms) DO UPDATE SET
        runs = runs_daily_latency.runs + excluded.runs;
    INSERT INTO runs_daily_turns VALUES ({row}.agent, {row}.started_at_ms / 86400000,
        {variant_key}, {row}.ending, {row}.llm_calls,
        CASE WHEN {row}.category = 'max_llm_calls' THEN 1 ELSE 0 END, {sign})
    ON CONFLICT (agent, day, variant_key, ending, llm_calls, capped) DO UPDATE SET
        runs = runs_daily_turns.runs + excluded.runs;";

/// Migration 5 for `backend`: the templates above with the rollup statements filled in.
pub(crate) fn migration_5(postgres: bool) -> String {
    let template = if postgres {
        MIGRATION_5_POSTGRES
    } else {
        MIGRATION_5_SQLITE
    };
    let add = |row: &str, sign: &str| {
        ROLLUP_ADD
            .replace(
                "{variant_key}",
                "CASE WHEN {row}.variant IS NULL THEN '' ELSE '=' || {row}.variant END",
            )
            .replace(
                "{bucket}",
                &LATENCY_BUCKET.replace("duration_ms", &format!("{row}.duration_ms")),
            )
            .replace("{row}", row)
            .replace("{sign}", sign)
    };
    template
        .replace("{add NEW 1}", &add("NEW", "1"))
        .replace("{add OLD -1}", &add("OLD", "-1"))
}

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

/// What [`Store::overview`] returns: the runs of a scope per day, variant and ending,
/// and their latency histogram per day and variant; both ordered by day.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Overview {
    /// Runs per day, variant and ending, with their sums.
    pub counts: Vec<DayCount>,
    /// Runs per day, variant and latency bucket.
    pub latency: Vec<LatencyCount>,
}

/// Runs by ending and LLM calls (a row of [`Store::turn_counts`]).
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

/// Which runs [`Store::runs_page`] lists; every filter is optional.
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

/// One page of [`Store::runs_page`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunsPage {
    /// The runs, newest first, with their feedback.
    pub runs: Vec<RunRecord>,
    /// The cursor of the next page, when there are more runs.
    pub next: Option<PageCursor>,
}

fn ending_of(text: &str) -> Option<Ending> {
    Ending::ALL.into_iter().find(|e| e.as_str() == text)
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The latency bucket of `duration_ms` in SQL (integer division on both backends).
const LATENCY_BUCKET: &str = "CASE WHEN duration_ms < 100 THEN duration_ms \
     WHEN duration_ms < 1000 THEN duration_ms / 10 * 10 \
     WHEN duration_ms < 10000 THEN duration_ms / 100 * 100 \
     WHEN duration_ms < 100000 THEN duration_ms / 1000 * 1000 \
     WHEN duration_ms < 1000000 THEN duration_ms / 10000 * 10000 \
     WHEN duration_ms < 10000000 THEN duration_ms / 100000 * 100000 \
     ELSE duration_ms / 1000000 * 1000000 END";

impl Store {
    /// The agents with stored runs, in name order (a loose index scan: one index probe
    /// per agent).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the database cannot be reached;
    /// [`StoreError::Backend`] when it refuses the query.
    pub async fn agents(&self) -> Result<Vec<String>, StoreError> {
        self.shared.ready().await?;
        let sql = "WITH RECURSIVE a(name) AS (SELECT MIN(agent) FROM runs \
             UNION ALL SELECT (SELECT MIN(agent) FROM runs WHERE agent > a.name) FROM a \
             WHERE a.name IS NOT NULL) SELECT name FROM a WHERE name IS NOT NULL";
        let names: Vec<String> = on_read_pool!(&self.shared.pools, pool, DB => {
            sqlx::query_scalar(sql).fetch_all(pool).await.map_err(db_error)?
        });
        Ok(names)
    }

    /// Runs of `scope` per UTC day, variant and ending, with their partial answers,
    /// store failures, tokens and cost, and per UTC day, variant and latency bucket
    /// (see [`Overview`]). The whole UTC days of the range are read from the daily
    /// rollups `runs_daily` and `runs_daily_latency` (kept by triggers on `runs`, in the
    /// transaction that writes the run); the parts of days at either end, if any, are a
    /// `GROUP BY` over the covering index `runs_dash_agent`.
    ///
    /// # Errors
    /// As [`agents`](Self::agents).
    pub async fn overview(&self, scope: &RunScope) -> Result<Overview, StoreError> {
        self.shared.ready().await?;
        let split = Split::of(scope);
        let mut out = Overview::default();
        if let Some((first, end)) = split.days {
            on_read_pool!(&self.shared.pools, pool, DB => {
                let mut q = QueryBuilder::<DB>::new(
                    "SELECT day, CASE WHEN variant_key = '' THEN NULL ELSE substr(variant_key, 2) END, \
                     ending, runs, partial, store_failures, tokens, cost_usd \
                     FROM runs_daily WHERE agent = ",
                );
                push_days(&mut q, scope, first, end);
                let rows = q.build().fetch_all(pool).await.map_err(db_error)?;
                out.counts.extend(day_counts(&rows)?);
                let mut q = QueryBuilder::<DB>::new(
                    "SELECT day, CASE WHEN variant_key = '' THEN NULL ELSE substr(variant_key, 2) END, \
                     latency_floor_ms, runs FROM runs_daily_latency WHERE agent = ",
                );
                push_days(&mut q, scope, first, end);
                let rows = q.build().fetch_all(pool).await.map_err(db_error)?;
                out.latency.extend(latency_counts(&rows)?);
            });
        }
        for (from, to) in split.edges {
            let edge = RunScope {
                from_ms: from,
                to_ms: to,
                ..scope.clone()
            };
            on_read_pool!(&self.shared.pools, pool, DB => {
                let mut q = QueryBuilder::<DB>::new(format!(
                    "SELECT started_at_ms / {DAY_MS} AS day, variant, ending, \
                     COUNT(*), CAST(COALESCE(SUM(partial), 0) AS BIGINT), \
                     CAST(COALESCE(SUM(store_failures), 0) AS BIGINT), \
                     CAST(COALESCE(SUM(tokens), 0) AS BIGINT), \
                     CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION) FROM runs WHERE agent = "
                ));
                push_scope(&mut q, &edge);
                q.push(" GROUP BY 1, 2, 3");
                let rows = q.build().fetch_all(pool).await.map_err(db_error)?;
                out.counts.extend(day_counts(&rows)?);
                let mut q = QueryBuilder::<DB>::new(format!(
                    "SELECT started_at_ms / {DAY_MS} AS day, variant, {LATENCY_BUCKET} AS bucket, \
                     COUNT(*) FROM runs WHERE agent = "
                ));
                push_scope(&mut q, &edge);
                q.push(" GROUP BY 1, 2, 3");
                let rows = q.build().fetch_all(pool).await.map_err(db_error)?;
                out.latency.extend(latency_counts(&rows)?);
            });
        }
        out.counts.sort_by_key(|r| r.day);
        out.latency.sort_by_key(|r| r.day);
        Ok(out)
    }

    /// Runs of `scope` by ending, LLM calls and whether their category is
    /// `max_llm_calls` (the input of `TurnStats::from_counts`); ordered by LLM calls.
    /// Whole days from the rollup `runs_daily_turns`, the parts of days at either end
    /// from the covering index, as [`overview`](Self::overview).
    ///
    /// # Errors
    /// As [`agents`](Self::agents).
    pub async fn turn_counts(&self, scope: &RunScope) -> Result<Vec<TurnCount>, StoreError> {
        self.shared.ready().await?;
        let split = Split::of(scope);
        let mut sums: BTreeMap<(u32, Ending, bool), u64> = BTreeMap::new();
        let mut add = |rows: Vec<TurnCount>| {
            for t in rows {
                *sums
                    .entry((t.llm_calls, t.ending, t.max_llm_calls_category))
                    .or_insert(0) += t.runs;
            }
        };
        if let Some((first, end)) = split.days {
            let rows: Vec<TurnCount> = on_read_pool!(&self.shared.pools, pool, DB => {
                let mut q = QueryBuilder::<DB>::new(
                    "SELECT ending, llm_calls, CAST(capped AS INTEGER), CAST(SUM(runs) AS BIGINT) \
                     FROM runs_daily_turns WHERE agent = ",
                );
                push_days(&mut q, scope, first, end);
                q.push(" GROUP BY 1, 2, 3");
                let rows = q.build().fetch_all(pool).await.map_err(db_error)?;
                turn_counts(&rows)?
            });
            add(rows);
        }
        for (from, to) in split.edges {
            let edge = RunScope {
                from_ms: from,
                to_ms: to,
                ..scope.clone()
            };
            let rows: Vec<TurnCount> = on_read_pool!(&self.shared.pools, pool, DB => {
                let mut q = QueryBuilder::<DB>::new(
                    "SELECT ending, llm_calls, \
                     CASE WHEN category = 'max_llm_calls' THEN 1 ELSE 0 END AS capped, COUNT(*) \
                     FROM runs WHERE agent = ",
                );
                push_scope(&mut q, &edge);
                q.push(" GROUP BY 1, 2, 3");
                let rows = q.build().fetch_all(pool).await.map_err(db_error)?;
                turn_counts(&rows)?
            });
            add(rows);
        }
        Ok(sums
            .into_iter()
            .filter(|(_, runs)| *runs > 0)
            .map(|((llm_calls, ending, capped), runs)| TurnCount {
                ending,
                llm_calls,
                max_llm_calls_category: capped,
                runs,
            })
            .collect())
    }

    /// One page of the runs under `filter`, newest first (keyset paging on
    /// `(started_at_ms, trace_id)`: a page costs the same however deep it is).
    ///
    /// # Errors
    /// As [`agents`](Self::agents); [`StoreError::Backend`] when a stored record does
    /// not decode.
    pub async fn runs_page(&self, filter: &RunFilter) -> Result<RunsPage, StoreError> {
        self.shared.ready().await?;
        let limit = match filter.limit {
            0 => 50,
            n => n.min(500),
        };
        let postgres = self.shared.backend == Backend::Postgres;
        let rows: Vec<(String, Option<String>)> = on_read_pool!(&self.shared.pools, pool, DB => {
            let mut q = QueryBuilder::<DB>::new(
                "SELECT r.record, f.body FROM runs r LEFT JOIN feedback f \
                 ON f.trace_id = r.trace_id WHERE r.record IS NOT NULL",
            );
            if let Some(agent) = &filter.agent {
                q.push(" AND r.agent = ").push_bind(column(agent));
            }
            if let Some(variant) = &filter.variant {
                q.push(" AND r.variant = ").push_bind(column(variant));
            }
            if let Some(ending) = filter.ending {
                q.push(" AND r.ending = ").push_bind(ending.as_str());
            }
            if let Some(category) = &filter.category {
                q.push(" AND r.category = ").push_bind(column(category));
            }
            if let Some(thread) = &filter.thread {
                q.push(" AND r.thread_id = ").push_bind(column(thread));
            }
            if let Some(from) = filter.from_ms {
                q.push(" AND r.started_at_ms >= ").push_bind(db_ms(from));
            }
            if let Some(to) = filter.to_ms {
                q.push(" AND r.started_at_ms < ").push_bind(db_ms(to));
            }
            if let Some(text) = filter.text.as_deref().filter(|t| !t.is_empty()) {
                q.push(if postgres { " AND r.record ILIKE " } else { " AND r.record LIKE " })
                    .push_bind(like_pattern(text))
                    .push(" ESCAPE '\\'");
            }
            if let Some(after) = &filter.after {
                let at = db_ms(after.started_at_ms);
                q.push(" AND (r.started_at_ms < ").push_bind(at)
                    .push(" OR (r.started_at_ms = ").push_bind(at)
                    .push(" AND r.trace_id < ").push_bind(after.trace_id.clone())
                    .push("))");
            }
            q.push(" ORDER BY r.started_at_ms DESC, r.trace_id DESC LIMIT ")
                .push_bind(i64::try_from(limit + 1).unwrap_or(i64::MAX));
            let rows = q.build().fetch_all(pool).await.map_err(db_error)?;
            rows.iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(db_error)?
        });
        let more = rows.len() > limit;
        let mut runs = Vec::with_capacity(limit.min(rows.len()));
        for (record, feedback) in rows.iter().take(limit) {
            let mut run: RunRecord = serde_json::from_str(record)
                .map_err(|e| StoreError::backend(format!("a stored run does not decode: {e}")))?;
            run.feedback = feedback
                .as_deref()
                .map(serde_json::from_str)
                .transpose()
                .map_err(|e| {
                    StoreError::backend(format!("a stored feedback does not decode: {e}"))
                })?;
            runs.push(run);
        }
        let next = match runs.last() {
            Some(last) if more => Some(PageCursor::new(last.started_at_ms, &last.trace_id)),
            _ => None,
        };
        Ok(RunsPage { runs, next })
    }
}

/// A scope's range cut into whole UTC days (read from the rollups) and the parts of
/// days before and after them (read from `runs`).
#[derive(Debug, PartialEq, Eq)]
struct Split {
    /// Whole days `first..end` (days since the Unix epoch), if any.
    days: Option<(i64, i64)>,
    /// Ranges in ms (half open, none empty) outside the whole days.
    edges: Vec<(u64, u64)>,
}

impl Split {
    fn of(scope: &RunScope) -> Self {
        let (from, to) = (scope.from_ms, scope.to_ms);
        if from >= to {
            return Self {
                days: None,
                edges: Vec::new(),
            };
        }
        let first = from.div_ceil(DAY_MS);
        let end = to / DAY_MS;
        if first >= end {
            return Self {
                days: None,
                edges: vec![(from, to)],
            };
        }
        let mut edges = Vec::new();
        if from < first * DAY_MS {
            edges.push((from, first * DAY_MS));
        }
        if end * DAY_MS < to {
            edges.push((end * DAY_MS, to));
        }
        let day = |d: u64| i64::try_from(d).unwrap_or(i64::MAX);
        Self {
            days: Some((day(first), day(end))),
            edges,
        }
    }
}

/// The rollups' key of a variant label (`''` stands for no variant).
fn variant_key(variant: &str) -> String {
    format!("={}", column(variant))
}

/// `$agent [AND variant_key = $key] AND day >= $first AND day < $end AND runs <> 0`,
/// the `agent = ` already pushed (the rollups' scope).
fn push_days<DB: sqlx::Database>(
    q: &mut QueryBuilder<'_, DB>,
    scope: &RunScope,
    first: i64,
    end: i64,
) where
    String: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    q.push_bind(column(&scope.agent));
    if let Some(variant) = &scope.variant {
        q.push(" AND variant_key = ")
            .push_bind(variant_key(variant));
    }
    q.push(" AND day >= ")
        .push_bind(first)
        .push(" AND day < ")
        .push_bind(end)
        .push(" AND runs <> 0");
}

/// Rows of (day, variant, ending, runs, partial, store failures, tokens, cost).
fn day_counts<R: Row>(rows: &[R]) -> Result<Vec<DayCount>, StoreError>
where
    usize: sqlx::ColumnIndex<R>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    f64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let ending: String = row.try_get(2).map_err(db_error)?;
        let Some(ending) = ending_of(&ending) else {
            continue;
        };
        out.push(DayCount {
            day: row.try_get(0).map_err(db_error)?,
            variant: row.try_get(1).map_err(db_error)?,
            ending,
            runs: unsigned(row.try_get(3).map_err(db_error)?),
            partial: unsigned(row.try_get(4).map_err(db_error)?),
            store_failures: unsigned(row.try_get(5).map_err(db_error)?),
            tokens: unsigned(row.try_get(6).map_err(db_error)?),
            cost_usd: row.try_get(7).map_err(db_error)?,
        });
    }
    Ok(out)
}

/// Rows of (day, variant, latency bucket, runs).
fn latency_counts<R: Row>(rows: &[R]) -> Result<Vec<LatencyCount>, StoreError>
where
    usize: sqlx::ColumnIndex<R>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.push(LatencyCount {
            day: row.try_get(0).map_err(db_error)?,
            variant: row.try_get(1).map_err(db_error)?,
            latency_floor_ms: unsigned(row.try_get(2).map_err(db_error)?),
            runs: unsigned(row.try_get(3).map_err(db_error)?),
        });
    }
    Ok(out)
}

/// Rows of (ending, LLM calls, capped as 0 or 1, runs).
fn turn_counts<R: Row>(rows: &[R]) -> Result<Vec<TurnCount>, StoreError>
where
    usize: sqlx::ColumnIndex<R>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i32: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let ending: String = row.try_get(0).map_err(db_error)?;
        let Some(ending) = ending_of(&ending) else {
            continue;
        };
        let calls: i64 = row.try_get(1).map_err(db_error)?;
        let capped: i32 = row.try_get(2).map_err(db_error)?;
        out.push(TurnCount {
            ending,
            llm_calls: u32::try_from(calls).unwrap_or(u32::MAX),
            max_llm_calls_category: capped == 1,
            runs: unsigned(row.try_get(3).map_err(db_error)?),
        });
    }
    Ok(out)
}

/// `agent = $1 [AND variant = $2] AND started_at_ms >= $3 AND started_at_ms < $4`, the
/// `agent = ` already pushed.
fn push_scope<DB: sqlx::Database>(q: &mut QueryBuilder<'_, DB>, scope: &RunScope)
where
    String: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    q.push_bind(column(&scope.agent));
    if let Some(variant) = &scope.variant {
        q.push(" AND variant = ").push_bind(column(variant));
    }
    q.push(" AND started_at_ms >= ")
        .push_bind(db_ms(scope.from_ms))
        .push(" AND started_at_ms < ")
        .push_bind(db_ms(scope.to_ms));
}

/// `%text%` with `%`, `_` and `\` escaped (the query says `ESCAPE '\'`).
fn like_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('%');
    for c in column(text).chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}
