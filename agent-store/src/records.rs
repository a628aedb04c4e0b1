//! [`FeedbackStore`] and [`TraceStore`] for [`Store`]: run records, feedback, eval sets,
//! traces.

use agent_core::store::StoreError;
use agent_core::store::{
    EvalExample, EvalFilter, Feedback, FeedbackStore, RunQuery, RunRecord, StoreFuture,
    TraceRecord, TraceStore,
};
use sqlx::{QueryBuilder, Row};

use crate::blob_refs::{Recent, externalize};
use crate::columns::{check_key, column, db_ms};
use crate::db::{on_read_pool, write_tx};
use crate::errors::db_error;
use crate::store::Store;
use crate::writer::RunRow;

fn encode<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::invalid(format!("cannot encode: {e}")))
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::backend(format!("a stored {what} does not decode: {e}")))
}

fn run_row(run: &RunRecord, recent: &Recent) -> Result<RunRow, StoreError> {
    check_key("trace id", &run.trace_id)?;
    let mut blobs = Vec::new();
    let record = externalize(encode(run)?, &mut blobs, recent);
    Ok(RunRow {
        trace_id: run.trace_id.clone(),
        agent: column(&run.agent),
        variant: run.variant.as_deref().map(column),
        fingerprint: column(&run.fingerprint),
        ending: run.ending.as_str(),
        category: run.category.as_deref().map(column),
        thread_id: run.thread.as_deref().map(column),
        started_at_ms: db_ms(run.started_at_ms),
        duration_ms: db_ms(run.duration_ms),
        llm_calls: i64::from(run.usage.llm_calls),
        cost_usd: run.usage.cost_usd.filter(|c| c.is_finite()),
        record: Some(record),
        trace: None,
        blobs,
    })
}

fn trace_row(trace: &TraceRecord, recent: &Recent) -> Result<RunRow, StoreError> {
    check_key("trace id", &trace.trace_id)?;
    let mut blobs = Vec::new();
    let body = externalize(encode(trace)?, &mut blobs, recent);
    Ok(RunRow {
        trace_id: trace.trace_id.clone(),
        agent: column(&trace.agent),
        variant: trace.variant.as_deref().map(column),
        fingerprint: column(&trace.fingerprint),
        ending: trace.ending.as_str(),
        category: trace.category.as_deref().map(column),
        thread_id: trace.thread.as_deref().map(column),
        started_at_ms: db_ms(trace.started_at_ms),
        duration_ms: db_ms(trace.duration_ms),
        llm_calls: i64::from(trace.usage.llm_calls),
        cost_usd: trace.usage.cost_usd.filter(|c| c.is_finite()),
        record: None,
        trace: Some(body),
        blobs,
    })
}

/// A run record from its row: the record JSON, with the feedback table's feedback.
fn run_from(record: &str, feedback: Option<&str>) -> Result<RunRecord, StoreError> {
    let mut run: RunRecord = decode("run", record)?;
    run.feedback = feedback.map(|f| decode("feedback", f)).transpose()?;
    Ok(run)
}

const RUN_SELECT: &str = "SELECT r.record, f.body FROM runs r \
     LEFT JOIN feedback f ON f.trace_id = r.trace_id WHERE r.record IS NOT NULL";

impl Store {
    async fn runs_where(
        &self,
        query: &RunQuery,
        newest_first: bool,
        limit: Option<usize>,
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.shared.ready().await?;
        let rows: Vec<(String, Option<String>)> = on_read_pool!(&self.shared.pools, pool, DB => {
            let mut q = QueryBuilder::<DB>::new(RUN_SELECT);
            if let Some(agent) = &query.agent {
                q.push(" AND r.agent = ").push_bind(column(agent));
            }
            if let Some(variant) = &query.variant {
                q.push(" AND r.variant = ").push_bind(column(variant));
            }
            if let Some(ending) = query.ending {
                q.push(" AND r.ending = ").push_bind(ending.as_str());
            }
            q.push(if newest_first {
                " ORDER BY r.started_at_ms DESC, r.trace_id DESC"
            } else {
                " ORDER BY r.started_at_ms, r.trace_id"
            });
            if let Some(limit) = limit {
                q.push(" LIMIT ").push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
            }
            let rows = q.build().fetch_all(pool).await.map_err(db_error)?;
            rows.iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(db_error)?
        });
        let (mut records, feedback): (Vec<String>, Vec<Option<String>>) = rows.into_iter().unzip();
        self.inline_blobs("run", &mut records).await?;
        records
            .iter()
            .zip(&feedback)
            .map(|(record, feedback)| run_from(record, feedback.as_deref()))
            .collect()
    }
}

