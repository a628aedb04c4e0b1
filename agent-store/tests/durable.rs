//! Durable runs on real SQLite and PostgreSQL stores.
//!
//! - `checkpoints_and_the_ledger_round_trip`: the `CheckpointStore` rows.
//! - `killed_at_every_boundary_then_resumed`: a 4-tool-call run (three turns, one of
//!   them with two parallel calls) whose process is killed (SIGKILL) at each of its 16
//!   write boundaries in turn (`before_call`, `tools_pending`, every ledger `started`
//!   and `completed`, `finished`), then resumed by a new process: the same result,
//!   transcript and usage as the run that was never killed.
//! - `killed_at_random_points`: 24 runs, each killed 1 to 3 times at a random moment
//!   after it started (its tools sleep, so the kills land anywhere in the run), then
//!   finished by a last process: `send_email` (irreversible) appended its line at most
//!   once per run, and every re-run of an idempotent tool saw the same key.
//!
//! The child is this test binary run again on `child_resumes_or_runs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agent_core::conformance::{self, HangAt};
use agent_core::store::{CheckpointRecord, CheckpointStore, LedgerEntry, SaveOutcome, StoreFuture};
use agent_core::{
    AgentConfig, AgentOutput, RunOptions, Tool, ToolContext,
    config::Backoff,
    durable::ResumeError,
    llm::{LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, Message, TokenUsage, ToolCall},
    resume_agent, run_agent_with,
    schema::{SchemaValidator, ValidationErrors},
    tool::{ToolDefinition, ToolFuture},
};
use agent_store::{Store, StoreOptions};
use common::Place;
use serde_json::{Value, json};

const TARGET: &str = "AGENT_DURABLE_TARGET";
const SCHEMA: &str = "AGENT_DURABLE_SCHEMA";
const RUN: &str = "AGENT_DURABLE_RUN";
const HANG_AT: &str = "AGENT_DURABLE_HANG_AT";
const EFFECTS: &str = "AGENT_DURABLE_EFFECTS";
const SCRIPT: &str = "AGENT_DURABLE_SCRIPT";

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Answer {
    ok: bool,
}

fn answer_schema() -> Value {
    json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
}

impl AgentOutput for Answer {
    fn output_tool() -> Option<ToolDefinition> {
        Some(ToolDefinition::new(
            "submit_output",
            "Answer.",
            answer_schema(),
        ))
    }

    fn from_arguments(arguments: &Value) -> Result<Self, ValidationErrors> {
        SchemaValidator::new(&answer_schema())
            .unwrap()
            .validate_into(arguments)
    }
}

/// Answers the `n`-th turn with `steps[n]` (`n`: assistant turns in the request), so a
/// process that takes a run over gets the step the run is at.
struct ByTurn(Vec<LlmResponse>);

impl LlmClient for ByTurn {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let step = self.0.get(turn).cloned();
        Box::pin(async move { step.ok_or_else(|| LlmError::permanent("script used up")) })
    }

    fn provider(&self) -> &str {
        "scripted"
    }
}

fn call(id: &str, name: &str, q: &str) -> ToolCall {
    ToolCall::new(id, name, json!({ "q": q }))
}

/// `plain`: four idempotent calls in three turns; `email`: the same with `send_email`
/// (irreversible) in the parallel turn.
fn script(kind: &str) -> Vec<LlmResponse> {
    let usage = |i: u64| TokenUsage::new(100 + i, 10 + i);
    let second = if kind == "email" {
        "send_email"
    } else {
        "stock"
    };
    vec![
        LlmResponse::tool_calls(vec![call("c1", "lookup", "a")]).with_usage(usage(1)),
        LlmResponse::tool_calls(vec![call("c2", "lookup", "b"), call("c3", second, "c")])
            .with_usage(usage(2)),
        LlmResponse::tool_calls(vec![call("c4", "stock", "d")]).with_usage(usage(3)),
        LlmResponse::tool_calls(vec![ToolCall::new(
            "c5",
            "submit_output",
            json!({"ok": true}),
        )])
        .with_usage(usage(4)),
    ]
}

/// A tool that appends `"{name} {idempotency key}"` to the effects file, after a short
/// sleep (so random kills land inside tools too).
struct Effect {
    name: &'static str,
    irreversible: bool,
    file: PathBuf,
}

