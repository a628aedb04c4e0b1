//! Test stores on both backends: an SQLite file in its own temporary directory, and a
//! PostgreSQL schema of its own in `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), dropped afterwards. Without a reachable
//! server the PostgreSQL tests are skipped with a message, except under `CI=true`, where
//! that is a failure.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::Duration;

use agent_store::{Store, StoreOptions};
use sqlx::Connection;

/// The PostgreSQL URL of the tests.
pub(crate) fn pg_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A name no other test (or test process) uses.
pub(crate) fn unique(prefix: &str) -> String {
    format!("{prefix}_{}_{:016x}", std::process::id(), fastrand::u64(..))
}

/// Where a test store lives.
#[derive(Clone, Debug)]
pub(crate) enum Place {
    Sqlite { dir: PathBuf, file: PathBuf },
    Postgres { url: String, schema: String },
}

impl Place {
    /// The target for `Store::open`.
    pub(crate) fn target(&self) -> String {
        match self {
            Place::Sqlite { file, .. } => file.display().to_string(),
            Place::Postgres { url, .. } => url.clone(),
        }
    }

    /// The options that put the store in its place (the schema on PostgreSQL).
    pub(crate) fn options(&self) -> StoreOptions {
        match self {
            Place::Sqlite { .. } => StoreOptions::new(),
            Place::Postgres { schema, .. } => StoreOptions::new().schema(schema.clone()),
        }
    }

    /// Opens another handle on the same place.
    pub(crate) async fn open(&self) -> Store {
        self.open_with(self.options()).await
    }

    /// Opens another handle with these options.
    pub(crate) async fn open_with(&self, options: StoreOptions) -> Store {
        Store::open_with(&self.target(), options).await.unwrap()
    }

    /// Removes the directory or drops the schema.
    pub(crate) async fn remove(&self) {
        match self {
            Place::Sqlite { dir, .. } => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Place::Postgres { url, schema } => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
            }
        }
    }
}

/// A place is a backend of the conformance kit: each `open` is a new handle (its own
/// connection pool) on the same database.
impl agent_core::conformance::Backend for Place {
    type Store = Store;

    fn open(&self) -> agent_core::conformance::Opening<'_, Store> {
        Box::pin(Place::open(self))
    }
}

/// A fresh SQLite place (the file does not exist yet).
pub(crate) fn sqlite_place() -> Place {
    let dir = std::env::temp_dir().join(unique("agent_store_test"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("runs.db");
    Place::Sqlite { dir, file }
}

/// A fresh PostgreSQL place, or `None` (with a message) when no server answers and
/// `CI` is not `true`.
pub(crate) async fn postgres_place() -> Option<Place> {
    let url = pg_url();
    let reachable =
        tokio::time::timeout(Duration::from_secs(3), sqlx::PgConnection::connect(&url)).await;
    match reachable {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Some(Place::Postgres {
                url,
                schema: unique("agent_store_test"),
            })
        }
        failed => {
            let why = match failed {
                Ok(Err(e)) => e.to_string(),
                _ => "connect timed out".to_owned(),
            };
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("PostgreSQL at DATABASE_URL is unreachable under CI=true: {why}");
            }
            eprintln!(
                "skipped: PostgreSQL at DATABASE_URL is unreachable ({why}); set CI=true to make this a failure"
            );
            None
        }
    }
}

/// Runs `check` against a fresh store of each backend (the PostgreSQL one only when a
/// server answers), cleaning up afterwards.
#[macro_export]
macro_rules! both_backends {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let place = $crate::common::sqlite_place();
                super::$check(&place).await;
                place.remove().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(place) = $crate::common::postgres_place().await else {
                    return;
                };
                super::$check(&place).await;
                place.remove().await;
            }
        }
    )*};
}
