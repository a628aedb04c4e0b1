//! Durable runs in one process: a crash is the run's future dropped while a checkpoint
//! write hangs, at every boundary in turn; the resumed run must end exactly like the
//! run that was never interrupted (on the scripted model). Also the typed errors of
//! `resume_agent`, the budgets left after a resume, the ledger's rule for irreversible
//! tools, and a failing checkpoint store.
//!
//! The real-process version (kill -9, SQLite and PostgreSQL) is
//! `agent-store/tests/durable_kill.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;
use crate::common::by_turn::ByTurn;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_core::conformance::CrashAt;
use agent_core::store::{
    CheckpointRecord, CheckpointStore, ConfigDifference, InMemoryCheckpoints, LedgerEntry,
    SaveOutcome, StoreFuture,
};
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentResult, RunOptions, Tool, ToolContext,
    config::Backoff,
    durable::ResumeError,
    handover::CallOutcome,
    llm::{LlmClient, LlmResponse, Message, TokenUsage, ToolCall},
    resume_agent, run_agent_with,
    store::StoreError,
    tool::{ToolDefinition, ToolFuture},
};
use common::{Triage, valid};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A tool that records the idempotency key of every execution (and, irreversible, is
/// the `send_email` of the issue).
#[derive(Clone)]
struct KeyTool {
    name: &'static str,
    irreversible: bool,
    keys: Arc<Mutex<Vec<String>>>,
}

impl KeyTool {
    fn new(name: &'static str, irreversible: bool) -> Self {
        Self {
            name,
            irreversible,
            keys: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn keys(&self) -> Vec<String> {
        self.keys.lock().unwrap().clone()
    }
}

impl Tool for KeyTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name,
            "Look something up.",
            json!({
                "type": "object",
                "properties": {"q": {"type": "string"}},
                "required": ["q"],
                "additionalProperties": false
            }),
        )
    }

    fn call<'a>(&'a self, arguments: Value, context: ToolContext) -> ToolFuture<'a> {
        self.keys.lock().unwrap().push(context.idempotency_key());
        Box::pin(async move { Ok(format!("{} of {}", self.name, arguments["q"])) })
    }

    fn irreversible(&self) -> bool {
        self.irreversible
    }
}

/// A store whose every call fails.
struct Broken;

impl CheckpointStore for Broken {
    fn save<'a>(&'a self, _: &'a CheckpointRecord) -> StoreFuture<'a, ()> {
        Box::pin(async { Err(StoreError::unavailable("down")) })
    }
    fn save_fenced<'a>(&'a self, _: &'a CheckpointRecord, _: u64) -> StoreFuture<'a, SaveOutcome> {
        Box::pin(async { Err(StoreError::unavailable("down")) })
    }
    fn record_tool_fenced<'a>(
        &'a self,
        _: &'a LedgerEntry,
        _: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        Box::pin(async { Err(StoreError::unavailable("down")) })
    }
    fn load<'a>(&'a self, _: &'a str) -> StoreFuture<'a, Option<CheckpointRecord>> {
        Box::pin(async { Err(StoreError::unavailable("down")) })
    }
    fn record_tool<'a>(&'a self, _: &'a LedgerEntry) -> StoreFuture<'a, ()> {
        Box::pin(async { Err(StoreError::unavailable("down")) })
    }
    fn unfinished<'a>(&'a self, _: usize) -> StoreFuture<'a, Vec<CheckpointRecord>> {
        Box::pin(async { Err(StoreError::unavailable("down")) })
    }
    fn ledger<'a>(&'a self, _: &'a str) -> StoreFuture<'a, Vec<LedgerEntry>> {
        Box::pin(async { Err(StoreError::unavailable("down")) })
    }
}

fn call(id: &str, name: &str, q: &str) -> ToolCall {
    ToolCall::new(id, name, json!({ "q": q }))
}

/// Four tool calls over three turns (one turn runs two in parallel), then the answer;
/// every turn reports its tokens.
fn four_call_script() -> Vec<LlmResponse> {
    let usage = |i: u64| TokenUsage::new(100 + i, 10 + i);
    vec![
        LlmResponse::tool_calls(vec![call("c1", "lookup", "a")]).with_usage(usage(1)),
        LlmResponse::tool_calls(vec![call("c2", "lookup", "b"), call("c3", "stock", "c")])
            .with_usage(usage(2)),
        LlmResponse::tool_calls(vec![call("c4", "stock", "d")]).with_usage(usage(3)),
        LlmResponse::tool_calls(vec![ToolCall::new("c5", "submit_output", valid())])
            .with_usage(usage(4)),
    ]
}

