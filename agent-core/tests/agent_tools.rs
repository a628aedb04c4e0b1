//! Agents used as tools (`AgentConfig::as_tool`): the child's typed answer as the tool
//! result, its usage added to the parent's exactly, budgets shared across the tree,
//! every failure of a child a tool error the parent's model sees, escalation carried up
//! when asked, the parent's deadline and cancellation binding the child.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::Duration;

use agent_core::testing::{ScriptStep, ScriptedModel};
use agent_core::{
    AgentConfig, AgentError, CancellationToken, RunOptions, Tool, ToolContext,
    error::Budget,
    llm::{LlmError, LlmResponse, Message, TokenUsage, ToolCall},
    pricing::ModelPrice,
    run_agent, run_agent_with,
    store::{META_PARENT_CALL_ID, META_PARENT_TRACE_ID},
    tool::{ToolDefinition, ToolFuture},
    usage::ChildUsage,
};
use serde_json::{Value, json};

/// The refund agent's answer.
#[agent_core::agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct Refund {
    /// Whether a refund is due.
    pub due: bool,
    /// How much (USD).
    pub amount: u32,
}

/// The triage agent's answer.
#[agent_core::agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct Triage {
    /// The queue.
    pub queue: String,
}

/// The typed input of the refund agent, for `AgentTool::input`.
#[agent_core::agent_type]
#[derive(Debug, Clone, PartialEq)]
pub struct RefundQuestion {
    /// The order.
    pub order: String,
}

/// A tool that does nothing.
struct Noop;

impl Tool for Noop {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new("noop", "Does nothing.", json!({"type": "object"}))
    }
    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Ok("done".to_owned()) })
    }
}

fn turn(response: LlmResponse, input: u64, output: u64) -> ScriptStep {
    ScriptStep::Respond(response.with_usage(TokenUsage::new(input, output)))
}

fn call(id: &str, name: &str, arguments: Value) -> LlmResponse {
    LlmResponse::tool_calls(vec![ToolCall::new(id, name, arguments)])
}

fn submit(id: &str, arguments: Value) -> LlmResponse {
    call(id, "submit_output", arguments)
}

fn refunds(model: ScriptedModel) -> AgentConfig<Refund> {
    AgentConfig::builder("refunds")
        .llm(model)
        .escalation(true)
        .build()
        .unwrap()
}

/// The tool results the parent's model saw, in order.
fn tool_results(model: &ScriptedModel) -> Vec<(String, bool)> {
    let requests = model.requests();
    let last = requests.last().unwrap();
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { results } => Some(results.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| (r.content, r.is_error))
        .collect()
}

