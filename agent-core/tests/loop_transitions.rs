//! One test per row of the transition tables in `docs/loop.md` and per counting rule, plus
//! the cases C1-C6 and C8-C14 of `docs/cases.md`. Each asserts the category,
//! `usage.llm_calls`, `usage.tool_calls` and the recorded requests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::time::Duration;

use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentError, Ending,
    error::AttemptKind,
    llm::{LlmError, LlmResponse, Message, StopReason, ToolCall, ToolChoice},
    run_agent,
};
use common::*;
use serde_json::json;

// ---- the model returns ... -------------------------------------------------------

#[tokio::test]
async fn row_submit_alone_valid_stops_with_the_value() {
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        r.outcome.as_ref().unwrap(),
        &Triage {
            severity: 2,
            summary: "parcel late".into()
        }
    );
    assert_eq!(r.ending(), Ending::Answered);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (1, 0));
    assert_eq!(model.request_count(), 1);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&r.output).unwrap(),
        valid()
    );
    assert_eq!(r.trace_id.len(), 32);
}

#[tokio::test]
async fn row_submit_alone_invalid_feeds_errors_back_and_loops() {
    let model = ScriptedModel::new().submit(invalid()).submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 0));
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2);
    let fed_back = last_results(&reqs[1]);
    assert_eq!(fed_back.len(), 1);
    assert!(fed_back[0].is_error);
    // C10: the feedback names the field path and the bound.
    assert!(
        fed_back[0]
            .content
            .contains("/severity: 9 is greater than the maximum of 4"),
        "{}",
        fed_back[0].content
    );
    assert_requests_well_formed(&reqs);
    // The transcript in order: the input, the rejected call, its error result, the
    // accepted call and its result (each call in its assistant message, the result
    // after it).
    let named = |role: &str, pairs: Vec<(&String, &String)>| {
        let pairs: Vec<String> = pairs.iter().map(|(n, id)| format!("{n}#{id}")).collect();
        format!("{role} {}", pairs.join(","))
    };
    let shape: Vec<String> = r
        .transcript
        .iter()
        .map(|m| match m {
            Message::User { .. } => "user".to_owned(),
            Message::Assistant { tool_calls, .. } => named(
                "assistant",
                tool_calls.iter().map(|c| (&c.name, &c.id)).collect(),
            ),
            Message::Tool { results } => named(
                "tool",
                results.iter().map(|r| (&r.name, &r.call_id)).collect(),
            ),
            other => format!("{other:?}"),
        })
        .collect();
    let first = &reqs[1].messages[1];
    let Message::Assistant { tool_calls, .. } = first else {
        panic!("the second request's second message is the first call: {first:?}");
    };
    let id1 = &tool_calls[0].id;
    let Some(Message::Assistant { tool_calls, .. }) = r.transcript.get(3) else {
        panic!(
            "the fourth message is the accepted call: {:?}",
            r.transcript
        );
    };
    let id2 = &tool_calls[0].id;
    assert_eq!(
        shape,
        [
            "user".to_owned(),
            format!("assistant submit_output#{id1}"),
            format!("tool submit_output#{id1}"),
            format!("assistant submit_output#{id2}"),
            format!("tool submit_output#{id2}"),
        ]
    );
    assert_eq!(reqs[1].messages, r.transcript[..3]);
}

#[tokio::test]
async fn row_submit_invalid_until_parse_retries_run_out_is_schema_validation() {
    let model = ScriptedModel::new()
        .submit(invalid())
        .submit(json!({"severity": 0, "summary": "x"}))
        .submit(json!({"summary": "x"}));
    let config = builder(&model, &[]).max_parse_retries(2).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "schema_validation_failed");
    assert_eq!(err.ending(), Ending::Exhausted);
    assert_eq!(err.attempts().len(), 3);
    assert!(
        err.attempts()
            .iter()
            .all(|a| a.kind == AttemptKind::SchemaValidation)
    );
    assert_eq!(err.attempts()[2].llm_call, 3);
    assert!(
        err.attempts()[2].message.contains("severity"),
        "{}",
        err.attempts()[2].message
    );
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 0));
    assert_eq!(model.request_count(), 3);
}

