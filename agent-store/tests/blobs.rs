//! Blobs: the bytes of content parts stored once per store, whatever number of runs,
//! turns, threads and checkpoints carry them; references restored on load; records
//! with inline base64 (written before blobs) still load. Both backends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::Arc;

use agent_core::content::{Bytes, Input, Part};
use agent_core::llm::Message;
use agent_core::store::{CheckpointRecord, CheckpointStore, Memory, ThreadEntry, TraceStore};
use agent_core::{AgentConfig, RunOptions, run_agent_with};
use common::Place;
use futures::StreamExt;
use sqlx::Connection;

/// A PNG-looking image of `size` bytes, distinct per `seed` (the signature is all the
/// sniffer needs).
fn image(seed: u8, size: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..size - 8).map(|i| seed.wrapping_add((i % 251) as u8)));
    bytes
}

/// Runs a query returning one integer on the place's database (its own schema).
async fn scalar(place: &Place, sql: &str) -> i64 {
    match place {
        Place::Sqlite { file, .. } => {
            let url = format!("sqlite://{}", file.display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            let v: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
            conn.close().await.unwrap();
            v
        }
        Place::Postgres { url, schema } => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query(&format!("SET search_path TO \"{schema}\""))
                .execute(&mut conn)
                .await
                .unwrap();
            let v: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
            conn.close().await.unwrap();
            v
        }
    }
}

/// Runs a statement with one text parameter on the place's database.
async fn execute(place: &Place, sql: &str, text: &str) {
    match place {
        Place::Sqlite { file, .. } => {
            let url = format!("sqlite://{}", file.display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query(sql)
                .bind(text)
                .execute(&mut conn)
                .await
                .unwrap();
            conn.close().await.unwrap();
        }
        Place::Postgres { url, schema } => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query(&format!("SET search_path TO \"{schema}\""))
                .execute(&mut conn)
                .await
                .unwrap();
            sqlx::query(sql)
                .bind(text)
                .execute(&mut conn)
                .await
                .unwrap();
            conn.close().await.unwrap();
        }
    }
}

const RUNS: usize = 10_000;
const SHARED: usize = 16 * 1024;

