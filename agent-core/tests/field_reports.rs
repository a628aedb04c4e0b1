//! Round-2 field reports (cases C27-C32 of `docs/cases.md`) through the loop with a
//! scripted model; each case and a sibling of its kind. The same cases on the wire are
//! in `providers_field_reports.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::{Arc, Mutex};

use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentError, Ending, OutputMode, Tool, ToolContext,
    error::AttemptKind,
    llm::{LlmResponse, StopReason, TokenUsage, ToolCall},
    run_agent,
    tool::{ToolDefinition, ToolFuture},
};
use common::*;
use serde_json::{Value, json};

// ---- C27: provider-declared stops that are not answers --------------------------------

#[tokio::test]
async fn c27_a_refusal_ends_the_run_after_that_request_with_its_text() {
    let model = ScriptedModel::new()
        .respond(
            LlmResponse::text("I can't help with that request.")
                .with_stop_reason(StopReason::Refusal),
        )
        .submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(
        err,
        AgentError::Refused {
            stop_reason: StopReason::Refusal,
            message: "I can't help with that request.".into(),
            reason: None,
        }
    );
    assert_eq!(err.category(), "refused");
    assert_eq!(err.ending(), Ending::Failed);
    assert_eq!(
        err.to_string(),
        "the provider refused to answer (refusal): I can't help with that request."
    );
    assert_eq!(model.request_count(), 1, "no nudge, no retry");
    assert_eq!(r.output, "I can't help with that request.");
}

#[tokio::test]
async fn c27_a_content_filter_stop_is_a_refusal_too_in_every_output_mode() {
    for mode in [OutputMode::Tool, OutputMode::Native, OutputMode::Prompted] {
        let model = ScriptedModel::new()
            .respond(LlmResponse::text("").with_stop_reason(StopReason::ContentFilter));
        let config = builder(&model, &[]).output_mode(mode).build().unwrap();
        let r = run_agent(&config, "ticket").await;
        assert_eq!(
            r.outcome.unwrap_err(),
            AgentError::Refused {
                stop_reason: StopReason::ContentFilter,
                message: "the provider gave no text".into(),
                reason: None,
            },
            "{mode}"
        );
        assert_eq!(model.request_count(), 1);
    }
}

#[tokio::test]
async fn c27_a_refused_turn_with_calls_runs_none_and_answers_them() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let call = model.call("lookup", order("A1"));
    let model = model.respond(
        LlmResponse::tool_calls(vec![call])
            .with_text("No.")
            .with_stop_reason(StopReason::Refusal),
    );
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("refused"));
    assert_eq!(lookup.runs(), 0);
    assert_well_formed(&r.transcript);
    assert!(matches!(
        r.transcript.last(),
        Some(agent_core::llm::Message::Tool { .. })
    ));
}

#[tokio::test]
async fn a_full_context_window_ends_the_run() {
    let model = ScriptedModel::new().respond(
        LlmResponse::text("")
            .with_stop_reason(StopReason::ContextWindowExceeded)
            .with_usage(TokenUsage::new(199_000, 0)),
    );
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(
        err,
        AgentError::ContextWindowExceeded {
            input_tokens: 199_000
        }
    );
    assert_eq!(err.category(), "context_window_exceeded");
    assert_eq!(err.ending(), Ending::Exhausted);
    assert_eq!(model.request_count(), 1);
}

// ---- C28: output cut by max_tokens ---------------------------------------------------

/// `write_note(text?)`: every parameter optional, so `{}` validates.
#[derive(Clone, Default)]
struct WriteNote {
    runs: Arc<Mutex<u32>>,
}

impl Tool for WriteNote {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "write_note",
            "Write a note on the ticket.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        )
    }

    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        *self.runs.lock().unwrap() += 1;
        Box::pin(async { Ok("noted".to_owned()) })
    }
}

#[tokio::test]
async fn c28_a_call_cut_by_max_tokens_is_never_run_and_is_answered_with_the_cap() {
    let note = WriteNote::default();
    let model = ScriptedModel::new();
    let cut = model.call("write_note", json!({}));
    let model = model
        .respond(LlmResponse::tool_calls(vec![cut]).with_stop_reason(StopReason::MaxTokens))
        .submit(valid());
    let config = builder(&model, &[])
        .tool(note.clone())
        .max_tokens(256)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(*note.runs.lock().unwrap(), 0, "never executed");
    assert_eq!(r.usage.tool_calls, 0);
    let results = last_results(&model.requests()[1]);
    assert!(results[0].is_error);
    assert_eq!(
        results[0].content,
        "write_note was not run: the output hit max_tokens (256 tokens) while this call was \
         being written, so its arguments are truncated; send it again with shorter \
         arguments. Call it again with a complete JSON object as arguments."
    );
}

