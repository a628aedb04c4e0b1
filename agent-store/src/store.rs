//! [`Store`]: the handle on one database, and how it opens.

use std::sync::Arc;

use agent_core::eval::replay as replay_trace;
use agent_core::store::{EvalFilter, FeedbackStore, RunDiff, TraceStore, write_jsonl};
use agent_core::{AgentConfig, AgentOutput, AgentResult, store::StoreError};

use crate::backend::Backend;
use crate::checkpoint_writer::CheckpointWriter;
use crate::db::Shared;
use crate::options::StoreOptions;
use crate::writer::Writer;

/// A handle on one database: SQLite file or PostgreSQL server. Cheap to clone; every
/// clone shares the pools and the writer. Implements [`Memory`](agent_core::store::Memory),
/// [`FeedbackStore`], [`TraceStore`] and
/// [`CheckpointStore`](agent_core::store::CheckpointStore) (durable runs).
#[derive(Clone)]
pub struct Store {
    pub(crate) shared: Arc<Shared>,
    pub(crate) writer: Arc<Writer>,
    /// The group commit of checkpoint saves and ledger entries.
    pub(crate) checkpoints: Arc<CheckpointWriter>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.shared.backend)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens `target`: a `postgres://` (or `postgresql://`) URL, else an SQLite file path
    /// (a `sqlite://` prefix is allowed; the file is created if missing). Connects and
    /// runs the migrations before it returns. Needs a Tokio runtime; the writer task
    /// runs on it.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for a malformed target (an empty path, a URL that does
    /// not parse, a bad schema name); [`StoreError::Unavailable`] when the server
    /// refuses or the file cannot be opened (its directory is missing, a directory is in
    /// its place, no permission); [`StoreError::Backend`] when a migration fails (a file
    /// that is not a database, a table of another shape: the migration is rolled back,
    /// nothing of the file is changed).
    pub async fn open(target: &str) -> Result<Self, StoreError> {
        Self::open_with(target, StoreOptions::default()).await
    }

    /// Opens `target` with options (see [`open`](Self::open)).
    ///
    /// # Errors
    /// As [`open`](Self::open); with [`StoreOptions::lazy`], only a malformed target.
    pub async fn open_with(target: &str, options: StoreOptions) -> Result<Self, StoreError> {
        let shared = Arc::new(Shared::open(target, &options)?);
        if !options.lazy {
            shared.ready().await?;
        }
        Shared::start_checkpointer(&shared);
        let writer = Arc::new(Writer::spawn(
            Arc::clone(&shared),
            options.queue,
            options.max_batch,
            options.write_behind,
        ));
        let checkpoints = Arc::new(CheckpointWriter::spawn(
            Arc::clone(&shared),
            options.queue,
            options.max_batch,
        ));
        Ok(Self {
            shared,
            writer,
            checkpoints,
        })
    }

    /// Which database this store uses.
    pub fn backend(&self) -> Backend {
        self.shared.backend
    }

    /// Waits until every record and trace queued before this call is committed or has
    /// failed; returns how many write-behind writes failed since the previous flush (0
    /// without [`StoreOptions::write_behind`]: then every failure is its caller's error).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the writer has stopped.
    pub async fn flush(&self) -> Result<u64, StoreError> {
        self.writer.flush().await
    }

    /// Flushes, then closes the connections; returns what [`flush`](Self::flush)
    /// returns. Other clones of the store stop working.
    ///
    /// # Errors
    /// As [`flush`](Self::flush).
    pub async fn close(&self) -> Result<u64, StoreError> {
        let flushed = self.flush().await;
        self.shared.close().await;
        flushed
    }

    /// Runs a stored run's input again on `config` (see [`agent_core::eval::replay`]).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when no trace has this id.
    pub async fn replay<T: AgentOutput>(
        &self,
        trace_id: &str,
        config: &AgentConfig<T>,
    ) -> Result<AgentResult<T>, StoreError> {
        replay_trace(self, trace_id, config).await
    }

    /// Compares two recorded runs (see [`RunDiff`]).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] naming the trace id that is not stored.
    pub async fn diff(&self, left: &str, right: &str) -> Result<RunDiff, StoreError> {
        let a = self
            .trace(left)
            .await?
            .ok_or_else(|| StoreError::not_found(format!("trace {left}")))?;
        let b = self
            .trace(right)
            .await?
            .ok_or_else(|| StoreError::not_found(format!("trace {right}")))?;
        Ok(RunDiff::between(&a, &b))
    }

    /// Writes the eval set under `filter` as JSON Lines (see
    /// [`write_jsonl`]); returns the number of lines.
    ///
    /// # Errors
    /// As [`stats`](Self::stats) when the store cannot be read; [`StoreError::Backend`]
    /// when `out` cannot be written.
    pub async fn export_jsonl(
        &self,
        filter: &EvalFilter,
        out: impl std::io::Write,
    ) -> Result<usize, StoreError> {
        let examples = self.eval_set(filter).await?;
        write_jsonl(&examples, out)
            .map_err(|e| StoreError::backend(format!("cannot write the eval set: {e}")))
    }
}
