//! Round-2 field reports (C27-C32, `docs/cases.md`) on the wire: each adapter's
//! responses against wiremock, through `run_agent`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::{AgentError, OutputMode, ToolRegistry, llm::StopReason, run_agent};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

fn openai_message(message: Value, finish: &str, usage: Option<Value>) -> ResponseTemplate {
    let mut body = json!({
        "id": "chatcmpl-field",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}]
    });
    if let Some(usage) = usage {
        body["usage"] = usage;
    }
    ResponseTemplate::new(200).set_body_json(body)
}

fn openai_call(name: &str, arguments: &str, finish: &str) -> ResponseTemplate {
    openai_message(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{name}"), "type": "function",
             "function": {"name": name, "arguments": arguments}}]}),
        finish,
        Some(json!({"prompt_tokens": 30, "completion_tokens": 10})),
    )
}

fn submit_reply() -> ResponseTemplate {
    openai_call(
        "submit_output",
        r#"{"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."}"#,
        "tool_calls",
    )
}

fn anthropic(content: Value, stop: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_field", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": content, "stop_reason": stop,
        "usage": {"input_tokens": 30, "output_tokens": 10}
    }))
}

async fn server(path: &str, replies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    let n = replies.len();
    for (i, reply) in replies.into_iter().enumerate() {
        mount_post(&server, path, reply, (i + 1 < n).then_some(1)).await;
    }
    server
}

fn openai_base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

// ---- C27 -----------------------------------------------------------------------------

#[tokio::test]
async fn c27_openai_refusal_ends_the_run_after_one_request() {
    let server = server(
        "/v1/chat/completions",
        vec![json_fixture(200, "openai/refusal.json"), submit_reply()],
    )
    .await;
    let config = triage("gpt-4.1", &openai_base(&server)).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        r.outcome.unwrap_err(),
        AgentError::Refused {
            stop_reason: StopReason::Refusal,
            message: "I'm sorry, I can't help with that request.".into(),
            // The refusal text is the reason's explanation (C58).
            reason: Some(
                agent_core::llm::RefusalReason::new()
                    .with_explanation("I'm sorry, I can't help with that request.")
            ),
        }
    );
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn c27_openai_content_filter_ends_the_run() {
    let server = server(
        "/v1/chat/completions",
        vec![openai_message(
            json!({"role": "assistant", "content": ""}),
            "content_filter",
            None,
        )],
    )
    .await;
    let config = triage("gpt-4.1", &openai_base(&server)).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("refused"));
    let AgentError::Refused { stop_reason, .. } = r.outcome.unwrap_err() else {
        panic!()
    };
    assert_eq!(stop_reason, StopReason::ContentFilter);
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn c27_anthropic_refusal_ends_the_run_with_its_text() {
    let server = server(
        "/v1/messages",
        vec![anthropic(
            json!([{"type": "text", "text": "I can't assist with that."}]),
            "refusal",
        )],
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server.uri()).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        r.outcome.unwrap_err(),
        AgentError::Refused {
            stop_reason: StopReason::Refusal,
            message: "I can't assist with that.".into(),
            reason: None,
        }
    );
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn anthropic_context_window_stop_ends_the_run() {
    let server = server(
        "/v1/messages",
        vec![anthropic(json!([]), "model_context_window_exceeded")],
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server.uri()).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        r.outcome.unwrap_err(),
        AgentError::ContextWindowExceeded { input_tokens: 30 }
    );
}

// ---- C28 -----------------------------------------------------------------------------

#[tokio::test]
async fn c28_openai_length_cut_call_is_not_run() {
    let ping = CountingTool::ping();
    let server = server(
        "/v1/chat/completions",
        vec![openai_call("ping", "{}", "length"), submit_reply()],
    )
    .await;
    let config = triage("gpt-4.1", &openai_base(&server))
        .tools(ToolRegistry::new().with(ping.clone()))
        .max_tokens(300)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(ping.calls(), 0);
    let second = &bodies(&server).await[1];
    let messages = second["messages"].as_array().unwrap();
    let result = messages.last().unwrap();
    assert_eq!(result["role"], "tool");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("the output hit max_tokens (300 tokens)"),
        "{result}"
    );
}

