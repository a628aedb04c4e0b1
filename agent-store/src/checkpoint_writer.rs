//! The checkpoint writer: the fenced checkpoint saves and the ledger entries of durable
//! runs, queued on a bounded channel and written in batches (group commit), one
//! transaction and a few multi-row statements per batch instead of one commit per
//! write.
//!
//! Not write-behind: every caller waits for the commit that holds its write and gets
//! its own outcome ([`SaveOutcome`], or the batch's error), so a write is durable
//! before the call that made it resolves, as with one commit per write.
//!
//! Fencing inside a batch: each row's condition is evaluated by the database inside the
//! batch's transaction, as the single-row statements did, so its outcome is the one the
//! write would have had alone at that point of the transaction. The writes of one batch
//! are concurrent calls (none waited for another), so any order between them is one
//! their callers could have seen; the batch puts them in rounds in which every key (a
//! run id for a checkpoint, a run id and call id for a ledger entry) comes at most
//! once, so two writes of one key (two resumes of one run in one process) are checked
//! one after the other. In a round, the checkpoints go first, then the ledger entries.
//!
//! A batch that fails with a database error of one statement (not an unreachable
//! database) is rolled back and its writes are tried again one by one, each in its own
//! transaction, so a bad write fails alone and a deadlock between two processes' batches
//! (PostgreSQL aborts one of them) costs a retry, not an error.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use agent_core::store::SaveOutcome;
use agent_core::store::StoreError;
use futures::FutureExt;
use sqlx::{QueryBuilder, Row};
use tokio::sync::{mpsc, oneshot};

use crate::backend::Backend;
use crate::blob_refs::{BlobRow, insert_blobs};
use crate::db::{Shared, write_tx};
use crate::errors::db_error;
use crate::writer::chunks;

/// A `checkpoints` row to store, with the fencing condition (`taken_at`).
pub(crate) struct CheckpointRow {
    pub(crate) run_id: String,
    pub(crate) seq: i64,
    pub(crate) finished: bool,
    pub(crate) fingerprint: String,
    pub(crate) updated_at_ms: i64,
    pub(crate) header: String,
    pub(crate) state: String,
    pub(crate) writer: String,
    /// Until when the writer holds the run (ms since the Unix epoch; 0: no one).
    pub(crate) lease_until_ms: i64,
    pub(crate) taken_at: i64,
    /// The blobs `header` and `state` refer to.
    pub(crate) blobs: Vec<BlobRow>,
}

/// A `tool_ledger` row to store; `writer` set: fenced (stored only if the run's
/// checkpoint is absent or carries it).
pub(crate) struct LedgerRow {
    pub(crate) run_id: String,
    pub(crate) call_id: String,
    pub(crate) tool: String,
    pub(crate) status: &'static str,
    pub(crate) updated_at_ms: i64,
    pub(crate) body: String,
    pub(crate) writer: Option<String>,
    /// The blobs `body` refers to.
    pub(crate) blobs: Vec<BlobRow>,
}

/// One write of a batch: a checkpoint, ledger entries, or both (one boundary of a run:
/// stored together, and its outcome is theirs). In the transaction, a fenced entry comes
/// after its item's checkpoint, so that a refused checkpoint refuses it too.
pub(crate) struct Item {
    save: Option<CheckpointRow>,
    tools: Vec<LedgerRow>,
}

impl Item {
    /// A fenced checkpoint save.
    pub(crate) fn save(row: CheckpointRow) -> Self {
        Self {
            save: Some(row),
            tools: Vec::new(),
        }
    }

    /// A ledger entry (fenced or not).
    pub(crate) fn tool(row: LedgerRow) -> Self {
        Self::boundary(None, vec![row])
    }

    /// A boundary's checkpoint (if any) and ledger entries.
    pub(crate) fn boundary(save: Option<CheckpointRow>, tools: Vec<LedgerRow>) -> Self {
        Self { save, tools }
    }
}

/// One row of a batch, flattened out of its item.
enum Write<'a> {
    Save(&'a CheckpointRow),
    Tool(&'a LedgerRow),
}

impl Write<'_> {
    fn key(&self) -> (&str, Option<&str>) {
        match self {
            Write::Save(row) => (&row.run_id, None),
            Write::Tool(row) => (&row.run_id, Some(&row.call_id)),
        }
    }
}

