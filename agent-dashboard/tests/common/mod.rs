//! Test helpers: stores (an SQLite file in a temporary directory, or a PostgreSQL schema
//! of its own, dropped afterwards), seeding with real runs and with records of known
//! values, the dashboard on a free loopback port, and an HTTP client with a cookie jar.

#![allow(
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::PathBuf;
use std::time::Duration;

use agent_core::store::{FeedbackStore, RunRecord};
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentResult, Ending, RunOptions, json, llm::LlmResponse, run_agent_with, tool,
    tools,
};
use agent_dashboard::Config;
use agent_store::{DAY_MS, Store};

/// The fixed days of the seeded records: day 20,000 (2024-10-04) and the next.
pub const DAY0: u64 = 20_000 * DAY_MS;
/// The query string of the seeded days.
pub const SEEDED_DAYS: &str = "from=2024-10-04&to=2024-10-05";

/// A name no other test (or test process) uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}_{:016x}", std::process::id(), fastrand::u64(..))
}

/// A fresh SQLite file in its own directory.
pub struct TempStore {
    pub dir: PathBuf,
    pub path: PathBuf,
}

impl TempStore {
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(unique("agent_dashboard_test"));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.db");
        Self { dir, path }
    }

    pub async fn open(&self) -> Store {
        Store::open(&self.path.display().to_string()).await.unwrap()
    }
}

impl Drop for TempStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The PostgreSQL URL of the tests.
pub fn pg_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Skips (with a message) or, under `CI=true`, fails.
pub fn skip_or_fail(why: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("the dashboard tests need {why}");
    }
    eprintln!("skipped: {why}; set CI=true to make this a failure");
}

/// Drops a test schema.
pub async fn drop_schema(schema: &str) {
    use sqlx::Connection;
    if let Ok(mut conn) = sqlx::PgConnection::connect(&pg_url()).await {
        let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .execute(&mut conn)
            .await;
    }
}

/// Whether PostgreSQL answers at `DATABASE_URL`.
pub async fn postgres_up() -> bool {
    use sqlx::Connection;
    matches!(
        tokio::time::timeout(
            Duration::from_secs(3),
            sqlx::PgConnection::connect(&pg_url())
        )
        .await,
        Ok(Ok(_))
    )
}

/// A triage decision.
#[agent_core::agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct Triage {
    /// The queue.
    pub queue: String,
    /// Severity 1 to 4.
    pub severity: u8,
}

/// Looks up an order.
#[tool]
async fn lookup_order(order_id: String) -> String {
    format!("{order_id}: shipped <b>today</b>")
}

/// The hostile input of the seeded real run.
pub const HOSTILE_INPUT: &str = "<script>alert('ticket')</script> where is NW-1?";
/// The hostile queue of its answer.
pub const HOSTILE_QUEUE: &str = "<script>alert('answer')</script>";
/// The hostile reasoning text of its first turn.
pub const HOSTILE_REASONING: &str = "Look it up. <script>alert('thought')</script>";

/// One real run (scripted model: a tool call, then an answer) with hostile text in
/// the input, the tool result and the answer; recorded with its trace.
pub async fn real_run(store: &Store) -> AgentResult<Triage> {
    let model = ScriptedModel::new();
    let call = model.call(
        "lookup_order",
        json!({"order_id": "NW-1<img src=x onerror=alert(1)>"}),
    );
    let model = model
        .respond(LlmResponse::tool_calls(vec![call]).with_reasoning(HOSTILE_REASONING))
        .submit(json!({"queue": HOSTILE_QUEUE, "severity": 2}));
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(model)
        .tools(tools![lookup_order])
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .variant("a")
        .build()
        .unwrap();
    let result = run_agent_with(
        &config,
        HOSTILE_INPUT,
        RunOptions::new()
            .metadata("ticket", "T-1")
            .metadata("api_key", "sk-SECRET-123"),
    )
    .await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    result
}

/// An 8 by 8 PNG (a checkerboard), valid enough for a browser to draw.
pub const PNG_8X8: &[u8] = b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x08\x00\x00\x00\x08\x08\x02\x00\x00\x00\x4b\x6d\x29\xdc\x00\x00\x00\x18\x49\x44\x41\x54\x78\x9c\x63\x38\xa1\x01\x04\x27\x30\x49\x06\xac\xa2\x40\x92\x61\x50\xea\x00\x00\x5a\x5d\x46\x01\x31\x86\x18\x23\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82";

/// A tiny PDF-looking document (the sniffer needs only its signature).
pub const PDF: &[u8] = b"%PDF-1.4\n% an invoice <script>alert(1)</script>\n";

/// A run of the in-process test model whose input carries [`PNG_8X8`] and [`PDF`]
/// (named with markup, shown as text).
pub async fn image_run(store: &Store) -> AgentResult<String> {
    use agent_core::content::{Input, Part};
    let config: AgentConfig<String> = AgentConfig::builder("vision")
        .model("test")
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .build()
        .unwrap();
    let mut pdf = Part::from_bytes(PDF.to_vec()).unwrap();
    if let Some(media) = pdf.media_mut() {
        media.name = Some("invoice <b>7</b>.pdf".to_owned());
    }
    let input = Input::text("The unit arrived cracked; photo and invoice attached.")
        .part(Part::from_bytes(PNG_8X8.to_vec()).unwrap())
        .part(pdf);
    let result = run_agent_with(&config, input, RunOptions::new()).await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    result
}