#[tokio::test]
async fn row_submit_with_another_call_executes_none_and_answers_every_id() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("lookup", order("A1")),
        model.call("submit_output", valid()),
    ];
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(lookup.runs(), 0, "nothing runs from an ambiguous turn");
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 0));
    let reqs = model.requests();
    let results = last_results(&reqs[1]);
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|x| x.is_error));
    assert!(
        results[0].content.starts_with("Not executed"),
        "{}",
        results[0].content
    );
    assert!(
        results[1].content.starts_with("Not accepted"),
        "{}",
        results[1].content
    );
    assert_requests_well_formed(&reqs);
}

#[tokio::test]
async fn row_ambiguous_until_parse_retries_run_out_is_ambiguous_turn() {
    let model = ScriptedModel::new();
    let twice = || {
        vec![
            model.call("submit_output", valid()),
            model.call("submit_output", valid()),
        ]
    };
    let (a, b) = (twice(), twice());
    let model = model.tool_calls(a).tool_calls(b);
    let config = builder(&model, &[]).max_parse_retries(1).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "ambiguous_tool_turn");
    assert_eq!(err.attempts().len(), 2);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 0));
    assert_requests_well_formed(&model.requests());
    assert_well_formed(&r.transcript);
}

#[tokio::test]
async fn row_only_other_tool_calls_run_and_feed_results_back() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(lookup.runs(), 1);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 1));
    let reqs = model.requests();
    let results = last_results(&reqs[1]);
    assert_eq!(
        results[0].content,
        r#"{"order_id":"A1","status":"shipped"}"#
    );
    assert!(!results[0].is_error);
    assert_eq!(reqs[1].tool_choice, ToolChoice::Auto);
    assert_requests_well_formed(&reqs);
}

#[tokio::test]
async fn row_plain_text_with_schema_nudges_and_forces_a_tool_call() {
    let model = ScriptedModel::new()
        .text("I think it's severity 2.")
        .submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 0));
    let reqs = model.requests();
    assert_eq!(reqs[0].tool_choice, ToolChoice::Auto);
    assert_eq!(reqs[1].tool_choice, ToolChoice::Required);
    match reqs[1].messages.last().unwrap() {
        Message::User { content, .. } => assert!(content.contains("submit_output"), "{content}"),
        other => panic!("expected the nudge, got {other:?}"),
    }
}

#[tokio::test]
async fn row_plain_text_until_parse_retries_run_out_is_schema_not_called() {
    let model = ScriptedModel::new().text("a").text("b").text("c");
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert!(matches!(err, AgentError::SchemaNotCalled { .. }));
    assert_eq!(err.category(), "schema_not_called");
    assert_eq!(err.attempts().len(), 3);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 0));
    assert_eq!(
        r.output, "c",
        "the last assistant text is the output of a failed run"
    );
}

#[tokio::test]
async fn row_plain_text_in_compat_mode_stops_with_the_text() {
    let model = ScriptedModel::new().text("Paris");
    let config = AgentConfig::<String>::builder("compat")
        .llm(model.clone())
        .build()
        .unwrap();
    let r = run_agent(&config, "Capital of France?").await;
    assert_eq!(r.outcome.as_deref(), Ok("Paris"));
    assert_eq!(r.output, "Paris");
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (1, 0));
    let reqs = model.requests();
    assert!(
        reqs[0].tools.is_empty(),
        "compat mode offers no submit_output"
    );
}

#[tokio::test]
async fn compat_mode_runs_tools_then_ends_on_text() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .text("It shipped.");
    let config = AgentConfig::<String>::builder("compat")
        .llm(model.clone())
        .tool(lookup.clone())
        .build()
        .unwrap();
    let r = run_agent(&config, "Where is A1?").await;
    assert_eq!(r.outcome.as_deref(), Ok("It shipped."));
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 1));
    assert_eq!(model.requests()[0].tools.len(), 1);
}

