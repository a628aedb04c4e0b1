//! # agent-store
//!
//! SQLite and PostgreSQL backends for agent-core's stores: one [`Store`] implements
//! [`Memory`](agent_core::Memory) (conversation threads), [`FeedbackStore`] (every run
//! recorded, feedback attached, eval sets exported) and [`TraceStore`] (transcripts and
//! events, replay, diff); [`Store::documents`] gives a [`Retriever`](agent_core::Retriever)
//! over stored documents and their embeddings.
//!
//! ```no_run
//! use agent_core::{AgentConfig, RunOptions, run_agent_with};
//! use agent_store::Store;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::open("runs.db").await?;            // or a postgres:// URL
//! let config: AgentConfig<String> = AgentConfig::builder("support")
//!     .model("test")
//!     .memory(store.clone())
//!     .feedback_store(store.clone())
//!     .trace_store(store.clone())
//!     .build()?;
//! let first = run_agent_with(&config, "Hi, I'm Ada.", RunOptions::new().thread("ada")).await;
//! let second = run_agent_with(&config, "What's my name?", RunOptions::new().thread("ada")).await;
//! # let _ = (first, second);
//! # Ok(())
//! # }
//! ```
//!
//! ## Backends
//!
//! [`Store::open`] takes a file path (SQLite, the embedded default) or a `postgres://`
//! URL. Both run the same versioned migrations when they open (sqlx's migrator; its
//! `_sqlx_migrations` table records what ran) and the same SQL, every value a bound
//! parameter: untrusted text (inputs, outputs, tool results) never becomes SQL.
//!
//! - **SQLite**: the file is created on first use; WAL journal, `synchronous=NORMAL`
//!   (a commit survives a killed process; a power cut may lose the last commits, never
//!   corrupt the file), a busy timeout (default 5 s) for other processes' locks,
//!   statement journals in memory. One writer connection (writes queue in order) and
//!   several readers. Commits never checkpoint: a background task does, every second,
//!   without blocking the writer (`PASSIVE`), and restarts a WAL that passed 64 MiB.
//! - **PostgreSQL**: a pool of connections (no TLS: a local server or a tunnel);
//!   [`StoreOptions::schema`] puts every table in one schema (created if missing), so
//!   many stores, or tests, share one database.
//!
//! Why sqlx: one async API over both databases with connection pools, transactions,
//! query builders for multi-row statements and a migrator, maintained and widely used;
//! without its macros (no database at compile time) and with SQLite bundled (no system
//! library). rusqlite + tokio-postgres would mean two APIs, two pools and a
//! `spawn_blocking` bridge for SQLite.
//!
//! ## Recording
//!
//! Run records and traces go through one background writer per store: callers queue
//! them on a bounded channel (4,096 by default) and wait for their commit; the writer
//! takes everything queued (up to 256 at a time) and writes it in one transaction with
//! multi-row upserts keyed by trace id. A run's record and its trace share one row of
//! the `runs` table (two JSON columns beside the indexed ones). So concurrent runs share
//! commits (group commit), a run's record is durable when `run_agent` returns, and a
//! retried write never duplicates. [`Store::flush`] waits for everything queued before
//! it.
//!
//! With [`StoreOptions::write_behind`], runs do not wait for the commit: `record`
//! returns once the row is queued, commits grow to the queue's size, and recording
//! costs about half as much CPU at concurrency 64 (see `benches/record.rs`). The price:
//! a failed write is no longer its run's error; it is a warning and a count returned by
//! the next flush, which `run_batch` adds to the receipt and reports to the config's
//! observer; and a run's record is durable after the next flush, not when the run
//! returns.
//!
//! ## Faults
//!
//! What a store does when its database goes wrong under it (`docs/scale-out.md` has
//! the same for the queue; the tests in `tests/faults.rs` and `tests/errors.rs` show
//! each):
//!
//! - **The SQLite file deleted or replaced** (`rm runs.db*`, a backup restored over
//!   it): the process still holds the old file open, so its writes would commit into a
//!   file no reader of the path sees. Every call checks that the path still names the
//!   file the store opened (device and inode; a `stat`, about a microsecond), and every
//!   write checks again after its commit. From then on every call fails with
//!   [`StoreError::Unavailable`] saying the file is gone (or was replaced) and to open
//!   the store again; a write is never reported stored unless its commit is in the file
//!   at the path. The store never recreates the file itself: [`Store::open`] on the path
//!   does (an empty store).
//! - **The PostgreSQL server crashes or restarts**: calls fail with
//!   [`StoreError::Unavailable`] (refused connections, broken connections, the server's
//!   "shutting down" and "starting up" codes) while it is away; the pool reconnects by
//!   itself on the next call. Every failure is its caller's error (or, write-behind,
//!   counted by the next flush), so a run counts it in `store_failures`.
//! - **Bad paths and files**: see [`Store::open`]. A failed open changes nothing.
//!
//! ## Retrieval
//!
//! Vector search is brute force in Rust on both backends: each collection's vectors are
//! kept in memory (reloaded when the collection changes) and scanned per query. That is
//! fine up to about 100,000 vectors of 768 dimensions (300 MB of `f32`, a few ms per
//! query on one core); past that use pgvector. On PostgreSQL with the `vector` extension
//! installed (checked in `pg_extension` when the store opens), vectors are also written
//! to an `embedding_vec vector` column and searched there with `<=>` (cosine distance).
//! That path is not tested here: the development and CI servers have no pgvector.