impl Tool for Effect {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name,
            "Does something.",
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        )
    }

    fn call<'a>(&'a self, arguments: Value, context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.file)
                .unwrap();
            // One write of the whole line: `writeln!` writes it in pieces, which two
            // tools of one turn (or a kill) could interleave ("stock b9:c3lookup ...").
            let line = format!("{} {}\n", self.name, context.idempotency_key());
            f.write_all(line.as_bytes()).unwrap();
            f.sync_data().unwrap();
            Ok(format!("{} done for {}", self.name, arguments["q"]))
        })
    }

    fn irreversible(&self) -> bool {
        self.irreversible
    }
}

/// The child: resumes the run, or starts it when nothing is stored; prints `started`,
/// then `done {json}` with the result's outcome, transcript and usage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of the kill tests; it runs only when they start it"]
async fn child_resumes_or_runs() {
    let Ok(target) = std::env::var(TARGET) else {
        return;
    };
    let mut options = StoreOptions::new();
    if let Ok(schema) = std::env::var(SCHEMA) {
        options = options.schema(schema);
    }
    let store = Store::open_with(&target, options).await.unwrap();
    let run_id = std::env::var(RUN).unwrap();
    let kind = std::env::var(SCRIPT).unwrap();
    let effects = PathBuf::from(std::env::var(EFFECTS).unwrap());
    let at = std::env::var(HANG_AT).map_or(0, |v| v.parse().unwrap());
    let tool = |name, irreversible| Effect {
        name,
        irreversible,
        file: effects.clone(),
    };
    let config: AgentConfig<Answer> = AgentConfig::builder("durable")
        .llm(ByTurn(script(&kind)))
        .backoff(Backoff::none())
        .checkpoints(HangAt::new(store.clone(), at))
        .tool(tool("lookup", false))
        .tool(tool("stock", false))
        .tool(tool("send_email", true))
        .build()
        .unwrap();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "started").unwrap();
        out.flush().unwrap();
    }
    let result = match resume_agent(&config, &run_id).await {
        Ok(result) => result,
        Err(ResumeError::UnknownRun { .. }) => {
            run_agent_with(&config, "go", RunOptions::new().run_id(run_id.clone())).await
        }
        Err(other) => panic!("{other}"),
    };
    let essence = json!({
        "outcome": format!("{:?}", result.outcome),
        "transcript": result.transcript,
        "usage": result.usage,
        "store_failures": result.store_failures,
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "done {essence}").unwrap();
    out.flush().unwrap();
}

struct Case<'p> {
    place: &'p Place,
    effects: PathBuf,
    kind: &'static str,
}

impl Case<'_> {
    fn spawn(&self, run_id: &str, hang_at: u64) -> Child {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "durable::child_resumes_or_runs",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .args(["--test-threads", "1"])
            .env(TARGET, self.place.target())
            .env(RUN, run_id)
            .env(SCRIPT, self.kind)
            .env(EFFECTS, &self.effects)
            .env(HANG_AT, hang_at.to_string())
            .stdout(Stdio::piped())
            .stderr(self.stderr_file(run_id));
        if let Place::Postgres { schema, .. } = self.place {
            command.env(SCHEMA, schema);
        }
        command.spawn().unwrap()
    }

    /// Reads a child's output until a line holds `until` (the test harness may print
    /// its own text before it on the same line); returns the line from `until` on.
    fn wait_for(child: &mut Child, until: &str) -> Option<String> {
        let stdout = child.stdout.as_mut().unwrap();
        for line in BufReader::new(stdout).lines() {
            let line = line.ok()?;
            if let Some(at) = line.find(until) {
                return Some(line[at..].to_owned());
            }
        }
        None
    }

    /// Where a child of this run writes its stderr (appended: a killed child's text
    /// stays, and the finishing child's follows it).
    fn stderr_path(&self, run_id: &str) -> PathBuf {
        self.effects.with_file_name(format!("stderr.{run_id}.txt"))
    }

    fn stderr_file(&self, run_id: &str) -> Stdio {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_path(run_id))
            .map_or_else(|_| Stdio::null(), Stdio::from)
    }

    /// A child that runs to the end; its `done` JSON.
    fn finish(&self, run_id: &str) -> Value {
        let mut child = self.spawn(run_id, 0);
        let Some(line) = Self::wait_for(&mut child, "done ") else {
            let status = child.wait().unwrap();
            let stderr = std::fs::read_to_string(self.stderr_path(run_id)).unwrap_or_default();
            panic!("the child of {run_id} did not finish ({status}); its stderr:\n{stderr}");
        };
        assert!(child.wait().unwrap().success());
        serde_json::from_str(line.trim_start_matches("done ")).unwrap()
    }

    fn kill(child: &mut Child) {
        child.kill().unwrap();
        assert!(!child.wait().unwrap().success(), "killed, not finished");
    }
}

