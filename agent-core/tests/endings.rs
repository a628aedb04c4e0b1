//! Endings, part 2: the handover of every run that did not answer, customer messages,
//! fatal tool errors, tools chosen by run state, and partial answers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::{Arc, Mutex};

use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentError, AgentOutput, Ending, Tool, ToolContext, ToolError,
    eval::run_batch,
    handover::CallOutcome,
    llm::{Message, ToolChoice},
    run_agent,
    schema::{SchemaValidator, ValidationErrors},
    tool::{ToolDefinition, ToolFuture},
};
use common::*;
use serde_json::{Value, json};

/// `refund(order_id)`: irreversible; fails with a fatal error for order "BROKEN".
#[derive(Clone, Default)]
struct Refund {
    runs: Arc<Mutex<Vec<String>>>,
}

impl Tool for Refund {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "refund",
            "Refund an order.",
            json!({"type": "object", "properties": {"order_id": {"type": "string"}},
                   "required": ["order_id"]}),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        let id = arguments["order_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.runs.lock().unwrap().push(id.clone());
        Box::pin(async move {
            if id == "BROKEN" {
                Err(ToolError::fatal(
                    "the payment system answered in an unknown state; stop and check by hand",
                ))
            } else {
                Ok(format!("refunded {id}"))
            }
        })
    }

    fn irreversible(&self) -> bool {
        true
    }
}

// ---- Handover --------------------------------------------------------------------------

#[tokio::test]
async fn an_exhausted_run_hands_over_what_happened() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let refund = Refund::default();
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .tool_call("refund", order("A1"))
        .text("I think we are done.")
        .text("still thinking");
    let config = builder(&model, &[&lookup])
        .tool(refund.clone())
        .max_llm_calls(4)
        .max_parse_retries(5)
        .build()
        .unwrap();
    let r = run_agent(&config, "Refund order A1, it never came.").await;
    assert_eq!(r.category(), Some("max_llm_calls"));
    let h = r.handover.as_ref().unwrap();
    assert_eq!(h.input, "Refund order A1, it never came.");
    assert_eq!(h.ending, Ending::Exhausted);
    assert_eq!(h.category, "max_llm_calls");
    assert_eq!(h.calls.len(), 2);
    assert_eq!(h.calls[0].tool, "lookup");
    assert_eq!(
        h.calls[0].outcome,
        CallOutcome::Succeeded(r#"{"order_id":"A1","status":"shipped"}"#.into())
    );
    assert!(!h.calls[0].irreversible);
    assert_eq!(h.calls[1].llm_call, 2);
    assert!(h.calls[1].is_irreversible_action());
    let actions: Vec<&str> = h.irreversible_actions().map(|c| c.tool.as_str()).collect();
    assert_eq!(actions, ["refund"]);
    assert_eq!(
        h.last_feedback.as_deref(),
        Some(
            "You answered in text. To finish, call the submit_output tool once, alone in its \
             turn, with arguments that match its schema."
        )
    );
    assert_eq!((h.spent.llm_calls, h.spent.tool_calls), (4, 2));
    assert_eq!(h.limits.max_llm_calls, 4);
    assert_eq!(h.model_summary, None);
    let text = h.to_string();
    assert_eq!(
        text.lines().take(4).collect::<Vec<_>>(),
        [
            "Asked: Refund order A1, it never came.",
            "Ended: exhausted (max_llm_calls): reached max_llm_calls (4) without an answer (2 failed attempts; #1 (schema_not_called, llm call 3): plain text instead of a submit_output call; #2 (schema_not_called, llm call 4): plain text instead of a submit_output call)",
            "Irreversible actions taken:",
            "  - refund({\"order_id\":\"A1\"})",
        ]
    );
    assert!(
        text.ends_with("Still open: the case has no validated answer"),
        "{text}"
    );
}

#[tokio::test]
async fn an_answered_run_has_no_handover() {
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "t").await;
    assert!(r.handover.is_none());
}

#[tokio::test]
async fn the_wrap_up_turn_offers_escalation_and_a_model_at_its_limit_hands_over() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .tool_call(
            "escalate_to_human",
            json!({"reason": "needs a goodwill decision",
                   "summary": "Order A1 shipped; customer wants a refund anyway."}),
        );
    let config = builder(&model, &[&lookup])
        .escalation(true)
        .wrap_up(true)
        .max_llm_calls(2)
        .build()
        .unwrap();
    let r = run_agent(&config, "t").await;
    assert_eq!(r.ending(), Ending::Escalated);
    let wrap_up = &model.requests()[1];
    let names: Vec<&str> = wrap_up.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["submit_output", "escalate_to_human"]);
    assert_eq!(wrap_up.tool_choice, ToolChoice::Required);
    let h = r.handover.unwrap();
    assert_eq!(
        h.model_summary.as_deref(),
        Some("Order A1 shipped; customer wants a refund anyway.")
    );
    assert_eq!(h.category, "escalated");
    // Without escalation the wrap-up turn still names submit_output alone.
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .wrap_up(true)
        .max_llm_calls(2)
        .build()
        .unwrap();
    assert!(run_agent(&config, "t").await.is_ok());
    let wrap_up = &model.requests()[1];
    assert_eq!(wrap_up.tools.len(), 1);
    assert_eq!(
        wrap_up.tool_choice,
        ToolChoice::Tool("submit_output".into())
    );
}

