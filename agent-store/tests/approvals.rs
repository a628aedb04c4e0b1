//! Pause and resume across processes, on real SQLite and PostgreSQL stores: a child
//! process runs until the run pauses (a refund that needs approval and a label job that
//! defers its result, beside a lookup in the same turn) and prints the pending calls as
//! JSON; this process, with the store alone, lists the paused run and records the
//! decisions it parsed from JSON; a second child resumes the run and finishes it. Every
//! tool's side effect (a line in a file) happens once; the edited arguments are the ones
//! that ran.
//!
//! The child is this test binary run again on `child_runs_or_resumes`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use agent_core::{
    AgentConfig, AgentError, AgentOutput, RunOptions, Tool, ToolContext, ToolError,
    config::Backoff,
    durable::{Decisions, PendingCall, paused_runs, record_decisions},
    llm::{LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, Message, ToolCall},
    resume_agent, run_agent_with,
    schema::{SchemaValidator, ValidationErrors},
    tool::{ToolDefinition, ToolFuture},
};
use agent_store::{Store, StoreOptions};
use common::Place;
use serde_json::{Value, json};

const TARGET: &str = "AGENT_APPROVALS_TARGET";
const SCHEMA: &str = "AGENT_APPROVALS_SCHEMA";
const STEP: &str = "AGENT_APPROVALS_STEP";
const EFFECTS: &str = "AGENT_APPROVALS_EFFECTS";
const RUN_ID: &str = "order-A1";

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

/// Answers the `n`-th turn with `steps[n]` (`n`: assistant turns in the request).
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

fn script() -> Vec<LlmResponse> {
    vec![
        LlmResponse::tool_calls(vec![
            ToolCall::new("c1", "lookup", json!({"order": "A1"})),
            ToolCall::new("c2", "refund", json!({"order": "A1", "amount": 80})),
            ToolCall::new("c3", "label", json!({"order": "A1"})),
        ]),
        LlmResponse::tool_calls(vec![ToolCall::new(
            "c4",
            "submit_output",
            json!({"ok": true}),
        )]),
    ]
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    Approval,
    Deferred,
}

/// A tool that appends `"{name} {arguments}"` to the effects file.
struct Effect {
    name: &'static str,
    kind: Kind,
    file: PathBuf,
}

impl Tool for Effect {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name,
            "Acts on an order.",
            json!({
                "type": "object",
                "properties": {"order": {"type": "string"}, "amount": {"type": "number", "maximum": 100}},
                "required": ["order"]
            }),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.file)
                .unwrap();
            // One write of the whole line, so concurrent tools never interleave.
            let line = format!("{} {arguments}\n", self.name);
            file.write_all(line.as_bytes()).unwrap();
            file.sync_all().unwrap();
            if self.kind == Kind::Deferred {
                return Err(ToolError::deferred("the warehouse prints the label"));
            }
            Ok(format!("{} ok", self.name))
        })
    }

    fn requires_approval(&self) -> bool {
        self.kind == Kind::Approval
    }
}

fn config(store: Store, effects: &Path) -> AgentConfig<Answer> {
    let tool = |name, kind| Effect {
        name,
        kind,
        file: effects.to_owned(),
    };
    AgentConfig::<Answer>::builder("refunds")
        .llm(ByTurn(script()))
        .backoff(Backoff::none())
        .tool(tool("lookup", Kind::Plain))
        .tool(tool("refund", Kind::Approval))
        .tool(tool("label", Kind::Deferred))
        .checkpoints(store)
        .build()
        .unwrap()
}

