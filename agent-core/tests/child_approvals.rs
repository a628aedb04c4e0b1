//! C64: a child agent (an agent used as a tool) whose call needs approval pauses its
//! parent, which lists the child's call as its own (`parent_call/child_call`, with the
//! way down in `via` and the tool's schema in `parameters`); a decision for that id
//! resumes the child inside the parent's call, which then answers. Before the fix the
//! child's pause was a tool error the parent's model saw, and the approval was lost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common::by_turn::ByTurn;

use std::sync::{Arc, Mutex};

use agent_core::store::InMemoryCheckpoints;
use agent_core::{
    AgentConfig, AgentError, AgentResult, Ending, RunOptions, Tool, ToolContext,
    config::Backoff,
    durable::{
        DecisionProblem, Decisions, PauseReason, PendingCall, ResumeError, Via, resume_agent_with,
    },
    llm::{LlmResponse, Message, ToolCall},
    run_agent_with,
    tool::{ToolDefinition, ToolFuture},
};
use serde_json::{Value, json};

/// The refund agent's answer.
#[agent_core::agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct Refund {
    /// Whether the refund was made.
    pub done: bool,
}

/// The triage agent's answer.
#[agent_core::agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct Triage {
    /// The queue.
    pub queue: String,
}

/// The refund tool: needs approval, records the arguments of every execution.
#[derive(Clone, Default)]
struct RefundTool {
    runs: Arc<Mutex<Vec<Value>>>,
}

impl RefundTool {
    fn runs(&self) -> Vec<Value> {
        self.runs.lock().unwrap().clone()
    }
}

fn refund_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "order": {"type": "string"},
            "amount": {"type": "number", "minimum": 0}
        },
        "required": ["order", "amount"],
        "additionalProperties": false
    })
}

impl Tool for RefundTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new("refund", "Refund an order.", refund_schema())
    }

    fn call<'a>(&'a self, arguments: Value, _: ToolContext) -> ToolFuture<'a> {
        self.runs.lock().unwrap().push(arguments.clone());
        Box::pin(async move { Ok(format!("refunded {}", arguments["amount"])) })
    }

    fn requires_approval(&self) -> bool {
        true
    }
}

fn call(id: &str, tool: &str, arguments: Value) -> LlmResponse {
    LlmResponse::tool_calls(vec![ToolCall::new(id, tool, arguments)])
}

/// The child: refund 120 on A1 (approval), then answer.
fn child_script() -> Vec<LlmResponse> {
    vec![
        call("r1", "refund", json!({"order": "A1", "amount": 120})),
        call("r2", "submit_output", json!({"done": true})),
    ]
}

/// The parent: ask the refund agent, then answer.
fn parent_script() -> Vec<LlmResponse> {
    vec![
        call("c1", "refunds", json!({"input": "refund A1"})),
        call("c2", "submit_output", json!({"queue": "billing"})),
    ]
}

/// Both agents on one store; each "process" gets fresh models.
struct Setup {
    store: InMemoryCheckpoints,
    refund: RefundTool,
}

impl Setup {
    fn new() -> Self {
        Self {
            store: InMemoryCheckpoints::new(),
            refund: RefundTool::default(),
        }
    }

    fn child(&self, model: ByTurn) -> AgentConfig<Refund> {
        AgentConfig::builder("refunder")
            .llm(model)
            .backoff(Backoff::none())
            .tool(self.refund.clone())
            .checkpoints(self.store.clone())
            .build()
            .unwrap()
    }

    /// The parent, its child on `child` (10 tokens a turn), itself 100 a turn.
    fn parent(&self, parent: ByTurn, child: ByTurn) -> AgentConfig<Triage> {
        AgentConfig::builder("triage")
            .llm(parent)
            .backoff(Backoff::none())
            .tool(self.child(child).as_tool("refunds", "Refunds orders."))
            .checkpoints(self.store.clone())
            .build()
            .unwrap()
    }