// ---- Customer messages -----------------------------------------------------------------

#[tokio::test]
async fn customer_messages_never_claim_success_when_there_was_none() {
    let answered = ScriptedModel::new().submit(valid());
    let r = run_agent(&builder(&answered, &[]).build().unwrap(), "t").await;
    assert_eq!(
        r.customer_message(),
        "Thank you, we have received your request and it is being processed."
    );
    let failed = ScriptedModel::new().fail(agent_core::llm::LlmError::permanent("401"));
    let r = run_agent(&builder(&failed, &[]).build().unwrap(), "t").await;
    assert_eq!(
        r.customer_message(),
        format!(
            "We could not process your request because of a technical problem. Please try \
             again later, or contact support and quote reference {}.",
            r.trace_id
        )
    );
    let exhausted = ScriptedModel::new().text("a").text("b").text("c");
    let r = run_agent(&builder(&exhausted, &[]).build().unwrap(), "t").await;
    assert_eq!(r.ending(), Ending::Exhausted);
    assert!(
        r.customer_message()
            .starts_with("We could not complete your request")
    );
    let escalated =
        ScriptedModel::new().tool_call("escalate_to_human", json!({"reason": "r", "summary": "s"}));
    let config = builder(&escalated, &[]).escalation(true).build().unwrap();
    let r = run_agent(&config, "t").await;
    assert_eq!(
        r.customer_message(),
        "Thank you. Your request has been passed to a member of our team, who will get back \
         to you."
    );
}

#[tokio::test]
async fn templates_and_a_fn_set_the_customer_message() {
    let model = ScriptedModel::new().text("a").text("b").text("c");
    let config = builder(&model, &[])
        .customer_message(Ending::Exhausted, "Sorry, ref {trace_id}.")
        .build()
        .unwrap();
    let r = run_agent(&config, "t").await;
    assert_eq!(r.customer_message(), format!("Sorry, ref {}.", r.trace_id));

    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[])
        .customer_message_fn(|r| {
            r.outcome
                .as_ref()
                .ok()
                .map(|t| format!("Severity {} noted.", t.severity))
        })
        .build()
        .unwrap();
    assert_eq!(
        run_agent(&config, "t").await.customer_message(),
        "Severity 2 noted."
    );
    // A fn that panics falls back to the template.
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[])
        .customer_message_fn(|_| panic!("bug in the message fn"))
        .build()
        .unwrap();
    assert!(
        run_agent(&config, "t")
            .await
            .customer_message()
            .starts_with("Thank you")
    );
}

// ---- Fatal tool errors -------------------------------------------------------------------

#[tokio::test]
async fn a_fatal_tool_error_stops_the_run_after_its_turn_with_every_call_answered() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let refund = Refund::default();
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("refund", order("BROKEN")),
        model.call("lookup", order("A2")),
    ];
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[&lookup])
        .tool(refund.clone())
        .build()
        .unwrap();
    let r = run_agent(&config, "t").await;
    let err = r.outcome.as_ref().unwrap_err();
    assert_eq!(
        err,
        &AgentError::ToolFatal {
            tool: "refund".into(),
            message: "refund failed: the payment system answered in an unknown state; stop \
                      and check by hand"
                .into()
        }
    );
    assert_eq!(err.category(), "tool_fatal");
    assert_eq!(err.ending(), Ending::Failed);
    assert_eq!(model.request_count(), 1, "no further round trip");
    assert_eq!(
        lookup.runs(),
        1,
        "the other call of the turn ran and was answered"
    );
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (1, 2));
    // The transcript: input, the turn, one result per call (the fatal one an error).
    assert_eq!(r.transcript.len(), 3);
    let Message::Tool { results } = &r.transcript[2] else {
        panic!()
    };
    assert!(results[0].is_error);
    assert!(!results[1].is_error);
    assert_well_formed(&r.transcript);
    let h = r.handover.unwrap();
    assert_eq!(h.category, "tool_fatal");
    assert!(matches!(h.calls[0].outcome, CallOutcome::Failed(_)));
    assert_eq!(
        h.irreversible_actions().count(),
        0,
        "the failed refund took no action"
    );
}

// ---- Tools by run state ------------------------------------------------------------------

