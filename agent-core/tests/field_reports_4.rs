//! Field reports, round 4, on the runner's side (docs/cases.md): what a reviewer
//! approves is what runs (C51), a handoff carries the target's own settings (C52), a
//! fallback switch in a tool loop never sends thinking the next provider rejects (C53).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;
use crate::providers_support;

use std::sync::{Arc, Mutex};

use agent_core::providers::ProviderOptions;
use agent_core::store::InMemoryCheckpoints;
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentError, RunOptions, Tool, ToolContext,
    durable::{DecisionProblem, Decisions, ResumeError, paused_runs, resume_agent_with},
    guardrail::{ToolGuardrail, ToolVerdict},
    llm::{Reasoning, ToolCall},
    run_agent, run_agent_with,
    tool::{ToolDefinition, ToolFuture},
};
use common::{Triage, valid};
use serde_json::{Value, json};

/// `refund {amount}`: records the arguments of every execution.
#[derive(Clone, Default)]
struct Refund(Arc<Mutex<Vec<Value>>>);

impl Refund {
    fn seen(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }
}

impl Tool for Refund {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "refund",
            "Refund an amount.",
            json!({
                "type": "object",
                "properties": {"amount": {"type": "integer", "minimum": 1}},
                "required": ["amount"],
                "additionalProperties": false
            }),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        self.0.lock().unwrap().push(arguments.clone());
        Box::pin(async move { Ok(format!("refunded {}", arguments["amount"])) })
    }
}

/// A refund needing approval, under a guardrail that caps the amount at 100.
fn capped(
    model: &ScriptedModel,
    refund: &Refund,
    store: &InMemoryCheckpoints,
) -> AgentConfig<Triage> {
    let cap = ToolGuardrail::new("cap").before(|call: &ToolCall| {
        match call.arguments["amount"].as_i64() {
            Some(amount) if amount > 100 => ToolVerdict::Replace(json!({"amount": 100})),
            _ => ToolVerdict::Allow,
        }
    });
    AgentConfig::builder("refunds")
        .llm(model.clone())
        .tool(refund.clone())
        .approval(|call, _| call.name == "refund")
        .tool_guardrail(cap)
        .checkpoints(store.clone())
        .build()
        .unwrap()
}

fn refund_then_answer() -> ScriptedModel {
    ScriptedModel::new()
        .tool_calls(vec![ToolCall::new("c1", "refund", json!({"amount": 500}))])
        .submit(valid())
}