fn effect_lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The `CheckpointStore` rows (the conformance kit's test), then agent-store's own
/// rules: an empty run id refused, the database's integrity check.
async fn checkpoints_and_the_ledger_round_trip(place: &Place) {
    conformance::checkpoints_and_the_ledger_round_trip(place).await;
    let store = place.open().await;
    assert!(store.load("").await.is_err(), "an empty run id is refused");
    store.check_integrity().await.unwrap();
    store.close().await.unwrap();
}

async fn killed_at_every_boundary_then_resumed(place: &Place) {
    place.open().await.close().await.unwrap();
    let dir = std::env::temp_dir().join(common::unique("durable_effects"));
    std::fs::create_dir_all(&dir).unwrap();
    let case = Case {
        place,
        effects: dir.join("effects.txt"),
        kind: "plain",
    };
    let baseline = case.finish("base");
    assert_eq!(baseline["outcome"], "Ok(Answer { ok: true })");
    assert_eq!(baseline["usage"]["llm_calls"], 4);
    assert_eq!(baseline["usage"]["tool_calls"], 4);
    // 4 before_call + 3 tools_pending + 8 ledger writes + finished.
    for at in 1..=16 {
        let run_id = format!("b{at}");
        let mut child = case.spawn(&run_id, at);
        let line = Case::wait_for(&mut child, "boundary ");
        assert_eq!(line.as_deref(), Some(format!("boundary {at}").as_str()));
        Case::kill(&mut child);
        let resumed = case.finish(&run_id);
        assert_eq!(resumed, baseline, "killed at write {at}");
    }
    // Every execution, first or again, used its call's key.
    for line in effect_lines(&case.effects) {
        let (_, key) = line.split_once(' ').unwrap();
        let (_, call) = key.split_once(':').unwrap();
        assert!(["c1", "c2", "c3", "c4"].contains(&call), "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

async fn killed_at_random_points(place: &Place) {
    place.open().await.close().await.unwrap();
    let dir = std::env::temp_dir().join(common::unique("durable_effects"));
    std::fs::create_dir_all(&dir).unwrap();
    let case = Case {
        place,
        effects: dir.join("effects.txt"),
        kind: "email",
    };
    let mut killed = 0;
    for run in 0..24 {
        let run_id = format!("r{run}");
        for _ in 0..fastrand::usize(1..=3) {
            let mut child = case.spawn(&run_id, 0);
            assert!(Case::wait_for(&mut child, "started").is_some());
            // The run takes about 10 ms from here (five tool executions of 2 ms).
            std::thread::sleep(Duration::from_micros(fastrand::u64(0..15_000)));
            child.kill().unwrap();
            child.wait().unwrap();
            killed += 1;
        }
        let done = case.finish(&run_id);
        assert_eq!(done["outcome"], "Ok(Answer { ok: true })", "{run_id}");
    }
    assert!(killed >= 24);
    let lines = effect_lines(&case.effects);
    let mut distinct = lines.clone();
    distinct.sort();
    distinct.dedup();
    eprintln!(
        "{killed} kills over 24 runs: {} tool executions, {} of them again after a kill, \
         {} emails sent",
        lines.len(),
        lines.len() - distinct.len(),
        lines.iter().filter(|l| l.starts_with("send_email")).count()
    );
    for run in 0..24 {
        let emails = lines
            .iter()
            .filter(|l| **l == format!("send_email r{run}:c3"))
            .count();
        assert!(emails <= 1, "run r{run} sent {emails} emails");
    }
    for line in &lines {
        let (tool, key) = line.split_once(' ').unwrap();
        let (run, call) = key.split_once(':').unwrap();
        assert!(run.starts_with('r'), "{line}");
        let expected = match tool {
            "lookup" => ["c1", "c2"].as_slice(),
            "stock" => &["c4"],
            "send_email" => &["c3"],
            _ => panic!("{line}"),
        };
        assert!(expected.contains(&call), "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A boundary is one write (the conformance kit's test).
async fn a_boundary_is_one_write(place: &Place) {
    conformance::a_boundary_is_one_write(place).await;
}

// C48.
/// The fenced writes keep one writer (the conformance kit's test: the rule, 8 handles
/// claiming at once, a `started` entry racing a take-over), then the integrity check.
async fn c48_fenced_writes_keep_one_writer(place: &Place) {
    conformance::fenced_writes_keep_one_writer(place).await;
    let store = place.open().await;
    store.check_integrity().await.unwrap();
    store.close().await.unwrap();
}

/// Passes every call to the store; each load waits until `n` loads were made: that many
/// processes read the checkpoint at the same moment.
struct LoadTogether {
    inner: Store,
    barrier: std::sync::Arc<tokio::sync::Barrier>,
}

impl CheckpointStore for LoadTogether {
    fn save<'a>(&'a self, checkpoint: &'a CheckpointRecord) -> StoreFuture<'a, ()> {
        self.inner.save(checkpoint)
    }
    fn save_fenced<'a>(
        &'a self,
        checkpoint: &'a CheckpointRecord,
        taken_at: u64,
    ) -> StoreFuture<'a, SaveOutcome> {
        self.inner.save_fenced(checkpoint, taken_at)
    }
    fn record_tool_fenced<'a>(
        &'a self,
        entry: &'a LedgerEntry,
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        self.inner.record_tool_fenced(entry, writer)
    }
    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<CheckpointRecord>> {
        Box::pin(async move {
            let found = self.inner.load(run_id).await;
            self.barrier.wait().await;
            found
        })
    }
    fn record_tool<'a>(&'a self, entry: &'a LedgerEntry) -> StoreFuture<'a, ()> {
        self.inner.record_tool(entry)
    }
    fn unfinished<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<CheckpointRecord>> {
        self.inner.unfinished(limit)
    }
    fn ledger<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<LedgerEntry>> {
        self.inner.ledger(run_id)
    }
}

// C48.
/// A child killed (SIGKILL) at its write 6 (the tools_pending of the turn that holds
/// send_email), then two resumes at once, each on its own store: one ends the run, the
/// other is `ResumeError::Fenced`, and send_email appended its line once.
async fn c48_two_resumes_at_once_one_is_fenced(place: &Place) {
    place.open().await.close().await.unwrap();
    let dir = std::env::temp_dir().join(common::unique("durable_effects"));
    std::fs::create_dir_all(&dir).unwrap();
    let case = Case {
        place,
        effects: dir.join("effects.txt"),
        kind: "email",
    };
    let mut child = case.spawn("two", 6);
    let line = Case::wait_for(&mut child, "boundary ");
    assert_eq!(line.as_deref(), Some("boundary 6"));
    Case::kill(&mut child);
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let config = |store: Store| -> AgentConfig<Answer> {
        let tool = |name, irreversible| Effect {
            name,
            irreversible,
            file: case.effects.clone(),
        };
        AgentConfig::builder("durable")
            .llm(ByTurn(script("email")))
            .backoff(Backoff::none())
            .checkpoints(LoadTogether {
                inner: store,
                barrier: barrier.clone(),
            })
            .tool(tool("lookup", false))
            .tool(tool("stock", false))
            .tool(tool("send_email", true))
            .build()
            .unwrap()
    };
    let (a, b) = (config(place.open().await), config(place.open().await));
    let (ra, rb) = tokio::join!(resume_agent(&a, "two"), resume_agent(&b, "two"));
    let (won, lost) = match (ra, rb) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        (ra, rb) => panic!(
            "exactly one resume goes on: {:?} / {:?}",
            ra.map(|r| r.outcome),
            rb.map(|r| r.outcome)
        ),
    };
    assert_eq!(
        lost,
        ResumeError::Fenced {
            run_id: "two".into()
        }
    );
    assert_eq!(format!("{:?}", won.outcome), "Ok(Answer { ok: true })");
    assert_eq!(won.usage.llm_calls, 4);
    assert_eq!(won.usage.tool_calls, 4);
    assert_eq!(won.store_failures, 0);
    let mut lines = effect_lines(&case.effects);
    lines.sort();
    // Each tool once: c1 before the kill, the rest by the resume that went on.
    assert_eq!(
        lines,
        [
            "lookup two:c1",
            "lookup two:c2",
            "send_email two:c3",
            "stock two:c4"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

both_backends!(
    checkpoints_and_the_ledger_round_trip,
    killed_at_every_boundary_then_resumed,
    killed_at_random_points,
    c48_fenced_writes_keep_one_writer,
    c48_two_resumes_at_once_one_is_fenced,
    a_boundary_is_one_write
);