#[tokio::test]
async fn tools_for_hides_a_tool_once_it_ran_and_a_call_to_it_is_unknown() {
    let refund = Refund::default();
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let seen_turns: Arc<Mutex<Vec<u32>>> = Arc::default();
    let turns = Arc::clone(&seen_turns);
    let model = ScriptedModel::new()
        .tool_call("refund", order("A1"))
        .tool_call("refund", order("A1"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .tool(refund.clone())
        .tools_for(move |state, tool| {
            if tool.name == "lookup" {
                turns.lock().unwrap().push(state.turn);
            }
            !(tool.name == "refund" && state.succeeded("refund"))
        })
        .build()
        .unwrap();
    let r = run_agent(&config, "t").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(*refund.runs.lock().unwrap(), ["A1"], "refunded once");
    let names = |i: usize| -> Vec<String> {
        model.requests()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(names(0), ["lookup", "refund", "submit_output"]);
    assert_eq!(names(1), ["lookup", "submit_output"]);
    let second = last_results(&model.requests()[2]);
    assert_eq!(
        second[0].content,
        "Unknown tool \"refund\". The available tools are: lookup, submit_output."
    );
    assert_eq!(*seen_turns.lock().unwrap(), [1, 2, 3]);
    // The same subset is one Arc: its wire encoding is made once.
    assert!(std::sync::Arc::ptr_eq(
        &model.requests()[1].tools,
        &model.requests()[2].tools
    ));
}

// ---- Partial answers -----------------------------------------------------------------------

/// A plan of steps; partial when some are left open.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Plan {
    done: Vec<String>,
    open: Vec<String>,
}

fn plan_schema() -> Value {
    json!({"type": "object",
           "properties": {"done": {"type": "array", "items": {"type": "string"}},
                          "open": {"type": "array", "items": {"type": "string"}}},
           "required": ["done", "open"]})
}

impl AgentOutput for Plan {
    fn output_tool() -> Option<ToolDefinition> {
        Some(ToolDefinition::new(
            "submit_output",
            "The plan.",
            plan_schema(),
        ))
    }

    fn from_arguments(arguments: &Value) -> Result<Self, ValidationErrors> {
        SchemaValidator::new(&plan_schema())
            .unwrap()
            .validate_into(arguments)
    }

    fn is_partial(&self) -> bool {
        !self.open.is_empty()
    }
}

#[tokio::test]
async fn partial_answers_are_answered_and_counted_apart() {
    struct ByInput;
    impl agent_core::llm::LlmClient for ByInput {
        fn complete<'a>(
            &'a self,
            request: &'a agent_core::llm::LlmRequest,
        ) -> agent_core::llm::LlmFuture<'a> {
            let open = matches!(&request.messages[0], Message::User { content, .. } if content == "partial");
            let args = if open {
                json!({"done": ["refund"], "open": ["replacement"]})
            } else {
                json!({"done": ["refund"], "open": []})
            };
            Box::pin(async move {
                Ok(agent_core::llm::LlmResponse::tool_calls(vec![
                    agent_core::llm::ToolCall::new("c", "submit_output", args),
                ]))
            })
        }
    }
    let config = AgentConfig::<Plan>::builder("p")
        .llm(ByInput)
        .build()
        .unwrap();
    let batch = run_batch(&config, ["full", "partial", "partial"], 2).await;
    assert_eq!(batch.receipt.count(Ending::Answered), 3);
    assert_eq!(batch.receipt.partial, 2);
    assert!(!batch.results[0].is_partial());
    assert!(batch.results[1].is_partial());
    assert!(batch.receipt.to_string().contains("partial answers"));
}

#[test]
fn categories_are_one_list_with_their_endings() {
    use agent_core::{AgentError, Category, Ending};
    assert_eq!(Category::ALL.len(), AgentError::CATEGORIES.len());
    for (category, tag) in Category::ALL.iter().zip(AgentError::CATEGORIES) {
        assert_eq!(category.as_str(), tag);
        assert_eq!(Category::from_tag(tag), Some(*category));
        assert_eq!(
            serde_json::to_value(category).unwrap(),
            serde_json::json!(tag)
        );
    }
    let unique: std::collections::BTreeSet<_> = AgentError::CATEGORIES.iter().collect();
    assert_eq!(unique.len(), AgentError::CATEGORIES.len());
    assert_eq!(Category::from_tag("no_such_category"), None);
    assert_eq!(Category::MaxLlmCalls.ending(), Ending::Exhausted);
    assert_eq!(Category::Escalated.ending(), Ending::Escalated);
    assert_eq!(Category::Stuck.ending(), Ending::Stuck);
    assert_eq!(Category::Internal.ending(), Ending::Failed);
    let error = AgentError::Cancelled;
    assert_eq!(error.kind(), Category::Cancelled);
    assert_eq!(error.category(), "cancelled");
    assert_eq!(error.ending(), error.kind().ending());
}