impl FeedbackStore for Store {
    fn record<'a>(&'a self, run: &'a RunRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move { self.writer.write(run_row(run, &self.shared.recent)?).await })
    }

    fn attach_feedback<'a>(
        &'a self,
        trace_id: &'a str,
        feedback: &'a Feedback,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            check_key("trace id", trace_id)?;
            // The run may still be queued.
            self.writer.sync().await?;
            let mut feedback = feedback.clone();
            if feedback.given_at_ms == 0 {
                feedback.given_at_ms = now_ms();
            }
            let body = encode(&feedback)?;
            write_tx!(&self.shared, DB, tx => {
                let exists = sqlx::query("SELECT 1 FROM runs WHERE trace_id = $1 AND record IS NOT NULL")
                    .bind(trace_id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .is_some();
                if !exists {
                    return Err(StoreError::not_found(format!("run {trace_id}")));
                }
                sqlx::query(
                    "INSERT INTO feedback (trace_id, rating, given_at_ms, body) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (trace_id) DO UPDATE SET \
                     rating = excluded.rating, given_at_ms = excluded.given_at_ms, \
                     body = excluded.body",
                )
                .bind(trace_id)
                .bind(feedback.rating.map(i64::from))
                .bind(db_ms(feedback.given_at_ms))
                .bind(body.as_str())
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            })
        })
    }

    fn run<'a>(&'a self, trace_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async move {
            self.shared.ready().await?;
            let row: Option<(String, Option<String>)> = on_read_pool!(&self.shared.pools, pool, DB => {
                let row = sqlx::query(&format!("{RUN_SELECT} AND r.trace_id = $1"))
                    .bind(trace_id)
                    .fetch_optional(pool)
                    .await
                    .map_err(db_error)?;
                match row {
                    Some(row) => Some((
                        row.try_get(0).map_err(db_error)?,
                        row.try_get(1).map_err(db_error)?,
                    )),
                    None => None,
                }
            });
            match row {
                Some((record, feedback)) => {
                    let record = self.inline_blob("run", record).await?;
                    run_from(&record, feedback.as_deref()).map(Some)
                }
                None => Ok(None),
            }
        })
    }

    fn runs<'a>(&'a self, query: &'a RunQuery) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(async move { self.runs_where(query, true, Some(query.limit)).await })
    }

    fn eval_set<'a>(&'a self, filter: &'a EvalFilter) -> StoreFuture<'a, Vec<EvalExample>> {
        Box::pin(async move {
            let mut query = RunQuery::new();
            query.agent.clone_from(&filter.agent);
            query.variant.clone_from(&filter.variant);
            let runs = self.runs_where(&query, false, None).await?;
            Ok(runs
                .iter()
                .filter_map(|run| EvalExample::from_record(run, filter))
                .collect())
        })
    }

    fn flush(&self) -> StoreFuture<'_, u64> {
        Box::pin(self.writer.flush())
    }
}

impl TraceStore for Store {
    fn record_trace<'a>(&'a self, trace: &'a TraceRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.writer
                .write(trace_row(trace, &self.shared.recent)?)
                .await
        })
    }

    fn trace<'a>(&'a self, trace_id: &'a str) -> StoreFuture<'a, Option<TraceRecord>> {
        Box::pin(async move {
            self.shared.ready().await?;
            let body: Option<Option<String>> = on_read_pool!(&self.shared.pools, pool, DB => {
                sqlx::query_scalar("SELECT trace FROM runs WHERE trace_id = $1")
                    .bind(trace_id)
                    .fetch_optional(pool)
                    .await
                    .map_err(db_error)?
            });
            match body.flatten() {
                Some(body) => {
                    let body = self.inline_blob("trace", body).await?;
                    decode("trace", &body).map(Some)
                }
                None => Ok(None),
            }
        })
    }

    fn flush(&self) -> StoreFuture<'_, u64> {
        Box::pin(self.writer.flush())
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
