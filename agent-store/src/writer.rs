//! The background writer: run records and traces queued on a bounded channel, written
//! in batches (one transaction, multi-row upserts by trace id). By default every caller
//! waits for the commit that holds its row and gets its outcome (group commit); in
//! write-behind mode callers return once queued, and failed writes are counted for the
//! next flush.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_core::store::StoreError;
use futures::FutureExt;
use sqlx::QueryBuilder;
use tokio::sync::{mpsc, oneshot};

use crate::backend::Backend;
use crate::blob_refs::{BlobRow, insert_blobs};
use crate::db::{Shared, write_tx};
use crate::errors::db_error;

/// One `runs` row: a run's columns, its record (from the feedback store) and its
/// trace (from the trace store); either JSON may come alone, and the writer merges the
/// two of one run into one row.
pub(crate) struct RunRow {
    pub(crate) trace_id: String,
    pub(crate) agent: String,
    pub(crate) variant: Option<String>,
    pub(crate) fingerprint: String,
    pub(crate) ending: &'static str,
    pub(crate) category: Option<String>,
    pub(crate) thread_id: Option<String>,
    pub(crate) started_at_ms: i64,
    pub(crate) duration_ms: i64,
    pub(crate) llm_calls: i64,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) record: Option<String>,
    pub(crate) trace: Option<String>,
    /// The blobs `record` and `trace` refer to (inserted in the same transaction).
    pub(crate) blobs: Vec<BlobRow>,
}

type Ack = oneshot::Sender<Result<(), StoreError>>;

enum Op {
    /// A row; its caller waits for the commit (`Some`), or not (write-behind).
    Row(Box<RunRow>, Option<Ack>),
    /// Answered once every op before it is done, with the write-behind failures since
    /// the previous flush.
    Flush(oneshot::Sender<u64>),
    /// Failures a `sync` took that belong to the next flush.
    Unflush(u64),
}

/// The sending side of the writer; the task ends when every store handle is gone.
pub(crate) struct Writer {
    tx: mpsc::Sender<Op>,
    write_behind: bool,
}

fn stopped() -> StoreError {
    StoreError::unavailable("the store's writer has stopped (its runtime shut down)")
}

impl Writer {
    pub(crate) fn spawn(
        shared: Arc<Shared>,
        queue: usize,
        max_batch: usize,
        write_behind: bool,
    ) -> Self {
        let (tx, rx) = mpsc::channel(queue.max(1));
        tokio::spawn(run(shared, rx, max_batch.max(1)));
        Self { tx, write_behind }
    }

    /// Queues a row (a record, a trace, or both) and waits for its commit, or, in
    /// write-behind mode, only until it is queued.
    pub(crate) async fn write(&self, row: RunRow) -> Result<(), StoreError> {
        if self.write_behind {
            return self
                .tx
                .send(Op::Row(Box::new(row), None))
                .await
                .map_err(|_| stopped());
        }
        let (ack, done) = oneshot::channel();
        self.tx
            .send(Op::Row(Box::new(row), Some(ack)))
            .await
            .map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }

    /// Waits for every row queued before it; returns the write-behind failures since
    /// the previous flush.
    pub(crate) async fn flush(&self) -> Result<u64, StoreError> {
        let (ack, done) = oneshot::channel();
        self.tx.send(Op::Flush(ack)).await.map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())
    }

    /// Waits for every row queued before it (the failures stay counted for the next
    /// flush).
    pub(crate) async fn sync(&self) -> Result<(), StoreError> {
        let failed = self.flush().await?;
        if failed > 0 {
            // Put them back for the next `flush`: this was not one.
            self.tx
                .send(Op::Unflush(failed))
                .await
                .map_err(|_| stopped())?;
        }
        Ok(())
    }
}

async fn run(shared: Arc<Shared>, mut rx: mpsc::Receiver<Op>, max_batch: usize) {
    let failed_behind = AtomicU64::new(0);
    let mut ops = Vec::with_capacity(max_batch);
    while let Some(first) = rx.recv().await {
        ops.push(first);
        while ops.len() < max_batch {
            match rx.try_recv() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        let mut rows: Vec<RunRow> = Vec::with_capacity(ops.len());
        let mut acks = Vec::with_capacity(ops.len());
        let mut behind = 0u64;
        let mut flushes = Vec::new();
        for op in ops.drain(..) {
            match op {
                Op::Row(row, ack) => {
                    rows.push(*row);
                    match ack {
                        Some(ack) => acks.push(ack),
                        None => behind += 1,
                    }
                }
                Op::Flush(ack) => flushes.push(ack),
                Op::Unflush(n) => {
                    failed_behind.fetch_add(n, Ordering::Relaxed);
                }
            }
        }
        let outcome = if rows.is_empty() {
            Ok(())
        } else {
            let rows = merge_per_run(rows);
            match AssertUnwindSafe(write(&shared, &rows)).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(_) => Err(StoreError::Panicked {
                    message: "the store's writer panicked while writing a batch".to_owned(),
                }),
            }
        };
        if let Err(error) = &outcome {
            tracing::warn!(error = %error, rows = acks.len() as u64 + behind, "store batch failed");
            failed_behind.fetch_add(behind, Ordering::Relaxed);
        }
        for ack in acks {
            let _ = ack.send(outcome.clone());
        }
        if !flushes.is_empty() {
            let failed = failed_behind.swap(0, Ordering::Relaxed);
            let mut flushes = flushes.into_iter();
            if let Some(first) = flushes.next() {
                let _ = first.send(failed);
            }
            for other in flushes {
                let _ = other.send(0);
            }
        }
    }
}