// C51: the pending call, `paused_runs` and the transcript show the arguments the
// guardrail put in (100, not the model's 500); approved, the tool runs with exactly
// those. Before, the reviewer saw 500 and 100 ran.
#[tokio::test]
async fn c51_what_a_reviewer_approves_is_what_runs_after_a_guardrail_replaced_it() {
    let store = InMemoryCheckpoints::new();
    let refund = Refund::default();
    let config = capped(&refund_then_answer(), &refund, &store);
    let paused = run_agent_with(&config, "refund me", RunOptions::new().run_id("r1")).await;
    let Err(AgentError::Paused { pending, .. }) = &paused.outcome else {
        panic!("{:?}", paused.outcome);
    };
    assert_eq!(pending[0].arguments, json!({"amount": 100}));
    assert!(refund.seen().is_empty(), "nothing ran before the approval");
    let listed = paused_runs(&store, 10).await.unwrap();
    assert_eq!(listed[0].pending[0].arguments, json!({"amount": 100}));
    let result = resume_agent_with(&config, "r1", Decisions::new().approve("c1"))
        .await
        .unwrap();
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(refund.seen(), [json!({"amount": 100})]);
    // The transcript's call is the one approved and run.
    let shown: Vec<&Value> = result
        .transcript
        .iter()
        .flat_map(|m| match m {
            agent_core::llm::Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .filter(|c| c.name == "refund")
        .map(|c| &c.arguments)
        .collect();
    assert_eq!(shown, [&json!({"amount": 100})]);
}

// C51: an edit the guardrail would change is refused with its reason (nothing runs, the
// run stays paused); an edit within its rules runs exactly as given.
#[tokio::test]
async fn c51_an_edit_a_guardrail_would_change_is_refused_and_one_it_allows_runs_as_given() {
    let store = InMemoryCheckpoints::new();
    let refund = Refund::default();
    let config = capped(&refund_then_answer(), &refund, &store);
    let paused = run_agent_with(&config, "refund me", RunOptions::new().run_id("r2")).await;
    assert!(matches!(paused.outcome, Err(AgentError::Paused { .. })));
    let refused = resume_agent_with(
        &config,
        "r2",
        Decisions::new().edit("c1", json!({"amount": 300})),
    )
    .await
    .unwrap_err();
    let ResumeError::Decisions { problems, .. } = &refused else {
        panic!("{refused:?}");
    };
    match &problems[0] {
        DecisionProblem::InvalidArguments { call_id, errors } => {
            assert_eq!(call_id, "c1");
            assert!(errors.contains("guardrail cap"), "{errors}");
        }
        other => panic!("{other:?}"),
    }
    assert!(refund.seen().is_empty());
    let result = resume_agent_with(
        &config,
        "r2",
        Decisions::new().edit("c1", json!({"amount": 50})),
    )
    .await
    .unwrap();
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(refund.seen(), [json!({"amount": 50})]);
}

// C52: after a handoff every request carries the target agent's own settings (its
// reasoning, temperature, output cap, prompt and model), not the first agent's.
#[tokio::test]
async fn c52_after_a_handoff_every_request_carries_the_target_agents_own_settings() {
    let target_model = ScriptedModel::new().submit(valid());
    let billing = AgentConfig::<Triage>::builder("billing")
        .llm(target_model.clone())
        .model("billing-model")
        .system_prompt("You are billing.")
        .reasoning(Reasoning::budget(2_048))
        .temperature(0.7)
        .max_tokens(3_000)
        .build()
        .unwrap();
    let first_model = ScriptedModel::new().tool_call("transfer_to_billing", json!({}));
    let triage = AgentConfig::<Triage>::builder("triage")
        .llm(first_model.clone())
        .model("triage-model")
        .system_prompt("You are triage.")
        .temperature(0.2)
        .max_tokens(1_000)
        .handoff(billing)
        .build()
        .unwrap();
    let result = run_agent(&triage, "refund me").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let first = &first_model.requests()[0];
    assert_eq!(first.reasoning, None);
    let sent = &target_model.requests()[0];
    assert_eq!(sent.model, "billing-model");
    assert_eq!(sent.system.as_deref(), Some("You are billing."));
    assert_eq!(sent.reasoning, Some(Reasoning::budget(2_048)));
    assert_eq!(sent.temperature, Some(0.7));
    assert_eq!(sent.max_tokens, 3_000);
}

/// An Anthropic server that applies the documented rule of extended thinking with tool
/// use: with `thinking` on, an assistant turn that a tool loop continues must start with
/// a thinking block; a request that breaks it is a 400, as the API answers.
struct ThinkingRules {
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl wiremock::Respond for ThinkingRules {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        self.bodies.lock().unwrap().push(body.clone());
        let messages = body["messages"].as_array().unwrap();
        let last_assistant = messages.iter().rev().find(|m| m["role"] == "assistant");
        let starts_with_thinking = last_assistant
            .and_then(|m| m["content"].as_array())
            .and_then(|blocks| blocks.first())
            .is_some_and(|b| b["type"] == "thinking");
        if body.get("thinking").is_some() && last_assistant.is_some() && !starts_with_thinking {
            return wiremock::ResponseTemplate::new(400).set_body_json(json!({
                "type": "error", "error": {"type": "invalid_request_error", "message":
                "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but \
                 found `tool_use`. When `thinking` is enabled, a final `assistant` message \
                 must start with a thinking block."}}));
        }
        wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_b", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
            "content": [{"type": "tool_use", "id": "toolu_b", "name": "submit_output",
                "input": {"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 600, "output_tokens": 70}
        }))
    }
}

// C53: the primary (thinking on) makes a tool call with a signed thinking block, then is
// overloaded; the turn goes to a fallback Anthropic endpoint with thinking on. The
// thinking block was the primary's (dropped at the switch), so the next request goes
// without thinking, and the run answers; before, the fallback got thinking on and a turn
// without its thinking block, which the API rejects with a 400.
#[tokio::test]
async fn c53_a_fallback_switch_in_a_tool_loop_sends_no_thinking_the_next_provider_rejects() {
    use providers_support::{CountingTool, expected_triage, json_fixture};
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let primary = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_fixture(200, "anthropic/parallel_tool_use.json"))
        .up_to_n_times(1)
        .mount(&primary)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(529).set_body_json(json!({
            "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})))
        .mount(&primary)
        .await;
    let fallback = MockServer::start().await;
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    Mock::given(method("POST"))
        .respond_with(ThinkingRules {
            bodies: Arc::clone(&bodies),
        })
        .mount(&fallback)
        .await;
    let lookup = CountingTool::lookup_order();
    let config = providers_support::triage_with("claude-sonnet-4-5", &primary.uri(), |o| o)
        .reasoning(Reasoning::budget(2_048))
        .max_llm_retries(1)
        .fallback_model_with(
            "claude-haiku-4-5",
            ProviderOptions::default()
                .with_api_key(providers_support::KEY)
                .with_base_url(fallback.uri()),
        )
        .tool(lookup.clone())
        .build()
        .unwrap();
    let result = run_agent(&config, "Two parcels A-1001 and B-2002 are late.").await;
    assert_eq!(result.outcome, Ok(expected_triage()), "{:?}", result.usage);
    let sent = bodies.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].get("thinking").is_none(), "{}", sent[0]);
    assert_eq!(lookup.calls(), 2);
}
