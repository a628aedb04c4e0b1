//! Human approval and deferred results: a run pauses (ending `paused`) when the model
//! calls a tool that needs approval or a tool defers its result; the turn's other calls
//! run first; `resume_agent_with` and `Decisions` continue it (approve, deny, edit, an
//! outside result), in this process or through the stored state and JSON; every bad
//! decision is a typed error that changes nothing.
//!
//! The version across real processes on SQLite is `agent-store/tests/approvals.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;
use crate::common::by_turn::ByTurn;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::store::InMemoryCheckpoints;
use agent_core::{
    AgentConfig, AgentError, AgentResult, ConfigError, Ending, RunOptions, Tool, ToolContext,
    ToolError,
    config::Backoff,
    durable::{
        DecisionProblem, Decisions, PauseReason, PendingCall, ResumeError, paused_runs,
        record_decisions, resume_agent_with,
    },
    eval::Receipt,
    llm::{LlmClient, LlmResponse, Message, ToolCall},
    resume_agent, run_agent_with,
    tool::{ToolDefinition, ToolFuture},
};
use common::{Triage, valid};
use serde_json::{Value, json};

/// How a test tool behaves.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    NeedsApproval,
    Defers,
}

/// A tool that records the arguments of every execution.
#[derive(Clone)]
struct Probe {
    name: &'static str,
    mode: Mode,
    runs: Arc<Mutex<Vec<Value>>>,
}

impl Probe {
    fn new(name: &'static str, mode: Mode) -> Self {
        Self {
            name,
            mode,
            runs: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn runs(&self) -> Vec<Value> {
        self.runs.lock().unwrap().clone()
    }
}

impl Tool for Probe {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name,
            "Act on an order.",
            json!({
                "type": "object",
                "properties": {
                    "order": {"type": "string"},
                    "amount": {"type": "number", "minimum": 0}
                },
                "required": ["order"],
                "additionalProperties": false
            }),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _: ToolContext) -> ToolFuture<'a> {
        self.runs.lock().unwrap().push(arguments.clone());
        let mode = self.mode;
        Box::pin(async move {
            if mode == Mode::Defers {
                return Err(ToolError::deferred(format!(
                    "label job for {} started; the warehouse answers later",
                    arguments["order"]
                )));
            }
            Ok(format!("{} done for {}", self.name, arguments))
        })
    }

    fn requires_approval(&self) -> bool {
        self.mode == Mode::NeedsApproval
    }
}

fn answer() -> Triage {
    Triage {
        severity: 2,
        summary: "parcel late".into(),
    }
}

fn call(id: &str, tool: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, tool, arguments)
}

/// Turn 1: a lookup and a refund in one turn; turn 2: the answer.
fn refund_script() -> Vec<LlmResponse> {
    vec![
        LlmResponse::tool_calls(vec![
            call("c1", "lookup", json!({"order": "A1"})),
            call("c2", "refund", json!({"order": "A1", "amount": 120})),
        ]),
        LlmResponse::tool_calls(vec![call("c3", "submit_output", valid())]),
    ]
}

struct Setup {
    store: InMemoryCheckpoints,
    lookup: Probe,
    refund: Probe,
}

impl Setup {
    fn new(refund_mode: Mode) -> Self {
        Self {
            store: InMemoryCheckpoints::new(),
            lookup: Probe::new("lookup", Mode::Plain),
            refund: Probe::new("refund", refund_mode),
        }
    }

    fn config(&self, llm: impl LlmClient + 'static) -> AgentConfig<Triage> {
        AgentConfig::<Triage>::builder("approvals")
            .llm(llm)
            .backoff(Backoff::none())
            .tool(self.lookup.clone())
            .tool(self.refund.clone())
            .checkpoints(self.store.clone())
            .build()
            .unwrap()
    }
}

async fn paused_run(setup: &Setup, model: &ByTurn) -> AgentResult<Triage> {
    let result = run_agent_with(
        &setup.config(model.clone()),
        "refund order A1",
        RunOptions::new().run_id("r1"),
    )
    .await;
    assert_eq!(result.ending(), Ending::Paused, "{:?}", result.outcome);
    result
}

fn tool_results(result: &AgentResult<Triage>) -> Vec<(String, String, bool)> {
    result
        .transcript
        .iter()
        .flat_map(|m| match m {
            Message::Tool { results } => results.clone(),
            _ => Vec::new(),
        })
        .map(|r| (r.call_id, r.content, r.is_error))
        .collect()
}

