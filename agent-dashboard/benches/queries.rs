//! The dashboard over a large store: seeds `BENCH_RUNS` runs (default 1,000,000) with
//! bulk SQL inserts of 20,000 runs each (a recursive CTE on SQLite, `generate_series` on
//! PostgreSQL; the triggers fill the daily rollups as for any insert),
//! then times the store's aggregate queries and the pages over HTTP (median and
//! slowest of 15 after 2 warm-ups).
//!
//! ```sh
//! cargo bench -p agent-dashboard --bench queries                       # both backends
//! BENCH_BACKEND=sqlite BENCH_RUNS=100000 cargo bench -p agent-dashboard --bench queries
//! ```
//!
//! PostgreSQL: `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`), in a
//! schema of its own, dropped afterwards. The seeded runs: 30 days ending now, agents
//! `triage` (90%) and `billing`, variants `a`, `b` and none, endings 70% answered, 10%
//! escalated, 8% exhausted, 6% stuck, 4% failed, 2% paused; 2% partial.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};

use agent_core::Ending;
use agent_store::{DAY_MS, RunFilter, RunScope, Store, StoreOptions};
use sqlx::Connection;

const SQLITE_SEED: &str = "
WITH RECURSIVE n(i) AS (SELECT $4 UNION ALL SELECT i + 1 FROM n WHERE i < $1),
r AS (SELECT i, printf('%032x', i) AS tid,
        CASE WHEN i % 10 = 0 THEN 'billing' ELSE 'triage' END AS agent,
        CASE i % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' END AS variant,
        CASE WHEN i % 100 < 70 THEN 'answered' WHEN i % 100 < 80 THEN 'escalated'
             WHEN i % 100 < 88 THEN 'exhausted' WHEN i % 100 < 94 THEN 'stuck'
             WHEN i % 100 < 98 THEN 'failed' ELSE 'paused' END AS ending,
        $2 + i * $3 AS started, 200 + (i * 7919) % 5000 AS dur, 1 + (i * 31) % 7 AS calls
      FROM n)
INSERT INTO runs (trace_id, agent, variant, fingerprint, ending, category, thread_id,
                  started_at_ms, duration_ms, llm_calls, cost_usd, record, trace)
SELECT tid, agent, variant, 'f', ending,
       CASE ending WHEN 'answered' THEN NULL WHEN 'exhausted' THEN 'max_llm_calls' ELSE ending END,
       'thread-' || (i % 5000), started, dur, calls, calls * 0.001,
       '{\"trace_id\":\"' || tid || '\",\"agent\":\"' || agent || '\",\"variant\":'
       || CASE WHEN variant IS NULL THEN 'null' ELSE '\"' || variant || '\"' END
       || ',\"fingerprint\":\"f\",\"model\":\"test\",\"thread\":\"thread-' || (i % 5000)
       || '\",\"input\":\"ticket ' || i || ': my parcel is late\",\"output\":null,\"ending\":\"' || ending
       || '\",\"category\":' || CASE ending WHEN 'answered' THEN 'null' WHEN 'exhausted' THEN '\"max_llm_calls\"' ELSE '\"' || ending || '\"' END
       || ',\"error\":null,\"usage\":{\"llm_calls\":' || calls || ',\"tool_calls\":1,\"input_tokens\":'
       || (500 + i % 300) || ',\"output_tokens\":60,\"cache_read_tokens\":0,\"cache_write_tokens\":0,\"cost_usd\":'
       || (calls * 0.001) || ',\"estimated_llm_calls\":0},\"scores\":null,\"duration_ms\":' || dur
       || ',\"started_at_ms\":' || started || ',\"metadata\":{'
       || CASE WHEN i % 50 = 0 THEN '\"partial\":\"true\"' ELSE '' END || '}}',
       NULL
FROM r";

fn postgres_seed() -> String {
    SQLITE_SEED
        .replace(
            "WITH RECURSIVE n(i) AS (SELECT $4 UNION ALL SELECT i + 1 FROM n WHERE i < $1),",
            "WITH n(i) AS (SELECT generate_series($4::bigint, $1::bigint)),",
        )
        .replace("printf('%032x', i)", "lpad(to_hex(i), 32, '0')")
        .replace("$2 + i * $3", "$2::bigint + i * $3::bigint")
}