// ---- the provider call ... ---------------------------------------------------------

#[tokio::test]
async fn row_transient_failure_retries_the_identical_request() {
    let model = ScriptedModel::new()
        .fail(LlmError::transient("overloaded").with_status(529))
        .submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 0));
    let reqs = model.requests();
    assert_eq!(reqs[0], reqs[1], "the retry re-sends the identical request");
    // user, assistant (submit), tool (the submission's acknowledgement): nothing from
    // the failed attempt.
    assert_eq!(
        r.transcript.len(),
        3,
        "a provider failure does not change the transcript"
    );
}

#[tokio::test]
async fn row_transient_failures_until_retries_run_out_is_max_llm_retries() {
    let model = ScriptedModel::new()
        .fail(LlmError::transient("a").with_status(500))
        .fail(LlmError::transient("b").with_status(502))
        .fail(LlmError::transient("c").with_status(503))
        .submit(valid());
    let config = builder(&model, &[]).max_llm_retries(3).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "max_llm_retries");
    assert_eq!(err.ending(), Ending::Failed);
    match &err {
        AgentError::MaxLlmRetries { failures } => {
            let statuses: Vec<_> = failures.iter().map(|f| f.status).collect();
            assert_eq!(statuses, [Some(500), Some(502), Some(503)]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 0));
    assert_eq!(model.request_count(), 3);
}

#[tokio::test]
async fn row_permanent_failure_stops_at_once() {
    let model = ScriptedModel::new()
        .fail(LlmError::permanent("invalid x-api-key").with_status(401))
        .submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "llm_permanent_error");
    assert_eq!(err.ending(), Ending::Failed);
    assert!(err.to_string().contains("HTTP 401"), "{err}");
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (1, 0));
    assert_eq!(model.request_count(), 1);
}

#[tokio::test]
async fn a_panicking_client_is_an_internal_error_not_a_provider_failure() {
    // A panic in a user's LlmClient is a bug in that code, not something the provider
    // said: `internal_error`, after exactly one attempt (no retry).
    let model = ScriptedModel::from_steps([agent_core::testing::ScriptStep::Panic("boom".into())]);
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "internal_error");
    assert_eq!(err.ending(), Ending::Failed);
    assert_eq!(
        err.to_string(),
        "internal error: the model client panicked: boom"
    );
    assert_eq!(r.usage.llm_calls, 1);
    assert_eq!(model.request_count(), 1);
}

// ---- the outer cap -----------------------------------------------------------------

#[tokio::test]
async fn row_max_llm_calls_is_checked_before_each_call() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .tool_call("lookup", order("A2"))
        .tool_call("lookup", order("A3"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .max_llm_calls(3)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "max_llm_calls");
    assert_eq!(err.ending(), Ending::Exhausted);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 3));
    assert_eq!(
        model.request_count(),
        3,
        "no fourth call to discover the run is over"
    );
}

// C12: max_llm_calls = 1 and the first turn is a tool call: one request, then the error.
#[tokio::test]
async fn c12_max_llm_calls_one_with_a_tool_call_makes_exactly_one_request() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .max_llm_calls(1)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.outcome.unwrap_err().category(), "max_llm_calls");
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (1, 1));
    assert_eq!(model.request_count(), 1);
}

// ---- counting rules ----------------------------------------------------------------

#[tokio::test]
async fn rule_max_llm_calls_counts_failed_round_trips() {
    let model = ScriptedModel::new()
        .fail(LlmError::transient("a"))
        .fail(LlmError::transient("b"))
        .submit(valid());
    let config = builder(&model, &[])
        .max_llm_calls(2)
        .max_llm_retries(5)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.outcome.unwrap_err().category(), "max_llm_calls");
    assert_eq!(r.usage.llm_calls, 2);
    assert_eq!(model.request_count(), 2);
}