fn config(
    llm: impl LlmClient + 'static,
    store: impl CheckpointStore + 'static,
    tools: &[&KeyTool],
) -> AgentConfig<Triage> {
    let mut b = AgentConfig::<Triage>::builder("durable")
        .llm(llm)
        .backoff(Backoff::none())
        .checkpoints(store);
    for t in tools {
        b = b.tool((*t).clone());
    }
    b.build().unwrap()
}

/// The parts of a result a crash must not change.
fn essence(r: &AgentResult<Triage>) -> (Result<Triage, String>, Vec<Message>, String, String) {
    (
        r.outcome.clone().map_err(|e| e.to_string()),
        r.transcript.clone(),
        format!("{:?}", r.usage),
        r.output.clone(),
    )
}

#[tokio::test]
async fn a_run_resumed_after_a_crash_at_any_boundary_ends_like_the_uninterrupted_run() {
    // The uninterrupted run, on the ScriptedModel.
    let (lookup, stock) = (KeyTool::new("lookup", false), KeyTool::new("stock", false));
    let scripted = ScriptedModel::from_steps(
        four_call_script()
            .into_iter()
            .map(agent_core::testing::ScriptStep::Respond),
    );
    let store = InMemoryCheckpoints::new();
    let baseline = run_agent_with(
        &config(scripted.clone(), store.clone(), &[&lookup, &stock]),
        "triage ticket 7",
        RunOptions::new().run_id("ticket-7"),
    )
    .await;
    assert_eq!(baseline.outcome, Ok(Triage::from_valid()));
    assert_eq!(baseline.usage.llm_calls, 4);
    assert_eq!(baseline.usage.tool_calls, 4);
    assert_eq!(baseline.store_failures, 0);
    // The store's calls (this store has `save_boundary`'s default: one call per
    // checkpoint or entry): 4 before_call + 3 tools_pending + 2 per tool execution +
    // finished.
    let writes = store.writes();
    assert_eq!(writes, 4 + 3 + 8 + 1);
    assert_eq!(
        lookup.keys(),
        vec!["ticket-7:c1".to_owned(), "ticket-7:c2".to_owned()]
    );

    for crash_at in 1..=writes {
        let inner = InMemoryCheckpoints::new();
        let crashing = CrashAt::new(inner.clone(), crash_at);
        let (lookup, stock) = (KeyTool::new("lookup", false), KeyTool::new("stock", false));
        let first = ByTurn::new(four_call_script());
        let cfg = config(first.clone(), crashing.clone(), &[&lookup, &stock]);
        let run = run_agent_with(
            &cfg,
            "triage ticket 7",
            RunOptions::new().run_id("ticket-7"),
        );
        tokio::select! {
            _ = run => panic!("the run ended before write {crash_at}"),
            () = crashing.reached().notified() => {}
        }
        // A new "process": a new model and new tools on the same stored state.
        let second = ByTurn::new(four_call_script());
        let cfg = config(second.clone(), inner.clone(), &[&lookup, &stock]);
        let resumed = match resume_agent(&cfg, "ticket-7").await {
            Ok(resumed) => resumed,
            // Nothing was stored before the crash: the run starts again.
            Err(ResumeError::UnknownRun { run_id }) => {
                assert_eq!(crash_at, 1);
                run_agent_with(&cfg, "triage ticket 7", RunOptions::new().run_id(run_id)).await
            }
            Err(other) => panic!("crash at write {crash_at}: {other}"),
        };
        assert_eq!(
            essence(&resumed),
            essence(&baseline),
            "crash at write {crash_at}"
        );
        assert_eq!(resumed.trace_id.len(), 32, "a resumed run keeps a trace id");
        assert_eq!(resumed.store_failures, 0, "crash at write {crash_at}");
        // Every execution of a call, first or again, saw the same key.
        for key in lookup.keys().iter().chain(&stock.keys()) {
            assert!(
                ["ticket-7:c1", "ticket-7:c2", "ticket-7:c3", "ticket-7:c4"]
                    .contains(&key.as_str()),
                "{key}"
            );
        }
        // A finished run (the crash hit after its last write) is answered from the store.
        let again = resume_agent(&cfg, "ticket-7").await.unwrap();
        assert_eq!(essence(&again), essence(&baseline));
        let before = second.requests();
        let _ = resume_agent(&cfg, "ticket-7").await.unwrap();
        assert_eq!(second.requests(), before, "a finished run sends no request");
    }
}