#[tokio::test]
async fn the_childs_typed_answer_is_the_tool_result_and_its_usage_is_added_exactly() {
    let child_model = ScriptedModel::from_steps([turn(
        submit("k1", json!({"due": true, "amount": 40})),
        30,
        7,
    )]);
    let parent_model = ScriptedModel::from_steps([
        turn(
            call("p1", "refunds", json!({"input": "Is A-1 due a refund?"})),
            100,
            10,
        ),
        turn(submit("p2", json!({"queue": "billing"})), 150, 5),
    ]);
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent_model.clone())
        .tool(refunds(child_model.clone()).as_tool("refunds", "Answers refund questions."))
        .build()
        .unwrap();
    let result = run_agent(&config, "A-1 arrived broken").await;
    assert_eq!(
        result.outcome,
        Ok(Triage {
            queue: "billing".into()
        })
    );
    // The child was asked the call's input.
    let asked = &child_model.requests()[0].messages;
    assert!(
        matches!(asked.last(), Some(Message::User { content, .. }) if content == "Is A-1 due a refund?")
    );
    assert_eq!(
        tool_results(&parent_model),
        [(r#"{"due":true,"amount":40}"#.to_owned(), false)]
    );
    // Tokens summed exactly; LLM calls and tool executions are the parent's own.
    let u = &result.usage;
    assert_eq!(
        (u.input_tokens, u.output_tokens),
        (100 + 150 + 30, 10 + 5 + 7)
    );
    assert_eq!((u.llm_calls, u.tool_calls), (2, 1));
    assert_eq!(u.children.len(), 1);
    let child: &ChildUsage = &u.children[0];
    assert_eq!(
        (
            child.tool.as_str(),
            child.call_id.as_str(),
            child.agent.as_str(),
            child.ending.as_str()
        ),
        ("refunds", "p1", "refunds", "answered")
    );
    assert_eq!(child.category, None);
    assert_eq!(
        (
            child.usage.llm_calls,
            child.usage.input_tokens,
            child.usage.output_tokens
        ),
        (1, 30, 7)
    );
    assert_eq!(child.trace_id.len(), 32);
    assert_ne!(child.trace_id, result.trace_id);
}

#[tokio::test]
async fn a_typed_input_is_the_tools_schema_and_reaches_the_child_as_json() {
    let child_model =
        ScriptedModel::from_steps([turn(submit("k1", json!({"due": false, "amount": 0})), 1, 1)]);
    let parent_model = ScriptedModel::new()
        .respond(call("p1", "refunds", json!({"order": "A-7"})))
        .respond(call("p2", "refunds", json!({"input": "not the schema"})))
        .submit(json!({"queue": "billing"}));
    let tool = refunds(child_model.clone())
        .as_tool("refunds", "Answers refund questions.")
        .input::<RefundQuestion>();
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent_model.clone())
        .tool(tool)
        .build()
        .unwrap();
    let offered = {
        let result = run_agent(&config, "A-7?").await;
        assert!(result.outcome.is_ok(), "{:?}", result.outcome);
        parent_model.requests()[0].tools.clone()
    };
    let refunds_tool = offered.iter().find(|d| d.name == "refunds").unwrap();
    assert_eq!(refunds_tool.parameters["required"], json!(["order"]));
    let asked = &child_model.requests()[0].messages;
    assert!(
        matches!(asked.last(), Some(Message::User { content, .. }) if content == r#"{"order":"A-7"}"#)
    );
    // The second call broke the schema: the child never ran for it.
    assert_eq!(child_model.request_count(), 1);
    let results = tool_results(&parent_model);
    assert!(results[1].1, "{results:?}");
}

#[tokio::test]
async fn every_failure_of_a_child_is_a_tool_error_and_the_parent_goes_on() {
    // (the child's script, the category the parent's model reads)
    let cases: Vec<(ScriptedModel, &str)> = vec![
        (
            ScriptedModel::new().fail(LlmError::permanent("bad key")),
            "llm_permanent_error",
        ),
        (
            ScriptedModel::new()
                .text("no tool call")
                .text("still none")
                .text("never")
                .text("nope"),
            "schema_not_called",
        ),
        (
            ScriptedModel::from_steps([ScriptStep::Panic("boom".into())]),
            "internal_error",
        ),
        (
            ScriptedModel::new().tool_call(
                "escalate_to_human",
                json!({"reason": "needs a manager", "summary": "refund over limit"}),
            ),
            "escalated",
        ),
    ];
    for (child_model, category) in cases {
        let parent_model = ScriptedModel::new()
            .tool_call("refunds", json!({"input": "refund?"}))
            .submit(json!({"queue": "billing"}));
        let config: AgentConfig<Triage> = AgentConfig::builder("triage")
            .llm(parent_model.clone())
            .tool(refunds(child_model).as_tool("refunds", "Answers refund questions."))
            .build()
            .unwrap();
        let result = run_agent(&config, "refund?").await;
        assert_eq!(
            result.outcome,
            Ok(Triage {
                queue: "billing".into()
            }),
            "{category}"
        );
        let results = tool_results(&parent_model);
        assert_eq!(results.len(), 1);
        let (text, is_error) = &results[0];
        assert!(*is_error, "{category}: {text}");
        assert!(
            text.contains(&format!("the refunds agent did not answer ({category})")),
            "{category}: {text}"
        );
        let child = &result.usage.children[0];
        assert_eq!(child.category.as_deref(), Some(category));
        assert_ne!(child.ending, "answered");
    }
}

#[tokio::test]
async fn a_child_that_escalates_escalates_the_parent_when_the_tool_says_so() {
    let child_model = ScriptedModel::new().tool_call(
        "escalate_to_human",
        json!({"reason": "needs a manager", "summary": "refund of 900 USD"}),
    );
    let parent_model = ScriptedModel::new()
        .tool_call("refunds", json!({"input": "refund 900?"}))
        .submit(json!({"queue": "billing"}));
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent_model.clone())
        .tool(
            refunds(child_model)
                .as_tool("refunds", "Answers refund questions.")
                .escalates_parent(true),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "refund 900?").await;
    assert_eq!(
        result.outcome,
        Err(AgentError::Escalated {
            reason: "needs a manager".into(),
            summary: "refund of 900 USD".into()
        })
    );
    assert_eq!(result.ending().as_str(), "escalated");
    // The parent asked once: the escalation ended it after the turn.
    assert_eq!(parent_model.request_count(), 1);
    assert_eq!(result.usage.children[0].ending, "escalated");
}

