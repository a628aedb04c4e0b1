//! Handoffs (`.handoff(config)`): the conversation goes to another agent of the same
//! output type, which answers; history filters; the bound on transfers; every call id
//! answered; budgets and usage over the whole run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::{Arc, Mutex};

use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentError, Tool, ToolContext, Value,
    config::Handoff,
    error::StuckReason,
    json,
    llm::{Message, ToolCall},
    observe::RunEvent,
    run_agent,
    tool::{ToolDefinition, ToolFuture},
};

/// The answer.
#[agent_core::agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The text.
    pub text: String,
}

struct Echo;

impl Tool for Echo {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new("echo", "Echoes.", json!({"type": "object"}))
    }
    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move { Ok(arguments.to_string()) })
    }
}

fn agent(name: &str, model: &ScriptedModel, prompt: &str) -> agent_core::AgentConfigBuilder<Reply> {
    AgentConfig::builder(name)
        .llm(model.clone())
        .system_prompt(prompt)
}

#[tokio::test]
async fn the_agent_handed_off_to_answers_with_the_history_and_its_own_prompt() {
    let billing_model = ScriptedModel::new().submit(json!({"text": "refund sent"}));
    let billing = agent("billing", &billing_model, "You are billing.")
        .build()
        .unwrap();
    let triage_model = ScriptedModel::new().tool_calls(vec![
        ToolCall::new("c1", "echo", json!({"x": 1})),
        ToolCall::new("c2", "transfer_to_billing", json!({})),
    ]);
    let events: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let seen = Arc::clone(&events);
    let config = agent("triage", &triage_model, "You are triage.")
        .tool(Echo)
        .handoff(billing)
        .observer(move |e: &RunEvent<'_>| {
            if let RunEvent::Handoff { from, to, .. } = e {
                seen.lock()
                    .unwrap()
                    .push(((*from).to_owned(), (*to).to_owned()));
            }
        })
        .build()
        .unwrap();
    let offered: Vec<String> = config
        .tool_definitions()
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert!(
        offered.contains(&"transfer_to_billing".to_owned()),
        "{offered:?}"
    );
    let result = run_agent(&config, "I want my money back").await;
    assert_eq!(
        result.outcome,
        Ok(Reply {
            text: "refund sent".into()
        })
    );
    assert_eq!(result.agent, "billing");
    assert_eq!(result.usage.llm_calls, 2);
    assert_eq!(
        result.usage.tool_calls, 1,
        "echo ran; the transfer is no tool"
    );
    assert_eq!(
        *events.lock().unwrap(),
        [("triage".to_owned(), "billing".to_owned())]
    );
    // Billing's request: its own system prompt, the whole history, each call answered.
    let request = &billing_model.requests()[0];
    assert_eq!(request.system.as_deref(), Some("You are billing."));
    let results: Vec<(String, String, bool)> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { results } => Some(results.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| (r.call_id, r.content, r.is_error))
        .collect();
    assert_eq!(
        results,
        [
            ("c1".to_owned(), r#"{"x":1}"#.to_owned(), false),
            (
                "c2".to_owned(),
                "Transferred to the billing agent.".to_owned(),
                false
            ),
        ]
    );
    assert!(
        !request.tools.iter().any(|d| d.name == "echo"),
        "billing's tools"
    );
}

#[tokio::test]
async fn an_input_filter_decides_which_history_goes_along() {
    let billing_model = ScriptedModel::new().submit(json!({"text": "ok"}));
    let billing = agent("billing", &billing_model, "Billing.")
        .build()
        .unwrap();
    let triage_model = ScriptedModel::new()
        .tool_call("echo", json!({"x": 1}))
        .tool_call("transfer_to_billing", json!({}));
    let config = agent("triage", &triage_model, "Triage.")
        .tool(Echo)
        .handoff_with(
            Handoff::new(billing)
                .description("Billing questions.")
                .input_only(),
        )
        .build()
        .unwrap();
    let described = config
        .tool_definitions()
        .iter()
        .find(|d| d.name == "transfer_to_billing")
        .unwrap()
        .description
        .clone();
    assert_eq!(described, "Billing questions.");
    let result = run_agent(&config, "refund please").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let messages = &billing_model.requests()[0].messages;
    assert_eq!(
        messages,
        &vec![Message::user("refund please")],
        "only the user's messages"
    );
}