fn record(
    n: u32,
    variant: &str,
    ending: Ending,
    day: u64,
    llm_calls: u32,
    partial: bool,
) -> RunRecord {
    let category = match ending {
        Ending::Answered => None,
        Ending::Exhausted => Some("max_llm_calls"),
        other => Some(other.as_str()),
    };
    let metadata = if partial {
        json!({"partial": "true"})
    } else {
        json!({})
    };
    serde_json::from_value(json!({
        "trace_id": format!("{n:032x}"),
        "agent": "triage",
        "variant": variant,
        "fingerprint": "f",
        "model": "test",
        "thread": null,
        "input": format!("seeded ticket {n}"),
        "output": {"queue": "billing", "severity": 1},
        "ending": ending,
        "category": category,
        "error": category.map(|c| format!("ended: {c}")),
        "usage": {"llm_calls": llm_calls, "tool_calls": 1, "input_tokens": 200, "output_tokens": 20,
                  "cache_read_tokens": 0, "cache_write_tokens": 0, "cost_usd": 0.002, "estimated_llm_calls": 0},
        "scores": null,
        "duration_ms": 100 + u64::from(n) * 10,
        "started_at_ms": DAY0 + day * DAY_MS + 3_600_000 + u64::from(n) * 1000,
        "metadata": metadata,
    }))
    .unwrap()
}

/// The seeded counts on the two days (answered includes the partial ones).
pub struct Seeded {
    pub answered: u64,
    pub partial: u64,
    pub escalated: u64,
    pub exhausted: u64,
    pub stuck: u64,
    pub failed: u64,
}

/// 20 records of `triage` on the two seeded days: 12 answered (2 partial), 3
/// escalated, 2 exhausted (max_llm_calls), 2 stuck, 1 failed.
pub async fn seed(store: &Store) -> Seeded {
    let mut n = 0u32;
    let mut add = |ending: Ending, count: u32, day: u64, calls: u32, partial: u32| {
        let mut out = Vec::new();
        for i in 0..count {
            n += 1;
            out.push(record(
                n,
                if n.is_multiple_of(3) { "b" } else { "a" },
                ending,
                day,
                calls + i % 2,
                i < partial,
            ));
        }
        out
    };
    let mut records = Vec::new();
    records.extend(add(Ending::Answered, 7, 0, 2, 2));
    records.extend(add(Ending::Answered, 5, 1, 3, 0));
    records.extend(add(Ending::Escalated, 2, 0, 4, 0));
    records.extend(add(Ending::Escalated, 1, 1, 4, 0));
    records.extend(add(Ending::Exhausted, 2, 1, 8, 0));
    records.extend(add(Ending::Stuck, 2, 0, 5, 0));
    records.extend(add(Ending::Failed, 1, 1, 1, 0));
    for r in &records {
        store.record(r).await.unwrap();
    }
    Seeded {
        answered: 12,
        partial: 2,
        escalated: 3,
        exhausted: 2,
        stuck: 2,
        failed: 1,
    }
}

/// A running dashboard: its base URL and the task serving it.
pub struct Running {
    pub base: String,
    pub task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `router(store, config)` on a free loopback port.
pub async fn start(store: Store, config: Config) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = agent_dashboard::router(store, config);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Running { base, task }
}

/// A config for `store_path` with a token (writes on).
pub fn config_with_token(store: &str, token: &str) -> Config {
    let mut config = Config::new(store);
    config.token = Some(token.to_owned());
    config
}

/// An HTTP client that does not follow redirects (cookies are passed by hand).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Logs `client` in with `token`; returns the session cookie header value.
pub async fn login(client: &reqwest::Client, base: &str, token: &str) -> String {
    let response = client
        .post(format!("{base}/login"))
        .form(&[("token", token), ("next", "/")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    cookie.split(';').next().unwrap().to_owned()
}

/// The value of the first `name="csrf" value="..."` in a page.
pub fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    html[at..].split('"').next().unwrap().to_owned()
}

/// Refunds an order (needs a person's approval).
#[tool]
async fn refund(order_id: String, amount: f64) -> String {
    format!("refunded {amount} on {order_id}")
}

/// A run paused on a `refund` call waiting for approval (checkpoints in `store`).
pub async fn paused_run(store: &Store, run_id: &str) -> AgentResult<Triage> {
    let model = ScriptedModel::new()
        .tool_call("refund", json!({"order_id": "NW-7", "amount": 250.0}))
        .submit(json!({"queue": "returns", "severity": 2}));
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(model)
        .tools(tools![refund])
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .checkpoints(store.clone())
        .approval(|call, _| call.name == "refund")
        .build()
        .unwrap();
    let result = run_agent_with(
        &config,
        "Refund NW-7 please <script>alert(7)</script>",
        RunOptions::new().run_id(run_id),
    )
    .await;
    assert_eq!(result.ending(), Ending::Paused, "{:?}", result.outcome);
    result
}

/// A stored sweep comparison (two variants of the built-in test model) in `dir` as
/// `NAME.json`.
pub async fn stored_sweep(dir: &std::path::Path, name: &str) {
    use agent_core::eval::{Sample, SweepOptions, Variant, sweep};
    let base: AgentConfig<Triage> = AgentConfig::builder("sweep").model("test").build().unwrap();
    let capped = base.with_(|b| b.max_llm_calls(3)).unwrap();
    let samples: Vec<Sample> = (0..4)
        .map(|i| Sample::new(format!("s{i}"), format!("ticket {i}")))
        .collect();
    let comparison = sweep(
        &[Variant::new("base", base), Variant::new("capped", capped)],
        &samples,
        &SweepOptions::new(),
    )
    .await
    .unwrap();
    comparison
        .write_json(dir.join(format!("{name}.json")))
        .unwrap();
}
