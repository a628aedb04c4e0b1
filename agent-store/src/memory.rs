//! [`Memory`] for [`Store`]: threads as numbered messages plus per-thread totals.
//!
//! An append is one transaction: claim the run's trace id in `thread_runs` (a second
//! append of the same run stops there), bump the thread's totals with an upsert whose
//! `RETURNING messages` gives the new message count (the row lock orders concurrent
//! appends on PostgreSQL; SQLite has one writer), then insert the messages numbered
//! after the previous ones. A run that summarized the thread's older messages sets the
//! thread's `summary` and the last message it covers (`summary_upto`) in the same
//! transaction; a load then reads only the messages after it.
//!
//! A claim (one run at a time per thread, C38) is one upsert into `thread_claims` that
//! takes the row only when it is free, its lease ran out, or the run holds it already:
//! the database decides, so runs of other processes and other store handles wait too.

use std::time::Duration;

use agent_core::store::{Memory, StoreFuture, ThreadEntry, ThreadState};
use agent_core::{llm::Message, store::StoreError};
use sqlx::{QueryBuilder, Row};

use crate::blob_refs::{externalize, insert_blobs};
use crate::columns::{check_key, db_ms};
use crate::db::{on_read_pool, write_tx};
use crate::errors::db_error;
use crate::store::Store;
use crate::writer::chunks;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Memory for Store {
    fn claim<'a>(
        &'a self,
        thread: &'a str,
        run: &'a str,
        lease: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            check_key("thread id", thread)?;
            check_key("trace id", run)?;
            let now = now_ms();
            let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
            let until = db_ms(now.saturating_add(lease_ms));
            let now = db_ms(now);
            self.shared.ready().await?;
            write_tx!(&self.shared, DB, tx => {
                sqlx::query(
                    "INSERT INTO thread_claims (thread_id, run_id, expires_at_ms) \
                     VALUES ($1, $2, $3) ON CONFLICT (thread_id) DO UPDATE SET \
                     run_id = excluded.run_id, expires_at_ms = excluded.expires_at_ms \
                     WHERE thread_claims.run_id = excluded.run_id \
                     OR thread_claims.expires_at_ms <= $4",
                )
                .bind(thread)
                .bind(run)
                .bind(until)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?
                .rows_affected()
                    == 1
            })
        })
    }

    fn release<'a>(&'a self, thread: &'a str, run: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            check_key("thread id", thread)?;
            check_key("trace id", run)?;
            self.shared.ready().await?;
            write_tx!(&self.shared, DB, tx => {
                sqlx::query("DELETE FROM thread_claims WHERE thread_id = $1 AND run_id = $2")
                    .bind(thread)
                    .bind(run)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
            })
        })
    }

    fn load<'a>(&'a self, thread: &'a str, max_messages: usize) -> StoreFuture<'a, ThreadState> {
        Box::pin(async move {
            check_key("thread id", thread)?;
            self.shared.ready().await?;
            let limit = i64::try_from(max_messages).unwrap_or(i64::MAX);
            type Totals = (i64, i64, Option<String>, i64);
            let (totals, mut bodies): (Option<Totals>, Vec<String>) = on_read_pool!(&self.shared.pools, pool, DB => {
                let mut tx = pool.begin().await.map_err(db_error)?;
                let totals = sqlx::query(
                    "SELECT llm_calls, runs, summary, summary_upto FROM threads WHERE thread_id = $1",
                )
                    .bind(thread)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .map(|row| {
                        Ok::<_, sqlx::Error>((
                            row.try_get(0)?,
                            row.try_get(1)?,
                            row.try_get(2)?,
                            row.try_get(3)?,
                        ))
                    })
                    .transpose()
                    .map_err(db_error)?;
                // Only the messages after what the summary covers.
                let upto = totals.as_ref().map_or(0, |t: &Totals| t.3);
                let bodies: Vec<String> = sqlx::query_scalar(
                    "SELECT body FROM thread_messages WHERE thread_id = $1 AND seq > $3 \
                     ORDER BY seq DESC LIMIT $2",
                )
                .bind(thread)
                .bind(limit)
                .bind(upto)
                .fetch_all(&mut *tx)
                .await
                .map_err(db_error)?;
                tx.commit().await.map_err(db_error)?;
                (totals, bodies)
            });
            self.inline_blobs("message", &mut bodies).await?;
            let mut messages = bodies
                .iter()
                .rev()
                .map(|b| {
                    serde_json::from_str::<Message>(b).map_err(|e| {
                        StoreError::backend(format!("a stored message does not decode: {e}"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            messages.shrink_to_fit();
            let (llm_calls, runs, summary, _) = totals.unwrap_or((0, 0, None, 0));
            Ok(ThreadState::new(
                messages,
                u64::try_from(llm_calls).unwrap_or(0),
                u64::try_from(runs).unwrap_or(0),
            )
            .with_summary(summary))
        })
    }

    fn append<'a>(&'a self, thread: &'a str, entry: &'a ThreadEntry) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            check_key("thread id", thread)?;
            check_key("trace id", &entry.trace_id)?;
            let mut blobs = Vec::new();
            let bodies = entry
                .messages
                .iter()
                .map(|m| {
                    serde_json::to_string(m)
                        .map(|b| externalize(b, &mut blobs, &self.shared.recent))
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::invalid(format!("cannot encode a message: {e}")))?;
            let n = i64::try_from(bodies.len()).unwrap_or(i64::MAX);
            let calls = i64::try_from(entry.llm_calls).unwrap_or(i64::MAX);
            let now = db_ms(now_ms());
            self.shared.ready().await?;
            write_tx!(&self.shared, DB, tx => {
                let claimed = sqlx::query(
                    "INSERT INTO thread_runs (trace_id, thread_id, llm_calls, appended_at_ms) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (trace_id) DO NOTHING",
                )
                .bind(entry.trace_id.as_str())
                .bind(thread)
                .bind(calls)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?
                .rows_affected();
                if claimed == 0 {
                    // Appended before: nothing to do.
                    tx.commit().await.map_err(db_error)?;
                    return Ok(());
                }
                let total: i64 = sqlx::query_scalar(
                    "INSERT INTO threads (thread_id, llm_calls, runs, messages, updated_at_ms) \
                     VALUES ($1, $2, 1, $3, $4) ON CONFLICT (thread_id) DO UPDATE SET \
                     llm_calls = threads.llm_calls + excluded.llm_calls, \
                     runs = threads.runs + 1, \
                     messages = threads.messages + excluded.messages, \
                     updated_at_ms = excluded.updated_at_ms \
                     RETURNING messages",
                )
                .bind(thread)
                .bind(calls)
                .bind(n)
                .bind(now)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
                let base = total - n;
                insert_blobs!(tx, DB, blobs.iter());
                if let Some(summary) = &entry.summary {
                    // It covers the messages before this entry but the newest `kept`.
                    let kept = i64::try_from(summary.kept).unwrap_or(i64::MAX);
                    sqlx::query(
                        "UPDATE threads SET summary = $2, \
                         summary_upto = CASE WHEN summary_upto > $3 THEN summary_upto ELSE $3 END \
                         WHERE thread_id = $1",
                    )
                    .bind(thread)
                    .bind(summary.text.as_str())
                    .bind(base.saturating_sub(kept).max(0))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                }
                let numbered: Vec<(i64, &String)> = (1i64..).map(|i| base + i).zip(&bodies).collect();
                for chunk in chunks(&numbered) {
                    let mut q = QueryBuilder::<DB>::new(
                        "INSERT INTO thread_messages (thread_id, seq, trace_id, body) ",
                    );
                    q.push_values(chunk, |mut b, (seq, body)| {
                        b.push_bind(thread)
                            .push_bind(*seq)
                            .push_bind(entry.trace_id.as_str())
                            .push_bind(body.as_str());
                    });
                    q.build().execute(&mut *tx).await.map_err(db_error)?;
                }
            })
        })
    }
}