#[tokio::test]
async fn a_child_cannot_pass_its_parents_token_cap_and_then_the_parent_stops() {
    // The parent may spend 1,000 tokens in all; its first call spends 400. The child
    // spends 300 a call: its second call would reach 1,000, so it stops after one.
    let child_model = ScriptedModel::from_steps([
        turn(call("k1", "noop", json!({"n": 1})), 200, 100),
        turn(call("k2", "noop", json!({"n": 2})), 200, 100),
        turn(submit("k3", json!({"due": true, "amount": 1})), 200, 100),
    ]);
    let child: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(child_model.clone())
        .tool(Noop)
        .build()
        .unwrap();
    let parent_model = ScriptedModel::from_steps([
        turn(call("p1", "refunds", json!({"input": "refund?"})), 300, 100),
        turn(submit("p2", json!({"queue": "billing"})), 10, 10),
    ]);
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent_model.clone())
        .max_total_tokens(1_000)
        .tool(child.as_tool("refunds", "Answers refund questions."))
        .build()
        .unwrap();
    let result = run_agent(&config, "refund?").await;
    let child = &result.usage.children[0];
    assert_eq!(child.category.as_deref(), Some("budget_exhausted"));
    assert_eq!(
        child.usage.llm_calls, 2,
        "the third call would pass the cap"
    );
    assert_eq!(child_model.request_count(), 2);
    assert_eq!(result.usage.total_tokens(), 400 + 600);
    // The parent's own check then sees the whole tree's spending.
    assert_eq!(
        result.outcome,
        Err(AgentError::BudgetExhausted {
            budget: Budget::TotalTokens {
                limit: 1_000,
                used: 1_000
            }
        })
    );
    assert_eq!(parent_model.request_count(), 1);
}