    fn fresh(&self) -> (ByTurn, ByTurn, AgentConfig<Triage>) {
        let parent = ByTurn::with_tokens(parent_script(), 100);
        let child = ByTurn::with_tokens(child_script(), 10);
        let config = self.parent(parent.clone(), child.clone());
        (parent, child, config)
    }

    async fn paused(&self) -> (AgentResult<Triage>, String) {
        let (_, _, config) = self.fresh();
        let result =
            run_agent_with(&config, "A1 arrived broken", RunOptions::new().run_id("p1")).await;
        assert_eq!(result.ending(), Ending::Paused, "{:?}", result.outcome);
        let pending = result.outcome.as_ref().unwrap_err().pending_calls();
        let child_run = pending[0].via[0].run_id.clone();
        (result, child_run)
    }
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
async fn c64_a_childs_approval_pauses_the_parent_listing_the_call_with_its_way_down() {
    let setup = Setup::new();
    let (result, child_run) = setup.paused().await;
    let Err(AgentError::Paused { run_id, pending }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(run_id, "p1");
    let mut expected = PendingCall::new(
        "c1/r1",
        "refund",
        json!({"order": "A1", "amount": 120}),
        PauseReason::Approval,
    )
    .with_parameters(refund_schema());
    expected.via = vec![Via::new("c1", "refunds", "refunder", child_run.as_str())];
    assert_eq!(pending, &vec![expected]);
    assert!(!child_run.is_empty() && child_run != "p1");
    // Nothing ran; the parent's model was not told of an error.
    assert!(setup.refund.runs().is_empty());
    assert!(
        tool_results(&result).is_empty(),
        "{:?}",
        tool_results(&result)
    );
    // The parent's own call and the child's turn are counted: 100 + 10 tokens each way.
    assert_eq!(result.usage.llm_calls, 1);
    assert_eq!(
        (result.usage.input_tokens, result.usage.output_tokens),
        (110, 110)
    );
    assert_eq!(result.usage.children.len(), 1);
    assert_eq!(result.usage.children[0].ending, "paused");
    // What a review queue gets.
    assert_eq!(
        serde_json::to_value(pending).unwrap(),
        json!([{
            "call_id": "c1/r1", "tool": "refund",
            "arguments": {"order": "A1", "amount": 120},
            "reason": {"kind": "approval"},
            "via": [{"call_id": "c1", "tool": "refunds", "agent": "refunder",
                     "run_id": child_run}],
            "parameters": refund_schema()
        }])
    );
}

#[tokio::test]
async fn c64_approving_the_childs_call_runs_it_once_and_both_runs_answer() {
    let setup = Setup::new();
    let (_, child_run) = setup.paused().await;
    // Another "process": fresh models on the same stored state.
    let (parent, child, config) = setup.fresh();
    let resumed = resume_agent_with(&config, "p1", Decisions::new().approve("c1/r1"))
        .await
        .unwrap();
    assert_eq!(
        resumed.outcome,
        Ok(Triage {
            queue: "billing".into()
        })
    );
    assert_eq!(
        setup.refund.runs(),
        vec![json!({"order": "A1", "amount": 120})]
    );
    // The parent's model saw the child's typed answer as the result of c1.
    let results = tool_results(&resumed);
    assert_eq!(
        results[0],
        ("c1".to_owned(), r#"{"done":true}"#.to_owned(), false)
    );
    assert_eq!(
        results.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["c1", "c2"]
    );
    // The child asked its model once more (turn 2), the parent once more (its answer).
    assert_eq!((parent.requests(), child.requests()), (1, 1));
    // Usage: each model turn counted once, the child's across its pause included.
    let u = &resumed.usage;
    assert_eq!((u.llm_calls, u.tool_calls), (2, 1));
    assert_eq!(
        (u.input_tokens, u.output_tokens),
        (100 + 100 + 10 + 10, 100 + 100 + 10 + 10)
    );
    assert_eq!(u.children.len(), 1, "{:?}", u.children);
    assert_eq!(u.children[0].ending, "answered");
    assert_eq!(u.children[0].call_id, "c1");
    assert_eq!(
        (
            u.children[0].usage.input_tokens,
            u.children[0].usage.llm_calls
        ),
        (20, 2)
    );
    // The child's run is finished in the store: resuming it again is not a pause.
    let again = resume_agent_with(
        &setup.child(ByTurn::with_tokens(child_script(), 10)),
        &child_run,
        Decisions::new().approve("r1"),
    )
    .await
    .unwrap_err();
    assert_eq!(again, ResumeError::NotPaused { run_id: child_run });
    assert_eq!(setup.refund.runs().len(), 1);
}

#[tokio::test]
async fn c64_an_edit_of_the_childs_call_is_checked_against_its_tool_schema_then_runs() {
    let setup = Setup::new();
    setup.paused().await;
    let (_, _, config) = setup.fresh();
    let bad = resume_agent_with(
        &config,
        "p1",
        Decisions::new().edit("c1/r1", json!({"order": "A1", "amount": -5})),
    )
    .await
    .unwrap_err();
    let ResumeError::Decisions { run_id, problems } = &bad else {
        panic!("{bad:?}")
    };
    assert_eq!(run_id, "p1");
    assert!(
        matches!(&problems[..], [DecisionProblem::InvalidArguments { call_id, errors }]
            if call_id == "c1/r1" && errors.contains("amount")),
        "{problems:?}"
    );
    assert!(setup.refund.runs().is_empty());
    let resumed = resume_agent_with(
        &config,
        "p1",
        Decisions::new().edit("c1/r1", json!({"order": "A1", "amount": 100})),
    )
    .await
    .unwrap();
    assert!(resumed.outcome.is_ok(), "{:?}", resumed.outcome);
    assert_eq!(
        setup.refund.runs(),
        vec![json!({"order": "A1", "amount": 100})]
    );
}

#[tokio::test]
async fn c64_a_denial_reaches_the_childs_model_and_the_tool_never_runs() {
    let setup = Setup::new();
    setup.paused().await;
    let (_, child, config) = setup.fresh();
    let resumed = resume_agent_with(
        &config,
        "p1",
        Decisions::new().deny("c1/r1", "over the limit"),
    )
    .await
    .unwrap();
    assert!(resumed.outcome.is_ok(), "{:?}", resumed.outcome);
    assert!(setup.refund.runs().is_empty());
    assert_eq!(child.requests(), 1);
    // Missing decisions are named with the parent's id.
    let setup = Setup::new();
    setup.paused().await;
    let (_, _, config) = setup.fresh();
    let missing = resume_agent_with(&config, "p1", Decisions::new())
        .await
        .unwrap_err();
    assert_eq!(
        missing,
        ResumeError::Decisions {
            run_id: "p1".into(),
            problems: vec![DecisionProblem::Missing {
                call_id: "c1/r1".into(),
                tool: "refund".into()
            }]
        }
    );
}

#[tokio::test]
async fn c64_a_grandchilds_approval_crosses_two_levels() {
    let setup = Setup::new();
    // triage -> desk (agent tool) -> refunder (agent tool) -> refund (approval)
    let desk_script = || {
        vec![
            call("d1", "refunds", json!({"input": "refund A1"})),
            call("d2", "submit_output", json!({"done": true})),
        ]
    };
    let build = |top: ByTurn, desk: ByTurn, child: ByTurn| {
        let desk: AgentConfig<Refund> = AgentConfig::builder("desk")
            .llm(desk)
            .backoff(Backoff::none())
            .tool(setup.child(child).as_tool("refunds", "Refunds orders."))
            .checkpoints(setup.store.clone())
            .build()
            .unwrap();
        AgentConfig::<Triage>::builder("triage")
            .llm(top)
            .backoff(Backoff::none())
            .tool(desk.as_tool("desk", "The refund desk."))
            .checkpoints(setup.store.clone())
            .build()
            .unwrap()
    };
    let top_script = || {
        vec![
            call("c1", "desk", json!({"input": "refund A1"})),
            call("c2", "submit_output", json!({"queue": "billing"})),
        ]
    };
    let config = build(
        ByTurn::with_tokens(top_script(), 100),
        ByTurn::with_tokens(desk_script(), 10),
        ByTurn::with_tokens(child_script(), 1),
    );
    let paused = run_agent_with(&config, "A1", RunOptions::new().run_id("p1")).await;
    let pending = paused.outcome.as_ref().unwrap_err().pending_calls();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].call_id, "c1/d1/r1");
    let path: Vec<(&str, &str, &str)> = pending[0]
        .via
        .iter()
        .map(|v| (v.call_id.as_str(), v.tool.as_str(), v.agent.as_str()))
        .collect();
    assert_eq!(
        path,
        [("c1", "desk", "desk"), ("d1", "refunds", "refunder")]
    );
    let config = build(
        ByTurn::with_tokens(top_script(), 100),
        ByTurn::with_tokens(desk_script(), 10),
        ByTurn::with_tokens(child_script(), 1),
    );
    let resumed = resume_agent_with(&config, "p1", Decisions::new().approve("c1/d1/r1"))
        .await
        .unwrap();
    assert!(resumed.outcome.is_ok(), "{:?}", resumed.outcome);
    assert_eq!(setup.refund.runs().len(), 1);
    // 2 turns each: 200 + 20 + 2 input tokens, each counted once.
    assert_eq!(resumed.usage.input_tokens, 222);
}

#[tokio::test]
async fn c64_a_parent_without_a_store_gets_a_tool_error_naming_the_childs_paused_run() {
    let setup = Setup::new();
    let parent = ByTurn::with_tokens(parent_script(), 100);
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent)
        .backoff(Backoff::none())
        .tool(
            setup
                .child(ByTurn::with_tokens(child_script(), 10))
                .as_tool("refunds", "Refunds orders."),
        )
        .build()
        .unwrap();
    let result = run_agent_with(&config, "A1", RunOptions::new().run_id("p1")).await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let results = tool_results(&result);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0].0, "c1");
    assert!(results[0].2, "{results:?}");
    assert!(
        results[0]
            .1
            .starts_with("refunds could not finish: the refunder agent's run ")
            && results[0]
                .1
                .ends_with("waits for decisions, and this run cannot wait (no checkpoint store)"),
        "{results:?}"
    );
    assert!(setup.refund.runs().is_empty());
}

#[tokio::test]
async fn c64_a_child_decided_directly_gives_the_parent_its_stored_answer() {
    let setup = Setup::new();
    let (_, child_run) = setup.paused().await;
    // A reviewer resumed the child run itself (it is in the store's paused runs too).
    let child = resume_agent_with(
        &setup.child(ByTurn::with_tokens(child_script(), 10)),
        &child_run,
        Decisions::new().approve("r1"),
    )
    .await
    .unwrap();
    assert_eq!(child.outcome, Ok(Refund { done: true }));
    // The parent, resumed with the same decision, takes the child's stored answer.
    let (_, child_model, config) = setup.fresh();
    let resumed = resume_agent_with(&config, "p1", Decisions::new().approve("c1/r1"))
        .await
        .unwrap();
    assert!(resumed.outcome.is_ok(), "{:?}", resumed.outcome);
    assert_eq!(setup.refund.runs().len(), 1);
    assert_eq!(child_model.requests(), 0);
    assert_eq!(
        tool_results(&resumed)[0],
        ("c1".to_owned(), r#"{"done":true}"#.to_owned(), false)
    );
}
