//! The connection pools of both backends, the state every handle shares, opening
//! (the SQLite file's identity, the checkpointer) and the macros that run SQL on a pool.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_core::store::StoreError;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Row};
use tokio::sync::OnceCell;

use crate::backend::Backend;
use crate::blob_refs::Recent;
use crate::errors::{db_error, is_duplicate_schema, migrate_error, redact};
use crate::migrations::Migrations;
use crate::options::StoreOptions;

/// The pools: SQLite has one writer connection (writes queue in the pool, in order,
/// instead of spinning in SQLite's busy handler) and several readers; PostgreSQL has
/// one pool.
pub(crate) enum Pools {
    Sqlite {
        write: SqlitePool,
        read: SqlitePool,
    },
    Postgres {
        pool: PgPool,
        schema: Option<String>,
    },
}

/// Runs `$body` with `$pool` bound to the backend's writing pool and `$DB` to its
/// database type; the SQL is the same text for both (`$1` placeholders, `ON CONFLICT`,
/// `RETURNING`, `excluded.`).
macro_rules! on_write_pool {
    ($pools:expr, $pool:ident, $DB:ident => $body:expr) => {
        match $pools {
            $crate::db::Pools::Sqlite { write: $pool, .. } => {
                #[allow(dead_code)]
                type $DB = ::sqlx::Sqlite;
                $body
            }
            $crate::db::Pools::Postgres { pool: $pool, .. } => {
                #[allow(dead_code)]
                type $DB = ::sqlx::Postgres;
                $body
            }
        }
    };
}

/// As [`on_write_pool`], with the backend's reading pool.
macro_rules! on_read_pool {
    ($pools:expr, $pool:ident, $DB:ident => $body:expr) => {
        match $pools {
            $crate::db::Pools::Sqlite { read: $pool, .. } => {
                #[allow(dead_code)]
                type $DB = ::sqlx::Sqlite;
                $body
            }
            $crate::db::Pools::Postgres { pool: $pool, .. } => {
                #[allow(dead_code)]
                type $DB = ::sqlx::Postgres;
                $body
            }
        }
    };
}

/// Runs `$body` in a write transaction on the backend's writing pool, `$tx` bound to the
/// transaction and `$DB` to the database type; commits when `$body` succeeds. `$body`
/// may leave early with `?` or `return Err(..)` (rolled back), or commit `$tx` itself
/// and `return Ok(..)`.
///
/// After a database error the connection is closed, not returned to the pool: SQLite
/// rolls a transaction back by itself on some errors (a full disk), and a connection
/// whose transaction state is in doubt must not take the next batch.
///
/// SQLite: the file is checked before the transaction and after the commit (see
/// [`Shared::check_file`]), so a commit that went into a file no longer at the store's
/// path is an error, never reported as stored.
macro_rules! write_tx {
    ($shared:expr, $DB:ident, $tx:ident => $body:expr) => {{
        let shared: &$crate::db::Shared = $shared;
        shared.check_file()?;
        $crate::db::on_write_pool!(&shared.pools, pool, $DB => {
            let mut conn = pool.acquire().await.map_err($crate::errors::db_error)?;
            let outcome: Result<_, ::agent_core::store::StoreError> = async {
                let mut $tx = ::sqlx::Connection::begin(&mut *conn)
                    .await
                    .map_err($crate::errors::db_error)?;
                let value = $body;
                $tx.commit().await.map_err($crate::errors::db_error)?;
                shared.check_file()?;
                Ok(value)
            }
            .await;
            if matches!(
                outcome,
                Err(::agent_core::store::StoreError::Backend { .. } | ::agent_core::store::StoreError::Unavailable { .. })
            ) {
                let _ = conn.close().await;
            }
            outcome
        })
    }};
}

pub(crate) use {on_read_pool, on_write_pool, write_tx};

