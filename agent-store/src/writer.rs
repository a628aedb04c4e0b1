//! The background writer: run records and traces queued on a bounded channel, written
//! in batches (one transaction, multi-row upserts by trace id), every caller told the
//! outcome of the commit that holds its row (group commit).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use agent_core::StoreError;
use futures::FutureExt;
use sqlx::QueryBuilder;
use tokio::sync::{mpsc, oneshot};

use crate::db::{Shared, db_error, on_write_pool};

/// One `runs` row.
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
    pub(crate) record: String,
}

/// One `traces` row.
pub(crate) struct TraceRow {
    pub(crate) trace_id: String,
    pub(crate) started_at_ms: i64,
    pub(crate) body: String,
}

type Ack = oneshot::Sender<Result<(), StoreError>>;

enum Op {
    Run(RunRow, Ack),
    Trace(TraceRow, Ack),
    Flush(Ack),
}

/// The sending side of the writer; the task ends when every store handle is gone.
pub(crate) struct Writer {
    tx: mpsc::Sender<Op>,
}

fn stopped() -> StoreError {
    StoreError::unavailable("the store's writer has stopped (its runtime shut down)")
}

impl Writer {
    pub(crate) fn spawn(shared: Arc<Shared>, queue: usize, max_batch: usize) -> Self {
        let (tx, rx) = mpsc::channel(queue.max(1));
        tokio::spawn(run(shared, rx, max_batch.max(1)));
        Self { tx }
    }

    async fn submit(&self, op: impl FnOnce(Ack) -> Op) -> Result<(), StoreError> {
        let (ack, done) = oneshot::channel();
        self.tx.send(op(ack)).await.map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }

    /// Queues a run record and waits for its commit.
    pub(crate) async fn record_run(&self, row: RunRow) -> Result<(), StoreError> {
        self.submit(|ack| Op::Run(row, ack)).await
    }

    /// Queues a trace and waits for its commit.
    pub(crate) async fn record_trace(&self, row: TraceRow) -> Result<(), StoreError> {
        self.submit(|ack| Op::Trace(row, ack)).await
    }

    /// Waits for every row queued before it.
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        self.submit(Op::Flush).await
    }
}

async fn run(shared: Arc<Shared>, mut rx: mpsc::Receiver<Op>, max_batch: usize) {
    let mut ops = Vec::with_capacity(max_batch);
    while let Some(first) = rx.recv().await {
        ops.push(first);
        while ops.len() < max_batch {
            match rx.try_recv() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        let mut runs = Vec::new();
        let mut traces = Vec::new();
        let mut acks = Vec::with_capacity(ops.len());
        for op in ops.drain(..) {
            match op {
                Op::Run(row, ack) => {
                    runs.push(row);
                    acks.push(ack);
                }
                Op::Trace(row, ack) => {
                    traces.push(row);
                    acks.push(ack);
                }
                Op::Flush(ack) => acks.push(ack),
            }
        }
        let outcome = if runs.is_empty() && traces.is_empty() {
            Ok(())
        } else {
            let runs = last_per_key(runs, |r| &r.trace_id);
            let traces = last_per_key(traces, |t| &t.trace_id);
            match AssertUnwindSafe(write(&shared, &runs, &traces))
                .catch_unwind()
                .await
            {
                Ok(outcome) => outcome,
                Err(_) => Err(StoreError::Panicked {
                    message: "the store's writer panicked while writing a batch".to_owned(),
                }),
            }
        };
        if let Err(error) = &outcome {
            tracing::warn!(error = %error, rows = acks.len(), "store batch failed");
        }
        for ack in acks {
            let _ = ack.send(outcome.clone());
        }
    }
}

/// Keeps the last row per key (one statement may not upsert a key twice on PostgreSQL).
fn last_per_key<R>(rows: Vec<R>, key: impl Fn(&R) -> &String) -> Vec<R> {
    let mut last: HashMap<String, usize> = HashMap::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        last.insert(key(row).clone(), i);
    }
    if last.len() == rows.len() {
        return rows;
    }
    rows.into_iter()
        .enumerate()
        .filter(|(i, row)| last.get(key(row)) == Some(i))
        .map(|(_, row)| row)
        .collect()
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
     category, thread_id, started_at_ms, duration_ms, llm_calls, cost_usd, record) ";
const RUNS_UPSERT: &str = " ON CONFLICT (trace_id) DO UPDATE SET agent = excluded.agent, \
     variant = excluded.variant, fingerprint = excluded.fingerprint, ending = excluded.ending, \
     category = excluded.category, thread_id = excluded.thread_id, \
     started_at_ms = excluded.started_at_ms, duration_ms = excluded.duration_ms, \
     llm_calls = excluded.llm_calls, cost_usd = excluded.cost_usd, record = excluded.record";
const TRACES_INSERT: &str = "INSERT INTO traces (trace_id, started_at_ms, body) ";
const TRACES_UPSERT: &str = " ON CONFLICT (trace_id) DO UPDATE SET \
     started_at_ms = excluded.started_at_ms, body = excluded.body";

/// Writes one batch in one transaction.
async fn write(shared: &Shared, runs: &[RunRow], traces: &[TraceRow]) -> Result<(), StoreError> {
    shared.ready().await?;
    on_write_pool!(&shared.pools, pool, DB => {
        let mut tx = pool.begin().await.map_err(db_error)?;
        for chunk in chunks(runs) {
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
                    .push_bind(r.record.as_str());
            });
            q.push(RUNS_UPSERT);
            q.build().execute(&mut *tx).await.map_err(db_error)?;
        }
        for chunk in chunks(traces) {
            let mut q = QueryBuilder::<DB>::new(TRACES_INSERT);
            q.push_values(chunk, |mut b, t| {
                b.push_bind(t.trace_id.as_str())
                    .push_bind(t.started_at_ms)
                    .push_bind(t.body.as_str());
            });
            q.push(TRACES_UPSERT);
            q.build().execute(&mut *tx).await.map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)
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

    #[test]
    fn the_last_row_per_key_wins() {
        let rows = vec![("a", 1), ("b", 2), ("a", 3)];
        let owned: Vec<(String, i32)> = rows.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let kept = last_per_key(owned, |r| &r.0);
        assert_eq!(kept, vec![("b".to_owned(), 2), ("a".to_owned(), 3)]);
    }
}
