//! Helpers: the Python peers (the official A2A SDK and the AG-UI types, from
//! `scripts/python-peers.sh`), a server on a free port, the test agents, and stores on
//! both backends (an SQLite file; a PostgreSQL schema of its own, dropped afterwards).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use agent_core::durable::InMemoryCheckpoints;
use agent_core::testing::TestModel;
use agent_core::{AgentConfig, agent_output, tool, tools};
use agent_store::{Store, StoreOptions};
use serde_json::Value;
use sqlx::Connection;

/// A support ticket's triage.
#[agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct Triage {
    /// The queue.
    pub queue: String,
    /// Severity from 1 to 4.
    #[schemars(range(min = 1, max = 4))]
    pub severity: u8,
}

/// Refund an order; runs once a person approved the call.
#[tool(requires_approval)]
async fn refund(order_id: String) -> Result<String, String> {
    Ok(format!("refunded {order_id}"))
}

/// Look an order up.
#[tool]
async fn lookup_order(order_id: String) -> Result<String, String> {
    Ok(format!("{order_id}: shipped"))
}

/// The `lookup_order` tool.
pub fn order_tools() -> agent_core::ToolRegistry {
    tools![lookup_order]
}

/// Wait for a parcel that never comes.
#[tool]
async fn wait_for_parcel(order_id: String) -> Result<String, String> {
    std::future::pending::<()>().await;
    Ok(order_id)
}

/// The triage agent whose first turn calls a tool that never returns: its run goes on
/// until it is cancelled.
pub fn waiting() -> AgentConfig<Triage> {
    AgentConfig::<Triage>::builder("waiting")
        .llm(TestModel::new().calling_tools_first())
        .tools(tools![wait_for_parcel])
        .build()
        .unwrap()
}

/// The triage agent on the built-in test model: it answers at once.
pub fn answering() -> AgentConfig<Triage> {
    AgentConfig::<Triage>::builder("triage")
        .llm(TestModel::new().calling_tools_first())
        .tools(tools![lookup_order])
        .build()
        .unwrap()
}

/// The triage agent whose first turn calls `refund` (needs approval): it pauses. With
/// `store` as its checkpoint store, else checkpoints in memory.
pub fn approving(store: Option<Store>) -> AgentConfig<Triage> {
    let builder = AgentConfig::<Triage>::builder("refunds")
        .llm(TestModel::new().calling_tools_first())
        .tools(tools![refund]);
    match store {
        Some(store) => builder.checkpoints(store),
        None => builder.checkpoints(InMemoryCheckpoints::new()),
    }
    .build()
    .unwrap()
}

/// The venv's python, or `None` (with a message) when it cannot be made and `CI` is
/// not `true`.
pub fn python() -> Option<String> {
    static PYTHON: OnceLock<Result<String, String>> = OnceLock::new();
    let made = PYTHON.get_or_init(|| {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/python-peers.sh");
        let out = std::process::Command::new("bash").arg(script).output();
        match out {
            Ok(out) if out.status.success() => {
                Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
            }
            Ok(out) => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
            Err(e) => Err(e.to_string()),
        }
    });
    match made {
        Ok(python) => Some(python.clone()),
        Err(why) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("the Python peers could not be made under CI=true: {why}");
            }
            eprintln!("skipped: the Python peers could not be made ({why})");
            None
        }
    }
}

/// A file of `tests/common/`.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/common")
        .join(name)
}

/// Serves `router` on a free port of 127.0.0.1; its base URL (`http://127.0.0.1:P/`).
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    format!("http://127.0.0.1:{port}/")
}

/// Runs the A2A SDK's client script with `args`; its JSON lines.
pub async fn sdk_client(python: &str, url: &str, args: &[&str]) -> Vec<Value> {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(script("a2a_client.py"))
            .arg(url)
            .args(args)
            .output(),
    )
    .await
    .expect("the SDK client ran for two minutes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the SDK client failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A name no other test (or test process) uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}_{:016x}", std::process::id(), fastrand::u64(..))
}

/// Where a test store lives.
#[derive(Clone, Debug)]
pub enum Place {
    /// A file in its own directory.
    Sqlite(PathBuf),
    /// A schema of its own.
    Postgres(String, String),
}

impl Place {
    /// A fresh SQLite place.
    pub fn sqlite() -> Place {
        let dir = std::env::temp_dir().join(unique("agent_interop_test"));
        std::fs::create_dir_all(&dir).unwrap();
        Place::Sqlite(dir)
    }

    /// A fresh PostgreSQL place, or `None` (with a message) when no server answers and
    /// `CI` is not `true`.
    pub async fn postgres() -> Option<Place> {
        let url = std::env::var("DATABASE_URL")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let reachable =
            tokio::time::timeout(Duration::from_secs(3), sqlx::PgConnection::connect(&url)).await;
        match reachable {
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
                Some(Place::Postgres(url, unique("agent_interop_test")))
            }
            _ if std::env::var("CI").as_deref() == Ok("true") => {
                panic!("PostgreSQL at DATABASE_URL is unreachable under CI=true")
            }
            _ => {
                eprintln!("skipped: PostgreSQL at DATABASE_URL is unreachable");
                None
            }
        }
    }

    /// Opens a store there (another handle each time: a "restarted process").
    pub async fn open(&self) -> Store {
        match self {
            Place::Sqlite(dir) => Store::open(&dir.join("tasks.db").display().to_string())
                .await
                .unwrap(),
            Place::Postgres(url, schema) => {
                Store::open_with(url, StoreOptions::new().schema(schema.clone()))
                    .await
                    .unwrap()
            }
        }
    }

    /// Removes the directory or drops the schema.
    pub async fn remove(&self) {
        match self {
            Place::Sqlite(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Place::Postgres(url, schema) => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
            }
        }
    }
}
