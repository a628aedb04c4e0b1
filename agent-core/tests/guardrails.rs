//! Guardrails: input (before and concurrent with the first call), output (reject with
//! feedback, trip) and tool (deny, replace, redact, trip), with their counts and events.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::testing::{ScriptStep, ScriptedModel};
use agent_core::{
    AgentConfig, AgentError, Tool, ToolContext, Value,
    guardrail::{InputGuardrail, OutputGuardrail, ToolGuardrail, ToolVerdict, Verdict},
    json,
    llm::{LlmResponse, Message, ToolCall},
    observe::{Observer, RunEvent},
    run_agent,
    tool::{ToolDefinition, ToolFuture},
};

/// The answer.
#[agent_core::agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct Refund {
    /// The amount (USD).
    pub amount: u32,
}

/// A tool that returns its arguments and counts its runs.
#[derive(Clone, Default)]
struct Lookup {
    runs: Arc<AtomicU32>,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Tool for Lookup {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup",
            "Looks an order up.",
            json!({"type": "object", "properties": {"order": {"type": "string"}},
                   "required": ["order"], "additionalProperties": false}),
        )
    }
    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            self.runs.fetch_add(1, Ordering::SeqCst);
            self.seen.lock().unwrap().push(arguments.clone());
            Ok(format!(
                "order {} paid with card 4111 1111 1111 1111",
                arguments["order"].as_str().unwrap_or("?")
            ))
        })
    }
}

/// Every guardrail event: (guardrail, stage, verdict).
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<(String, String, String)>>>);

impl Observer for Events {
    fn on_event(&self, event: &RunEvent<'_>) {
        if let RunEvent::Guardrail {
            guardrail,
            stage,
            verdict,
            ..
        } = event
        {
            self.0.lock().unwrap().push((
                (*guardrail).to_owned(),
                (*stage).to_owned(),
                (*verdict).to_owned(),
            ));
        }
    }
}

impl Events {
    fn get(&self) -> Vec<(String, String, String)> {
        self.0.lock().unwrap().clone()
    }
}

fn triple(a: &str, b: &str, c: &str) -> (String, String, String) {
    (a.to_owned(), b.to_owned(), c.to_owned())
}

fn has_card_number(text: &str) -> bool {
    text.chars().filter(char::is_ascii_digit).count() >= 13
}

fn card_guardrail() -> InputGuardrail {
    InputGuardrail::new("card_number", |input: &str| {
        if has_card_number(input) {
            Verdict::Trip("the ticket contains a card number".into())
        } else {
            Verdict::Pass
        }
    })
}

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
async fn an_input_guardrail_trips_before_any_request_and_no_tool_runs() {
    let model = ScriptedModel::new()
        .tool_call("lookup", json!({"order": "A-1"}))
        .submit(json!({"amount": 5}));
    let lookup = Lookup::default();
    let events = Events::default();
    let config: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(model.clone())
        .tool(lookup.clone())
        .input_guardrail(card_guardrail())
        .observer(events.clone())
        .build()
        .unwrap();
    let result = run_agent(&config, "Refund my card 4111 1111 1111 1111 please").await;
    assert_eq!(
        result.outcome,
        Err(AgentError::GuardrailTripped {
            guardrail: "card_number".into(),
            reason: "the ticket contains a card number".into()
        })
    );
    assert_eq!(result.category(), Some("guardrail_tripped"));
    assert_eq!(result.ending().as_str(), "failed");
    assert_eq!(model.request_count(), 0);
    assert_eq!(lookup.runs.load(Ordering::SeqCst), 0);
    assert_eq!(result.usage.guardrail_interventions, 1);
    assert_eq!(events.get(), [triple("card_number", "input", "trip")]);

    // A clean ticket passes: nothing counted.
    let result = run_agent(&config, "Refund order A-1 please").await;
    assert_eq!(result.outcome, Ok(Refund { amount: 5 }));
    assert_eq!(result.usage.guardrail_interventions, 0);
}

