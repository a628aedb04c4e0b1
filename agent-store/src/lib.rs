//! # agent-store
//!
//! SQLite and PostgreSQL backends for agent-core's stores: one [`Store`] implements
//! [`Memory`](agent_core::store::Memory) (conversation threads), [`FeedbackStore`](agent_core::store::FeedbackStore) (every run
//! recorded, feedback attached, eval sets exported) and [`TraceStore`](agent_core::store::TraceStore) (transcripts and
//! events, replay, diff); [`Store::documents`] gives a [`Retriever`](agent_core::store::Retriever)
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
//! ## Blobs
//!
//! The bytes of content parts (images, documents, audio) are kept once per store, in the
//! `blobs` table (SHA-256, media type, size in bytes, bytes; migration 8). Every JSON the
//! store writes (run records, traces, checkpoint headers and states, ledger entries,
//! thread messages) has each part's inline base64 (`"source":{"bytes":"..."}`) replaced
//! by a reference, `"source":{"blob":{"sha256":"<64 hex>","size":<bytes>}}`, the part's
//! `media_type` staying beside it; the blob row is inserted in the same transaction as
//! the row that refers to it, and not again when it is stored already. Loading reads the
//! referenced blobs in one query and puts the base64 back, so a load returns exactly the
//! JSON that was given; records written before blobs (inline base64) load as they are,
//! and a reference whose blob is missing is a [`StoreError::Backend`] naming the hash.
//! The swap works on serde_json's compact text (in which an unescaped `"` is always
//! structural), without parsing it: JSON with no inline bytes costs one substring
//! search. A store remembers the last 32 blobs it met (up to 32 MiB of base64), so the
//! same image in every checkpoint of a run, or in many runs, is compared as text
//! instead of decoded and hashed again. [`Store::blob`] reads one blob,
//! [`Store::blob_usage`] and [`Store::stats`] count them. Blobs are never deleted: one
//! that nothing refers to any more stays until the database is cleaned by hand.
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

mod backend;
mod blob_refs;
mod blobs;
mod checkpoint_writer;
mod checkpoints;
mod columns;
mod dashboard;
mod db;
mod documents;
mod errors;
mod memory;
mod migrations;
mod options;
mod protocol_tasks;
mod records;
mod rollups;
mod stats;
mod store;
mod writer;

pub use agent_core::store::StoreError;

pub use backend::Backend;
pub use blobs::{Blob, BlobUsage, BlobsCollected};
pub use dashboard::{
    DAY_MS, DayCount, LatencyCount, Overview, PageCursor, RunFilter, RunScope, RunsPage, TurnCount,
};
pub use documents::Documents;
pub use options::StoreOptions;
pub use protocol_tasks::ProtocolTask;
pub use stats::StoreStats;
pub use store::Store;