// C13: plain text, then bad arguments, then an ambiguous turn, max_parse_retries = 2.
#[tokio::test]
async fn c13_parse_retries_are_one_counter_and_the_error_lists_every_attempt() {
    let model = ScriptedModel::new().text("thinking...").submit(invalid());
    let ambiguous = vec![
        model.call("submit_output", valid()),
        model.call("lookup", order("A")),
    ];
    let model = model.tool_calls(ambiguous).submit(valid());
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = builder(&model, &[&lookup])
        .max_parse_retries(2)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(
        err.category(),
        "ambiguous_tool_turn",
        "the kind that tipped it over"
    );
    let kinds: Vec<AttemptKind> = err.attempts().iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            AttemptKind::SchemaNotCalled,
            AttemptKind::SchemaValidation,
            AttemptKind::AmbiguousTurn
        ]
    );
    let text = err.to_string();
    assert!(text.contains("3 failed attempts"), "{text}");
    assert!(
        text.contains("schema_not_called") && text.contains("schema_validation_failed"),
        "{text}"
    );
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 0));
    assert_eq!(lookup.runs(), 0);
    assert_eq!(model.remaining(), 1, "the valid submit was never requested");
}

// C14: two transient failures, a success, two more, with max_llm_retries = 3: goes on.
#[tokio::test]
async fn c14_a_success_resets_the_consecutive_failure_count() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .fail(LlmError::transient("1"))
        .fail(LlmError::transient("2"))
        .tool_call("lookup", order("A1"))
        .fail(LlmError::transient("3"))
        .fail(LlmError::transient("4"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .max_llm_retries(3)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (6, 1));
    assert_eq!(model.request_count(), 6);
}

#[tokio::test]
async fn rule_max_tool_calls_answers_calls_past_the_limit_without_running_them() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let three = vec![
        model.call("lookup", order("A1")),
        model.call("lookup", order("A2")),
        model.call("lookup", order("A3")),
    ];
    let model = model
        .tool_calls(three)
        .tool_call("lookup", order("A4"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .max_tool_calls(2)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(
        r.is_ok(),
        "the tool limit never ends a run by itself: {:?}",
        r.outcome
    );
    assert_eq!(lookup.runs(), 2);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 2));
    let reqs = model.requests();
    let first = last_results(&reqs[1]);
    assert_eq!(
        first.iter().map(|x| x.is_error).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert!(
        first[2].content.contains("tool call limit (2) is reached"),
        "{}",
        first[2].content
    );
    assert!(first[2].content.contains("submit_output"));
    let second = last_results(&reqs[2]);
    assert!(second[0].is_error && second[0].content.contains("limit"));
    assert_requests_well_formed(&reqs);
}

#[tokio::test]
async fn rule_submit_output_never_counts_as_a_tool_execution() {
    let model = ScriptedModel::new().submit(invalid()).submit(valid());
    let config = builder(&model, &[]).max_tool_calls(0).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(r.usage.tool_calls, 0);
}

// ---- tools -------------------------------------------------------------------------

#[tokio::test]
async fn invalid_arguments_never_reach_the_tool() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", json!({"order_id": ""}))
        .tool_call("lookup", json!({"id": "A1"}))
        .submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(lookup.runs(), 0);
    assert_eq!(r.usage.tool_calls, 0, "a rejected call is not an execution");
    let reqs = model.requests();
    let first = &last_results(&reqs[1])[0];
    assert!(first.is_error);
    assert!(
        first.content.contains("invalid arguments: /order_id:"),
        "{}",
        first.content
    );
    let second = &last_results(&reqs[2])[0];
    assert!(second.content.contains("order_id"), "{}", second.content);
}

#[tokio::test]
async fn unknown_tool_is_an_error_result_listing_the_tools() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("read_file", json!({"path": "/etc"}))
        .submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    let res = &last_results(&model.requests()[1])[0];
    assert!(res.is_error);
    assert_eq!(
        res.content,
        "Unknown tool \"read_file\". The available tools are: lookup, submit_output."
    );
}