trait FromValid {
    fn from_valid() -> Self;
}

impl FromValid for Triage {
    fn from_valid() -> Self {
        Triage {
            severity: 2,
            summary: "parcel late".into(),
        }
    }
}

#[tokio::test]
async fn a_run_that_used_7_of_8_llm_calls_has_1_left_after_a_resume() {
    let lookup = KeyTool::new("lookup", false);
    // Every turn a new lookup (no guard fires); never an answer.
    let steps: Vec<LlmResponse> = (0..20)
        .map(|i| {
            LlmResponse::tool_calls(vec![call(&format!("c{i}"), "lookup", &format!("q{i}"))])
                .with_usage(TokenUsage::new(50, 5))
        })
        .collect();
    let inner = InMemoryCheckpoints::new();
    // 4 writes per tool turn: write 29 is the before_call of the 8th LLM call, write 30
    // its tools_pending: the crash loses the 8th call.
    let crashing = CrashAt::new(inner.clone(), 30);
    let build = |llm: ByTurn, store: Arc<dyn CheckpointStore>| {
        AgentConfig::<Triage>::builder("durable")
            .llm(llm)
            .backoff(Backoff::none())
            .max_llm_calls(8)
            .max_tool_calls(20)
            .checkpoints(store)
            .tool(lookup.clone())
            .build()
            .unwrap()
    };
    let first = ByTurn::new(steps.clone());
    let cfg = build(first.clone(), Arc::new(crashing.clone()));
    tokio::select! {
        _ = run_agent_with(&cfg, "go", RunOptions::new().run_id("r8")) => panic!("ended"),
        () = crashing.reached().notified() => {}
    }
    assert_eq!(first.requests(), 8);
    let second = ByTurn::new(steps);
    let cfg = build(second.clone(), Arc::new(inner));
    let resumed = resume_agent(&cfg, "r8").await.unwrap();
    assert_eq!(second.requests(), 1, "one LLM call was left");
    assert_eq!(resumed.usage.llm_calls, 8);
    assert_eq!(resumed.usage.tool_calls, 7);
    assert_eq!(resumed.usage.input_tokens, 8 * 50);
    assert_eq!(resumed.category(), Some("max_llm_calls"));
}

#[tokio::test]
async fn an_irreversible_call_interrupted_mid_way_is_not_run_again_and_is_outcome_unknown() {
    let email = KeyTool::new("send_email", true);
    let steps = vec![
        LlmResponse::tool_calls(vec![call("e1", "send_email", "ada")]),
        LlmResponse::text("I cannot tell whether it was sent."),
    ];
    let inner = InMemoryCheckpoints::new();
    // before_call 1, tools_pending 2, started 3, completed 4: crash on the completed
    // write, after the email went out.
    let crashing = CrashAt::new(inner.clone(), 4);
    let build = |llm: ByTurn, store: Arc<dyn CheckpointStore>| {
        AgentConfig::<Triage>::builder("durable")
            .llm(llm)
            .backoff(Backoff::none())
            .max_parse_retries(0)
            .checkpoints(store)
            .tool(email.clone())
            .build()
            .unwrap()
    };
    let cfg = build(ByTurn::new(steps.clone()), Arc::new(crashing.clone()));
    tokio::select! {
        _ = run_agent_with(&cfg, "mail ada", RunOptions::new().run_id("m1")) => panic!("ended"),
        () = crashing.reached().notified() => {}
    }
    assert_eq!(email.keys(), vec!["m1:e1".to_owned()]);
    let cfg = build(ByTurn::new(steps), Arc::new(inner));
    let resumed = resume_agent(&cfg, "m1").await.unwrap();
    assert_eq!(email.keys().len(), 1, "the email is sent at most once");
    let Some(Message::Tool { results }) = resumed.transcript.get(2) else {
        panic!("{:?}", resumed.transcript)
    };
    assert!(results[0].is_error);
    assert!(
        results[0]
            .content
            .contains("outcome of this send_email call is unknown"),
        "{}",
        results[0].content
    );
    assert_eq!(resumed.category(), Some("schema_not_called"));
    let handover = resumed.handover.unwrap();
    assert!(matches!(handover.calls[0].outcome, CallOutcome::Unknown(_)));
    assert!(
        handover.to_string().contains("outcome unknown"),
        "{handover}"
    );
}