#[tokio::test]
async fn a_call_that_needs_approval_pauses_the_run_after_the_turns_other_calls() {
    let setup = Setup::new(Mode::NeedsApproval);
    let model = ByTurn::new(refund_script());
    let result = paused_run(&setup, &model).await;
    let Err(AgentError::Paused { run_id, pending }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(run_id, "r1");
    assert_eq!(
        pending,
        &vec![PendingCall::new(
            "c2",
            "refund",
            json!({"order": "A1", "amount": 120}),
            PauseReason::Approval,
        )]
    );
    assert_eq!(result.category(), Some("paused"));
    assert!(result.handover.is_none(), "a pause is not a hand-over");
    // The other call of the turn ran; the refund did not.
    assert_eq!(setup.lookup.runs(), vec![json!({"order": "A1"})]);
    assert!(setup.refund.runs().is_empty());
    assert_eq!(result.usage.llm_calls, 1);
    assert_eq!(result.usage.tool_calls, 1);
    // The transcript ends with the turn waiting: its calls are answered on resume.
    assert!(matches!(
        result.transcript.last(),
        Some(Message::Assistant { tool_calls, .. }) if tool_calls.len() == 2
    ));
    // Serializable: what a review queue gets.
    let text = serde_json::to_value(pending).unwrap();
    assert_eq!(
        text,
        json!([{
            "call_id": "c2", "tool": "refund",
            "arguments": {"order": "A1", "amount": 120},
            "reason": {"kind": "approval"}
        }])
    );
    assert_eq!(
        result.outcome.as_ref().unwrap_err().to_string(),
        "paused: run r1 waits on refund c2 (approval)"
    );
    // Receipts count a pause as paused: not failed, exhausted or stuck.
    let receipt = Receipt::from_results(std::slice::from_ref(&result));
    assert_eq!(receipt.count(Ending::Paused), 1);
    assert_eq!(receipt.count(Ending::Failed), 0);
    assert_eq!(receipt.count(Ending::Exhausted), 0);
    assert_eq!(receipt.count(Ending::Stuck), 0);
}

#[tokio::test]
async fn approving_runs_the_call_once_and_the_run_answers_without_an_extra_llm_call() {
    let setup = Setup::new(Mode::NeedsApproval);
    let model = ByTurn::new(refund_script());
    paused_run(&setup, &model).await;
    // Another "process": a new model on the same stored state.
    let second = ByTurn::new(refund_script());
    let resumed = resume_agent_with(
        &setup.config(second.clone()),
        "r1",
        Decisions::new().approve("c2"),
    )
    .await
    .unwrap();
    assert_eq!(resumed.outcome, Ok(answer()));
    // The lookup came from the ledger; the refund ran once, as the model asked.
    assert_eq!(setup.lookup.runs().len(), 1);
    assert_eq!(
        setup.refund.runs(),
        vec![json!({"order": "A1", "amount": 120})]
    );
    // Two LLM calls in all: the pause cost none; every call id answered once.
    assert_eq!(resumed.usage.llm_calls, 2);
    assert_eq!(resumed.usage.tool_calls, 2);
    assert_eq!(second.requests(), 1);
    let results = tool_results(&resumed);
    let ids: Vec<&str> = results.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3"]);
    assert_eq!(results[0].1, r#"lookup done for {"order":"A1"}"#);
    assert_eq!(
        results[1].1,
        r#"refund done for {"order":"A1","amount":120}"#
    );
    // Resuming twice: the decisions were taken; the finished run returns its result.
    let again = resume_agent_with(
        &setup.config(ByTurn::new(refund_script())),
        "r1",
        Decisions::new().approve("c2"),
    )
    .await;
    assert_eq!(
        again.unwrap_err(),
        ResumeError::NotPaused {
            run_id: "r1".into()
        }
    );
    let stored = resume_agent(&setup.config(ByTurn::new(Vec::new())), "r1")
        .await
        .unwrap();
    assert_eq!(stored.outcome, Ok(answer()));
    assert_eq!(setup.refund.runs().len(), 1);
}

#[tokio::test]
async fn denying_gives_the_model_the_reason_and_never_runs_the_tool() {
    let setup = Setup::new(Mode::NeedsApproval);
    paused_run(&setup, &ByTurn::new(refund_script())).await;
    let resumed = resume_agent_with(
        &setup.config(ByTurn::new(refund_script())),
        "r1",
        Decisions::new().deny("c2", "refunds over 100 USD need a manager"),
    )
    .await
    .unwrap();
    assert_eq!(resumed.outcome, Ok(answer()));
    assert!(setup.refund.runs().is_empty());
    let results = tool_results(&resumed);
    assert_eq!(
        results[1],
        (
            "c2".to_owned(),
            "refund was not run: a person denied the call. Their reason: refunds over 100 \
             USD need a manager"
                .to_owned(),
            true
        )
    );
    assert_eq!(resumed.usage.tool_calls, 1, "a denied call is no execution");
}

#[tokio::test]
async fn edited_arguments_are_validated_first_then_run_and_shown_in_the_transcript() {
    let setup = Setup::new(Mode::NeedsApproval);
    paused_run(&setup, &ByTurn::new(refund_script())).await;
    let cfg = setup.config(ByTurn::new(refund_script()));
    // Arguments that break the tool's schema: a typed error, nothing runs or changes.
    let bad = resume_agent_with(
        &cfg,
        "r1",
        Decisions::new().edit("c2", json!({"order": "A1", "amount": -5})),
    )
    .await
    .unwrap_err();
    let ResumeError::Decisions { run_id, problems } = &bad else {
        panic!("{bad:?}")
    };
    assert_eq!(run_id, "r1");
    assert!(
        matches!(&problems[..], [DecisionProblem::InvalidArguments { call_id, errors }]
            if call_id == "c2" && errors.contains("amount")),
        "{problems:?}"
    );
    assert!(setup.refund.runs().is_empty());
    // The valid edit runs, with the new arguments, which the transcript then shows.
    let resumed = resume_agent_with(
        &cfg,
        "r1",
        Decisions::new().edit("c2", json!({"order": "A1", "amount": 100})),
    )
    .await
    .unwrap();
    assert_eq!(resumed.outcome, Ok(answer()));
    assert_eq!(
        setup.refund.runs(),
        vec![json!({"order": "A1", "amount": 100})]
    );
    let edited = resumed.transcript.iter().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls.iter().find(|c| c.id == "c2"),
        _ => None,
    });
    assert_eq!(
        edited.unwrap().arguments,
        json!({"order": "A1", "amount": 100})
    );
}