/// 10,000 runs each carrying the same 16 KiB image, every 1,000th one of three
/// others: the database holds four blobs, each once, and the runs' JSON holds none of
/// the bytes.
async fn ten_thousand_runs_store_each_image_once(place: &Place) {
    let store = place.open().await;
    let config: Arc<AgentConfig<String>> = Arc::new(
        AgentConfig::builder("vision")
            .model("test")
            .trace_store(store.clone())
            .feedback_store(store.clone())
            .build()
            .unwrap(),
    );
    let shared = image(0, SHARED);
    let others: Vec<Vec<u8>> = (1..=3u8).map(|s| image(s, 1000 + usize::from(s))).collect();
    let shared_part = Part::from_bytes(shared.clone()).unwrap();
    let other_parts: Vec<Part> = others
        .iter()
        .map(|b| Part::from_bytes(b.clone()).unwrap())
        .collect();
    let results: Vec<_> = futures::stream::iter(0..RUNS)
        .map(|i| {
            let mut input =
                Input::text(format!("ticket {i}: see the photo")).part(shared_part.clone());
            if i % 1000 == 0 {
                input = input.part(other_parts[(i / 1000) % 3].clone());
            }
            let config = Arc::clone(&config);
            // Spawned: the runs use both worker threads.
            tokio::spawn(async move { run_agent_with(&config, input, RunOptions::new()).await })
        })
        .buffer_unordered(64)
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(results.len(), RUNS);
    for r in &results {
        assert!(r.is_ok(), "{:?}", r.category());
        assert_eq!(r.store_failures, 0);
    }
    store.flush().await.unwrap();

    let stats = store.stats().await.unwrap();
    assert_eq!(stats.traces, RUNS as u64);
    assert_eq!(stats.runs, RUNS as u64);
    assert_eq!(stats.blobs, 4);
    let distinct: usize = SHARED + others.iter().map(Vec::len).sum::<usize>();
    assert_eq!(stats.blob_bytes, distinct as u64);
    let usage = store.blob_usage().await.unwrap();
    assert_eq!((usage.blobs, usage.bytes), (4, distinct as u64));
    // Measured in the tables themselves: four rows, their bytes once.
    assert_eq!(scalar(place, "SELECT COUNT(*) FROM blobs").await, 4);
    assert_eq!(
        scalar(
            place,
            "SELECT CAST(SUM(LENGTH(bytes)) AS BIGINT) FROM blobs"
        )
        .await,
        distinct as i64
    );
    // No run's JSON holds bytes; together they are far smaller than one copy of the
    // shared image per run would be (base64 of 16 KiB is 21,848 characters).
    assert_eq!(
        scalar(
            place,
            "SELECT COUNT(*) FROM runs WHERE trace LIKE '%\"bytes\":\"%' \
             OR record LIKE '%\"bytes\":\"%'"
        )
        .await,
        0
    );
    let json_chars = scalar(
        place,
        "SELECT CAST(SUM(LENGTH(trace) + LENGTH(record)) AS BIGINT) FROM runs",
    )
    .await;
    assert!(
        json_chars < (RUNS * 4096) as i64,
        "the runs' JSON is {json_chars} characters"
    );

    // Loading puts the bytes back.
    let first = &results[0];
    let trace = store.trace(&first.trace_id).await.unwrap().unwrap();
    let carried: Vec<&Part> = trace
        .transcript
        .iter()
        .filter_map(|m| match m {
            Message::User { parts, .. } => Some(parts.iter()),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(carried.contains(&&shared_part), "{carried:?}");
    let blob = store
        .blob(&Bytes::from(shared.clone()).sha256())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(blob.media_type, "image/png");
    let shown = format!("{blob:?}");
    assert!(
        shown.contains(&format!("<{SHARED} bytes, sha256:")) && !shown.contains("iVBORw0KGgo"),
        "{shown}"
    );
    assert_eq!(blob.bytes.as_slice(), shared.as_slice());
    store.close().await.unwrap();
}

/// Threads and checkpoints refer to the same blobs; both load back exactly; two store
/// handles writing the same blob store it once.
async fn threads_and_checkpoints_share_blobs(place: &Place) {
    let store = place.open().await;
    let other = place.open().await;
    let photo = Part::from_bytes(image(7, 3000)).unwrap();
    let pdf = Part::from_bytes_as(b"%PDF-1.4 invoice".to_vec(), "application/pdf").unwrap();
    let message = Message::user_with("photo and invoice", vec![photo.clone(), pdf.clone()]);
    store
        .append("t1", &ThreadEntry::new("run-1", vec![message.clone()], 1))
        .await
        .unwrap();
    other
        .append("t2", &ThreadEntry::new("run-2", vec![message.clone()], 1))
        .await
        .unwrap();
    let loaded = Memory::load(&store, "t1", 10).await.unwrap();
    assert_eq!(loaded.messages, vec![message.clone()]);

    let mut checkpoint = CheckpointRecord::default();
    checkpoint.run_id = "durable-1".into();
    checkpoint.seq = 1;
    checkpoint.header = serde_json::to_string(&serde_json::json!({"input": [photo]})).unwrap();
    checkpoint.state = serde_json::to_string(&serde_json::json!({"messages": [message]})).unwrap();
    store.save(&checkpoint).await.unwrap();
    let back = CheckpointStore::load(&other, "durable-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.header, checkpoint.header);
    assert_eq!(back.state, checkpoint.state);
    let unfinished = store.unfinished(10).await.unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].state, checkpoint.state);
    // Stored as references, not bytes.
    assert_eq!(
        scalar(
            place,
            "SELECT COUNT(*) FROM checkpoints WHERE state LIKE '%\"bytes\":\"%'"
        )
        .await,
        0
    );
    assert_eq!(
        scalar(
            place,
            "SELECT COUNT(*) FROM thread_messages WHERE body LIKE '%\"blob\":{\"sha256\":%'"
        )
        .await,
        2
    );
    let stats = store.stats().await.unwrap();
    assert_eq!(stats.blobs, 2);
    assert_eq!(stats.blob_bytes, 3000 + 16);
    store.close().await.unwrap();
    other.close().await.unwrap();
}

/// A message written with inline base64 (before blobs) loads as it was; a reference
/// whose blob is missing is an error naming the hash; a bad hash is invalid.
async fn inline_records_still_load(place: &Place) {
    let store = place.open().await;
    store
        .append(
            "old",
            &ThreadEntry::new("run-old", vec![Message::user("x")], 1),
        )
        .await
        .unwrap();
    let photo = Part::from_bytes(image(9, 500)).unwrap();
    let message = Message::user_with("old photo", vec![photo]);
    let inline = serde_json::to_string(&message).unwrap();
    assert!(inline.contains("\"bytes\":\""));
    execute(
        place,
        "UPDATE thread_messages SET body = $1 WHERE thread_id = 'old'",
        &inline,
    )
    .await;
    let loaded = Memory::load(&store, "old", 10).await.unwrap();
    assert_eq!(loaded.messages, vec![message]);

    let hash = "ab".repeat(32);
    let dangling = format!(
        "{{\"role\":\"user\",\"content\":\"x\",\"parts\":[{{\"type\":\"image\",\"source\":\
         {{\"blob\":{{\"sha256\":\"{hash}\",\"size\":3}}}},\"media_type\":\"image/png\"}}]}}"
    );
    execute(
        place,
        "UPDATE thread_messages SET body = $1 WHERE thread_id = 'old'",
        &dangling,
    )
    .await;
    let error = Memory::load(&store, "old", 10).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        agent_core::store::StoreError::backend(format!(
            "a stored message: blob sha256:{hash} is referenced but not stored"
        ))
        .to_string()
    );
    assert!(store.blob(&hash).await.unwrap().is_none());
    let invalid = store.blob("../../etc/passwd").await.unwrap_err();
    assert!(matches!(
        invalid,
        agent_core::store::StoreError::Invalid { .. }
    ));
    store.close().await.unwrap();
}