#[tokio::test]
async fn tool_error_panic_and_timeout_come_back_as_error_results() {
    let failing = TestTool::new("failing", Behaviour::Fail);
    let panicking = TestTool::new("panicking", Behaviour::Panic);
    let slow = TestTool::new("slow", Behaviour::Sleep(Duration::from_secs(3600)));
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("failing", order("F")),
        model.call("panicking", order("P")),
        model.call("slow", order("S")),
    ];
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[&failing, &panicking, &slow])
        .tool_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "tool failures never end the run");
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 3));
    let results = last_results(&model.requests()[1]);
    assert!(results.iter().all(|x| x.is_error));
    assert_eq!(results[0].content, "failing failed: order F not found");
    assert_eq!(
        results[1].content,
        "panicking failed: the tool panicked: lookup exploded on P"
    );
    assert_eq!(results[2].content, "slow failed: it timed out after 50 ms");
}

#[tokio::test(start_paused = true)]
async fn the_default_tool_timeout_is_sixty_seconds() {
    let slow = TestTool::new("slow", Behaviour::Sleep(Duration::from_secs(61)));
    let model = ScriptedModel::new()
        .tool_call("slow", order("S"))
        .submit(valid());
    let config = builder(&model, &[&slow]).build().unwrap();
    let started = tokio::time::Instant::now();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(started.elapsed().as_secs(), 60);
    let res = &last_results(&model.requests()[1])[0];
    assert_eq!(res.content, "slow failed: it timed out after 60000 ms");
}

#[tokio::test(start_paused = true)]
async fn calls_of_a_turn_run_concurrently_and_results_keep_emission_order() {
    let slow = TestTool::new("slow", Behaviour::Sleep(Duration::from_secs(2)));
    let quick = TestTool::new("quick", Behaviour::Sleep(Duration::from_secs(1)));
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("slow", order("S")),
        model.call("quick", order("Q")),
    ];
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[&slow, &quick]).build().unwrap();
    let started = tokio::time::Instant::now();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(started.elapsed().as_secs(), 2, "concurrent: max, not sum");
    let names: Vec<String> = last_results(&model.requests()[1])
        .into_iter()
        .map(|x| x.name)
        .collect();
    assert_eq!(names, ["slow", "quick"]);
}

#[tokio::test(start_paused = true)]
async fn tool_concurrency_bounds_the_calls_in_flight() {
    let slow = TestTool::new("slow", Behaviour::Sleep(Duration::from_secs(1)));
    let model = ScriptedModel::new();
    let calls = (0..4)
        .map(|i| model.call("slow", order(&format!("S{i}"))))
        .collect();
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[&slow])
        .tool_concurrency(2)
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(
        started.elapsed().as_secs(),
        2,
        "4 calls of 1 s, 2 at a time"
    );
    assert_eq!(r.usage.tool_calls, 4);
}

// ---- cases -------------------------------------------------------------------------

// C1: submit_output twice in one turn, the first invalid, the second valid.
#[tokio::test]
async fn c1_two_submits_one_invalid_is_ambiguous_and_both_ids_answered() {
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("submit_output", invalid()),
        model.call("submit_output", valid()),
    ];
    let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(
        r.usage.llm_calls, 2,
        "neither submit of the first turn was accepted"
    );
    let reqs = model.requests();
    let answered: Vec<String> = last_results(&reqs[1])
        .into_iter()
        .map(|x| x.call_id)
        .collect();
    assert_eq!(answered, ids);
    assert_requests_well_formed(&reqs);
}