#[tokio::test]
async fn resume_errors_are_typed_and_send_nothing() {
    let lookup = KeyTool::new("lookup", false);
    let store = InMemoryCheckpoints::new();
    let model = ByTurn::new(four_call_script());
    // No checkpoint store.
    let plain = AgentConfig::<Triage>::builder("plain")
        .llm(model.clone())
        .build()
        .unwrap();
    assert_eq!(
        resume_agent(&plain, "x").await.unwrap_err(),
        ResumeError::NoCheckpointStore
    );
    // Unknown run id.
    let cfg = config(model.clone(), store.clone(), &[&lookup]);
    assert_eq!(
        resume_agent(&cfg, "nope").await.unwrap_err(),
        ResumeError::UnknownRun {
            run_id: "nope".into()
        }
    );
    // A stored run, then a config with another tool set.
    let inner = InMemoryCheckpoints::new();
    let crashing = CrashAt::new(inner.clone(), 2);
    let cfg = config(model.clone(), crashing.clone(), &[&lookup]);
    tokio::select! {
        _ = run_agent_with(&cfg, "go", RunOptions::new().run_id("t1")) => panic!("ended"),
        () = crashing.reached().notified() => {}
    }
    let stored = inner.load("t1").await.unwrap().unwrap();
    let sent = model.requests();
    let other = KeyTool::new("refund", true);
    let cfg = config(model.clone(), inner.clone(), &[&lookup, &other]);
    let error = resume_agent(&cfg, "t1").await.unwrap_err();
    assert_eq!(
        error,
        ResumeError::ConfigMismatch {
            run_id: "t1".into(),
            differences: vec![ConfigDifference::ToolAdded {
                name: "refund".into()
            }],
        }
    );
    assert_eq!(
        error.to_string(),
        "run t1 cannot be resumed with this config: tool refund was added"
    );
    // Another output type: the schema differs (and the tool is gone).
    let text: AgentConfig<String> = AgentConfig::builder("text")
        .llm(model.clone())
        .checkpoints(inner.clone())
        .build()
        .unwrap();
    let Err(ResumeError::ConfigMismatch { differences, .. }) = resume_agent(&text, "t1").await
    else {
        panic!("a mismatch")
    };
    assert!(matches!(
        &differences[0],
        ConfigDifference::OutputSchema {
            stored: Some(_),
            current: None
        }
    ));
    assert_eq!(
        differences[1],
        ConfigDifference::ToolRemoved {
            name: "lookup".into()
        }
    );
    assert_eq!(model.requests(), sent, "no request sent");
    assert_eq!(
        inner.load("t1").await.unwrap().unwrap(),
        stored,
        "nothing overwritten"
    );
    // A fresh run under a run id that has a checkpoint is refused: resume it instead.
    let cfg = config(model.clone(), inner.clone(), &[&lookup]);
    let refused = run_agent_with(&cfg, "go", RunOptions::new().run_id("t1")).await;
    assert_eq!(refused.category(), Some("invalid_run"));
    assert_eq!(model.requests(), sent);
    // A malformed run id.
    let bad = run_agent_with(&cfg, "go", RunOptions::new().run_id("")).await;
    assert_eq!(bad.category(), Some("invalid_run"));
}

/// A store that logs every write the runner makes, one line per call: a boundary's
/// checkpoint phase (or `-`) and its entries, or a lone entry. A boundary's line is
/// logged when it is stored; with `slow`, a boundary with a checkpoint takes 50 ms; with
/// `fail_pending`, a boundary with a `tools_pending` checkpoint fails (logged with
/// `failed`, nothing of it stored).
#[derive(Clone, Default)]
struct Logged {
    inner: InMemoryCheckpoints,
    log: Arc<Mutex<Vec<String>>>,
    slow: bool,
    fail_pending: bool,
}

fn entries_text(entries: &[LedgerEntry]) -> String {
    let parts: Vec<String> = entries
        .iter()
        .map(|e| format!("{} {}", e.call_id, e.status.as_str()))
        .collect();
    parts.join(", ")
}