mod checkpoint_writer;
mod checkpoints;
mod dashboard;
mod db;
mod documents;
mod memory;
mod records;
mod writer;

use std::sync::Arc;
use std::time::Duration;

pub use agent_core::StoreError;
use agent_core::store::{
    EvalFilter, FeedbackStore, RunDiff, TraceStore, replay as replay_trace, write_jsonl,
};
use agent_core::{AgentConfig, AgentOutput, AgentResult};

pub use dashboard::{
    DAY_MS, DayCount, LatencyCount, Overview, PageCursor, RunFilter, RunScope, RunsPage, TurnCount,
};
pub use db::Backend;
pub use documents::Documents;

use checkpoint_writer::CheckpointWriter;
use db::Shared;
use writer::Writer;

/// A handle on one database: SQLite file or PostgreSQL server. Cheap to clone; every
/// clone shares the pools and the writer. Implements [`Memory`](agent_core::Memory),
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

/// How a [`Store`] opens.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StoreOptions {
    /// PostgreSQL: the schema for every table (created if missing); default: the
    /// server's search path (usually `public`). 1 to 63 letters, digits, underscores.
    pub schema: Option<String>,
    /// Connections per pool (default 8; SQLite readers, PostgreSQL connections).
    pub max_connections: u32,
    /// How long a call waits for a connection (default 5 s); a server that refuses
    /// fails after this.
    pub connect_timeout: Duration,
    /// SQLite: how long a write waits for another process's lock (default 5 s).
    pub busy_timeout: Duration,
    /// SQLite: extra `PRAGMA`s run on every connection (for example `max_page_count`
    /// to cap the file's size).
    pub pragmas: Vec<(String, String)>,
    /// Open without connecting (PostgreSQL) or creating the file (SQLite): the first
    /// call connects and migrates, and a failure there is that call's error. Default
    /// off: [`Store::open_with`] connects and migrates before it returns.
    pub lazy: bool,
    /// The writer's queue (records waiting for a commit; default 4,096).
    pub queue: usize,
    /// The most records one commit takes (default 256).
    pub max_batch: usize,
    /// Write-behind (default off): `record` and `record_trace` return once the row is
    /// queued instead of committed. Runs do not wait for commits, so commits are
    /// larger and recording is cheaper; a failed write is then a `tracing` warning and
    /// a count returned by the next [`Store::flush`] (which `run_batch` adds to the
    /// receipt), not an error of its run, and a run's record is durable after the next
    /// flush rather than when the run returns.
    pub write_behind: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            schema: None,
            max_connections: 8,
            connect_timeout: db::DEFAULT_CONNECT_TIMEOUT,
            busy_timeout: Duration::from_secs(5),
            pragmas: Vec::new(),
            lazy: false,
            queue: 4096,
            max_batch: 256,
            write_behind: false,
        }
    }
}

impl StoreOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// PostgreSQL: put every table in `schema` (created if missing).
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Connections per pool (at least 1).
    #[must_use]
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// How long a call waits for a connection.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// SQLite: how long a write waits for another process's lock.
    #[must_use]
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// SQLite: a `PRAGMA key = value` run on every connection.
    #[must_use]
    pub fn pragma(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.pragmas.push((key.into(), value.into()));
        self
    }

    /// Connect and migrate on first use instead of in `open_with`.
    #[must_use]
    pub fn lazy(mut self, lazy: bool) -> Self {
        self.lazy = lazy;
        self
    }

    /// The writer's queue length (at least 1).
    #[must_use]
    pub fn queue(mut self, n: usize) -> Self {
        self.queue = n.max(1);
        self
    }

    /// The most records one commit takes (at least 1).
    #[must_use]
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n.max(1);
        self
    }

    /// Write-behind: records and traces return once queued (see the field's docs).
    #[must_use]
    pub fn write_behind(mut self, on: bool) -> Self {
        self.write_behind = on;
        self
    }
}

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

    /// A retriever over the documents of `collection`, embedded with `embedder` (see
    /// [`Documents`]).
    pub fn documents(
        &self,
        collection: impl Into<String>,
        embedder: Arc<dyn agent_core::Embedder>,
    ) -> Documents {
        Documents::new(self.clone(), collection.into(), embedder)
    }

    /// Runs a stored run's input again on `config` (see [`agent_core::store::replay`]).
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

    /// Row counts.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the database cannot be reached (the server
    /// refuses, the SQLite file is gone or was replaced: see "Faults" in the crate
    /// docs); [`StoreError::Backend`] when it refuses the query.
    pub async fn stats(&self) -> Result<StoreStats, StoreError> {
        records::stats(self).await
    }

    /// Checks the database: SQLite's `PRAGMA integrity_check` must say `ok`, and every
    /// table must be readable (both backends).
    ///
    /// # Errors
    /// [`StoreError::Backend`] with the problems found (for example a missing table);
    /// [`StoreError::Unavailable`] as for [`stats`](Self::stats).
    pub async fn check_integrity(&self) -> Result<(), StoreError> {
        records::check_integrity(self).await
    }
}
