//! Row counts of a store ([`StoreStats`]) and its integrity check.

use agent_core::store::StoreError;
use sqlx::Row;

use crate::db::{Pools, on_read_pool};
use crate::errors::db_error;
use crate::store::Store;

/// Row counts of a store, for checks and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreStats {
    /// Recorded runs.
    pub runs: u64,
    /// Recorded traces.
    pub traces: u64,
    /// Runs with feedback.
    pub feedback: u64,
    /// Memory threads.
    pub threads: u64,
    /// Messages over all threads.
    pub thread_messages: u64,
    /// Stored documents over all collections.
    pub documents: u64,
    /// Stored blobs: the distinct bytes of content parts (images, documents, audio),
    /// each stored once however many runs, turns and threads refer to it.
    pub blobs: u64,
    /// The bytes of all stored blobs (the sum of their sizes).
    pub blob_bytes: u64,
}

impl Store {
    /// Row counts.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the database cannot be reached (the server
    /// refuses, the SQLite file is gone or was replaced: see "Faults" in the crate
    /// docs); [`StoreError::Backend`] when it refuses the query.
    pub async fn stats(&self) -> Result<StoreStats, StoreError> {
        self.shared.ready().await?;
        let counts: Vec<i64> = on_read_pool!(&self.shared.pools, pool, DB => {
            let row = sqlx::query(
                "SELECT (SELECT COUNT(record) FROM runs), (SELECT COUNT(trace) FROM runs), \
                 (SELECT COUNT(*) FROM feedback), (SELECT COUNT(*) FROM threads), \
                 (SELECT COUNT(*) FROM thread_messages), (SELECT COUNT(*) FROM documents), \
                 (SELECT COUNT(*) FROM blobs), \
                 (SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM blobs)",
            )
            .fetch_one(pool)
            .await
            .map_err(db_error)?;
            (0..8)
                .map(|i| row.try_get::<i64, _>(i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_error)?
        });
        let n = |i: usize| {
            counts
                .get(i)
                .copied()
                .map_or(0, |c| u64::try_from(c).unwrap_or(0))
        };
        Ok(StoreStats {
            runs: n(0),
            traces: n(1),
            feedback: n(2),
            threads: n(3),
            thread_messages: n(4),
            documents: n(5),
            blobs: n(6),
            blob_bytes: n(7),
        })
    }

    /// Checks the database: SQLite's `PRAGMA integrity_check` must say `ok`, and every
    /// table must be readable (both backends).
    ///
    /// # Errors
    /// [`StoreError::Backend`] with the problems found (for example a missing table);
    /// [`StoreError::Unavailable`] as for [`stats`](Self::stats).
    pub async fn check_integrity(&self) -> Result<(), StoreError> {
        self.shared.ready().await?;
        if let Pools::Sqlite { read, .. } = &self.shared.pools {
            let lines: Vec<String> = sqlx::query_scalar("PRAGMA integrity_check")
                .fetch_all(read)
                .await
                .map_err(db_error)?;
            if lines != ["ok"] {
                return Err(StoreError::backend(format!(
                    "integrity_check: {}",
                    lines.join("; ")
                )));
            }
        }
        self.stats().await.map(drop)
    }
}