#[tokio::test]
async fn two_children_at_once_share_what_is_left_of_the_cost_cap() {
    // Price: 1 USD per million input and output tokens; cap 0.001 USD = 1,000 tokens.
    let price = ModelPrice::new(1.0, 1.0);
    let child = |model: ScriptedModel| -> AgentConfig<Refund> {
        AgentConfig::builder("refunds")
            .llm(model)
            .model("scripted-child")
            .price("scripted-child", price)
            .tool(Noop)
            .build()
            .unwrap()
    };
    let slow = |id: &str| {
        ScriptStep::Delayed(
            Duration::from_millis(30),
            Box::new(turn(call(id, "noop", json!({"id": id})), 150, 50)),
        )
    };
    let a = ScriptedModel::from_steps([slow("a1"), slow("a2"), slow("a3"), slow("a4")]);
    let b = ScriptedModel::from_steps([slow("b1"), slow("b2"), slow("b3"), slow("b4")]);
    let parent_model = ScriptedModel::new()
        .tool_calls(vec![
            ToolCall::new("p1", "refunds_a", json!({"input": "a"})),
            ToolCall::new("p2", "refunds_b", json!({"input": "b"})),
        ])
        .submit(json!({"queue": "billing"}));
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent_model.clone())
        .model("scripted-parent")
        .price("scripted-parent", price)
        .max_cost_usd(0.001)
        .tool(child(a.clone()).as_tool("refunds_a", "A."))
        .tool(child(b.clone()).as_tool("refunds_b", "B."))
        .build()
        .unwrap();
    let result = run_agent(&config, "two questions").await;
    let spent: u32 = result
        .usage
        .children
        .iter()
        .map(|c| c.usage.llm_calls)
        .sum();
    // Each call costs 200 tokens = 0.0002 USD: five fit under the cap, not six.
    assert!(spent <= 5, "{spent} child calls");
    assert!(a.request_count() + b.request_count() <= 5);
    let cost = result.usage.cost_usd.unwrap();
    assert!(cost <= 0.001 + 1e-12, "{cost}");
    for child in &result.usage.children {
        assert_eq!(child.category.as_deref(), Some("budget_exhausted"));
    }
    assert!(matches!(
        result.outcome,
        Err(AgentError::BudgetExhausted {
            budget: Budget::CostUsd { .. }
        })
    ));
}

#[tokio::test]
async fn a_child_without_a_price_does_not_run_under_a_cost_cap() {
    let child_model = ScriptedModel::new().submit(json!({"due": true, "amount": 1}));
    let parent_model = ScriptedModel::new()
        .tool_call("refunds", json!({"input": "refund?"}))
        .submit(json!({"queue": "billing"}));
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent_model.clone())
        .model("scripted-parent")
        .price("scripted-parent", ModelPrice::new(1.0, 1.0))
        .max_cost_usd(1.0)
        .tool(refunds(child_model.clone()).as_tool("refunds", "Answers refund questions."))
        .build()
        .unwrap();
    let result = run_agent(&config, "refund?").await;
    assert!(result.outcome.is_ok());
    assert_eq!(child_model.request_count(), 0);
    let (text, is_error) = &tool_results(&parent_model)[0];
    assert!(*is_error);
    assert!(text.contains("has no price"), "{text}");
}

#[tokio::test]
async fn the_parents_deadline_and_cancellation_bind_the_child() {
    // Deadline: the child hangs; it ends deadline_exceeded within the parent's deadline
    // and the parent's model reads that.
    let parent_model = ScriptedModel::new()
        .tool_call("refunds", json!({"input": "refund?"}))
        .submit(json!({"queue": "billing"}));
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent_model.clone())
        .deadline(Duration::from_millis(300))
        .tool(
            refunds(ScriptedModel::from_steps([ScriptStep::Hang]))
                .as_tool("refunds", "Answers refund questions."),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "refund?").await;
    let child = &result.usage.children[0];
    assert_eq!(child.category.as_deref(), Some("deadline_exceeded"));
    assert!(result.outcome.is_ok() || result.category() == Some("deadline_exceeded"));

    // Cancellation: the parent's token cancels the child's run too.
    let token = CancellationToken::new();
    let parent_model = ScriptedModel::new()
        .tool_call("refunds", json!({"input": "refund?"}))
        .submit(json!({"queue": "billing"}));
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent_model)
        .tool(
            refunds(ScriptedModel::from_steps([ScriptStep::Hang]))
                .as_tool("refunds", "Answers refund questions."),
        )
        .build()
        .unwrap();
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let result = run_agent_with(&config, "refund?", RunOptions::new().cancellation(token)).await;
    assert_eq!(result.outcome, Err(AgentError::Cancelled));
}