impl CheckpointStore for Logged {
    fn save<'a>(&'a self, checkpoint: &'a CheckpointRecord) -> StoreFuture<'a, ()> {
        self.inner.save(checkpoint)
    }
    fn save_fenced<'a>(&'a self, c: &'a CheckpointRecord, at: u64) -> StoreFuture<'a, SaveOutcome> {
        self.log
            .lock()
            .unwrap()
            .push(format!("save_fenced {}", c.seq));
        self.inner.save_fenced(c, at)
    }
    fn record_tool_fenced<'a>(
        &'a self,
        entry: &'a LedgerEntry,
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        self.log.lock().unwrap().push(format!(
            "fenced {}",
            entries_text(std::slice::from_ref(entry))
        ));
        self.inner.record_tool_fenced(entry, writer)
    }
    fn save_boundary<'a>(
        &'a self,
        checkpoint: Option<(&'a CheckpointRecord, u64)>,
        entries: &'a [LedgerEntry],
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        let phase = checkpoint.map_or_else(
            || "-".to_owned(),
            |(c, _)| {
                let state: Value = serde_json::from_str(&c.state).unwrap();
                let at = state["phase"]["at"]
                    .as_str()
                    .unwrap_or("finished")
                    .to_owned();
                format!("{} {at}", c.seq)
            },
        );
        let line = format!("{phase} [{}]", entries_text(entries));
        let delay = self.slow && checkpoint.is_some();
        let fail = self.fail_pending && phase.ends_with("tools_pending");
        Box::pin(async move {
            if delay {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            if fail {
                self.log.lock().unwrap().push(format!("{line} failed"));
                return Err(StoreError::unavailable("the disk is full"));
            }
            let outcome = self.inner.save_boundary(checkpoint, entries, writer).await;
            self.log.lock().unwrap().push(line);
            outcome
        })
    }
    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<CheckpointRecord>> {
        self.inner.load(run_id)
    }
    fn record_tool<'a>(&'a self, entry: &'a LedgerEntry) -> StoreFuture<'a, ()> {
        self.log.lock().unwrap().push(format!(
            "entry {}",
            entries_text(std::slice::from_ref(entry))
        ));
        self.inner.record_tool(entry)
    }
    fn unfinished<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<CheckpointRecord>> {
        self.inner.unfinished(limit)
    }
    fn ledger<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<LedgerEntry>> {
        self.inner.ledger(run_id)
    }
}

#[tokio::test]
async fn a_tool_turn_costs_two_writes() {
    let (lookup, stock) = (KeyTool::new("lookup", false), KeyTool::new("stock", false));
    let steps = vec![
        LlmResponse::tool_calls(vec![call("c1", "lookup", "a")]),
        LlmResponse::tool_calls(vec![call("c2", "stock", "b")]),
        // Not run (unknown tool): the turn's held checkpoint is dropped, and the next
        // save takes its seq.
        LlmResponse::tool_calls(vec![call("c3", "nope", "c")]),
        LlmResponse::tool_calls(vec![ToolCall::new("c4", "submit_output", valid())]),
    ];
    let store = Logged::default();
    let cfg = config(ByTurn::new(steps), store.clone(), &[&lookup, &stock]);
    let result = run_agent_with(&cfg, "go", RunOptions::new().run_id("w1")).await;
    assert_eq!(result.outcome, Ok(Triage::from_valid()));
    assert_eq!(result.store_failures, 0);
    // The tools_pending checkpoint goes with the started entry; the completed entry
    // with the next before_call.
    assert_eq!(
        *store.log.lock().unwrap(),
        [
            "1 before_call []",
            "2 tools_pending [c1 started]",
            "3 before_call [c1 completed]",
            "4 tools_pending [c2 started]",
            "5 before_call [c2 completed]",
            "6 before_call []",
            "7 finished []",
        ]
    );
    let mut ledger = store.inner.ledger("w1").await.unwrap();
    ledger.sort_by(|a, b| a.call_id.cmp(&b.call_id));
    let statuses: Vec<_> = ledger
        .iter()
        .map(|e| (e.call_id.as_str(), e.status.as_str()))
        .collect();
    assert_eq!(statuses, [("c1", "completed"), ("c2", "completed")]);
    let last = store.inner.load("w1").await.unwrap().unwrap();
    assert_eq!((last.seq, last.finished), (7, true));
}