/// The rows of `items` in order, each with its item's index and, for a fenced entry
/// that follows its item's checkpoint, that checkpoint's row index.
fn flatten(items: &[Item]) -> Vec<(usize, Write<'_>, Option<usize>)> {
    let mut rows = Vec::with_capacity(items.len() + 1);
    for (i, item) in items.iter().enumerate() {
        let save = item.save.as_ref().map(|row| {
            rows.push((i, Write::Save(row), None));
            rows.len() - 1
        });
        for row in &item.tools {
            let after = save.filter(|_| row.writer.is_some());
            rows.push((i, Write::Tool(row), after));
        }
    }
    rows
}

type Reply = oneshot::Sender<Result<SaveOutcome, StoreError>>;

/// The sending side; the task ends when every store handle is gone.
pub(crate) struct CheckpointWriter {
    tx: mpsc::Sender<(Item, Reply)>,
}

fn stopped() -> StoreError {
    StoreError::unavailable("the store's checkpoint writer has stopped (its runtime shut down)")
}

impl CheckpointWriter {
    pub(crate) fn spawn(shared: Arc<Shared>, queue: usize, max_batch: usize) -> Self {
        let (tx, rx) = mpsc::channel(queue.max(1));
        tokio::spawn(run(shared, rx, max_batch.max(1)));
        Self { tx }
    }

    /// Queues a write and waits for the commit that holds it: its outcome (a ledger
    /// entry without a writer is always [`SaveOutcome::Saved`]), or the batch's error.
    pub(crate) async fn write(&self, item: Item) -> Result<SaveOutcome, StoreError> {
        let (reply, done) = oneshot::channel();
        self.tx.send((item, reply)).await.map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }
}

async fn run(shared: Arc<Shared>, mut rx: mpsc::Receiver<(Item, Reply)>, max_batch: usize) {
    let mut items = Vec::with_capacity(max_batch);
    let mut replies = Vec::with_capacity(max_batch);
    while let Some((item, reply)) = rx.recv().await {
        items.push(item);
        replies.push(reply);
        while items.len() < max_batch {
            match rx.try_recv() {
                Ok((item, reply)) => {
                    items.push(item);
                    replies.push(reply);
                }
                Err(_) => break,
            }
        }
        let outcomes = match guarded(&shared, &items).await {
            Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
            Err(error) if items.len() > 1 && matches!(error, StoreError::Backend { .. }) => {
                tracing::debug!(error = %error, writes = items.len(), "checkpoint batch failed; its writes are tried one by one");
                let mut alone = Vec::with_capacity(items.len());
                for item in &items {
                    let outcome = guarded(&shared, std::slice::from_ref(item)).await;
                    alone.push(outcome.and_then(|o| {
                        o.into_iter().next().ok_or_else(|| {
                            StoreError::backend("a checkpoint batch of one had no outcome")
                        })
                    }));
                }
                alone
            }
            Err(error) => vec![Err(error); items.len()],
        };
        for (reply, outcome) in replies.drain(..).zip(outcomes) {
            let _ = reply.send(outcome);
        }
        items.clear();
    }
}

/// [`write`] inside a catch boundary: a panic is the batch's error.
async fn guarded(shared: &Shared, items: &[Item]) -> Result<Vec<SaveOutcome>, StoreError> {
    match AssertUnwindSafe(write(shared, items)).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(_) => Err(StoreError::Panicked {
            message: "the store's checkpoint writer panicked while writing a batch".to_owned(),
        }),
    }
}

