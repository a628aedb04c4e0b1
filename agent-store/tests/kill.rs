//! A process killed (SIGKILL) in the middle of a batch leaves a store that opens
//! cleanly, with every run it had finished intact. The child is this test binary run
//! again on `child_records_until_killed`, which records batches forever and prints the
//! trace id of each run once `run_batch` has returned it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_core::store::{FeedbackStore, TraceStore};
use agent_core::testing::TestModel;
use agent_core::{AgentConfig, eval::run_batch};
use agent_store::{Store, StoreOptions};
use common::Place;

const TARGET: &str = "AGENT_STORE_KILL_TARGET";
const SCHEMA: &str = "AGENT_STORE_KILL_SCHEMA";
/// Runs the parent waits for before it kills the child.
const FINISHED: usize = 640;

fn config(store: &Store) -> AgentConfig<String> {
    AgentConfig::builder("killed")
        .llm(TestModel::new())
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .build()
        .unwrap()
}

/// The child: records batches of 64 runs until killed (or for 60 s at most).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of killed_mid_batch; it runs only when that test starts it"]
async fn child_records_until_killed() {
    let Ok(target) = std::env::var(TARGET) else {
        return;
    };
    let mut options = StoreOptions::new();
    if let Ok(schema) = std::env::var(SCHEMA) {
        options = options.schema(schema);
    }
    let store = Store::open_with(&target, options).await.unwrap();
    let config = config(&store);
    let started = Instant::now();
    let mut round = 0;
    while started.elapsed() < Duration::from_secs(60) {
        let inputs: Vec<String> = (0..64)
            .map(|i| format!("round {round} input {i}"))
            .collect();
        let batch = run_batch(&config, inputs.clone(), 64).await;
        let mut out = std::io::stdout().lock();
        for (result, input) in batch.results.iter().zip(&inputs) {
            if result.store_failures == 0 {
                writeln!(out, "done {} {input}", result.trace_id).unwrap();
            }
        }
        out.flush().unwrap();
        round += 1;
    }
}

async fn killed_mid_batch(place: &Place) {
    // The store exists before the child starts (the child only records).
    place.open().await.close().await.unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "kill::child_records_until_killed",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(TARGET, place.target())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Place::Postgres { schema, .. } = place {
        command.env(SCHEMA, schema);
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let finished = tokio::task::spawn_blocking(move || {
        let mut finished = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("done ") {
                let (id, input) = rest.split_once(' ').unwrap();
                finished.push((id.to_owned(), input.to_owned()));
                if finished.len() >= FINISHED {
                    break;
                }
            }
        }
        finished
    })
    .await
    .unwrap();
    // The child is in the middle of its next batch: kill it (SIGKILL).
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed, it did not finish");
    assert_eq!(finished.len(), FINISHED, "the child stopped early");

    let store = place.open().await;
    store.check_integrity().await.unwrap();
    for (id, input) in &finished {
        let run = store
            .run(id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("run {id} lost"));
        assert_eq!(&run.input, input);
        let trace = store
            .trace(id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("trace {id} lost"));
        assert_eq!(trace.transcript.len(), 2);
    }
    let stats = store.stats().await.unwrap();
    assert!(stats.runs as usize >= FINISHED, "{stats:?}");
    // And it takes new records.
    let batch = run_batch(&config(&store), ["after the kill"], 1).await;
    assert_eq!(batch.receipt.store_failures, 0);
    assert_eq!(store.stats().await.unwrap().runs, stats.runs + 1);
    store.close().await.unwrap();
}

both_backends!(killed_mid_batch);