/// One row per run: a record and a trace of the same run become one row (a later
/// JSON of the same kind replaces an earlier one). One statement may not upsert a key
/// twice on PostgreSQL.
fn merge_per_run(rows: Vec<RunRow>) -> Vec<RunRow> {
    let mut index: HashMap<String, usize> = HashMap::with_capacity(rows.len());
    let mut merged: Vec<RunRow> = Vec::with_capacity(rows.len());
    for row in rows {
        match index.get(&row.trace_id) {
            Some(&i) => {
                let kept = &mut merged[i];
                let mut blobs = std::mem::take(&mut kept.blobs);
                if row.record.is_some() {
                    let trace = kept.trace.take().or(row.trace.clone());
                    *kept = row;
                    kept.trace = kept.trace.take().or(trace);
                } else if row.trace.is_some() {
                    kept.trace = row.trace;
                    kept.blobs = row.blobs;
                }
                // Either JSON may refer to blobs of either row: keep them all.
                blobs.append(&mut kept.blobs);
                kept.blobs = blobs;
            }
            None => {
                index.insert(row.trace_id.clone(), merged.len());
                merged.push(row);
            }
        }
    }
    merged
}

/// Splits `n` rows into statements of 64, 16, 4 and 1 rows, so a few statement shapes
/// serve every batch size (prepared statements stay cached).
pub(crate) fn chunk_sizes(mut n: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    for size in [64, 16, 4, 1] {
        while n >= size {
            sizes.push(size);
            n -= size;
        }
    }
    sizes
}

/// Splits `rows` by [`chunk_sizes`].
pub(crate) fn chunks<R>(rows: &[R]) -> Vec<&[R]> {
    let mut out = Vec::new();
    let mut rest = rows;
    for size in chunk_sizes(rows.len()) {
        let (head, tail) = rest.split_at(size);
        out.push(head);
        rest = tail;
    }
    out
}

const RUNS_INSERT: &str = "INSERT INTO runs (trace_id, agent, variant, fingerprint, ending, \
     category, thread_id, started_at_ms, duration_ms, llm_calls, cost_usd, record, trace) ";
const RUNS_UPSERT: &str = " ON CONFLICT (trace_id) DO UPDATE SET agent = excluded.agent, \
     variant = excluded.variant, fingerprint = excluded.fingerprint, ending = excluded.ending, \
     category = excluded.category, thread_id = excluded.thread_id, \
     started_at_ms = excluded.started_at_ms, duration_ms = excluded.duration_ms, \
     llm_calls = excluded.llm_calls, cost_usd = excluded.cost_usd, \
     record = COALESCE(excluded.record, runs.record), \
     trace = COALESCE(excluded.trace, runs.trace)";

/// Writes one batch in one transaction. On PostgreSQL the batch first takes a
/// transaction-level advisory lock (one per schema): the triggers on `runs` update the
/// daily rollup rows (migration 5), which two concurrent batches could otherwise lock
/// in opposite orders (a deadlock). Batches of the same day contend for the same
/// rollup rows anyway, so the lock only puts them in a queue.
async fn write(shared: &Shared, rows: &[RunRow]) -> Result<(), StoreError> {
    // `write_tx!` checks the SQLite file before and after the commit.
    shared.migrated().await?;
    let postgres = shared.backend == Backend::Postgres;
    write_tx!(&shared, DB, tx => {
        if postgres {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext(current_schema()))")
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
        }
        insert_blobs!(tx, DB, rows.iter().flat_map(|r| r.blobs.iter()));
        for chunk in chunks(rows) {
            let mut q = QueryBuilder::<DB>::new(RUNS_INSERT);
            q.push_values(chunk, |mut b, r| {
                b.push_bind(r.trace_id.as_str())
                    .push_bind(r.agent.as_str())
                    .push_bind(r.variant.as_deref())
                    .push_bind(r.fingerprint.as_str())
                    .push_bind(r.ending)
                    .push_bind(r.category.as_deref())
                    .push_bind(r.thread_id.as_deref())
                    .push_bind(r.started_at_ms)
                    .push_bind(r.duration_ms)
                    .push_bind(r.llm_calls)
                    .push_bind(r.cost_usd)
                    .push_bind(r.record.as_deref())
                    .push_bind(r.trace.as_deref());
            });
            q.push(RUNS_UPSERT);
            q.build().execute(&mut *tx).await.map_err(db_error)?;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_use_few_shapes_and_cover_every_row() {
        assert_eq!(chunk_sizes(0), Vec::<usize>::new());
        assert_eq!(chunk_sizes(85), vec![64, 16, 4, 1]);
        assert_eq!(chunk_sizes(130), vec![64, 64, 1, 1]);
        let rows: Vec<u32> = (0..87).collect();
        let joined: Vec<u32> = chunks(&rows).concat();
        assert_eq!(joined, rows);
    }

    fn row(id: &str, record: Option<&str>, trace: Option<&str>) -> RunRow {
        RunRow {
            trace_id: id.into(),
            agent: "a".into(),
            variant: None,
            fingerprint: "f".into(),
            ending: "answered",
            category: None,
            thread_id: None,
            started_at_ms: 0,
            duration_ms: 0,
            llm_calls: 0,
            cost_usd: None,
            record: record.map(str::to_owned),
            trace: trace.map(str::to_owned),
            blobs: Vec::new(),
        }
    }

    #[test]
    fn a_record_and_a_trace_of_one_run_become_one_row() {
        let merged = merge_per_run(vec![
            row("a", None, Some("t1")),
            row("b", Some("r"), None),
            row("a", Some("r1"), None),
            row("a", None, Some("t2")),
        ]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].record.as_deref(), Some("r1"));
        assert_eq!(merged[0].trace.as_deref(), Some("t2"));
        assert_eq!(merged[1].trace, None);
    }
}