/// The indices of `rows` in rounds: in each round, every key at most once, each key's
/// writes in the order they were queued, and a row that follows a checkpoint (the third
/// field) in that checkpoint's round or a later one (in a round, the checkpoints are
/// written first).
fn rounds(rows: &[(usize, Write<'_>, Option<usize>)]) -> Vec<Vec<usize>> {
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut round_of: Vec<usize> = Vec::with_capacity(rows.len());
    let mut next: HashMap<(&str, Option<&str>), usize> = HashMap::with_capacity(rows.len());
    for (i, (_, row, after)) in rows.iter().enumerate() {
        let at_least = after.and_then(|a| round_of.get(a).copied()).unwrap_or(0);
        let slot = next.entry(row.key()).or_insert(0);
        let round = (*slot).max(at_least);
        *slot = round + 1;
        round_of.push(round);
        if round == rounds.len() {
            rounds.push(Vec::new());
        }
        if let Some(r) = rounds.get_mut(round) {
            r.push(i);
        }
    }
    rounds
}

/// The fenced save of many rows: the update holds only where the stored row is the
/// writer's (checked first: the common case needs no look-up of `taken_at`) or its
/// `seq` is the row's `taken_at`. `RETURNING` names the rows stored.
const SAVE_HEAD: &str = "WITH v AS (SELECT column1 AS run_id, column2 AS seq, \
     column3 AS finished, column4 AS fingerprint, column5 AS updated_at_ms, \
     column6 AS header, column7 AS state, column8 AS writer, column9 AS taken_at, column10 AS lease_until_ms FROM (";
const SAVE_TAIL: &str = ") AS t) INSERT INTO checkpoints \
     (run_id, seq, finished, fingerprint, updated_at_ms, header, state, writer, \
     lease_until_ms) \
     SELECT run_id, seq, finished, fingerprint, updated_at_ms, header, state, writer, \
     lease_until_ms FROM v WHERE true \
     ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, \
     finished = excluded.finished, fingerprint = excluded.fingerprint, \
     updated_at_ms = excluded.updated_at_ms, header = excluded.header, \
     state = excluded.state, writer = excluded.writer, \
     lease_until_ms = excluded.lease_until_ms \
     WHERE checkpoints.writer = excluded.writer \
     OR checkpoints.seq = (SELECT v.taken_at FROM v WHERE v.run_id = excluded.run_id) \
     RETURNING run_id";

const LEDGER_HEAD: &str = "WITH v AS (SELECT column1 AS run_id, column2 AS call_id, \
     column3 AS tool, column4 AS status, column5 AS updated_at_ms, column6 AS body, \
     column7 AS writer FROM (";
const LEDGER_UPSERT: &str = " ON CONFLICT (run_id, call_id) DO UPDATE SET tool = excluded.tool, \
     status = excluded.status, updated_at_ms = excluded.updated_at_ms, body = excluded.body \
     RETURNING run_id, call_id";
/// SQLite runs one writer at a time: the check and the insert see the same rows.
const LEDGER_TAIL_SQLITE: &str = ") AS t) INSERT INTO tool_ledger \
     (run_id, call_id, tool, status, updated_at_ms, body) \
     SELECT run_id, call_id, tool, status, updated_at_ms, body FROM v \
     WHERE v.writer IS NULL OR NOT EXISTS \
     (SELECT 1 FROM checkpoints c WHERE c.run_id = v.run_id AND c.writer <> v.writer)";
/// PostgreSQL: the checkpoint rows of the fenced entries are read `FOR SHARE`, so a
/// concurrent take-over waits for this commit (or this check for its).
const LEDGER_TAIL_POSTGRES: &str = ") AS t), owner AS (SELECT c.run_id, c.writer \
     FROM checkpoints c JOIN v ON c.run_id = v.run_id AND v.writer IS NOT NULL \
     FOR SHARE OF c) INSERT INTO tool_ledger \
     (run_id, call_id, tool, status, updated_at_ms, body) \
     SELECT run_id, call_id, tool, status, updated_at_ms, body FROM v \
     WHERE v.writer IS NULL OR NOT EXISTS \
     (SELECT 1 FROM owner o WHERE o.run_id = v.run_id AND o.writer <> v.writer)";

/// Writes one batch in one transaction; the outcome of each item, in order (stored
/// only if each of its rows was).
async fn write(shared: &Shared, items: &[Item]) -> Result<Vec<SaveOutcome>, StoreError> {
    // `write_tx!` checks the SQLite file before and after the commit.
    shared.migrated().await?;
    let rows = flatten(items);
    let mut stored_rows = vec![false; rows.len()];
    let ledger_tail = match shared.backend {
        Backend::Postgres => LEDGER_TAIL_POSTGRES,
        _ => LEDGER_TAIL_SQLITE,
    };
    let rounds = rounds(&rows);
    write_tx!(shared, DB, tx => {
        // Blobs first (a refused save leaves its blobs stored, unreferenced: harmless).
        insert_blobs!(
            tx,
            DB,
            items.iter().flat_map(|item| {
                let save = item.save.iter().flat_map(|r| r.blobs.iter());
                save.chain(item.tools.iter().flat_map(|r| r.blobs.iter()))
            })
        );
        for round in &rounds {
            let saves: Vec<(usize, &CheckpointRow)> = round
                .iter()
                .filter_map(|&i| match rows.get(i) {
                    Some((_, Write::Save(row), _)) => Some((i, *row)),
                    _ => None,
                })
                .collect();
            for chunk in chunks(&saves) {
                let mut q = QueryBuilder::<DB>::new(SAVE_HEAD);
                q.push_values(chunk, |mut b, (_, r)| {
                    b.push_bind(r.run_id.as_str())
                        .push_bind(r.seq)
                        .push_bind(r.finished)
                        .push_bind(r.fingerprint.as_str())
                        .push_bind(r.updated_at_ms)
                        .push_bind(r.header.as_str())
                        .push_bind(r.state.as_str())
                        .push_bind(r.writer.as_str())
                        .push_bind(r.taken_at)
                        .push_bind(r.lease_until_ms);
                });
                q.push(SAVE_TAIL);
                let stored = q.build().fetch_all(&mut *tx).await.map_err(db_error)?;
                for row in &stored {
                    let run_id: String = row.try_get(0).map_err(db_error)?;
                    if let Some((i, _)) = chunk.iter().find(|(_, r)| r.run_id == run_id)
                        && let Some(o) = stored_rows.get_mut(*i)
                    {
                        *o = true;
                    }
                }
            }
            let tools: Vec<(usize, &LedgerRow)> = round
                .iter()
                .filter_map(|&i| match rows.get(i) {
                    Some((_, Write::Tool(row), _)) => Some((i, *row)),
                    _ => None,
                })
                .collect();
            for chunk in chunks(&tools) {
                let mut q = QueryBuilder::<DB>::new(LEDGER_HEAD);
                q.push_values(chunk, |mut b, (_, r)| {
                    b.push_bind(r.run_id.as_str())
                        .push_bind(r.call_id.as_str())
                        .push_bind(r.tool.as_str())
                        .push_bind(r.status)
                        .push_bind(r.updated_at_ms)
                        .push_bind(r.body.as_str())
                        .push_bind(r.writer.as_deref());
                });
                q.push(ledger_tail);
                q.push(LEDGER_UPSERT);
                let stored = q.build().fetch_all(&mut *tx).await.map_err(db_error)?;
                for row in &stored {
                    let run_id: String = row.try_get(0).map_err(db_error)?;
                    let call_id: String = row.try_get(1).map_err(db_error)?;
                    if let Some((i, _)) = chunk
                        .iter()
                        .find(|(_, r)| r.run_id == run_id && r.call_id == call_id)
                        && let Some(o) = stored_rows.get_mut(*i)
                    {
                        *o = true;
                    }
                }
            }
        }
    })?;
    let mut outcomes = vec![SaveOutcome::Saved; items.len()];
    for ((item, _, _), stored) in rows.iter().zip(stored_rows) {
        if !stored && let Some(o) = outcomes.get_mut(*item) {
            *o = SaveOutcome::Fenced;
        }
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(run: &str, call: &str, writer: Option<&str>) -> LedgerRow {
        LedgerRow {
            run_id: run.into(),
            call_id: call.into(),
            tool: "t".into(),
            status: "started",
            updated_at_ms: 0,
            body: String::new(),
            writer: writer.map(str::to_owned),
            blobs: Vec::new(),
        }
    }

    fn tool(run: &str, call: &str) -> Item {
        Item::tool(ledger(run, call, None))
    }

    fn checkpoint(run: &str) -> CheckpointRow {
        CheckpointRow {
            run_id: run.into(),
            seq: 1,
            finished: false,
            fingerprint: String::new(),
            updated_at_ms: 0,
            header: String::new(),
            state: String::new(),
            writer: String::new(),
            lease_until_ms: 0,
            taken_at: 0,
            blobs: Vec::new(),
        }
    }

    fn save(run: &str) -> Item {
        Item::save(checkpoint(run))
    }

    #[test]
    fn a_key_comes_once_per_round_in_queue_order() {
        let items = vec![
            save("a"),
            tool("a", "c1"),
            tool("a", "c2"),
            save("a"),
            tool("a", "c1"),
            save("b"),
            save("a"),
        ];
        assert_eq!(
            rounds(&flatten(&items)),
            vec![vec![0, 1, 2, 5], vec![3, 4], vec![6]]
        );
        assert!(rounds(&[]).is_empty());
    }

    #[test]
    fn a_fenced_entry_comes_no_earlier_than_its_items_checkpoint() {
        let items = vec![
            save("a"),
            // Its checkpoint goes to round 1 (after the first save of "a"): its fenced
            // entry too, though its key is new; its unfenced entry stays in round 0.
            Item::boundary(
                Some(checkpoint("a")),
                vec![ledger("a", "c1", None), ledger("a", "c2", Some("w"))],
            ),
            tool("a", "c2"),
        ];
        let rows = flatten(&items);
        let owners: Vec<usize> = rows.iter().map(|(item, _, _)| *item).collect();
        assert_eq!(owners, vec![0, 1, 1, 1, 2]);
        assert_eq!(rounds(&rows), vec![vec![0, 2], vec![1, 3], vec![4]]);
    }
}