/// The child: `start` runs until the pause and prints `paused {pending}`; `resume`
/// resumes and prints `done {result}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of the approval tests; it runs only when they start it"]
async fn child_runs_or_resumes() {
    let Ok(target) = std::env::var(TARGET) else {
        return;
    };
    let mut options = StoreOptions::new();
    if let Ok(schema) = std::env::var(SCHEMA) {
        options = options.schema(schema);
    }
    let store = Store::open_with(&target, options).await.unwrap();
    let effects = PathBuf::from(std::env::var(EFFECTS).unwrap());
    let config = config(store.clone(), &effects);
    let line = if std::env::var(STEP).as_deref() == Ok("start") {
        let result = run_agent_with(&config, "refund A1", RunOptions::new().run_id(RUN_ID)).await;
        let Err(AgentError::Paused { pending, .. }) = &result.outcome else {
            panic!("{:?}", result.outcome)
        };
        format!("paused {}", serde_json::to_string(pending).unwrap())
    } else {
        let result = resume_agent(&config, RUN_ID).await.unwrap();
        let done = json!({
            "outcome": format!("{:?}", result.outcome),
            "transcript": result.transcript,
            "usage": result.usage,
        });
        format!("done {done}")
    };
    store.close().await.unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// Runs the child on `step`; the line of its output from `until` on.
fn child(place: &Place, effects: &Path, step: &str, until: &str) -> String {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "approvals::child_runs_or_resumes",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env(TARGET, place.target())
        .env(STEP, step)
        .env(EFFECTS, effects)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Place::Postgres { schema, .. } = place {
        command.env(SCHEMA, schema);
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    // Read to the end: a pipe closed early would kill the child on its next write.
    let all: Vec<String> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .collect();
    let found = all.iter().find_map(|line| {
        line.find(until)
            .map(|at| line[at + until.len()..].to_owned())
    });
    assert!(child.wait().unwrap().success(), "the {step} child failed");
    found.unwrap_or_else(|| panic!("the {step} child printed no {until:?} line"))
}

fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The effects, with those of the first turn sorted: the tools of one
/// model turn run concurrently, so `lookup` and `label` may land in
/// either order; later turns keep theirs.
fn effects_by_turn(file: &Path) -> Vec<String> {
    let mut all = lines(file);
    let first_turn = all.len().min(2);
    all[..first_turn].sort();
    all
}

async fn paused_in_one_process_decided_in_another_resumed_in_a_third(place: &Place) {
    let effects = std::env::temp_dir().join(common::unique("approval_effects"));
    // Creates the schema before the children use it.
    let store = place.open().await;

    let pending: Vec<PendingCall> =
        serde_json::from_str(&child(place, &effects, "start", "paused ")).unwrap();
    let ids: Vec<(&str, &str, &str)> = pending
        .iter()
        .map(|p| (p.call_id.as_str(), p.tool.as_str(), p.reason.as_str()))
        .collect();
    assert_eq!(
        ids,
        [("c2", "refund", "approval"), ("c3", "label", "deferred")]
    );
    // The lookup ran, the label job started, the refund waits.
    assert_eq!(
        effects_by_turn(&effects),
        [r#"label {"order":"A1"}"#, r#"lookup {"order":"A1"}"#]
    );

    // The reviewer: the store alone, decisions from JSON.
    let listed = paused_runs(&store, 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].run_id, RUN_ID);
    assert_eq!(listed[0].pending, pending);
    let too_much: Decisions = serde_json::from_value(
        json!({"c2": {"decision": "edit", "arguments": {"order": "A1", "amount": 120}}}),
    )
    .unwrap();
    let refused = record_decisions(&store, RUN_ID, too_much)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("amount"), "{refused}");
    let decisions: Decisions = serde_json::from_value(json!({
        "c2": {"decision": "edit", "arguments": {"order": "A1", "amount": 100}},
        "c3": {"decision": "result", "value": "label LBL-9 printed"}
    }))
    .unwrap();
    let left = record_decisions(&store, RUN_ID, decisions).await.unwrap();
    assert!(left.is_empty());

    // A third process resumes it.
    let done: Value = serde_json::from_str(&child(place, &effects, "resume", "done ")).unwrap();
    assert_eq!(done["outcome"], json!("Ok(Answer { ok: true })"));
    assert_eq!(done["usage"]["llm_calls"], json!(2));
    assert_eq!(done["usage"]["tool_calls"], json!(3));
    // Each effect once; the refund with the edited amount.
    assert_eq!(
        effects_by_turn(&effects),
        [
            r#"label {"order":"A1"}"#,
            r#"lookup {"order":"A1"}"#,
            r#"refund {"order":"A1","amount":100}"#,
        ]
    );
    let results: Vec<(String, String)> = done["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .flat_map(|m| m["results"].as_array().unwrap().clone())
        .map(|r| {
            (
                r["call_id"].as_str().unwrap().to_owned(),
                r["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        results[..3],
        [
            ("c1".to_owned(), "lookup ok".to_owned()),
            ("c2".to_owned(), "refund ok".to_owned()),
            ("c3".to_owned(), "label LBL-9 printed".to_owned()),
        ]
    );
    assert!(paused_runs(&store, 10).await.unwrap().is_empty());
    store.close().await.unwrap();
    let _ = std::fs::remove_file(&effects);
}

both_backends!(paused_in_one_process_decided_in_another_resumed_in_a_third);