#[tokio::test]
async fn a_concurrent_input_guardrail_drops_the_call_in_flight_or_holds_its_turn() {
    // It trips while the call is in flight: the call is dropped, its tokens counted.
    let model = ScriptedModel::from_steps([ScriptStep::Delayed(
        Duration::from_secs(5),
        Box::new(ScriptStep::Respond(LlmResponse::tool_calls(vec![
            ToolCall::new("c1", "lookup", json!({"order": "A-1"})),
        ]))),
    )]);
    let lookup = Lookup::default();
    let slow_trip = || {
        InputGuardrail::new_async("moderation", |_input: String| async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Verdict::Trip("abusive".into())
        })
        .concurrent()
    };
    let config: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(model.clone())
        .tool(lookup.clone())
        .input_guardrail(slow_trip())
        .build()
        .unwrap();
    let result = run_agent(&config, "you are useless").await;
    assert_eq!(result.category(), Some("guardrail_tripped"));
    assert_eq!(model.request_count(), 1, "the call was sent at once");
    assert_eq!(result.usage.llm_calls, 1);
    assert!(result.usage.input_tokens > 0, "the dropped call is counted");
    assert_eq!(lookup.runs.load(Ordering::SeqCst), 0);

    // The call returns first (a tool call): its turn waits, and the tool never runs.
    let model = ScriptedModel::new().tool_call("lookup", json!({"order": "A-1"}));
    let config: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(model.clone())
        .tool(lookup.clone())
        .input_guardrail(slow_trip())
        .build()
        .unwrap();
    let result = run_agent(&config, "you are useless").await;
    assert_eq!(result.category(), Some("guardrail_tripped"));
    assert_eq!(lookup.runs.load(Ordering::SeqCst), 0);
    assert_eq!(result.usage.llm_calls, 1);
}