#[tokio::test]
async fn a_deferred_result_pauses_the_run_and_comes_back_with_the_decisions() {
    let setup = Setup::new(Mode::Defers);
    let result = paused_run(&setup, &ByTurn::new(refund_script())).await;
    let pending = result.outcome.as_ref().unwrap_err().pending_calls();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].call_id, "c2");
    assert_eq!(
        pending[0].reason,
        PauseReason::Deferred {
            note: r#"label job for "A1" started; the warehouse answers later"#.into()
        }
    );
    // The tool ran once (it started the job) and deferred.
    assert_eq!(setup.refund.runs().len(), 1);
    let cfg = setup.config(ByTurn::new(refund_script()));
    // A deferred call takes a result, not an approval.
    let wrong = resume_agent_with(&cfg, "r1", Decisions::new().approve("c2"))
        .await
        .unwrap_err();
    assert_eq!(
        wrong,
        ResumeError::Decisions {
            run_id: "r1".into(),
            problems: vec![DecisionProblem::WrongKind {
                call_id: "c2".into(),
                decision: "approve".into(),
                waits_for: "deferred".into(),
            }],
        }
    );
    let resumed = resume_agent_with(
        &cfg,
        "r1",
        Decisions::new().result("c2", json!({"label": "LBL-9"})),
    )
    .await
    .unwrap();
    assert_eq!(resumed.outcome, Ok(answer()));
    assert_eq!(setup.refund.runs().len(), 1, "not run again");
    assert_eq!(
        resumed.usage.tool_calls, 2,
        "the deferred call ran once: it counts once"
    );
    let results = tool_results(&resumed);
    assert_eq!(
        results[1],
        ("c2".to_owned(), r#"{"label":"LBL-9"}"#.to_owned(), false)
    );
}

