//! The versioned migrations, run by sqlx's migrator when a store is ready.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::migrate::{Migration, MigrationSource, MigrationType};

use crate::backend::Backend;
use crate::rollups;

/// The versioned migrations: the same statements for both backends, except the binary
/// column type (`BLOB` / `BYTEA`). Never edit a released migration; add one.
#[derive(Debug)]
pub(crate) struct Migrations(pub(crate) Backend);

const MIGRATION_1: &str = "
CREATE TABLE IF NOT EXISTS runs (
    trace_id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    variant TEXT,
    fingerprint TEXT NOT NULL,
    ending TEXT NOT NULL,
    category TEXT,
    thread_id TEXT,
    started_at_ms BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    llm_calls BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION,
    record TEXT,
    trace TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started_at_ms);
CREATE TABLE IF NOT EXISTS feedback (
    trace_id TEXT PRIMARY KEY,
    rating BIGINT,
    given_at_ms BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS threads (
    thread_id TEXT PRIMARY KEY,
    llm_calls BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    messages BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS thread_runs (
    trace_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    llm_calls BIGINT NOT NULL,
    appended_at_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS thread_messages (
    thread_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    trace_id TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
CREATE TABLE IF NOT EXISTS collections (
    collection TEXT PRIMARY KEY,
    version BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    collection TEXT NOT NULL,
    id TEXT NOT NULL,
    model TEXT NOT NULL,
    dims BIGINT NOT NULL,
    embedding {blob} NOT NULL,
    body TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (collection, id)
);
";

/// Durable runs: one checkpoint row per run (replaced in place), one ledger row per
/// tool execution.
const MIGRATION_2: &str = "
CREATE TABLE IF NOT EXISTS checkpoints (
    run_id TEXT PRIMARY KEY,
    seq BIGINT NOT NULL,
    finished BOOLEAN NOT NULL,
    fingerprint TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    header TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checkpoints_by_finished ON checkpoints (finished, updated_at_ms);
CREATE TABLE IF NOT EXISTS tool_ledger (
    run_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run_id, call_id)
);
";

/// Thread claims ([`Memory::claim`](agent_core::store::Memory::claim)): the run that
/// holds each busy thread, until when (case C38).
const MIGRATION_3: &str = "
CREATE TABLE IF NOT EXISTS thread_claims (
    thread_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
";

/// Fencing of durable runs: who wrote each checkpoint (a token per process that runs
/// the run; see `CheckpointStore::save_fenced`).
const MIGRATION_4: &str = "
ALTER TABLE checkpoints ADD COLUMN writer TEXT NOT NULL DEFAULT '';
";

/// Thread summaries (compaction): the summary of a thread's older messages and the last
/// message it covers (`seq`; 0 for none).
const MIGRATION_6: &str = "
ALTER TABLE threads ADD COLUMN summary TEXT;
ALTER TABLE threads ADD COLUMN summary_upto BIGINT NOT NULL DEFAULT 0;
";

/// Leases of durable runs: until when the process running a run holds it (ms since the
/// Unix epoch; 0: no one, a paused or finished run). A sweeper takes over only runs
/// whose lease lapsed (`docs/durable.md`, "Leases and the sweeper").
const MIGRATION_7: &str = "
ALTER TABLE checkpoints ADD COLUMN lease_until_ms BIGINT NOT NULL DEFAULT 0;
";

/// Blobs: the bytes of content parts (images, documents, audio), once per store, by
/// their SHA-256; stored JSON refers to them (see `src/blob_refs.rs`, `src/blobs.rs`).
/// `size` in bytes.
const MIGRATION_8: &str = "
CREATE TABLE IF NOT EXISTS blobs (
    sha256 TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    bytes {blob} NOT NULL
);
";

/// Protocol tasks (`src/protocol_tasks.rs`): an A2A task served by agent-interop, its
/// JSON whole, by protocol and id. `updated_at_ms` in ms since the Unix epoch.
const MIGRATION_9: &str = "
CREATE TABLE IF NOT EXISTS protocol_tasks (
    protocol TEXT NOT NULL,
    task_id TEXT NOT NULL,
    context_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    run_id TEXT NOT NULL,
    state TEXT NOT NULL,
    body TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (protocol, task_id)
);
";

impl<'s> MigrationSource<'s> for Migrations {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, sqlx::error::BoxDynError>> + Send + 's>>
    {
        let blob = match self.0 {
            Backend::Sqlite => "BLOB",
            Backend::Postgres => "BYTEA",
        };
        let migrations = vec![
            Migration::new(
                1,
                Cow::Borrowed("runs (records and traces), feedback, threads, documents"),
                MigrationType::Simple,
                Cow::Owned(MIGRATION_1.replace("{blob}", blob)),
                false,
            ),
            Migration::new(
                2,
                Cow::Borrowed("checkpoints and the tool ledger (durable runs)"),
                MigrationType::Simple,
                Cow::Borrowed(MIGRATION_2),
                false,
            ),
            Migration::new(
                3,
                Cow::Borrowed("thread claims: one run at a time per thread"),
                MigrationType::Simple,
                Cow::Borrowed(MIGRATION_3),
                false,
            ),
            Migration::new(
                4,
                Cow::Borrowed("checkpoint writers: fencing of durable runs"),
                MigrationType::Simple,
                Cow::Borrowed(MIGRATION_4),
                false,
            ),
            Migration::new(
                5,
                // The description is stored with the migration as released; it stays.
                Cow::Borrowed(
                    "dashboard: generated columns, indexes and daily rollups (src/dashboard.rs)",
                ),
                MigrationType::Simple,
                Cow::Owned(rollups::migration_5(self.0 == Backend::Postgres)),
                false,
            ),
            Migration::new(
                6,
                Cow::Borrowed("thread summaries (compaction)"),
                MigrationType::Simple,
                Cow::Borrowed(MIGRATION_6),
                false,
            ),
            Migration::new(
                7,
                Cow::Borrowed("checkpoint leases: until when a process holds a durable run"),
                MigrationType::Simple,
                Cow::Borrowed(MIGRATION_7),
                false,
            ),
            Migration::new(
                8,
                Cow::Borrowed("blobs: the bytes of content parts, once, by SHA-256"),
                MigrationType::Simple,
                Cow::Owned(MIGRATION_8.replace("{blob}", blob)),
                false,
            ),
            Migration::new(
                9,
                Cow::Borrowed("protocol tasks: A2A tasks served over the store"),
                MigrationType::Simple,
                Cow::Borrowed(MIGRATION_9),
                false,
            ),
        ];
        Box::pin(async move { Ok(migrations) })
    }
}
