//! The cost of durable runs: the CPU time a checkpoint store adds per turn, at
//! concurrency 64, on SQLite and PostgreSQL.
//!
//! Each run makes 9 LLM calls: 8 turns of one tool call each, then the answer. With a
//! checkpoint store a tool turn stores 4 rows (`before_call`, `tools_pending`, the
//! ledger's `started` and `completed`), the answer turn one (`before_call`), and the run
//! one more at its end (`finished`): 34 rows per run, in 18 awaited writes (a tool
//! turn's `tools_pending` goes with its `started` entry, its `completed` entry with the
//! next checkpoint: `docs/durable.md`, "Writes per turn"). The cost per turn is the
//! process's CPU time (every thread: the runtime's workers, sqlx's SQLite threads;
//! not the PostgreSQL server's) with the store, minus without it, over the turns.
//!
//! ```text
//! cargo bench -p agent-store --bench checkpoint
//! ```
//!
//! PostgreSQL is `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`), in
//! the schema `agent_checkpoint_bench` (dropped before and after); skipped when no
//! server answers.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use agent_core::{
    AgentConfig, Tool, ToolContext,
    eval::run_batch,
    llm::{LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, Message, ToolCall},
    tool::{ToolDefinition, ToolFuture},
};
use agent_store::{Store, StoreOptions};
use serde_json::{Value, json};
use sqlx::Connection;

const CONCURRENCY: usize = 64;
const RUNS: usize = 2048;
const TOOL_TURNS: usize = 8;
const SCHEMA: &str = "agent_checkpoint_bench";

/// Eight tool turns, then a plain-text answer (compat mode).
struct ByTurn;

impl LlmClient for ByTurn {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let response = if turn < TOOL_TURNS {
            LlmResponse::tool_calls(vec![ToolCall::new(
                format!("c{turn}"),
                "lookup",
                json!({"order_id": format!("A-{turn}")}),
            )])
        } else {
            LlmResponse::text("Your parcel ships today.")
        };
        Box::pin(async move { Ok::<_, LlmError>(response) })
    }

    fn provider(&self) -> &str {
        "scripted"
    }
}

struct Lookup;

impl Tool for Lookup {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup",
            "Look up an order.",
            json!({"type": "object", "properties": {"order_id": {"type": "string"}}}),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            Ok(json!({"order_id": arguments["order_id"], "status": "shipped"}).to_string())
        })
    }
}

fn config(store: Option<&Store>) -> AgentConfig<String> {
    let mut b = AgentConfig::builder("bench")
        .llm(ByTurn)
        .tool(Lookup)
        .max_llm_calls(20)
        .max_tool_calls(20)
        .no_progress_turns(20);
    if let Some(store) = store {
        b = b.checkpoints(store.clone());
    }
    b.build().unwrap()
}

/// The CPU time of this process so far (user + system, every thread), from
/// `/proc/self/stat` (Linux; ticks of 10 ms).
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
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// CPU and wall time of `RUNS` runs at concurrency 64.
fn measure(rt: &tokio::runtime::Runtime, config: &AgentConfig<String>) -> (Duration, Duration) {
    let inputs: Vec<String> = (0..RUNS).map(|i| format!("ticket {i}")).collect();
    rt.block_on(async {
        let (wall, cpu) = (Instant::now(), process_cpu());
        let batch = run_batch(config, inputs, CONCURRENCY).await;
        assert_eq!(batch.receipt.store_failures, 0);
        assert!(batch.results.iter().all(|r| r.usage.llm_calls == 9));
        (process_cpu().saturating_sub(cpu), wall.elapsed())
    })
}

fn report(name: &str, base: (Duration, Duration), with: (Duration, Duration)) {
    let turns = (RUNS * (TOOL_TURNS + 1)) as f64;
    let cpu = with.0.saturating_sub(base.0).as_secs_f64() * 1e6 / turns;
    let wall = with.1.as_secs_f64() * 1e6 / turns;
    let rows = (RUNS * (4 * TOOL_TURNS + 2)) as f64;
    let per_row = with.0.saturating_sub(base.0).as_secs_f64() * 1e6 / rows;
    println!(
        "{name}: checkpoint CPU {cpu:.1} us/turn ({per_row:.1} us/row); wall {wall:.1} us/turn at c64 (no store: {:.1})",
        base.1.as_secs_f64() * 1e6 / turns
    );
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

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let plain = config(None);
    let _ = measure(&rt, &plain);
    let base = measure(&rt, &plain);

    let dir = std::env::temp_dir().join(format!("agent_checkpoint_bench_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bench.db").display().to_string();
    let store = rt.block_on(Store::open(&file)).unwrap();
    let cfg = config(Some(&store));
    let _ = measure(&rt, &cfg);
    report("sqlite", base, measure(&rt, &cfg));
    rt.block_on(store.close()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    if !rt.block_on(drop_schema(&url)) {
        println!("postgres: skipped, no server at DATABASE_URL");
        return;
    }
    let store = rt
        .block_on(Store::open_with(&url, StoreOptions::new().schema(SCHEMA)))
        .unwrap();
    let cfg = config(Some(&store));
    let _ = measure(&rt, &cfg);
    report("postgres", base, measure(&rt, &cfg));
    rt.block_on(store.close()).unwrap();
    rt.block_on(drop_schema(&url));
}
