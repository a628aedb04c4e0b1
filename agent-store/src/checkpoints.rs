//! [`CheckpointStore`] for [`Store`]: one row per run in `checkpoints`, replaced in
//! place at every boundary, and one row per tool execution in `tool_ledger`.
//!
//! `save` (used by `record_decisions`) is one upsert in its own transaction on the
//! writing pool, after the blobs its header and state refer to (see `blob_refs.rs`:
//! every header, state and ledger body is stored with parts' bytes as references, and
//! loads put them back). The runner's writes (`save_boundary`, `save_fenced`, `record_tool_fenced`,
//! `record_tool`) go through the store's checkpoint writer (`checkpoint_writer.rs`):
//! group commit, each caller waiting for the commit that holds its write and getting its
//! own outcome, so a write is durable before the call resolves. On SQLite the commit
//! survives a killed process (WAL, `synchronous=NORMAL`); on PostgreSQL it is the
//! server's commit.
//!
//! The fenced writes keep the check and the write in one statement: the fenced save is
//! an upsert whose update holds only where the stored row is the writer's or its `seq`
//! is `taken_at` (PostgreSQL re-checks it on the row's latest version under the row
//! lock; SQLite runs one writer at a time), and a fenced ledger entry is inserted only
//! when the run's checkpoint row is absent or its writer's, reading that row `FOR
//! SHARE` on PostgreSQL so that a take-over (which updates the row) waits for the
//! entry's commit, or the entry's check waits for the take-over's and then sees the new
//! writer.

use agent_core::store::StoreError;
use agent_core::store::{
    CheckpointRecord, CheckpointStore, LedgerEntry, LedgerStatus, SaveOutcome, StoreFuture,
};
use sqlx::Row;

use crate::blob_refs::{Recent, externalize, insert_blobs};
use crate::checkpoint_writer::{CheckpointRow, Item, LedgerRow};
use crate::columns::{check_key, column, db_ms};
use crate::db::{on_read_pool, on_write_pool, write_tx};
use crate::errors::db_error;
use crate::store::Store;

/// A checkpoint as the checkpoint writer stores it, fenced with `taken_at`.
fn checkpoint_row(
    checkpoint: &CheckpointRecord,
    taken_at: u64,
    recent: &Recent,
) -> Result<CheckpointRow, StoreError> {
    check_key("run id", &checkpoint.run_id)?;
    let mut blobs = Vec::new();
    let header = externalize(column(&checkpoint.header), &mut blobs, recent);
    let state = externalize(column(&checkpoint.state), &mut blobs, recent);
    Ok(CheckpointRow {
        run_id: checkpoint.run_id.clone(),
        seq: i64::try_from(checkpoint.seq).unwrap_or(i64::MAX),
        finished: checkpoint.finished,
        fingerprint: column(&checkpoint.fingerprint),
        updated_at_ms: db_ms(checkpoint.updated_at_ms),
        header,
        state,
        writer: column(&checkpoint.writer),
        lease_until_ms: db_ms(checkpoint.lease_until_ms),
        taken_at: i64::try_from(taken_at).unwrap_or(i64::MAX),
        blobs,
    })
}