#[tokio::test]
async fn c28_a_run_that_ends_on_cut_submissions_names_max_tokens_and_its_value() {
    let cut = || {
        LlmResponse::tool_calls(vec![ToolCall::new(
            "c",
            "submit_output",
            json!({"severity": 2}),
        )])
        .with_stop_reason(StopReason::MaxTokens)
    };
    let model = ScriptedModel::new()
        .respond(cut())
        .respond(cut())
        .respond(cut());
    let config = builder(&model, &[]).max_tokens(128).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let Err(AgentError::SchemaValidation { attempts }) = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(attempts.len(), 3);
    for a in attempts {
        assert_eq!(
            a.message,
            "/: the output hit max_tokens (128 tokens) while this call was being written, so \
             its arguments are truncated; send it again with shorter arguments"
        );
        assert!(!a.message.contains("required property"), "{}", a.message);
    }
}

#[tokio::test]
async fn c28_an_empty_turn_that_hit_max_tokens_says_so() {
    // A reasoning model spent the whole cap thinking: no text, no call.
    let cut = || {
        let mut response = LlmResponse::text("").with_stop_reason(StopReason::MaxTokens);
        response.reasoning = "Let me think step by step about this ticket...".into();
        response
    };
    let model = ScriptedModel::new().respond(cut()).submit(valid());
    let config = builder(&model, &[]).max_tokens(64).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    let nudge = model.requests()[1].messages.last().cloned().unwrap();
    assert_eq!(
        nudge,
        agent_core::llm::Message::user(
            "Your reply was cut off at the output limit (max_tokens, 64 tokens) before it held \
             an answer. To finish, call the submit_output tool once, alone in its turn, with \
             arguments that match its schema."
        )
    );
    // When the run ends for it, the error names the cap.
    let model = ScriptedModel::new()
        .respond(cut())
        .respond(cut())
        .respond(cut());
    let config = builder(&model, &[]).max_tokens(64).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "schema_not_called");
    assert_eq!(
        err.attempts()[0].message,
        "an empty turn: no text and no tool call (the output hit max_tokens, 64 tokens)"
    );
}

// ---- C29: whole-number floats for integers -------------------------------------------

/// `add_items(count: u32)`, deserialized by serde as a `#[tool]` fn would.
#[derive(Clone, Default)]
struct AddItems {
    seen: Arc<Mutex<Vec<u32>>>,
}

impl Tool for AddItems {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "add_items",
            "Add items to the order.",
            json!({"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}},
                   "required": ["count"], "additionalProperties": false}),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        #[derive(serde::Deserialize)]
        struct Args {
            count: u32,
        }
        let parsed: Result<Args, _> = serde_json::from_value(arguments);
        let seen = Arc::clone(&self.seen);
        Box::pin(async move {
            let args = parsed.map_err(|e| agent_core::ToolError::new(e.to_string()))?;
            seen.lock().unwrap().push(args.count);
            Ok(format!("added {}", args.count))
        })
    }
}

#[tokio::test]
async fn c29_whole_number_floats_satisfy_integer_parameters_and_fields() {
    let add = AddItems::default();
    let model = ScriptedModel::new()
        .tool_call("add_items", json!({"count": 3.0}))
        .submit(json!({"severity": 2.0, "summary": "parcel late"}));
    let config = builder(&model, &[]).tool(add.clone()).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        r.outcome,
        Ok(Triage {
            severity: 2,
            summary: "parcel late".into()
        })
    );
    assert_eq!(r.usage.llm_calls, 2);
    assert_eq!(*add.seen.lock().unwrap(), [3]);
    assert_eq!(last_results(&model.requests()[1])[0].content, "added 3");
}

#[tokio::test]
async fn c29_a_non_whole_number_stays_a_validation_error_with_its_path() {
    let add = AddItems::default();
    let model = ScriptedModel::new()
        .tool_call("add_items", json!({"count": 3.5}))
        .submit(json!({"severity": 2.5, "summary": "parcel late"}))
        .submit(valid());
    let config = builder(&model, &[]).tool(add.clone()).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert!(add.seen.lock().unwrap().is_empty());
    let tool_result = &last_results(&model.requests()[1])[0];
    assert_eq!(
        tool_result.content,
        "add_items was not run: invalid arguments: /count: 3.5 is not of type \"integer\""
    );
    let submit = &last_results(&model.requests()[2])[0];
    assert!(
        submit
            .content
            .contains("/severity: 2.5 is not of type \"integer\""),
        "{}",
        submit.content
    );
}

