//! The cost of recording runs: `run_batch` at concurrency 64 with the built-in test
//! model, without stores, with a feedback store (`*_records`: run records), and with a
//! feedback and a trace store (`sqlite`, `postgres`: records and transcripts, one row per
//! run), on SQLite and PostgreSQL; `*_write_behind` is the latter with
//! `StoreOptions::write_behind` (runs do not wait for commits; `run_batch` flushes). One iteration is one run; the recording cost per run
//! is a backend's time minus the time without stores.
//!
//! ```text
//! cargo bench -p agent-store --bench record
//! ```
//!
//! PostgreSQL is `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`), in
//! the schema `agent_store_bench` (dropped before and after); it is skipped when no
//! server answers.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use agent_core::testing::TestModel;
use agent_core::{AgentConfig, eval::run_batch};
use agent_store::{Store, StoreOptions};
use criterion::{Criterion, criterion_group, criterion_main};
use sqlx::Connection;

const CONCURRENCY: usize = 64;
const SCHEMA: &str = "agent_store_bench";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The config: no store, a feedback store (run records), or both a feedback and a trace
/// store (records and transcripts, as `triage --store` does).
fn config(store: Option<&Store>, traces: bool) -> AgentConfig<String> {
    let mut builder = AgentConfig::builder("bench").llm(TestModel::new());
    if let Some(store) = store {
        builder = builder.feedback_store(store.clone());
        if traces {
            builder = builder.trace_store(store.clone());
        }
    }
    builder.build().unwrap()
}

/// The CPU time of this process so far, every thread (user + system), from
/// `/proc/self/stat` (Linux; clock ticks of 10 ms, so samples are kept long).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime: fields 14 and 15 of the line, 12 and 13 after the name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// Two measurements of the same batches: the wall-clock time per run at concurrency 64
/// (`record_per_run_c64`), and the process's CPU time per run over every thread (the
/// runtime's workers, SQLite's connection threads, the checkpointer;
/// `record_cpu_per_run_c64`).
fn bench_batch(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    name: &str,
    config: &AgentConfig<String>,
) {
    let batch = |iters: u64, cpu: bool| {
        // CPU time ticks in 10 ms: measure at least 4,096 runs and scale to `iters`.
        let runs = if cpu { iters.max(4096) } else { iters };
        let inputs: Vec<String> = (0..runs)
            .map(|i| format!("ticket {i}: my parcel is late"))
            .collect();
        rt.block_on(async {
            let (wall, cpu0) = (Instant::now(), process_cpu());
            let batch = run_batch(config, inputs, CONCURRENCY).await;
            let elapsed = if cpu {
                process_cpu()
                    .saturating_sub(cpu0)
                    .mul_f64(iters as f64 / runs as f64)
            } else {
                wall.elapsed()
            };
            assert_eq!(batch.receipt.store_failures, 0);
            elapsed
        })
    };
    for (group, cpu) in [
        ("record_per_run_c64", false),
        ("record_cpu_per_run_c64", true),
    ] {
        let mut group = c.benchmark_group(group);
        group
            .sample_size(20)
            .measurement_time(Duration::from_secs(8));
        group.bench_function(name, |b| b.iter_custom(|iters| batch(iters, cpu)));
        group.finish();
    }
}

async fn drop_schema(url: &str) -> bool {
    let Ok(Ok(mut conn)) =
        tokio::time::timeout(Duration::from_secs(3), sqlx::PgConnection::connect(url)).await
    else {
        return false;
    };
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        .execute(&mut conn)
        .await
        .is_ok()
}

/// The variants after `no_store`: name, write-behind, traces too.
const VARIANTS: [(&str, bool, bool); 3] = [
    ("records", false, false),
    ("", false, true),
    ("write_behind", true, true),
];

fn name(backend: &str, variant: &str) -> String {
    if variant.is_empty() {
        backend.to_owned()
    } else {
        format!("{backend}_{variant}")
    }
}

/// Every variant starts from an empty store (a new file, a new schema).
fn record(c: &mut Criterion) {
    let rt = runtime();
    bench_batch(c, &rt, "no_store", &config(None, false));

    let dir = std::env::temp_dir().join(format!("agent_store_bench_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (variant, behind, traces) in VARIANTS {
        let file = dir
            .join(format!("bench_{variant}.db"))
            .display()
            .to_string();
        let store = rt
            .block_on(Store::open_with(
                &file,
                StoreOptions::new().write_behind(behind),
            ))
            .unwrap();
        bench_batch(
            c,
            &rt,
            &name("sqlite", variant),
            &config(Some(&store), traces),
        );
        rt.block_on(store.close()).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);

    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    if !rt.block_on(drop_schema(&url)) {
        eprintln!("postgres: skipped, no server at DATABASE_URL");
        return;
    }
    for (variant, behind, traces) in VARIANTS {
        let options = StoreOptions::new().schema(SCHEMA).write_behind(behind);
        let store = rt.block_on(Store::open_with(&url, options)).unwrap();
        bench_batch(
            c,
            &rt,
            &name("postgres", variant),
            &config(Some(&store), traces),
        );
        rt.block_on(store.close()).unwrap();
        rt.block_on(drop_schema(&url));
    }
}

criterion_group!(benches, record);
criterion_main!(benches);
