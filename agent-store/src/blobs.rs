//! Content-addressed blobs: the bytes of images, documents and audio kept once per
//! store, in the `blobs` table (migration 8), keyed by their SHA-256.
//!
//! Every JSON the store writes that can carry parts (run records, traces, checkpoint
//! headers and states, ledger entries, thread messages) goes through
//! `blob_refs::externalize` first: a part's inline base64 becomes a reference
//! (`{"blob":{"sha256":..,"size":..}}`, the media type staying beside it in the part)
//! and its bytes a blob row, inserted in the same transaction as the row that refers to
//! it (`ON CONFLICT DO NOTHING`: a blob already stored is not written again). Loading
//! reads the referenced blobs in one query and puts the bytes back, so callers get the
//! JSON they stored. Records written before blobs (inline base64) load as they are.
//!
//! A blob that no row references any more (its run, thread or checkpoint deleted by
//! hand or by a retention job, or a fenced save refused after its blobs were inserted)
//! stays until [`Store::collect_blobs`] deletes it: the store never deletes one on its
//! own.

use std::collections::{HashMap, HashSet};

use agent_core::content::Bytes;
use agent_core::store::StoreError;
use sqlx::{QueryBuilder, Row};

use crate::db::{on_read_pool, write_tx};
use crate::errors::db_error;
use crate::store::Store;

use crate::blob_refs as refs;

/// One stored blob: the bytes of a part, by hash.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Blob {
    /// The SHA-256 of the bytes, 64 lowercase hex digits.
    pub sha256: String,
    /// The media type of the part that stored it (`image/png`, `application/pdf`, ...).
    pub media_type: String,
    /// The bytes (`Debug` shows their size and hash, never them).
    pub bytes: Bytes,
}

/// How much the blobs of a store hold ([`Store::blob_usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlobUsage {
    /// Stored blobs (distinct bytes).
    pub blobs: u64,
    /// Their bytes together.
    pub bytes: u64,
}

/// What [`Store::collect_blobs`] deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlobsCollected {
    /// Blobs deleted (no row referenced them).
    pub blobs: u64,
    /// Their bytes together.
    pub bytes: u64,
    /// Blobs kept (referenced).
    pub kept: u64,
}

/// Every column whose JSON may reference blobs (the ones written through
/// `blob_refs::externalize`): run records and traces, checkpoint headers and states,
/// tool-ledger entries, thread messages.
const REFERENCING: [(&str, &str); 6] = [
    ("runs", "record"),
    ("runs", "trace"),
    ("checkpoints", "header"),
    ("checkpoints", "state"),
    ("tool_ledger", "body"),
    ("thread_messages", "body"),
];