#[tokio::test]
async fn c29_native_answers_read_whole_floats_as_integers_too() {
    let model = ScriptedModel::new().text(r#"{"severity": 4.0, "summary": "legal threat"}"#);
    let config = builder(&model, &[])
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.outcome.unwrap().severity, 4);
}

// ---- C30: double-encoded arguments ---------------------------------------------------

#[tokio::test]
async fn c30_double_encoded_arguments_are_unwrapped_once() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let raw = json!("\"{\\\"order_id\\\":\\\"A-1\\\"}\"");
    let model = ScriptedModel::new()
        .tool_calls(vec![ToolCall::from_wire("c1", "lookup", Some(&raw))])
        .submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(lookup.runs(), 1);
    assert_eq!(
        last_results(&model.requests()[1])[0].content,
        r#"{"order_id":"A-1","status":"shipped"}"#
    );
    // Unwrapped once only: a triple-encoded string stays an error.
    let triple = json!(serde_json::to_string(&raw).unwrap());
    let call = ToolCall::from_wire("c2", "lookup", Some(&triple));
    assert_eq!(call.arguments, json!({}));
    assert!(call.arguments_error.is_some());
}

// ---- C32: budgets bind without usage ---------------------------------------------------

#[tokio::test]
async fn c32_a_token_cap_binds_when_the_server_reports_no_usage() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let mut model = ScriptedModel::new();
    for n in 0..20 {
        model = model.tool_call("lookup", order(&format!("A{n}")));
    }
    let config = builder(&model, &[&lookup])
        .max_total_tokens(1000)
        .max_tool_calls(50)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "budget_exhausted");
    // The estimate binds after 6 of the 20 turns (843 tokens used; the seventh would
    // pass 1,000 by the projection of the last round trip).
    assert_eq!(r.usage.llm_calls, 6);
    assert_eq!(r.usage.total_tokens(), 843);
    assert!(r.usage.is_estimated());
    assert_eq!(r.usage.estimated_llm_calls, r.usage.llm_calls);
    assert!(r.usage.total_tokens() <= 1000, "{}", r.usage.total_tokens());
    let agent_core::AgentError::BudgetExhausted {
        budget: agent_core::error::Budget::TotalTokens { limit, used },
    } = err
    else {
        panic!("{err}")
    };
    assert_eq!((limit, used), (1000, r.usage.total_tokens()));
}

#[tokio::test]
async fn c32_the_estimate_follows_the_documented_rule() {
    // One round trip without usage: input = request bytes / 4, output = reply bytes / 4.
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let request = &model.requests()[0];
    assert_eq!(r.usage.input_tokens, request.estimated_input_tokens());
    let reply_bytes = "submit_output".len() + valid().to_string().len();
    assert_eq!(r.usage.output_tokens, (reply_bytes as u64).div_ceil(4));
    assert_eq!(r.usage.estimated_llm_calls, 1);
    // A reported usage is taken as it is.
    let model = ScriptedModel::new().respond(
        LlmResponse::tool_calls(vec![ToolCall::new("c", "submit_output", valid())])
            .with_usage(TokenUsage::new(10, 5)),
    );
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (10, 5));
    assert!(!r.usage.is_estimated());
}

#[tokio::test]
async fn c32_a_cost_cap_binds_without_usage_too() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let mut model = ScriptedModel::new();
    for n in 0..20 {
        model = model.tool_call("lookup", order(&format!("A{n}")));
    }
    let config = builder(&model, &[&lookup])
        .model("dispatch-like")
        .price(
            "dispatch-like",
            agent_core::pricing::ModelPrice::new(1000.0, 1000.0),
        )
        .max_cost_usd(0.5)
        .max_tool_calls(50)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    // Without usage and without the estimate, the cap could never bind: all 20 turns
    // would run. From the estimate it stops after the fourth (spent + the last call's
    // cost would pass $0.50; the calls grow, so the spend may end a little past it).
    assert_eq!(r.category(), Some("budget_exhausted"));
    assert_eq!(r.usage.llm_calls, 4);
    assert_eq!(r.usage.estimated_llm_calls, 4);
    let spent = r.usage.cost_usd.unwrap();
    assert!((spent - 0.503).abs() < 1e-9, "{spent}");
}

#[tokio::test]
async fn attempt_kinds_are_unchanged_by_these_cases() {
    // The three malformed-turn kinds stay the only ones: a cut call is a validation
    // problem, an empty cut turn a missing answer.
    assert_eq!(
        AttemptKind::SchemaValidation.category(),
        "schema_validation_failed"
    );
    assert_eq!(AttemptKind::SchemaNotCalled.category(), "schema_not_called");
}