/// A durable run with an image: its checkpoints (the fenced, group-committed saves)
/// refer to the image's blob, and resuming the finished run gives back its transcript
/// with the image's bytes.
async fn durable_runs_checkpoint_references(place: &Place) {
    let store = place.open().await;
    let config: AgentConfig<String> = AgentConfig::builder("vision")
        .model("test")
        .checkpoints(store.clone())
        .build()
        .unwrap();
    let photo = Part::from_bytes(image(3, 2000)).unwrap();
    let input = Input::text("what is on the photo?").part(photo.clone());
    let first = run_agent_with(&config, input, RunOptions::new().run_id("img-1")).await;
    assert!(first.is_ok(), "{:?}", first.category());
    assert_eq!(
        scalar(
            place,
            "SELECT COUNT(*) FROM checkpoints WHERE run_id = 'img-1' \
             AND header NOT LIKE '%\"bytes\":\"%' AND state NOT LIKE '%\"bytes\":\"%' \
             AND (header LIKE '%\"blob\":{%' OR state LIKE '%\"blob\":{%')"
        )
        .await,
        1
    );
    let again = agent_core::resume_agent(&config, "img-1").await.unwrap();
    assert_eq!(again.transcript, first.transcript);
    assert!(
        again
            .transcript
            .iter()
            .any(|m| matches!(m, Message::User { parts, .. } if parts.contains(&photo))),
        "{:?}",
        again.transcript
    );
    assert_eq!(store.stats().await.unwrap().blobs, 1);
    store.close().await.unwrap();
}