#[tokio::test]
async fn c28_anthropic_max_tokens_cut_tool_use_is_not_run() {
    let ping = CountingTool::ping();
    let server = server(
        "/v1/messages",
        vec![
            anthropic(
                json!([{"type": "tool_use", "id": "toolu_cut", "name": "ping", "input": {}}]),
                "max_tokens",
            ),
            anthropic(
                json!([{"type": "tool_use", "id": "toolu_ok", "name": "submit_output",
                        "input": {"severity": 2, "queue": "shipping",
                                  "summary": "Parcel A-1001 is a week late."}}]),
                "tool_use",
            ),
        ],
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server.uri())
        .tools(ToolRegistry::new().with(ping.clone()))
        .max_tokens(200)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(ping.calls(), 0);
    let second = &bodies(&server).await[1];
    let results = &second["messages"][2]["content"][0];
    assert_eq!(results["type"], "tool_result");
    assert_eq!(results["is_error"], true);
    assert!(
        results["content"]
            .as_str()
            .unwrap()
            .contains("max_tokens (200 tokens)")
    );
}

// ---- C29, C30 --------------------------------------------------------------------------

#[tokio::test]
async fn c29_whole_floats_on_the_openai_and_anthropic_wires() {
    let server_o = server(
        "/v1/chat/completions",
        vec![openai_call(
            "submit_output",
            r#"{"severity": 2.0, "queue": "shipping", "summary": "Parcel A-1001 is a week late."}"#,
            "tool_calls",
        )],
    )
    .await;
    let config = triage("gpt-4.1", &openai_base(&server_o)).build().unwrap();
    assert_eq!(
        run_agent(&config, "ticket").await.outcome,
        Ok(expected_triage())
    );
    let server_a = server(
        "/v1/messages",
        vec![anthropic(
            json!([{"type": "tool_use", "id": "toolu_1", "name": "submit_output",
                    "input": {"severity": 2.0, "queue": "shipping",
                              "summary": "Parcel A-1001 is a week late."}}]),
            "tool_use",
        )],
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server_a.uri())
        .build()
        .unwrap();
    assert_eq!(
        run_agent(&config, "ticket").await.outcome,
        Ok(expected_triage())
    );
}

#[tokio::test]
async fn c30_double_encoded_arguments_on_the_wire_run_the_tool() {
    let lookup = CountingTool::lookup_order();
    let double = serde_json::to_string(&json!({"order_id": "A-1"}).to_string()).unwrap();
    let server = server(
        "/v1/chat/completions",
        vec![
            openai_call("lookup_order", &double, "tool_calls"),
            submit_reply(),
        ],
    )
    .await;
    let config = triage("dispatch/gemma", &openai_base(&server))
        .tools(ToolRegistry::new().with(lookup.clone()))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(lookup.calls(), 1);
    assert_eq!(lookup.seen(), [json!({"order_id": "A-1"})]);
}

// ---- C32 ------------------------------------------------------------------------------

#[tokio::test]
async fn c32_a_compatible_server_without_usage_still_hits_the_token_cap() {
    let lookup = CountingTool::lookup_order();
    let replies: Vec<ResponseTemplate> = (0..20)
        .map(|n| {
            openai_message(
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": format!("c{n}"), "type": "function", "function": {
                        "name": "lookup_order",
                        "arguments": format!("{{\"order_id\": \"A-{n}\"}}")}}]}),
                "tool_calls",
                None,
            )
        })
        .collect();
    let server = server("/v1/chat/completions", replies).await;
    let config = triage("dispatch/gemma", &openai_base(&server))
        .tools(ToolRegistry::new().with(lookup.clone()))
        .max_total_tokens(1000)
        .max_tool_calls(50)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("budget_exhausted"));
    assert!(r.usage.llm_calls < 20, "{}", r.usage.llm_calls);
    assert_eq!(r.usage.estimated_llm_calls, r.usage.llm_calls);
}

// ---- reasoning parsers -------------------------------------------------------------------

#[tokio::test]
async fn a_native_answer_left_in_reasoning_content_is_read_from_there() {
    let answer =
        r#"{"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."}"#;
    let server = server(
        "/v1/chat/completions",
        vec![openai_message(
            json!({"role": "assistant", "content": "", "reasoning_content": answer}),
            "stop",
            Some(json!({"prompt_tokens": 30, "completion_tokens": 10})),
        )],
    )
    .await;
    let config = triage("dispatch/qwen3", &openai_base(&server))
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.outcome, Ok(expected_triage()));
    assert_eq!(r.output, answer);
}