// C2: a list-like output submitted once per item (three calls in one turn).
#[tokio::test]
async fn c2_one_submit_per_item_is_ambiguous_with_feedback_asking_for_one_call() {
    let model = ScriptedModel::new();
    let calls = (0..3)
        .map(|_| model.call("submit_output", valid()))
        .collect();
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    let results = last_results(&model.requests()[1]);
    assert_eq!(results.len(), 3);
    for res in &results {
        assert!(res.is_error);
        assert!(res.content.contains("made exactly once"), "{}", res.content);
        assert!(
            res.content.contains("this turn had 3 calls"),
            "{}",
            res.content
        );
    }
}

// C3: submit_output (invalid) plus read_file in one turn.
#[tokio::test]
async fn c3_invalid_submit_with_read_file_is_ambiguous_and_read_file_not_run() {
    let read_file = TestTool::new("read_file", Behaviour::Echo);
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("submit_output", invalid()),
        model.call("read_file", order("x")),
    ];
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[&read_file]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "not a silent end, not a skipped retry");
    assert_eq!(read_file.runs(), 0);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 0));
    let results = last_results(&model.requests()[1]);
    assert_eq!(results[1].name, "read_file");
    assert!(results[1].is_error);
    assert_requests_well_formed(&model.requests());
}

// C4: text content plus one valid submit_output in the same message.
#[tokio::test]
async fn c4_text_plus_valid_submit_succeeds() {
    let model = ScriptedModel::new();
    let call = model.call("submit_output", valid());
    let model = model.respond(LlmResponse::tool_calls(vec![call]).with_text("Here is my triage."));
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.outcome.unwrap().severity, 2);
    assert_eq!(r.usage.llm_calls, 1);
}

// C5: classification by content, not by the stop reason label.
#[tokio::test]
async fn c5_classification_is_by_content_not_finish_reason() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let call = model.call("lookup", order("A1"));
    let model = model
        .respond(LlmResponse::tool_calls(vec![call]).with_stop_reason(StopReason::EndTurn))
        .respond(
            LlmResponse::text(r#"{"severity": 2, "summary": "x"}"#)
                .with_stop_reason(StopReason::ToolUse),
        )
        .submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(lookup.runs(), 1, "'stop' with tool calls: the calls ran");
    let reqs = model.requests();
    assert_eq!(
        reqs[2].tool_choice,
        ToolChoice::Required,
        "'tool_calls' with no calls: a plain-text turn"
    );
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 1));
}

// C9: a tool call id is missing: a unique id is synthesised and used for the result.
#[tokio::test]
async fn c9_missing_ids_are_synthesised_unique_and_used() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let calls = vec![
        ToolCall::new("", "lookup", order("A1")),
        ToolCall::new("", "lookup", order("A2")),
    ];
    let model = ScriptedModel::new().tool_calls(calls).submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    let reqs = model.requests();
    let Message::Assistant { tool_calls, .. } = &reqs[1].messages[1] else {
        panic!("expected the assistant turn")
    };
    assert!(tool_calls.iter().all(|c| !c.id.is_empty()));
    assert_ne!(tool_calls[0].id, tool_calls[1].id);
    let answered: Vec<String> = last_results(&reqs[1])
        .into_iter()
        .map(|x| x.call_id)
        .collect();
    assert_eq!(
        answered,
        [tool_calls[0].id.clone(), tool_calls[1].id.clone()]
    );
    assert_requests_well_formed(&reqs);
}

// C8 (runner side): truncated submit arguments are a validation retry that says so, and
// the broken call is re-sent with valid JSON arguments.
#[tokio::test]
async fn c8_truncated_submit_is_a_validation_retry_and_resent_as_valid_json() {
    let model = ScriptedModel::new();
    let broken = ToolCall::from_wire(
        "c1",
        "submit_output",
        Some(&json!("{\"severity\": 2, \"summ")),
    );
    let model = model
        .respond(LlmResponse::tool_calls(vec![broken]).with_stop_reason(StopReason::MaxTokens))
        .submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    let reqs = model.requests();
    let res = &last_results(&reqs[1])[0];
    assert!(res.content.contains("truncated"), "{}", res.content);
    let Message::Assistant { tool_calls, .. } = &reqs[1].messages[1] else {
        panic!()
    };
    assert_eq!(tool_calls[0].arguments, json!({}));
}

