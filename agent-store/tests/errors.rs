//! Every documented `# Errors` line of the store's API, checked: the variant the docs
//! name, for the cause they name (C46), and a bad input overwrites nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agent_core::store::{
    CheckpointRecord, CheckpointStore, EmbedFuture, Embedder, EvalFilter, Feedback, FeedbackStore,
    HashEmbedder, LedgerEntry, Memory, RunQuery, ThreadEntry, TraceStore,
};
use agent_core::testing::TestModel;
use agent_core::{AgentConfig, llm::LlmError, run_agent, store::StoreError};
use agent_store::{Store, StoreOptions};
use sqlx::Connection;

fn is_unavailable(e: &StoreError, says: &str) -> bool {
    matches!(e, StoreError::Unavailable { message } if message.contains(says))
}

fn is_backend(e: &StoreError, says: &str) -> bool {
    matches!(e, StoreError::Backend { message } if message.contains(says))
}

/// C46: `Store::open("/no/such/dir/runs.db")` is `Unavailable` (the file cannot be
/// opened), saying which directory is missing; lazily opened, the first call says the
/// same; nothing is created.
#[tokio::test]
async fn c46_open_in_a_missing_directory_is_unavailable() {
    let error = Store::open("/no/such/dir/runs.db").await.unwrap_err();
    assert!(
        is_unavailable(&error, "directory /no/such/dir does not exist"),
        "{error:?}"
    );
    let lazy = Store::open_with("/no/such/dir/runs.db", StoreOptions::new().lazy(true))
        .await
        .unwrap();
    let error = lazy.stats().await.unwrap_err();
    assert!(is_unavailable(&error, "/no/such/dir"), "{error:?}");
    assert!(!std::path::Path::new("/no/such/dir").exists());
}

/// `Store::open`: `Invalid` for a malformed target, `Unavailable` when the file cannot
/// be opened (a directory in its place, an unreadable directory) or the server refuses,
/// `Backend` when a migration fails (a file that is not a database, a `runs` table of
/// another shape); the bad files are left as they were.
#[tokio::test]
async fn open_errors_are_as_documented() {
    for target in [
        "",
        "sqlite://",
        "postgres://postgres@127.0.0.1:notaport/test",
    ] {
        let error = Store::open(target).await.unwrap_err();
        assert!(
            matches!(error, StoreError::Invalid { .. }),
            "{target:?}: {error:?}"
        );
    }
    let error = Store::open_with(&common::pg_url(), StoreOptions::new().schema("a\"; DROP"))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Invalid { .. }), "{error:?}");

    let place = common::sqlite_place();
    let common::Place::Sqlite { dir, .. } = &place else {
        unreachable!()
    };
    // A directory where the file should be.
    let error = Store::open(dir.to_str().unwrap()).await.unwrap_err();
    assert!(
        is_unavailable(&error, "cannot open the SQLite file"),
        "{error:?}"
    );

    // A file that is not a database: Backend, and the file is unchanged.
    let text = dir.join("notes.db");
    std::fs::write(&text, "not a database, and it stays that way\n".repeat(200)).unwrap();
    let before = std::fs::read(&text).unwrap();
    let error = Store::open(text.to_str().unwrap()).await.unwrap_err();
    assert!(is_backend(&error, "not a database"), "{error:?}");
    assert_eq!(std::fs::read(&text).unwrap(), before);

    // A database whose `runs` table has another shape: the migration fails (Backend)
    // and rolls back; the table and its rows are as they were.
    let other = dir.join("other.db");
    let url = format!("sqlite://{}?mode=rwc", other.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE runs (trace_id TEXT PRIMARY KEY, note TEXT)")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("INSERT INTO runs VALUES ('t1', 'kept')")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let error = Store::open(other.to_str().unwrap()).await.unwrap_err();
    assert!(is_backend(&error, "started_at_ms"), "{error:?}");
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let rows: Vec<(String, String)> = sqlx::query_as("SELECT trace_id, note FROM runs")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows, [("t1".to_owned(), "kept".to_owned())]);
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    // The migrator's own (empty) bookkeeping table; none of the store's tables.
    assert_eq!(tables, ["_sqlx_migrations", "runs"]);
    let ran: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(ran, 0, "the failed migration is not recorded as run");
    conn.close().await.unwrap();

    // A server that refuses (nothing listens on the port): Unavailable.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("postgres://postgres@127.0.0.1:{port}/test");
    let quick = StoreOptions::new().connect_timeout(Duration::from_millis(300));
    let error = Store::open_with(&refused, quick.clone()).await.unwrap_err();
    assert!(matches!(error, StoreError::Unavailable { .. }), "{error:?}");
    // Lazily: only a malformed target fails the open; the rest is the first call's.
    let lazy = Store::open_with(&refused, quick.lazy(true)).await.unwrap();
    assert!(matches!(
        lazy.stats().await,
        Err(StoreError::Unavailable { .. })
    ));
    let error = Store::open_with("", StoreOptions::new().lazy(true))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Invalid { .. }), "{error:?}");
    place.remove().await;
}