#[tokio::test]
async fn every_bad_decision_is_a_typed_error_that_changes_nothing() {
    let setup = Setup::new(Mode::NeedsApproval);
    paused_run(&setup, &ByTurn::new(refund_script())).await;
    let model = ByTurn::new(refund_script());
    let cfg = setup.config(model.clone());
    let r1 = || "r1".to_owned();
    // A decision missing for a pending call (no decisions at all).
    assert_eq!(
        resume_agent(&cfg, "r1").await.unwrap_err(),
        ResumeError::Decisions {
            run_id: r1(),
            problems: vec![DecisionProblem::Missing {
                call_id: "c2".into(),
                tool: "refund".into()
            }],
        }
    );
    // An unknown call id (and so c2 still missing); a result for an approval.
    let err = resume_agent_with(
        &cfg,
        "r1",
        Decisions::new().approve("c9").result("c2", json!("done")),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        ResumeError::Decisions {
            run_id: r1(),
            problems: vec![
                DecisionProblem::WrongKind {
                    call_id: "c2".into(),
                    decision: "result".into(),
                    waits_for: "approval".into(),
                },
                DecisionProblem::UnknownCall {
                    call_id: "c9".into()
                },
            ],
        }
    );
    assert_eq!(
        err.to_string(),
        "the decisions for run r1 cannot be applied: c2 waits for approval, which takes \
         approve, deny or edit, not result; no pending call has the id c9"
    );
    // Nothing was sent, nothing ran, the run is still paused.
    assert_eq!(model.requests(), 0);
    assert!(setup.refund.runs().is_empty());
    let paused = paused_runs(&setup.store, 10).await.unwrap();
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0].run_id, "r1");
    // Decisions for a run that is not paused: an unknown run, a finished one.
    assert_eq!(
        resume_agent_with(&cfg, "nope", Decisions::new().approve("c2"))
            .await
            .unwrap_err(),
        ResumeError::UnknownRun {
            run_id: "nope".into()
        }
    );
    resume_agent_with(&cfg, "r1", Decisions::new().approve("c2"))
        .await
        .unwrap();
    assert_eq!(
        record_decisions(&setup.store, "r1", Decisions::new().approve("c2"))
            .await
            .unwrap_err(),
        ResumeError::NotPaused { run_id: r1() }
    );
    assert!(paused_runs(&setup.store, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn decisions_travel_as_json_and_can_be_recorded_before_the_resume() {
    let setup = Setup::new(Mode::NeedsApproval);
    let result = paused_run(&setup, &ByTurn::new(refund_script())).await;
    // The pending calls go out as JSON (a review page), decisions come back as JSON.
    let wire = serde_json::to_string(result.outcome.as_ref().unwrap_err().pending_calls()).unwrap();
    let pending: Vec<PendingCall> = serde_json::from_str(&wire).unwrap();
    let form = format!(
        r#"{{"{}": {{"decision": "deny", "reason": "customer withdrew"}}}}"#,
        pending[0].call_id
    );
    let decisions: Decisions = serde_json::from_str(&form).unwrap();
    // A reviewer's process records them with the store alone (no config, no model).
    let listed = paused_runs(&setup.store, 10).await.unwrap();
    assert_eq!(listed[0].pending, pending);
    assert_eq!(listed[0].input, "refund order A1");
    assert_eq!(listed[0].agent, "approvals");
    let left = record_decisions(&setup.store, "r1", decisions)
        .await
        .unwrap();
    assert!(left.is_empty());
    assert_eq!(
        paused_runs(&setup.store, 10).await.unwrap()[0].decided,
        Decisions::new().deny("c2", "customer withdrew")
    );
    // A worker later resumes it with no decisions of its own.
    let resumed = resume_agent(&setup.config(ByTurn::new(refund_script())), "r1")
        .await
        .unwrap();
    assert_eq!(resumed.outcome, Ok(answer()));
    assert!(setup.refund.runs().is_empty());
    assert!(tool_results(&resumed)[1].1.contains("customer withdrew"));
}

#[tokio::test]
async fn the_approval_policy_chooses_calls_at_run_time() {
    let store = InMemoryCheckpoints::new();
    let refund = Probe::new("refund", Mode::Plain);
    let script = vec![
        LlmResponse::tool_calls(vec![
            call("c1", "refund", json!({"order": "A1", "amount": 20})),
            call("c2", "refund", json!({"order": "A2", "amount": 500})),
        ]),
        LlmResponse::tool_calls(vec![call("c3", "submit_output", valid())]),
    ];
    let cfg = AgentConfig::<Triage>::builder("policy")
        .llm(ByTurn::new(script))
        .tool(refund.clone())
        .checkpoints(store.clone())
        .approval(|call, state| {
            assert_eq!(state.turn, 1);
            call.name == "refund" && call.arguments["amount"].as_f64() > Some(100.0)
        })
        .build()
        .unwrap();
    let result = run_agent_with(&cfg, "two refunds", RunOptions::new().run_id("p1")).await;
    let pending = result.outcome.as_ref().unwrap_err().pending_calls();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].call_id, "c2");
    assert_eq!(refund.runs(), vec![json!({"order": "A1", "amount": 20})]);
    let resumed = resume_agent_with(&cfg, "p1", Decisions::new().approve("c2"))
        .await
        .unwrap();
    assert_eq!(resumed.outcome, Ok(answer()));
    assert_eq!(refund.runs().len(), 2);
}