/// A ledger entry as the checkpoint writer stores it; `writer` set: fenced.
fn ledger_row(
    entry: &LedgerEntry,
    writer: Option<String>,
    recent: &Recent,
) -> Result<LedgerRow, StoreError> {
    check_key("run id", &entry.run_id)?;
    check_key("call id", &entry.call_id)?;
    let body = serde_json::to_string(entry)
        .map_err(|e| StoreError::invalid(format!("cannot encode a ledger entry: {e}")))?;
    let mut blobs = Vec::new();
    let body = externalize(body, &mut blobs, recent);
    Ok(LedgerRow {
        run_id: entry.run_id.clone(),
        call_id: column(&entry.call_id),
        tool: column(&entry.tool),
        status: entry.status.as_str(),
        updated_at_ms: db_ms(now_ms()),
        body,
        writer,
        blobs,
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A `checkpoints` row selected as `run_id, seq, finished, fingerprint, updated_at_ms,
/// header, state, writer, lease_until_ms`.
fn record_of_row<R: Row>(row: &R) -> Result<CheckpointRecord, sqlx::Error>
where
    usize: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let mut record = CheckpointRecord::default();
    record.run_id = row.try_get(0)?;
    record.seq = to_u64(row.try_get(1)?);
    record.finished = row.try_get(2)?;
    record.fingerprint = row.try_get(3)?;
    record.updated_at_ms = to_u64(row.try_get(4)?);
    record.header = row.try_get(5)?;
    record.state = row.try_get(6)?;
    record.writer = row.try_get(7)?;
    record.lease_until_ms = to_u64(row.try_get(8)?);
    Ok(record)
}

impl Store {
    /// The checkpoints with the bytes of the blobs their headers and states refer to
    /// put back.
    async fn inline_checkpoints(
        &self,
        mut records: Vec<CheckpointRecord>,
    ) -> Result<Vec<CheckpointRecord>, StoreError> {
        let mut texts: Vec<String> = Vec::with_capacity(records.len() * 2);
        for r in &mut records {
            texts.push(std::mem::take(&mut r.header));
            texts.push(std::mem::take(&mut r.state));
        }
        self.inline_blobs("checkpoint", &mut texts).await?;
        let mut texts = texts.into_iter();
        for r in &mut records {
            r.header = texts.next().unwrap_or_default();
            r.state = texts.next().unwrap_or_default();
        }
        Ok(records)
    }
}

impl CheckpointStore for Store {
    fn save<'a>(&'a self, checkpoint: &'a CheckpointRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let row = checkpoint_row(checkpoint, 0, &self.shared.recent)?;
            self.shared.ready().await?;
            write_tx!(&self.shared, DB, tx => {
                insert_blobs!(tx, DB, row.blobs.iter());
                sqlx::query(
                    "INSERT INTO checkpoints \
                     (run_id, seq, finished, fingerprint, updated_at_ms, header, state, writer, \
                     lease_until_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                     ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, \
                     finished = excluded.finished, fingerprint = excluded.fingerprint, \
                     updated_at_ms = excluded.updated_at_ms, header = excluded.header, \
                     state = excluded.state, writer = excluded.writer, \
                     lease_until_ms = excluded.lease_until_ms",
                )
                .bind(row.run_id.as_str())
                .bind(row.seq)
                .bind(row.finished)
                .bind(row.fingerprint.as_str())
                .bind(row.updated_at_ms)
                .bind(row.header.as_str())
                .bind(row.state.as_str())
                .bind(row.writer.as_str())
                .bind(row.lease_until_ms)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            })
        })
    }

    fn save_fenced<'a>(
        &'a self,
        checkpoint: &'a CheckpointRecord,
        taken_at: u64,
    ) -> StoreFuture<'a, SaveOutcome> {
        Box::pin(async move {
            let row = checkpoint_row(checkpoint, taken_at, &self.shared.recent)?;
            self.shared.migrated().await?;
            self.checkpoints.write(Item::save(row)).await
        })
    }

    fn record_tool_fenced<'a>(
        &'a self,
        entry: &'a LedgerEntry,
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        Box::pin(async move {
            let row = ledger_row(entry, Some(column(writer)), &self.shared.recent)?;
            self.shared.migrated().await?;
            self.checkpoints.write(Item::tool(row)).await
        })
    }

    /// One transaction (with the rest of the writer's batch): a refused checkpoint
    /// refuses the boundary's started entries too, and a crash stores all of it or none.
    fn save_boundary<'a>(
        &'a self,
        checkpoint: Option<(&'a CheckpointRecord, u64)>,
        entries: &'a [LedgerEntry],
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        Box::pin(async move {
            let save = match checkpoint {
                Some((record, taken_at)) => {
                    Some(checkpoint_row(record, taken_at, &self.shared.recent)?)
                }
                None => None,
            };
            let tools = entries
                .iter()
                .map(|entry| {
                    let fenced = entry.status == LedgerStatus::Started;
                    ledger_row(entry, fenced.then(|| column(writer)), &self.shared.recent)
                })
                .collect::<Result<Vec<_>, _>>()?;
            self.shared.migrated().await?;
            self.checkpoints.write(Item::boundary(save, tools)).await
        })
    }

    /// One statement in its own commit on the writing pool (not through the group
    /// writer: a renewal is rare, one per run every 20 s, and must not wait behind a
    /// batch).
    fn renew_lease<'a>(
        &'a self,
        run_id: &'a str,
        writer: &'a str,
        until_ms: u64,
    ) -> StoreFuture<'a, SaveOutcome> {
        Box::pin(async move {
            check_key("run id", run_id)?;
            self.shared.ready().await?;
            let renewed = on_write_pool!(&self.shared.pools, pool, DB => {
                sqlx::query(
                    "UPDATE checkpoints SET lease_until_ms = $1 WHERE run_id = $2 \
                     AND writer = $3 AND finished = $4 AND lease_until_ms > 0",
                )
                .bind(db_ms(until_ms))
                .bind(run_id)
                .bind(column(writer))
                .bind(false)
                .execute(pool)
                .await
                .map_err(db_error)?
                .rows_affected()
            });
            self.shared.check_file()?;
            Ok(if renewed == 1 {
                SaveOutcome::Saved
            } else {
                SaveOutcome::Fenced
            })
        })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<CheckpointRecord>> {
        Box::pin(async move {
            check_key("run id", run_id)?;
            self.shared.ready().await?;
            let row: Option<CheckpointRecord> = on_read_pool!(&self.shared.pools, pool, DB => {
                sqlx::query(
                    "SELECT run_id, seq, finished, fingerprint, updated_at_ms, header, state, \
                     writer, lease_until_ms FROM checkpoints WHERE run_id = $1",
                )
                .bind(run_id)
                .fetch_optional(pool)
                .await
                .map_err(db_error)?
                .map(|row| record_of_row(&row))
                .transpose()
                .map_err(db_error)?
            });
            match row {
                Some(record) => self
                    .inline_checkpoints(vec![record])
                    .await
                    .map(|mut v| v.pop()),
                None => Ok(None),
            }
        })
    }

    fn unfinished<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<CheckpointRecord>> {
        Box::pin(async move {
            self.shared.ready().await?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows: Vec<CheckpointRecord> = on_read_pool!(&self.shared.pools, pool, DB => {
                sqlx::query(
                    "SELECT run_id, seq, finished, fingerprint, updated_at_ms, header, state, \
                     writer, lease_until_ms FROM checkpoints WHERE finished = $1 \
                     ORDER BY updated_at_ms DESC, run_id LIMIT $2",
                )
                .bind(false)
                .bind(limit)
                .fetch_all(pool)
                .await
                .map_err(db_error)?
                .iter()
                .map(record_of_row)
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_error)?
            });
            self.inline_checkpoints(rows).await
        })
    }

    fn record_tool<'a>(&'a self, entry: &'a LedgerEntry) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let row = ledger_row(entry, None, &self.shared.recent)?;
            self.shared.migrated().await?;
            self.checkpoints.write(Item::tool(row)).await.map(drop)
        })
    }

    fn ledger<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<LedgerEntry>> {
        Box::pin(async move {
            check_key("run id", run_id)?;
            self.shared.ready().await?;
            let mut bodies: Vec<String> = on_read_pool!(&self.shared.pools, pool, DB => {
                sqlx::query_scalar("SELECT body FROM tool_ledger WHERE run_id = $1")
                    .bind(run_id)
                    .fetch_all(pool)
                    .await
                    .map_err(db_error)?
            });
            self.inline_blobs("ledger entry", &mut bodies).await?;
            bodies
                .iter()
                .map(|b| {
                    serde_json::from_str::<LedgerEntry>(b).map_err(|e| {
                        StoreError::backend(format!("a stored ledger entry does not decode: {e}"))
                    })
                })
                .collect()
        })
    }
}