/// What every store handle and the writer task share.
pub(crate) struct Shared {
    pub(crate) pools: Pools,
    pub(crate) backend: Backend,
    ready: OnceCell<()>,
    /// Whether PostgreSQL has the pgvector extension (checked once, when ready).
    pub(crate) pgvector: AtomicBool,
    /// SQLite: the file the connections opened (`None` for PostgreSQL and `:memory:`).
    file: Option<SqliteFile>,
    /// The blobs met last (see [`Recent`]).
    pub(crate) recent: Recent,
}

/// The SQLite file of a store: its path, how to create it, and which file (device and
/// inode) was at the path when the store first opened it.
struct SqliteFile {
    path: PathBuf,
    /// The pools' options with `create_if_missing`: used once, in `ready`.
    create: SqliteConnectOptions,
    identity: OnceLock<FileId>,
    /// Whether the loss of the file was already logged (it is logged once).
    reported: AtomicBool,
}

/// Which file a path names: device and inode on Unix (elsewhere only whether it exists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId(u64, u64);

#[cfg(unix)]
fn file_id(meta: &std::fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    FileId(meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn file_id(_meta: &std::fs::Metadata) -> FileId {
    FileId(0, 0)
}

impl Shared {
    /// Opens the pools without connecting: SQLite files are created and PostgreSQL
    /// connected on first use.
    pub(crate) fn open(target: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        let is_pg = target.starts_with("postgres://") || target.starts_with("postgresql://");
        let mut file = None;
        let pools = if is_pg {
            let mut connect = PgConnectOptions::from_str(target)
                .map_err(|e| {
                    StoreError::invalid(format!("invalid PostgreSQL URL: {}", redact(&e)))
                })?
                .disable_statement_logging();
            if let Some(schema) = &options.schema {
                check_schema_name(schema)?;
                connect = connect.options([("search_path", schema.as_str())]);
            }
            let pool = PgPoolOptions::new()
                .max_connections(options.max_connections)
                .acquire_timeout(options.connect_timeout)
                .connect_lazy_with(connect);
            Pools::Postgres {
                pool,
                schema: options.schema.clone(),
            }
        } else {
            let path = target.strip_prefix("sqlite://").unwrap_or(target);
            if path.is_empty() {
                return Err(StoreError::invalid("an empty SQLite path"));
            }
            // Absolute, so connections opened later (and the file checks) name the same
            // file even if the process changes its working directory.
            let path = if path == ":memory:" {
                PathBuf::from(path)
            } else {
                std::path::absolute(path)
                    .map_err(|e| StoreError::invalid(format!("SQLite path {path:?}: {e}")))?
            };
            // The pools never create the file: `ready` does, once. A connection opened
            // after the file was deleted then fails instead of starting an empty one.
            let mut connect = SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(false)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(options.busy_timeout)
                .foreign_keys(true)
                // Statement journals (an upsert in a transaction needs one) in memory,
                // not in a temporary file.
                .pragma("temp_store", "MEMORY")
                // Commits do not checkpoint; a background task does (see `checkpointer`).
                .pragma("wal_autocheckpoint", "0")
                // After a restart, the WAL file is cut back to 64 MiB.
                .pragma("journal_size_limit", "67108864")
                .disable_statement_logging();
            for (key, value) in &options.pragmas {
                connect = connect.pragma(key.clone(), value.clone());
            }
            let write = SqlitePoolOptions::new()
                .max_connections(1)
                .acquire_timeout(options.connect_timeout)
                .connect_lazy_with(connect.clone());
            let read = SqlitePoolOptions::new()
                .max_connections(options.max_connections)
                .acquire_timeout(options.connect_timeout)
                .connect_lazy_with(connect.clone());
            if path != Path::new(":memory:") {
                file = Some(SqliteFile {
                    path,
                    create: connect.create_if_missing(true),
                    identity: OnceLock::new(),
                    reported: AtomicBool::new(false),
                });
            }
            Pools::Sqlite { write, read }
        };
        Ok(Self {
            backend: if is_pg {
                Backend::Postgres
            } else {
                Backend::Sqlite
            },
            pools,
            ready: OnceCell::new(),
            pgvector: AtomicBool::new(false),
            file,
            recent: Recent::default(),
        })
    }

    /// Runs the migrations once (creating the SQLite file, or the schema on
    /// PostgreSQL, first, and the pgvector column when the extension is installed),
    /// then checks the SQLite file (see [`check_file`](Self::check_file)). A failed
    /// migration is not remembered: the next call tries again.
    pub(crate) async fn ready(&self) -> Result<(), StoreError> {
        self.migrated().await?;
        self.check_file()
    }

    /// Runs the migrations once, as [`ready`](Self::ready), without checking the SQLite
    /// file: for a write that checks it itself ([`write_tx!`] does, before its
    /// transaction and after its commit), so that a batch costs no extra `stat` per
    /// write it holds.
    pub(crate) async fn migrated(&self) -> Result<(), StoreError> {
        self.ready
            .get_or_try_init(|| async { self.migrate().await })
            .await
            .map(drop)
    }

    /// SQLite: the file at the store's path must still be the one its connections
    /// opened. A file deleted (or replaced) under an open store stays open in the
    /// process, so without this check writes would commit into a file that no reader
    /// of the path ever sees. Every call then fails with
    /// [`StoreError::Unavailable`] saying so (logged once as an error); reopening the
    /// store uses (or creates) the file now at the path. A `stat` of the path: about a
    /// microsecond.
    pub(crate) fn check_file(&self) -> Result<(), StoreError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let Some(expected) = file.identity.get() else {
            return Ok(());
        };
        let what = match std::fs::metadata(&file.path) {
            Ok(meta) if file_id(&meta) == *expected => return Ok(()),
            Ok(_) => "was replaced by another file",
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "is gone (deleted)",
            Err(e) => {
                return Err(StoreError::unavailable(format!(
                    "cannot check the SQLite file {}: {e}",
                    file.path.display()
                )));
            }
        };
        let message = format!(
            "the SQLite file {} {what} since this store opened it: nothing is written to or \
             read from it any more (its writes would reach no reader of the path); open the \
             store again to use the file now at the path",
            file.path.display()
        );
        if !file.reported.swap(true, Ordering::Relaxed) {
            tracing::error!("{message}");
        }
        Err(StoreError::unavailable(message))
    }

    /// SQLite: creates the file if missing (the pools never do) and runs SQLite's
    /// connection setup on it once.
    async fn create_file(file: &SqliteFile) -> Result<(), StoreError> {
        use sqlx::Connection;
        let in_file = |e: StoreError| {
            let path = file.path.display();
            match e {
                StoreError::Unavailable { message } => StoreError::unavailable(format!(
                    "cannot open the SQLite file {path}: {message}"
                )),
                StoreError::Backend { message } => {
                    StoreError::backend(format!("the SQLite file {path}: {message}"))
                }
                other => other,
            }
        };
        if let Some(dir) = file.path.parent()
            && !dir.as_os_str().is_empty()
            && !dir.is_dir()
        {
            return Err(StoreError::unavailable(format!(
                "cannot open the SQLite file {}: its directory {} does not exist",
                file.path.display(),
                dir.display()
            )));
        }
        let conn = sqlx::SqliteConnection::connect_with(&file.create)
            .await
            .map_err(|e| in_file(db_error(e)))?;
        conn.close().await.map_err(|e| in_file(db_error(e)))
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = Migrator::new(Migrations(self.backend))
            .await
            .map_err(|e| StoreError::backend(format!("migrations: {e}")))?;
        match &self.pools {
            Pools::Sqlite { write, .. } => {
                if let Some(file) = &self.file {
                    Self::create_file(file).await?;
                }
                migrator.run(write).await.map_err(migrate_error)?;
                if let Some(file) = &self.file {
                    let meta = std::fs::metadata(&file.path).map_err(|e| {
                        StoreError::unavailable(format!(
                            "cannot open the SQLite file {}: {e}",
                            file.path.display()
                        ))
                    })?;
                    let _ = file.identity.set(file_id(&meta));
                }
            }
            Pools::Postgres { pool, schema } => {
                if let Some(schema) = schema {
                    let created = sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
                        .execute(pool)
                        .await;
                    // Two processes creating the same new schema at once: `IF NOT EXISTS`
                    // checks before it inserts, so the later one fails on the catalog's
                    // unique index (23505) or as a duplicate schema (42P06). Either way
                    // the schema now exists, which is all this step needs.
                    match created {
                        Ok(_) => {}
                        Err(e) if is_duplicate_schema(&e) => {}
                        Err(e) => return Err(db_error(e)),
                    }
                }
                migrator.run(pool).await.map_err(migrate_error)?;
                let has_vector: bool = sqlx::query(
                    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
                )
                .fetch_one(pool)
                .await
                .map_err(db_error)?
                .try_get(0)
                .map_err(db_error)?;
                if has_vector {
                    sqlx::query(
                        "ALTER TABLE documents ADD COLUMN IF NOT EXISTS embedding_vec vector",
                    )
                    .execute(pool)
                    .await
                    .map_err(db_error)?;
                }
                self.pgvector.store(has_vector, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// SQLite: starts the background checkpointer. Commits never checkpoint (their
    /// `wal_autocheckpoint` is 0): every second this task copies committed WAL frames
    /// into the database file (`PRAGMA wal_checkpoint(PASSIVE)`, which never blocks a
    /// writer) on a reader connection, so the writer's commits pay for no fsync. When
    /// the WAL is still over 64 MiB (a writer that never pauses), it checkpoints with
    /// `RESTART`, which waits for the writer between two commits and starts the WAL
    /// over. It stops when the store is dropped.
    pub(crate) fn start_checkpointer(shared: &std::sync::Arc<Self>) {
        if shared.backend != Backend::Sqlite {
            return;
        }
        let weak = std::sync::Arc::downgrade(shared);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(shared) = weak.upgrade() else { return };
                if shared.ready.get().is_none() || shared.check_file().is_err() {
                    continue;
                }
                if let Pools::Sqlite { read, .. } = &shared.pools {
                    if read.is_closed() {
                        return;
                    }
                    // PASSIVE keeps up between commits; a WAL over the limit (a writer that
                    // never pauses) is checkpointed and restarted while the writer waits.
                    let passive = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                        .fetch_one(read)
                        .await;
                    let frames = passive
                        .as_ref()
                        .ok()
                        .and_then(|row| row.try_get::<i64, _>(1).ok());
                    let outcome = match frames {
                        Some(frames) if frames > WAL_RESTART_FRAMES => {
                            sqlx::query("PRAGMA wal_checkpoint(RESTART)")
                                .execute(read)
                                .await
                                .map(drop)
                        }
                        _ => passive.map(drop),
                    };
                    if let Err(error) = outcome {
                        tracing::debug!(error = %error, "WAL checkpoint failed; the next one retries");
                    }
                }
            }
        });
    }

    /// Closes the pools (waiting for connections in use to come back).
    pub(crate) async fn close(&self) {
        match &self.pools {
            Pools::Sqlite { write, read } => {
                // A last full checkpoint, so a closed store is one file.
                let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                    .execute(write)
                    .await;
                read.close().await;
                write.close().await;
            }
            Pools::Postgres { pool, .. } => pool.close().await,
        }
    }
}

/// A schema name is put into SQL as an identifier, so only plain names are accepted.
fn check_schema_name(schema: &str) -> Result<(), StoreError> {
    let ok = (1..=63).contains(&schema.len())
        && schema
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !schema.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(StoreError::invalid(format!(
            "schema name {schema:?}: use 1 to 63 letters, digits and underscores, not starting with a digit"
        )))
    }
}

/// How often the SQLite checkpointer runs.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(1000);

/// A WAL longer than this (frames of 4 KiB: 64 MiB) is restarted by the checkpointer.
const WAL_RESTART_FRAMES: i64 = 16_384;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(check_schema_name("agent_test_1").is_ok());
        assert!(check_schema_name("1x").is_err());
        assert!(check_schema_name("a\"; DROP").is_err());
        assert!(check_schema_name("").is_err());
    }
}