#[tokio::test]
async fn a_policy_that_panics_asks_for_approval() {
    let refund = Probe::new("refund", Mode::Plain);
    let cfg = AgentConfig::<Triage>::builder("panicky")
        .llm(ByTurn::new(refund_script()))
        .tool(Probe::new("lookup", Mode::Plain))
        .tool(refund.clone())
        .checkpoints(InMemoryCheckpoints::new())
        .approval(|call, _| {
            assert!(call.name != "refund", "policy bug");
            false
        })
        .build()
        .unwrap();
    let result = run_agent_with(&cfg, "x", RunOptions::new().run_id("x1")).await;
    assert_eq!(
        result.outcome.as_ref().unwrap_err().pending_calls()[0].call_id,
        "c2"
    );
    assert!(refund.runs().is_empty());
}

#[tokio::test]
async fn approvals_need_a_checkpoint_store() {
    let tool = AgentConfig::<Triage>::builder("a")
        .llm(ByTurn::new(Vec::new()))
        .tool(Probe::new("refund", Mode::NeedsApproval))
        .build()
        .err()
        .unwrap();
    assert_eq!(
        tool,
        ConfigError::ApprovalWithoutCheckpoints {
            what: r#"tool "refund""#.into()
        }
    );
    let policy = AgentConfig::<Triage>::builder("a")
        .llm(ByTurn::new(Vec::new()))
        .approval(|_, _| true)
        .build()
        .err()
        .unwrap();
    assert_eq!(
        policy.to_string(),
        "the approval policy needs approval, which pauses runs, but the config has no \
         checkpoint store: add one with .checkpoints(store)"
    );
}

#[tokio::test]
async fn without_a_checkpoint_store_a_deferred_call_is_an_error_result_and_the_run_goes_on() {
    let refund = Probe::new("refund", Mode::Defers);
    let cfg = AgentConfig::<Triage>::builder("no-store")
        .llm(ByTurn::new(refund_script()))
        .tool(Probe::new("lookup", Mode::Plain))
        .tool(refund.clone())
        .build()
        .unwrap();
    let result = run_agent_with(&cfg, "x", RunOptions::new()).await;
    assert_eq!(result.outcome, Ok(answer()));
    let results = tool_results(&result);
    assert_eq!(
        results[1],
        (
            "c2".to_owned(),
            "refund could not run: its result has to wait (for approval or from outside), \
             and this run cannot wait (no checkpoint store)"
                .to_owned(),
            true
        )
    );
}

#[tokio::test]
async fn the_deadline_does_not_run_while_a_run_is_paused() {
    let setup = Setup::new(Mode::NeedsApproval);
    let cfg = AgentConfig::<Triage>::builder("deadline")
        .llm(ByTurn::new(refund_script()))
        .tool(setup.lookup.clone())
        .tool(setup.refund.clone())
        .checkpoints(setup.store.clone())
        .deadline(Duration::from_millis(400))
        .build()
        .unwrap();
    let result = run_agent_with(&cfg, "x", RunOptions::new().run_id("d1")).await;
    assert_eq!(result.ending(), Ending::Paused);
    // Longer than the whole deadline passes while nobody decides.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let resumed = resume_agent_with(&cfg, "d1", Decisions::new().approve("c2"))
        .await
        .unwrap();
    assert_eq!(resumed.outcome, Ok(answer()));
}

#[tokio::test]
async fn a_run_can_pause_again_after_a_resume() {
    let setup = Setup::new(Mode::NeedsApproval);
    let script = vec![
        LlmResponse::tool_calls(vec![call("c1", "refund", json!({"order": "A1"}))]),
        LlmResponse::tool_calls(vec![call("c2", "refund", json!({"order": "A2"}))]),
        LlmResponse::tool_calls(vec![call("c3", "submit_output", valid())]),
    ];
    let cfg = setup.config(ByTurn::new(script));
    let first = run_agent_with(&cfg, "x", RunOptions::new().run_id("twice")).await;
    assert_eq!(
        first.outcome.as_ref().unwrap_err().pending_calls()[0].call_id,
        "c1"
    );
    let second = resume_agent_with(&cfg, "twice", Decisions::new().approve("c1"))
        .await
        .unwrap();
    assert_eq!(
        second.outcome.as_ref().unwrap_err().pending_calls()[0].call_id,
        "c2"
    );
    assert_eq!(second.usage.llm_calls, 2);
    let done = resume_agent_with(&cfg, "twice", Decisions::new().approve("c2"))
        .await
        .unwrap();
    assert_eq!(done.outcome, Ok(answer()));
    assert_eq!(done.usage.llm_calls, 3);
    assert_eq!(done.usage.tool_calls, 2);
    assert_eq!(setup.refund.runs().len(), 2);
}