/// `collect_blobs` deletes exactly the blobs no run record, trace, checkpoint, ledger
/// entry or thread message references any more, and what stays loads as before.
async fn unreferenced_blobs_are_collected(place: &Place) {
    let store = place.open().await;
    let part = |seed: u8, size: usize| Part::from_bytes(image(seed, size)).unwrap();
    let (shared, threaded, checkpointed, traced) = (
        part(20, 1000),
        part(21, 1100),
        part(22, 1200),
        part(23, 1300),
    );
    // A thread with two images, another with one of them.
    let both = Message::user_with("two photos", vec![shared.clone(), threaded.clone()]);
    store
        .append("t1", &ThreadEntry::new("run-1", vec![both.clone()], 1))
        .await
        .unwrap();
    let one = Message::user_with("one photo", vec![shared.clone()]);
    store
        .append("t2", &ThreadEntry::new("run-2", vec![one.clone()], 1))
        .await
        .unwrap();
    // A checkpoint holding a third.
    let mut checkpoint = CheckpointRecord::default();
    checkpoint.run_id = "gc-durable".into();
    checkpoint.seq = 1;
    checkpoint.header =
        serde_json::to_string(&serde_json::json!({"input": [checkpointed]})).unwrap();
    checkpoint.state = "{}".into();
    store.save(&checkpoint).await.unwrap();
    // A run's record and trace holding a fourth.
    let config: AgentConfig<String> = AgentConfig::builder("vision")
        .model("test")
        .trace_store(store.clone())
        .build()
        .unwrap();
    let run = run_agent_with(
        &config,
        Input::text("see").part(traced.clone()),
        RunOptions::new(),
    )
    .await;
    assert!(run.is_ok(), "{:?}", run.category());
    store.flush().await.unwrap();
    assert_eq!(store.stats().await.unwrap().blobs, 4);

    // Everything referenced: nothing goes.
    let kept = store.collect_blobs().await.unwrap();
    assert_eq!((kept.blobs, kept.bytes, kept.kept), (0, 0, 4));

    // Thread t1 deleted by hand: its second image is referenced nowhere else, the
    // first still is (t2).
    execute(
        place,
        "DELETE FROM thread_messages WHERE thread_id = $1",
        "t1",
    )
    .await;
    let collected = store.collect_blobs().await.unwrap();
    assert_eq!(
        (collected.blobs, collected.bytes, collected.kept),
        (1, 1100, 3)
    );
    assert!(store.blob(&sha(&threaded)).await.unwrap().is_none());
    assert!(store.blob(&sha(&shared)).await.unwrap().is_some());
    let loaded = Memory::load(&store, "t2", 10).await.unwrap();
    assert_eq!(loaded.messages, vec![one]);

    // The checkpoint and the run deleted: their images go; t2's stays.
    execute(
        place,
        "DELETE FROM checkpoints WHERE run_id = $1",
        "gc-durable",
    )
    .await;
    execute(place, "DELETE FROM runs WHERE agent = $1", "vision").await;
    let collected = store.collect_blobs().await.unwrap();
    assert_eq!(
        (collected.blobs, collected.bytes, collected.kept),
        (2, 2500, 1)
    );
    let usage = store.blob_usage().await.unwrap();
    assert_eq!((usage.blobs, usage.bytes), (1, 1000));

    // A blob collected comes back when a new row references it again.
    store
        .append("t3", &ThreadEntry::new("run-3", vec![both.clone()], 1))
        .await
        .unwrap();
    assert_eq!(
        Memory::load(&store, "t3", 10).await.unwrap().messages,
        vec![both]
    );
    assert_eq!(store.blob_usage().await.unwrap().blobs, 2);
    store.close().await.unwrap();
}

/// The SHA-256 of a part's bytes.
fn sha(part: &Part) -> String {
    match &part.media().unwrap().source {
        agent_core::content::Source::Bytes(bytes) => bytes.sha256(),
        other => panic!("{other:?}"),
    }
}

both_backends!(
    unreferenced_blobs_are_collected,
    durable_runs_checkpoint_references,
    ten_thousand_runs_store_each_image_once,
    threads_and_checkpoints_share_blobs,
    inline_records_still_load,
);