// C11: three parallel calls to the same tool fail in one turn.
#[tokio::test]
async fn c11_three_failing_parallel_calls_count_three_and_the_run_goes_on() {
    let lookup = TestTool::new("lookup", Behaviour::Fail);
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("lookup", order("A1")),
        model.call("lookup", order("A2")),
        model.call("lookup", order("A3")),
    ];
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 3));
    let results = last_results(&model.requests()[1]);
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|x| x.is_error));
    assert_requests_well_formed(&model.requests());
}

#[tokio::test]
async fn transcript_holds_every_message_of_the_run() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .system_prompt("You triage.")
        .build()
        .unwrap();
    let r = run_agent(&config, "my parcel is late").await;
    assert!(r.is_ok());
    assert_eq!(r.transcript.len(), 5);
    assert_eq!(r.transcript[0], Message::user("my parcel is late"));
    assert!(matches!(r.transcript[2], Message::Tool { .. }));
    // The accepted submission is answered too: the transcript can be re-sent as it is.
    let Message::Tool { results } = &r.transcript[4] else {
        panic!()
    };
    assert!(!results[0].is_error && results[0].content.starts_with("Accepted"));
    assert_well_formed(&r.transcript);
    assert!(matches!(r.transcript.last(), Some(Message::Tool { .. })));
    assert_eq!(model.requests()[0].system.as_deref(), Some("You triage."));
}

// Totality outside a Tokio runtime: a typed error that says why, before any request.
#[test]
fn without_a_tokio_runtime_the_run_ends_typed_before_any_request() {
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = futures::executor::block_on(run_agent(&config, "ticket"));
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "internal_error");
    assert!(err.to_string().contains("needs a Tokio runtime"), "{err}");
    assert_eq!(model.request_count(), 0);
}

#[test]
fn a_runtime_without_timers_ends_typed_too() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let slow = TestTool::new("slow", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("slow", order("A"))
        .submit(valid());
    let config = builder(&model, &[&slow]).build().unwrap();
    let r = runtime.block_on(run_agent(&config, "ticket"));
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "internal_error");
    assert!(err.to_string().contains("built without them"), "{err}");
    assert_eq!(model.request_count(), 0, "found out before any request");
}

// C11 with identical arguments, on the default guards: parallel duplicates in one turn
// are one attempt for the repeat guard, and all three run.
#[tokio::test]
async fn c11_identical_parallel_failing_calls_all_run_on_default_guards() {
    let lookup = TestTool::new("lookup", Behaviour::Fail);
    let model = ScriptedModel::new();
    let calls = (0..3).map(|_| model.call("lookup", order("A1"))).collect();
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(
        (r.usage.llm_calls, r.usage.tool_calls, lookup.runs()),
        (2, 3, 3)
    );
    assert_requests_well_formed(&model.requests());
}

/// A tool with no parameters.
struct Ping(std::sync::Arc<std::sync::atomic::AtomicU32>);

impl agent_core::Tool for Ping {
    fn definition(&self) -> agent_core::tool::ToolDefinition {
        agent_core::tool::ToolDefinition::new(
            "ping",
            "Ping.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }
    fn call<'a>(
        &'a self,
        arguments: serde_json::Value,
        _c: agent_core::ToolContext,
    ) -> agent_core::tool::ToolFuture<'a> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move { Ok(format!("pong {arguments}")) })
    }
}