/// `flush` and `close`: `Unavailable` once the writer has stopped (its runtime shut
/// down); every other call on such a store fails the same way.
#[test]
fn flush_and_close_after_the_writer_stopped_are_unavailable() {
    let place = common::sqlite_place();
    let target = place.target();
    let store = {
        let first = tokio::runtime::Runtime::new().unwrap();
        first.block_on(Store::open(&target)).unwrap()
    };
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let error = store.flush().await.unwrap_err();
        assert!(is_unavailable(&error, "writer has stopped"), "{error:?}");
        let error = store.close().await.unwrap_err();
        assert!(is_unavailable(&error, "writer has stopped"), "{error:?}");
    });
    drop(second);
    let cleanup = tokio::runtime::Runtime::new().unwrap();
    cleanup.block_on(place.remove());
}

/// `replay` and `diff`: `NotFound` naming the trace id; `attach_feedback`: `NotFound`
/// for a run that is not recorded; `export_jsonl`: `Backend` when the output cannot be
/// written; `Memory` and `Documents`: `Invalid` for empty or NUL keys; `Documents`:
/// `Embedding` when the embedder fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_inputs_outputs_and_embedders_fail_as_documented() {
    let place = common::sqlite_place();
    let store = place.open().await;
    let config: AgentConfig<String> = AgentConfig::builder("errors")
        .llm(TestModel::new())
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .build()
        .unwrap();
    let known = run_agent(&config, "hello").await.trace_id;

    let error = store.replay("missing-1", &config).await.unwrap_err();
    assert!(matches!(&error, StoreError::NotFound { what } if what.contains("missing-1")));
    let error = store.diff(&known, "missing-2").await.unwrap_err();
    assert!(matches!(&error, StoreError::NotFound { what } if what.contains("missing-2")));
    let error = store.diff("missing-3", &known).await.unwrap_err();
    assert!(matches!(&error, StoreError::NotFound { what } if what.contains("missing-3")));
    let feedback = Feedback::new().rating(1);
    let error = store
        .attach_feedback("missing-4", &feedback)
        .await
        .unwrap_err();
    assert!(matches!(&error, StoreError::NotFound { what } if what.contains("missing-4")));
    let error = store.attach_feedback("", &feedback).await.unwrap_err();
    assert!(matches!(error, StoreError::Invalid { .. }), "{error:?}");
    store.attach_feedback(&known, &feedback).await.unwrap();

    struct Refusing;
    impl std::io::Write for Refusing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk says no"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let error = store
        .export_jsonl(&EvalFilter::new(), Refusing)
        .await
        .unwrap_err();
    assert!(is_backend(&error, "disk says no"), "{error:?}");

    let entry = ThreadEntry::new("t-1", Vec::new(), 1);
    for thread in ["", "a\0b"] {
        let error = Memory::load(&store, thread, 10).await.unwrap_err();
        assert!(matches!(error, StoreError::Invalid { .. }), "{error:?}");
        let error = store.append(thread, &entry).await.unwrap_err();
        assert!(matches!(error, StoreError::Invalid { .. }), "{error:?}");
    }

    struct Failing;
    impl Embedder for Failing {
        fn embed<'a>(&'a self, _: &'a [String]) -> EmbedFuture<'a> {
            Box::pin(async { Err(LlmError::permanent("no embeddings today")) })
        }
        fn model(&self) -> &str {
            "failing"
        }
    }
    let docs = store.documents("faq", Arc::new(HashEmbedder::new(8)));
    for id in ["", "a\0b"] {
        let error = docs
            .add(id, "text", agent_core::json!({}))
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::Invalid { .. }), "{error:?}");
    }
    docs.add("d1", "refunds take five days", agent_core::json!({}))
        .await
        .unwrap();
    let failing = store.documents("faq", Arc::new(Failing));
    let error = failing
        .add("d2", "text", agent_core::json!({}))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Embedding { .. }), "{error:?}");
    let error = failing.search("refunds", 3).await.unwrap_err();
    assert!(matches!(error, StoreError::Embedding { .. }), "{error:?}");
    // Nothing was overwritten by the failures.
    assert_eq!(docs.len().await.unwrap(), 1);
    assert_eq!(store.stats().await.unwrap().runs, 1);
    store.close().await.unwrap();
    place.remove().await;
}