#[tokio::test]
async fn a_childs_records_point_at_its_parent() {
    use agent_core::store::{FeedbackStore, RunRecord};
    use std::sync::{Arc, Mutex};

    #[derive(Default, Clone)]
    struct Records(Arc<Mutex<Vec<RunRecord>>>);
    impl FeedbackStore for Records {
        fn record<'a>(&'a self, run: &'a RunRecord) -> agent_core::store::StoreFuture<'a, ()> {
            self.0.lock().unwrap().push(run.clone());
            Box::pin(async { Ok(()) })
        }
        fn attach_feedback<'a>(
            &'a self,
            _trace_id: &'a str,
            _feedback: &'a agent_core::store::Feedback,
        ) -> agent_core::store::StoreFuture<'a, ()> {
            Box::pin(async { Ok(()) })
        }
        fn run<'a>(
            &'a self,
            _trace_id: &'a str,
        ) -> agent_core::store::StoreFuture<'a, Option<RunRecord>> {
            Box::pin(async { Ok(None) })
        }
        fn runs<'a>(
            &'a self,
            _query: &'a agent_core::store::RunQuery,
        ) -> agent_core::store::StoreFuture<'a, Vec<RunRecord>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn eval_set<'a>(
            &'a self,
            _filter: &'a agent_core::store::EvalFilter,
        ) -> agent_core::store::StoreFuture<'a, Vec<agent_core::store::EvalExample>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn flush(&self) -> agent_core::store::StoreFuture<'_, u64> {
            Box::pin(async { Ok(0) })
        }
    }
    let records = Records::default();
    let child: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(ScriptedModel::new().submit(json!({"due": true, "amount": 5})))
        .feedback_store(records.clone())
        .build()
        .unwrap();
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(
            ScriptedModel::new()
                .tool_call("refunds", json!({"input": "refund?"}))
                .submit(json!({"queue": "billing"})),
        )
        .tool(child.as_tool("refunds", "Answers refund questions."))
        .build()
        .unwrap();
    let result = run_agent(&config, "refund?").await;
    let stored = records.0.lock().unwrap().clone();
    assert_eq!(stored.len(), 1);
    let record = &stored[0];
    assert_eq!(record.agent, "refunds");
    assert_eq!(
        record.metadata.get(META_PARENT_TRACE_ID),
        Some(&result.trace_id)
    );
    let call_id = record.metadata.get(META_PARENT_CALL_ID).unwrap();
    assert!(!call_id.is_empty());
    assert_eq!(record.trace_id, result.usage.children[0].trace_id);
}

#[tokio::test]
async fn a_child_that_pauses_under_a_parent_without_a_store_is_a_tool_error_and_the_parent_goes_on()
{
    // The child's model calls `noop`, which needs a person's approval: the child pauses;
    // the parent has no checkpoint store, so it cannot wait (with one it pauses: see
    // child_approvals.rs, C64).
    let child_model = ScriptedModel::from_steps([turn(call("k1", "noop", json!({})), 20, 5)]);
    let child: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(child_model.clone())
        .tool(Noop)
        .checkpoints(agent_core::store::InMemoryCheckpoints::new())
        .approval(|call, _| call.name == "noop")
        .build()
        .unwrap();
    let parent_model = ScriptedModel::from_steps([
        turn(
            call("p1", "refunds", json!({"input": "refund A-1?"})),
            100,
            10,
        ),
        turn(submit("p2", json!({"queue": "billing"})), 150, 5),
    ]);
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(parent_model.clone())
        .tool(child.as_tool("refunds", "Answers refund questions."))
        .build()
        .unwrap();
    let result = run_agent(&config, "A-1 arrived broken").await;
    assert_eq!(
        result.outcome,
        Ok(Triage {
            queue: "billing".into()
        })
    );
    let [(text, is_error)] = &tool_results(&parent_model)[..] else {
        panic!("{:?}", tool_results(&parent_model));
    };
    assert!(*is_error);
    assert!(
        text.starts_with("refunds could not finish: the refunds agent's run ")
            && text
                .ends_with("waits for decisions, and this run cannot wait (no checkpoint store)"),
        "{text}"
    );
    let [child_usage] = &result.usage.children[..] else {
        panic!("{:?}", result.usage.children);
    };
    assert_eq!(child_usage.ending, "paused");
    assert_eq!(child_usage.category.as_deref(), Some("paused"));
    // The child's tokens are the parent's too: 110 + 155 + 25.
    assert_eq!(result.usage.total_tokens(), 290);
}