/// Two calls of one turn at once: the second call's started entry is written only
/// once the first call's write, which carries the turn's checkpoint, is stored (no tool
/// starts before the turn is durable); the first call's completed entry is written at
/// once (the other call still runs), the last one's with the next checkpoint.
#[tokio::test]
async fn a_second_call_of_a_turn_starts_after_the_turns_checkpoint() {
    let (lookup, stock) = (KeyTool::new("lookup", false), KeyTool::new("stock", false));
    let steps = vec![
        LlmResponse::tool_calls(vec![call("c1", "lookup", "a"), call("c2", "stock", "b")]),
        LlmResponse::tool_calls(vec![ToolCall::new("c3", "submit_output", valid())]),
    ];
    let store = Logged {
        slow: true,
        ..Logged::default()
    };
    let cfg = config(ByTurn::new(steps), store.clone(), &[&lookup, &stock]);
    let result = run_agent_with(&cfg, "go", RunOptions::new().run_id("w3")).await;
    assert_eq!(result.outcome, Ok(Triage::from_valid()));
    let log = store.log.lock().unwrap().clone();
    assert_eq!(
        log[..2],
        ["1 before_call []", "2 tools_pending [c1 started]"]
    );
    // Logged when stored: after the slow write it waited for, though it is not slow.
    assert!(log.contains(&"- [c2 started]".to_owned()), "{log:?}");
    // c1's and c2's completed entries: one alone (the other call was still running),
    // the other with the next before_call.
    let alone: Vec<_> = log.iter().filter(|l| l.starts_with("entry ")).collect();
    assert_eq!(alone.len(), 1, "{log:?}");
    assert!(
        log[log.len() - 2].starts_with("3 before_call [c"),
        "{log:?}"
    );
    assert_eq!(log[log.len() - 1], "4 finished []");
    assert_eq!(log.len(), 6, "{log:?}");
}

/// A tool that cannot safely continue.
struct Fatal;

impl Tool for Fatal {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new("fatal", "Fails for good.", json!({"type": "object"}))
    }

    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Err(agent_core::ToolError::fatal("the disk is gone")) })
    }
}

/// A run that stops right after its tools (a fatal tool) writes the tool's completed
/// entry before the run's end, and then its finished checkpoint.
#[tokio::test]
async fn a_run_that_stops_after_its_tools_writes_their_entries_first() {
    let steps = vec![LlmResponse::tool_calls(vec![call("c1", "fatal", "a")])];
    let store = Logged::default();
    let cfg = AgentConfig::<Triage>::builder("durable")
        .llm(ByTurn::new(steps))
        .backoff(Backoff::none())
        .checkpoints(store.clone())
        .tool(Fatal)
        .build()
        .unwrap();
    let result = run_agent_with(&cfg, "go", RunOptions::new().run_id("w2")).await;
    assert_eq!(result.category(), Some("tool_fatal"));
    assert_eq!(
        *store.log.lock().unwrap(),
        [
            "1 before_call []",
            "2 tools_pending [c1 started]",
            "- [c1 completed]",
            "3 finished []",
        ]
    );
}

/// A failed write of a turn's checkpoint with its first started entry: the entry is
/// written again alone before the tool starts (its at-most-once does not hang on the
/// checkpoint's write), and the failure is counted once.
#[tokio::test]
async fn a_failed_turn_checkpoint_still_writes_the_started_entry_before_the_tool() {
    let lookup = KeyTool::new("lookup", false);
    let steps = vec![
        LlmResponse::tool_calls(vec![call("c1", "lookup", "a")]),
        LlmResponse::tool_calls(vec![ToolCall::new("c2", "submit_output", valid())]),
    ];
    let store = Logged {
        fail_pending: true,
        ..Logged::default()
    };
    let cfg = config(ByTurn::new(steps), store.clone(), &[&lookup]);
    let result = run_agent_with(&cfg, "go", RunOptions::new().run_id("w4")).await;
    assert_eq!(result.outcome, Ok(Triage::from_valid()));
    assert_eq!(result.store_failures, 1);
    assert_eq!(
        *store.log.lock().unwrap(),
        [
            "1 before_call []",
            "2 tools_pending [c1 started] failed",
            "fenced c1 started",
            "3 before_call [c1 completed]",
            "4 finished []",
        ]
    );
    assert_eq!(lookup.keys(), ["w4:c1"]);
}