#[tokio::test]
async fn an_output_guardrail_rejects_with_feedback_the_model_corrects_or_trips() {
    let model = ScriptedModel::new()
        .submit(json!({"amount": 500}))
        .submit(json!({"amount": 50}));
    let limit = OutputGuardrail::new("refund_limit", |r: &Refund| {
        if r.amount > 100 {
            Verdict::Reject("refunds over 100 USD need a manager; offer at most 100".into())
        } else {
            Verdict::Pass
        }
    });
    let events = Events::default();
    let config: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(model.clone())
        .output_guardrail(limit.clone())
        .observer(events.clone())
        .build()
        .unwrap();
    let result = run_agent(&config, "refund A-1").await;
    assert_eq!(result.outcome, Ok(Refund { amount: 50 }));
    assert_eq!(result.usage.guardrail_interventions, 1);
    assert_eq!(events.get(), [triple("refund_limit", "output", "reject")]);
    let (feedback, is_error) = &tool_results(&model)[0];
    assert!(*is_error);
    assert!(
        feedback.contains("refunds over 100 USD need a manager"),
        "{feedback}"
    );

    // Under max_parse_retries: rejected every time, the run ends exhausted.
    let model = ScriptedModel::new()
        .submit(json!({"amount": 500}))
        .submit(json!({"amount": 400}))
        .submit(json!({"amount": 300}));
    let config: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(model)
        .max_parse_retries(2)
        .output_guardrail(limit)
        .build()
        .unwrap();
    let result = run_agent(&config, "refund A-1").await;
    assert_eq!(result.category(), Some("schema_validation_failed"));
    assert_eq!(result.usage.guardrail_interventions, 3);

    // A trip ends the run at once, as does a guardrail that panics.
    for guardrail in [
        OutputGuardrail::new("policy", |_: &Refund| Verdict::Trip("fraud pattern".into())),
        OutputGuardrail::new("policy", |_: &Refund| -> Verdict { panic!("bug") }),
    ] {
        let model = ScriptedModel::new()
            .submit(json!({"amount": 5}))
            .submit(json!({"amount": 5}));
        let config: AgentConfig<Refund> = AgentConfig::builder("refunds")
            .llm(model.clone())
            .output_guardrail(guardrail)
            .build()
            .unwrap();
        let result = run_agent(&config, "refund A-1").await;
        match &result.outcome {
            Err(AgentError::GuardrailTripped { guardrail, reason }) => {
                assert_eq!(guardrail, "policy");
                assert!(
                    reason == "fraud pattern" || reason.contains("bug"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(model.request_count(), 1);
    }
}

#[tokio::test]
async fn tool_guardrails_deny_replace_redact_and_trip() {
    let model = ScriptedModel::new()
        .tool_calls(vec![
            ToolCall::new("c1", "lookup", json!({"order": "BLOCKED"})),
            ToolCall::new("c2", "lookup", json!({"order": "a-2"})),
            ToolCall::new("c3", "lookup", json!({"order": "BAD"})),
        ])
        .submit(json!({"amount": 5}));
    let lookup = Lookup::default();
    let events = Events::default();
    let guardrail = ToolGuardrail::new("orders")
        .only(["lookup"])
        .before(|call: &ToolCall| match call.arguments["order"].as_str() {
            Some("BLOCKED") => ToolVerdict::Deny("that order is under investigation".into()),
            Some("BAD") => ToolVerdict::Replace(json!({"order": 7})),
            Some(order) if order != order.to_uppercase() => {
                ToolVerdict::Replace(json!({"order": order.to_uppercase()}))
            }
            _ => ToolVerdict::Allow,
        })
        .after(|_call: &ToolCall, text: &str| {
            text.contains("4111")
                .then(|| text.replace("4111 1111 1111 1111", "[card]"))
        });
    let config: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(model.clone())
        .tool(lookup.clone())
        .tool_guardrail(guardrail)
        .observer(events.clone())
        .build()
        .unwrap();
    let result = run_agent(&config, "refund").await;
    assert_eq!(result.outcome, Ok(Refund { amount: 5 }));
    // Only the replaced call ran, with the new arguments.
    assert_eq!(lookup.runs.load(Ordering::SeqCst), 1);
    assert_eq!(*lookup.seen.lock().unwrap(), [json!({"order": "A-2"})]);
    assert_eq!(result.usage.tool_calls, 1);
    let results = tool_results(&model);
    assert_eq!(
        results,
        [
            (
                "lookup was not run: that order is under investigation".to_owned(),
                true
            ),
            ("order A-2 paid with card [card]".to_owned(), false),
            (results[2].0.clone(), true),
        ]
    );
    assert!(
        results[2]
            .0
            .contains("replaced its arguments with ones that do not validate"),
        "{}",
        results[2].0
    );
    assert_eq!(
        events.get(),
        [
            triple("orders", "tool_before", "deny"),
            triple("orders", "tool_before", "replace"),
            triple("orders", "tool_after", "redact"),
            triple("orders", "tool_before", "deny"),
        ]
    );
    assert_eq!(result.usage.guardrail_interventions, 4);
}

#[tokio::test]
async fn a_tool_guardrail_trip_ends_the_run_after_the_turn_is_answered() {
    let model = ScriptedModel::new()
        .tool_calls(vec![
            ToolCall::new("c1", "lookup", json!({"order": "A-1"})),
            ToolCall::new("c2", "lookup", json!({"order": "DROP TABLE"})),
        ])
        .submit(json!({"amount": 5}));
    let lookup = Lookup::default();
    let guardrail = ToolGuardrail::new("sql").before(|call: &ToolCall| {
        if call.arguments["order"]
            .as_str()
            .is_some_and(|o| o.contains("DROP"))
        {
            ToolVerdict::Trip("an injection attempt".into())
        } else {
            ToolVerdict::Allow
        }
    });
    let config: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(model.clone())
        .tool(lookup.clone())
        .tool_guardrail(guardrail)
        .build()
        .unwrap();
    let result = run_agent(&config, "refund").await;
    assert_eq!(
        result.outcome,
        Err(AgentError::GuardrailTripped {
            guardrail: "sql".into(),
            reason: "an injection attempt".into()
        })
    );
    assert_eq!(model.request_count(), 1);
    assert_eq!(lookup.runs.load(Ordering::SeqCst), 1, "the other call ran");
    // Every call of the turn is answered in the transcript.
    let answered: Vec<String> = result
        .transcript
        .iter()
        .filter_map(|m| match m {
            Message::Tool { results } => Some(results.iter().map(|r| r.call_id.clone())),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(answered, ["c1", "c2"]);
    assert_eq!(result.usage.guardrail_interventions, 1);
}