/// Reads and writes of a store whose database cannot be reached: `Unavailable` (the
/// file is gone; the server refuses); `check_integrity`: `Backend` with the problem
/// found (a table is missing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_writes_and_checks_of_an_unreachable_or_damaged_store() {
    let place = common::sqlite_place();
    let store = place.open().await;
    let common::Place::Sqlite { file, .. } = &place else {
        unreachable!()
    };
    let config: AgentConfig<String> = AgentConfig::builder("x")
        .llm(TestModel::new())
        .feedback_store(store.clone())
        .build()
        .unwrap();
    let id = run_agent(&config, "q").await.trace_id;
    let record = store.run(&id).await.unwrap().unwrap();
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap();
    sqlx::query("DROP TABLE feedback")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let error = store.check_integrity().await.unwrap_err();
    assert!(is_backend(&error, "no such table: feedback"), "{error:?}");

    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    // The checkpoint writes (the group-committing writer checks the file in its
    // transaction, not per call).
    let mut checkpoint = CheckpointRecord::default();
    checkpoint.run_id = "r".into();
    checkpoint.seq = 1;
    let entry: LedgerEntry = serde_json::from_value(serde_json::json!({
        "run_id": "r", "call_id": "c", "tool": "t", "arguments_hash": "00",
        "status": {"status": "started"}
    }))
    .unwrap();
    let errors = [
        store.save(&checkpoint).await.unwrap_err(),
        store.save_fenced(&checkpoint, 0).await.unwrap_err(),
        store
            .save_boundary(Some((&checkpoint, 0)), std::slice::from_ref(&entry), "w")
            .await
            .unwrap_err(),
        store.record_tool(&entry).await.unwrap_err(),
        store.record_tool_fenced(&entry, "w").await.unwrap_err(),
        CheckpointStore::load(&store, "r").await.unwrap_err(),
        store.record(&record).await.unwrap_err(),
        store.run("any").await.unwrap_err(),
        store.runs(&RunQuery::new()).await.unwrap_err(),
        store.trace("any").await.unwrap_err(),
        Memory::load(&store, "t", 5).await.unwrap_err(),
        store.stats().await.unwrap_err(),
        store.check_integrity().await.unwrap_err(),
        store
            .documents("faq", Arc::new(HashEmbedder::new(8)))
            .len()
            .await
            .unwrap_err(),
    ];
    for error in &errors {
        assert!(is_unavailable(error, "is gone"), "{error:?}");
    }
    let _ = store.close().await;
    place.remove().await;
}