#[tokio::test]
async fn a_failing_checkpoint_store_never_changes_the_outcome_and_is_counted() {
    let lookup = KeyTool::new("lookup", false);
    let steps = vec![
        LlmResponse::tool_calls(vec![call("c1", "lookup", "a")]),
        LlmResponse::tool_calls(vec![ToolCall::new("c2", "submit_output", valid())]),
    ];
    let cfg = config(ByTurn::new(steps), Broken, &[&lookup]);
    let result = run_agent_with(&cfg, "go", RunOptions::new().run_id("b1")).await;
    assert_eq!(result.outcome, Ok(Triage::from_valid()));
    // One per write: load, before_call, tools_pending with started (a write of two
    // stops at its first failure), started again alone, completed with the next
    // before_call, finished.
    assert_eq!(result.store_failures, 6);
    // Without a usable checkpoint, resume is a typed error.
    assert!(matches!(
        resume_agent(&cfg, "b1").await,
        Err(ResumeError::Unreadable { .. })
    ));
}

/// A store that passes every call to `inner`, except that write number `at` (1-based)
/// and every load wait at a gate: the write until `release` is notified (a process
/// stalled there), each load until `loads` loads have been made (processes that read
/// the checkpoint at the same moment).
#[derive(Clone)]
struct Gated {
    inner: InMemoryCheckpoints,
    at: u64,
    writes: Arc<AtomicU64>,
    reached: Arc<Notify>,
    release: Arc<Notify>,
    loads: Option<Arc<tokio::sync::Barrier>>,
}

impl Gated {
    fn stall_at(inner: InMemoryCheckpoints, at: u64) -> Self {
        Self {
            inner,
            at,
            writes: Arc::new(AtomicU64::new(0)),
            reached: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
            loads: None,
        }
    }

    fn loads_together(inner: InMemoryCheckpoints, n: usize) -> Self {
        Self {
            loads: Some(Arc::new(tokio::sync::Barrier::new(n))),
            ..Self::stall_at(inner, 0)
        }
    }

    /// Waits at the gate when this is write number `at`.
    async fn gate(&self) {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.at {
            self.reached.notify_one();
            self.release.notified().await;
        }
    }
}

impl CheckpointStore for Gated {
    fn save<'a>(&'a self, checkpoint: &'a CheckpointRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.gate().await;
            self.inner.save(checkpoint).await
        })
    }
    fn save_fenced<'a>(
        &'a self,
        checkpoint: &'a CheckpointRecord,
        taken_at: u64,
    ) -> StoreFuture<'a, SaveOutcome> {
        Box::pin(async move {
            self.gate().await;
            self.inner.save_fenced(checkpoint, taken_at).await
        })
    }
    fn record_tool_fenced<'a>(
        &'a self,
        entry: &'a LedgerEntry,
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        Box::pin(async move {
            self.gate().await;
            self.inner.record_tool_fenced(entry, writer).await
        })
    }
    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<CheckpointRecord>> {
        Box::pin(async move {
            let found = self.inner.load(run_id).await;
            if let Some(barrier) = &self.loads {
                barrier.wait().await;
            }
            found
        })
    }
    fn record_tool<'a>(&'a self, entry: &'a LedgerEntry) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.gate().await;
            self.inner.record_tool(entry).await
        })
    }
    fn unfinished<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<CheckpointRecord>> {
        self.inner.unfinished(limit)
    }
    fn ledger<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<LedgerEntry>> {
        self.inner.ledger(run_id)
    }
}

/// One tool turn (an irreversible send_email), then the answer.
fn email_script() -> Vec<LlmResponse> {
    vec![
        LlmResponse::tool_calls(vec![call("e1", "send_email", "ada")]),
        LlmResponse::tool_calls(vec![ToolCall::new("s1", "submit_output", valid())]),
    ]
}

