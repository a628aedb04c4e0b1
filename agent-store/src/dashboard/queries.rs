//! The dashboard's queries on [`Store`]: agents, the overview of a scope, LLM calls per
//! run, a page of runs; and how their rows decode.

use std::collections::BTreeMap;

use agent_core::store::RunRecord;
use agent_core::{Ending, store::StoreError};
use sqlx::{QueryBuilder, Row};

use super::{
    DAY_MS, DayCount, LatencyCount, Overview, PageCursor, RunFilter, RunScope, RunsPage, TurnCount,
};
use crate::backend::Backend;
use crate::columns::{column, db_ms};
use crate::db::on_read_pool;
use crate::errors::db_error;
use crate::rollups::LATENCY_BUCKET;
use crate::store::Store;

fn ending_of(text: &str) -> Option<Ending> {
    Ending::ALL.into_iter().find(|e| e.as_str() == text)
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

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
        let (mut records, feedback): (Vec<String>, Vec<Option<String>>) =
            rows.into_iter().take(limit).unzip();
        self.inline_blobs("run", &mut records).await?;
        let mut runs = Vec::with_capacity(records.len());
        for (record, feedback) in records.iter().zip(&feedback) {
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