/// Whether `sha256` is 64 lowercase hex digits.
fn is_hash(sha256: &str) -> bool {
    sha256.len() == 64
        && sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Store {
    /// The blob stored under `sha256` (64 lowercase hex digits), or `None`.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] when `sha256` is not 64 lowercase hex digits;
    /// [`StoreError::Unavailable`] / [`StoreError::Backend`] as for
    /// [`stats`](Self::stats).
    pub async fn blob(&self, sha256: &str) -> Result<Option<Blob>, StoreError> {
        if !is_hash(sha256) {
            return Err(StoreError::invalid(
                "a blob hash is 64 lowercase hex digits (a SHA-256)",
            ));
        }
        self.shared.ready().await?;
        let row: Option<(String, Vec<u8>)> = on_read_pool!(&self.shared.pools, pool, DB => {
            sqlx::query("SELECT media_type, bytes FROM blobs WHERE sha256 = $1")
                .bind(sha256)
                .fetch_optional(pool)
                .await
                .map_err(db_error)?
                .map(|row| Ok::<_, sqlx::Error>((row.try_get(0)?, row.try_get(1)?)))
                .transpose()
                .map_err(db_error)?
        });
        Ok(row.map(|(media_type, bytes)| Blob {
            sha256: sha256.to_owned(),
            media_type,
            bytes: Bytes::from(bytes),
        }))
    }

    /// How many blobs the store holds and their bytes together: one query on the
    /// `blobs` table (small: one row per distinct part), for pages and reports.
    ///
    /// # Errors
    /// As [`stats`](Self::stats).
    pub async fn blob_usage(&self) -> Result<BlobUsage, StoreError> {
        self.shared.ready().await?;
        let (blobs, bytes): (i64, i64) = on_read_pool!(&self.shared.pools, pool, DB => {
            let row = sqlx::query(
                "SELECT COUNT(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM blobs",
            )
            .fetch_one(pool)
            .await
            .map_err(db_error)?;
            (row.try_get(0).map_err(db_error)?, row.try_get(1).map_err(db_error)?)
        });
        Ok(BlobUsage {
            blobs: u64::try_from(blobs).unwrap_or(0),
            bytes: u64::try_from(bytes).unwrap_or(0),
        })
    }

    /// Deletes the blobs that no run record, trace, checkpoint, tool-ledger entry or
    /// thread message references: the bytes left behind when such rows were deleted
    /// (the store itself never deletes them), or by a fenced save that was refused after
    /// its blobs went in. Returns how many blobs and bytes went, and how many stayed.
    ///
    /// One write transaction: it reads every referencing column's rows that hold a
    /// reference (the JSON without the bytes, so far smaller than the blobs), then
    /// deletes the others in batches. Concurrent writers are safe: every write that
    /// references a blob inserts it in its own transaction, and that insert waits for
    /// this one (PostgreSQL: the `blobs` table is locked `SHARE ROW EXCLUSIVE` for the
    /// collection, which blocks inserts into it and nothing else, so reads and text-only
    /// writes go on; SQLite: the store's one writing connection runs it like any write),
    /// so a blob is either seen referenced or inserted again after. Run it from a
    /// maintenance job, not per run: its cost grows with the rows that hold references.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] / [`StoreError::Backend`] as for
    /// [`stats`](Self::stats); nothing is deleted then.
    pub async fn collect_blobs(&self) -> Result<BlobsCollected, StoreError> {
        self.shared.ready().await?;
        let pattern = format!("%{}%", refs::REF_MARK);
        write_tx!(&self.shared, DB, tx => {
            if self.shared.backend == crate::backend::Backend::Postgres {
                sqlx::query("LOCK TABLE blobs IN SHARE ROW EXCLUSIVE MODE")
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
            }
            let mut referenced: HashSet<String> = HashSet::new();
            for (table, column) in REFERENCING {
                let sql = format!("SELECT {column} FROM {table} WHERE {column} LIKE $1");
                let texts: Vec<Option<String>> = sqlx::query_scalar(&sql)
                    .bind(pattern.as_str())
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db_error)?;
                for text in texts.iter().flatten() {
                    referenced.extend(refs::referenced(text));
                }
            }
            let stored: Vec<(String, i64)> = sqlx::query_as("SELECT sha256, size FROM blobs")
                .fetch_all(&mut *tx)
                .await
                .map_err(db_error)?;
            let mut collected = BlobsCollected::default();
            let orphans: Vec<&(String, i64)> = stored
                .iter()
                .filter(|(hash, _)| !referenced.contains(hash))
                .collect();
            collected.kept = (stored.len() - orphans.len()) as u64;
            for chunk in orphans.chunks(256) {
                let mut q = QueryBuilder::<DB>::new("DELETE FROM blobs WHERE sha256 IN (");
                let mut list = q.separated(", ");
                for (hash, _) in chunk {
                    list.push_bind(hash.as_str());
                }
                q.push(")");
                q.build().execute(&mut *tx).await.map_err(db_error)?;
                for (_, size) in chunk {
                    collected.blobs += 1;
                    collected.bytes += u64::try_from(*size).unwrap_or(0);
                }
            }
            collected
        })
    }

    /// Puts the bytes of the blobs that `texts` reference back into them (one query
    /// for all; none when nothing is referenced). `what` names the kind of JSON in
    /// errors.
    pub(crate) async fn inline_blobs(
        &self,
        what: &str,
        texts: &mut [String],
    ) -> Result<(), StoreError> {
        let mut hashes: Vec<String> = Vec::new();
        for text in texts.iter() {
            for hash in refs::referenced(text) {
                if !hashes.contains(&hash) {
                    hashes.push(hash);
                }
            }
        }
        if hashes.is_empty() {
            return Ok(());
        }
        let mut blobs: HashMap<String, Bytes> = HashMap::with_capacity(hashes.len());
        for chunk in hashes.chunks(256) {
            let rows: Vec<(String, Vec<u8>)> = on_read_pool!(&self.shared.pools, pool, DB => {
                let mut q = QueryBuilder::<DB>::new("SELECT sha256, bytes FROM blobs WHERE sha256 IN (");
                let mut list = q.separated(", ");
                for hash in chunk {
                    list.push_bind(hash.as_str());
                }
                q.push(")");
                q.build()
                    .fetch_all(pool)
                    .await
                    .map_err(db_error)?
                    .iter()
                    .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                    .collect::<Result<Vec<_>, sqlx::Error>>()
                    .map_err(db_error)?
            });
            blobs.extend(rows.into_iter().map(|(h, b)| (h, Bytes::from(b))));
        }
        for text in texts.iter_mut() {
            let taken = std::mem::take(text);
            *text = refs::internalize(taken, &blobs)
                .map_err(|e| StoreError::backend(format!("a stored {what}: {e}")))?;
        }
        Ok(())
    }

    /// As [`inline_blobs`](Self::inline_blobs) for one text.
    pub(crate) async fn inline_blob(&self, what: &str, text: String) -> Result<String, StoreError> {
        let mut texts = [text];
        self.inline_blobs(what, &mut texts).await?;
        let [text] = texts;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_checked() {
        assert!(is_hash(&"a".repeat(64)));
        assert!(!is_hash(&"A".repeat(64)));
        assert!(!is_hash("../etc/passwd"));
        assert!(!is_hash(&"a".repeat(63)));
    }
}