// C48: two resumes at once, one goes on.
#[tokio::test]
async fn c48_two_resumes_of_one_run_at_once_one_goes_on_the_other_is_fenced() {
    let email = KeyTool::new("send_email", true);
    let inner = InMemoryCheckpoints::new();
    // The first process dies at write 3 (the `started` of send_email): the stored
    // checkpoint is its tools_pending (seq 2), the email was not sent.
    let crashing = CrashAt::new(inner.clone(), 3);
    let cfg = config(ByTurn::new(email_script()), crashing.clone(), &[&email]);
    tokio::select! {
        _ = run_agent_with(&cfg, "mail ada", RunOptions::new().run_id("f1")) => panic!("ended"),
        () = crashing.reached().notified() => {}
    }
    assert_eq!(inner.load("f1").await.unwrap().unwrap().seq, 2);
    // Two processes resume it at the same moment: both read seq 2 before either claims.
    let together = Gated::loads_together(inner.clone(), 2);
    let (a, b) = (ByTurn::new(email_script()), ByTurn::new(email_script()));
    let cfg_a = config(a.clone(), together.clone(), &[&email]);
    let cfg_b = config(b.clone(), together.clone(), &[&email]);
    let (ra, rb) = tokio::join!(resume_agent(&cfg_a, "f1"), resume_agent(&cfg_b, "f1"));
    let (won, lost, winner) = match (ra, rb) {
        (Ok(won), Err(lost)) => (won, lost, &a),
        (Err(lost), Ok(won)) => (won, lost, &b),
        other => panic!("exactly one resume must go on: {other:?}"),
    };
    assert_eq!(
        lost,
        ResumeError::Fenced {
            run_id: "f1".into()
        }
    );
    assert_eq!(
        lost.to_string(),
        "run f1 was taken over by another process while this one resumed it"
    );
    assert_eq!(won.outcome, Ok(Triage::from_valid()));
    assert_eq!(
        email.keys(),
        vec!["f1:e1".to_owned()],
        "the email went out once"
    );
    assert_eq!(
        winner.requests(),
        1,
        "the winner made the one LLM call left"
    );
    assert_eq!(
        a.requests() + b.requests(),
        1,
        "the fenced one sent nothing"
    );
    // The stored checkpoint is the winner's finished one.
    let stored = inner.load("f1").await.unwrap().unwrap();
    assert!(stored.finished);
    assert_eq!(stored.writer.len(), 32);
}

// C48: a stalled process whose run was taken over.
#[tokio::test]
async fn c48_a_process_that_lost_its_run_stops_at_its_next_write_with_fenced() {
    // Write 3 is A's `started` of send_email: A stalls there (not dead), B takes the
    // run over from A's tools_pending checkpoint and finishes it; then A goes on.
    for (at, seq, what) in [(2, 2, "tools_pending save"), (3, 2, "started write")] {
        let email = KeyTool::new("send_email", true);
        let inner = InMemoryCheckpoints::new();
        let stalling = Gated::stall_at(inner.clone(), at);
        let a_model = ByTurn::new(email_script());
        let cfg_a = config(a_model.clone(), stalling.clone(), &[&email]);
        let run_a = tokio::spawn({
            let cfg_a = cfg_a.clone();
            async move { run_agent_with(&cfg_a, "mail ada", RunOptions::new().run_id("f2")).await }
        });
        stalling.reached.notified().await;
        let b_model = ByTurn::new(email_script());
        let cfg_b = config(b_model.clone(), inner.clone(), &[&email]);
        let b = resume_agent(&cfg_b, "f2").await.unwrap();
        assert_eq!(b.outcome, Ok(Triage::from_valid()), "{what}");
        stalling.release.notify_one();
        let a = run_a.await.unwrap();
        assert_eq!(
            a.outcome,
            Err(agent_core::AgentError::Fenced {
                run_id: "f2".into(),
                seq
            }),
            "{what}"
        );
        assert_eq!(a.category(), Some("fenced"));
        assert_eq!(a.ending(), agent_core::Ending::Failed);
        assert_eq!(
            a.outcome.as_ref().unwrap_err().to_string(),
            format!(
                "run f2 was taken over by another process; this one stopped at its write #{seq} (fenced)"
            )
        );
        assert_eq!(a.store_failures, 0, "a fenced write is no store failure");
        assert_eq!(
            a_model.requests(),
            1,
            "{what}: A sent nothing after it lost the run"
        );
        assert_eq!(
            email.keys(),
            vec!["f2:e1".to_owned()],
            "{what}: sent once, by B"
        );
        // A did not overwrite B's finished checkpoint: a resume returns B's result.
        let again = resume_agent(&cfg_b, "f2").await.unwrap();
        assert_eq!(essence(&again), essence(&b), "{what}");
    }
}