/// Runs `1..=runs` in statements of 20,000 (each its own transaction, as the store's
/// batches are): the triggers that keep the daily rollups update the same few rows
/// for every run, and PostgreSQL slows down quadratically when one transaction
/// updates a row thousands of times (every update adds a row version that the next
/// one must step over until the transaction ends).
fn chunks(runs: u64) -> Vec<(i64, i64)> {
    let runs = runs as i64;
    (0..)
        .map(|k| (k * 20_000 + 1, ((k + 1) * 20_000).min(runs)))
        .take_while(|(first, _)| *first <= runs)
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn time<F, Fut, T>(name: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    for _ in 0..2 {
        f().await;
    }
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..15 {
        let start = Instant::now();
        f().await;
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "  {name:<52} median {:>8.1} ms   slowest {:>8.1} ms",
        times[7].as_secs_f64() * 1e3,
        times[14].as_secs_f64() * 1e3
    );
}

async fn bench(label: &str, store: Store, runs: u64) {
    let now = now_ms();
    let from = now - 30 * DAY_MS;
    println!("{label}: {runs} runs");
    time("Store::agents", || async { store.agents().await.unwrap() }).await;
    let scope = RunScope::new("triage", from - DAY_MS, now + DAY_MS);
    let overview = store.overview(&scope).await.unwrap();
    let counted: u64 = overview.counts.iter().map(|r| r.runs).sum();
    println!(
        "  (overview of triage, 31 days: {counted} runs in {} groups, {} latency groups)",
        overview.counts.len(),
        overview.latency.len()
    );
    time("Store::overview (triage, 31 days)", || async {
        store.overview(&scope).await.unwrap()
    })
    .await;
    let variant = scope.clone().variant("a");
    time("Store::overview (triage, variant a, 31 days)", || async {
        store.overview(&variant).await.unwrap()
    })
    .await;
    time("Store::turn_counts (triage, 31 days)", || async {
        store.turn_counts(&scope).await.unwrap()
    })
    .await;
    let mut stuck = RunFilter::new();
    stuck.agent = Some("triage".into());
    stuck.ending = Some(Ending::Stuck);
    stuck.from_ms = Some(now - 7 * DAY_MS);
    time("Store::runs_page (triage, stuck, 7 days, 50)", || async {
        store.runs_page(&stuck).await.unwrap()
    })
    .await;
    let mut deep = RunFilter::new();
    deep.variant = Some("b".into());
    deep.ending = Some(Ending::Escalated);
    let first = store.runs_page(&deep).await.unwrap();
    deep.after = first.next;
    time(
        "Store::runs_page (variant b, escalated, page 2)",
        || async { store.runs_page(&deep).await.unwrap() },
    )
    .await;
    let mut thread = RunFilter::new();
    thread.thread = Some("thread-42".into());
    time("Store::runs_page (thread-42)", || async {
        store.runs_page(&thread).await.unwrap()
    })
    .await;
    let mut text = RunFilter::new();
    text.agent = Some("triage".into());
    text.text = Some("parcel is late".into());
    time("Store::runs_page (text, common match)", || async {
        store.runs_page(&text).await.unwrap()
    })
    .await;
    let mut rare = RunFilter::new();
    rare.text = Some("ticket 12345:".into());
    time("Store::runs_page (text, one match: a scan)", || async {
        store.runs_page(&rare).await.unwrap()
    })
    .await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = agent_dashboard::router(store.clone(), agent_dashboard::Config::new("bench"));
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::new();
    for (name, path) in [
        (
            "GET / (overview page, triage, 30 days)",
            "/?agent=triage".to_owned(),
        ),
        (
            "GET /turns (triage, 30 days)",
            "/turns?agent=triage".to_owned(),
        ),
        (
            "GET /runs?agent=triage&ending=stuck",
            "/runs?agent=triage&ending=stuck".to_owned(),
        ),
        (
            "GET /runs?variant=b&category=max_llm_calls",
            "/runs?variant=b&category=max_llm_calls".to_owned(),
        ),
    ] {
        let url = format!("{base}{path}");
        let status = client.get(&url).send().await.unwrap().status();
        assert_eq!(status, 200, "{url}");
        time(name, || async {
            client
                .get(&url)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
        })
        .await;
    }
    server.abort();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs: u64 = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let backend = std::env::var("BENCH_BACKEND").unwrap_or_else(|_| "both".into());
    let start_ms = now_ms() - 30 * DAY_MS;
    let step = (30 * DAY_MS / runs.max(1)) as i64;
    if backend == "both" || backend == "sqlite" {
        let dir =
            std::env::temp_dir().join(format!("agent_dashboard_bench_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.db").display().to_string();
        let store = Store::open(&path).await.unwrap();
        let seeding = Instant::now();
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{path}"))
            .await
            .unwrap();
        for (first, last) in chunks(runs) {
            sqlx::query(SQLITE_SEED)
                .bind(last)
                .bind(start_ms as i64)
                .bind(step)
                .bind(first)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        sqlx::query("ANALYZE").execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
        println!(
            "sqlite: seeded {runs} runs in {:.1} s",
            seeding.elapsed().as_secs_f64()
        );
        bench("sqlite", store.clone(), runs).await;
        store.close().await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
    if backend == "both" || backend == "postgres" {
        let url = std::env::var("DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let schema = format!("agent_dashboard_bench_{}", std::process::id());
        let store = Store::open_with(&url, StoreOptions::new().schema(schema.clone()))
            .await
            .unwrap();
        let seeding = Instant::now();
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::query(&format!("SET search_path TO \"{schema}\""))
            .execute(&mut conn)
            .await
            .unwrap();
        let seed = postgres_seed();
        for (first, last) in chunks(runs) {
            sqlx::query(&seed)
                .bind(last)
                .bind(start_ms as i64)
                .bind(step)
                .bind(first)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        // The rollups too: each of their rows was updated once per run (a row version
        // each), which autovacuum clears in time on a live server.
        sqlx::query("VACUUM ANALYZE runs, runs_daily, runs_daily_latency, runs_daily_turns")
            .execute(&mut conn)
            .await
            .unwrap();
        println!(
            "postgres: seeded {runs} runs in {:.1} s (with VACUUM ANALYZE of runs and the rollups)",
            seeding.elapsed().as_secs_f64()
        );
        bench("postgres", store.clone(), runs).await;
        store.close().await.unwrap();
        sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .execute(&mut conn)
            .await
            .unwrap();
    }
}