// C6 through the loop, on the default config: "", null, "{}" and {} are the same empty
// object, and the tool runs for each.
#[tokio::test]
async fn c6_every_empty_argument_spelling_runs_a_no_parameter_tool() {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let spellings = [json!(""), json!(null), json!("{}"), json!({})];
    let calls = spellings
        .iter()
        .enumerate()
        .map(|(i, raw)| ToolCall::from_wire(format!("p{i}"), "ping", Some(raw)))
        .collect();
    let model = ScriptedModel::new().tool_calls(calls).submit(valid());
    let config = builder(&model, &[])
        .tool(Ping(runs.clone()))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 4);
    let results = last_results(&model.requests()[1]);
    assert!(
        results
            .iter()
            .all(|x| !x.is_error && x.content == "pong {}"),
        "{results:?}"
    );
}

fn deeply_nested(depth: usize) -> serde_json::Value {
    let mut v = json!(1);
    for _ in 0..depth {
        let mut map = serde_json::Map::new();
        map.insert("a".to_owned(), v);
        v = serde_json::Value::Object(map);
    }
    v
}

// Whatever a hand-written client returns, the next request is one any provider accepts.
#[tokio::test]
async fn hostile_calls_are_made_safe_to_answer_and_resend() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    let turn1 = vec![
        ToolCall::new("dup", "lookup", order("A1")),
        ToolCall::new("x", "functions.lookup", order("A2")),
        ToolCall::new("y", "lookup", json!(["not", "an", "object"])),
        ToolCall::new("z", "lookup", deeply_nested(20_000)),
    ];
    let turn2 = vec![ToolCall::new("dup", "lookup", order("A3"))];
    let model = model.tool_calls(turn1).tool_calls(turn2).submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(lookup.runs(), 2, "only the two well-formed lookups ran");
    let reqs = model.requests();
    assert_requests_well_formed(&reqs);
    let Message::Assistant { tool_calls, .. } = &reqs[2].messages[3] else {
        panic!()
    };
    assert_ne!(
        tool_calls[0].id, "dup",
        "an id repeated from an earlier turn is replaced"
    );
    let Message::Assistant { tool_calls, .. } = &reqs[1].messages[1] else {
        panic!()
    };
    assert_eq!(tool_calls[1].name, "functions_lookup");
    assert_eq!(tool_calls[2].arguments, json!({}));
    assert_eq!(tool_calls[3].arguments, json!({}));
    let results = last_results(&reqs[1]);
    assert!(
        results[1]
            .content
            .starts_with("Unknown tool \"functions_lookup\"")
    );
    assert!(
        results[2]
            .content
            .contains("must be a JSON object, got an array"),
        "{}",
        results[2].content
    );
    assert!(
        results[3].content.contains("more than 128 levels"),
        "{}",
        results[3].content
    );
}

// C1 where the correction budget is already spent: the ambiguous turn itself ends the run.
#[tokio::test]
async fn c1_two_submits_with_no_retries_left_end_as_ambiguous_tool_turn() {
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("submit_output", invalid()),
        model.call("submit_output", valid()),
    ];
    let model = model.tool_calls(calls).submit(valid());
    let config = builder(&model, &[]).max_parse_retries(0).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("ambiguous_tool_turn"));
    assert_eq!((r.usage.llm_calls, model.request_count()), (1, 1));
    assert_well_formed(&r.transcript);
}

// C8 for a tool other than submit_output: an error result, the tool not run, and the
// broken call re-sent with `{}` as its arguments.
#[tokio::test]
async fn c8_truncated_arguments_for_a_tool_are_an_error_result_and_resent_as_valid_json() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let broken = ToolCall::from_wire("c1", "lookup", Some(&json!("{\"order_id\": \"A1")));
    let model = ScriptedModel::new()
        .respond(LlmResponse::tool_calls(vec![broken]).with_stop_reason(StopReason::MaxTokens))
        .submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!((lookup.runs(), r.usage.tool_calls), (0, 0));
    let reqs = model.requests();
    let res = &last_results(&reqs[1])[0];
    assert!(
        res.is_error && res.content.contains("truncated"),
        "{}",
        res.content
    );
    let Message::Assistant { tool_calls, .. } = &reqs[1].messages[1] else {
        panic!()
    };
    assert_eq!(tool_calls[0].arguments, json!({}));
}