#[tokio::test]
async fn a_chain_of_transfers_past_max_handoffs_ends_stuck() {
    // Configs are frozen values, so a ping-pong is a chain of copies: a -> b -> a' -> ..
    let transfer_to =
        |next: &str| ScriptedModel::new().tool_call(format!("transfer_to_{next}"), json!({}));
    let chain = || {
        let last = agent("e", &ScriptedModel::new().submit(json!({"text": "e"})), "e")
            .build()
            .unwrap();
        let d = agent("d", &transfer_to("e"), "d")
            .handoff(last)
            .build()
            .unwrap();
        let c = agent("c", &transfer_to("d"), "c")
            .handoff(d)
            .build()
            .unwrap();
        agent("b", &transfer_to("c"), "b")
            .handoff(c)
            .build()
            .unwrap()
    };
    let a = agent("a", &transfer_to("b"), "a")
        .max_handoffs(2)
        .handoff(chain())
        .build()
        .unwrap();
    let result = run_agent(&a, "go").await;
    assert_eq!(
        result.outcome,
        Err(AgentError::Stuck {
            reason: StuckReason::Handoffs { limit: 2 }
        })
    );
    assert_eq!(result.agent, "c", "two transfers happened");
    assert_eq!(result.usage.llm_calls, 3);
    // With the default bound (4) the same chain reaches e, which answers.
    let a = agent("a", &transfer_to("b"), "a")
        .handoff(chain())
        .build()
        .unwrap();
    let result = run_agent(&a, "go").await;
    assert_eq!(result.outcome, Ok(Reply { text: "e".into() }));
    assert_eq!(result.agent, "e");
}

#[tokio::test]
async fn a_second_transfer_in_one_turn_is_answered_as_an_error() {
    let x_model = ScriptedModel::new().submit(json!({"text": "x"}));
    let y_model = ScriptedModel::new().submit(json!({"text": "y"}));
    let x = agent("x", &x_model, "x").build().unwrap();
    let y = agent("y", &y_model, "y").build().unwrap();
    let model = ScriptedModel::new().tool_calls(vec![
        ToolCall::new("c1", "transfer_to_y", json!({})),
        ToolCall::new("c2", "transfer_to_x", json!({})),
    ]);
    let config = agent("router", &model, "router")
        .handoff(x)
        .handoff(y)
        .build()
        .unwrap();
    let result = run_agent(&config, "?").await;
    assert_eq!(result.outcome, Ok(Reply { text: "y".into() }));
    assert_eq!(result.agent, "y");
    assert_eq!(x_model.request_count(), 0);
    let results: Vec<(String, bool)> = y_model.requests()[0]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { results } => Some(results.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| (r.call_id, r.is_error))
        .collect();
    assert_eq!(results, [("c1".to_owned(), false), ("c2".to_owned(), true)]);
}

#[test]
fn a_handoff_name_that_clashes_with_a_tool_is_a_config_error() {
    struct Clash;
    impl Tool for Clash {
        fn definition(&self) -> ToolDefinition {
            ToolDefinition::new("transfer_to_b", "Clash.", json!({"type": "object"}))
        }
        fn call<'a>(&'a self, _a: Value, _c: ToolContext) -> ToolFuture<'a> {
            Box::pin(async { Ok(String::new()) })
        }
    }
    let b = agent("b", &ScriptedModel::new(), "b").build().unwrap();
    let err = agent("a", &ScriptedModel::new(), "a")
        .tool(Clash)
        .handoff(b)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("transfer_to_b"), "{err}");
}
