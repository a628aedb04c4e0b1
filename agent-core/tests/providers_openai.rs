//! The OpenAI adapter against wiremock: request bodies and headers, responses (C5, C8),
//! errors (C15, C18), and whole runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::time::Duration;

use agent_core::providers::{OpenAiClient, ProviderOptions};
use agent_core::{
    AgentError, Tool,
    llm::{LlmClient, LlmErrorKind, StopReason},
    run_agent,
};
use providers_support::*;
use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

const MODEL: &str = "gpt-4.1";

fn base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

fn client(server: &MockServer) -> OpenAiClient {
    OpenAiClient::openai(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(base(server)),
    )
    .unwrap()
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, "/v1/chat/completions", response, None).await;
}

async fn mount_once(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, "/v1/chat/completions", response, Some(1)).await;
}

#[tokio::test]
async fn text_response_headers_and_cached_usage() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(200, "openai/text.json").insert_header("x-request-id", "req_8f2b"),
    )
    .await;
    let response = client(&server).complete(&hello(MODEL)).await.unwrap();
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.usage.input_tokens, 1219);
    assert_eq!(response.usage.output_tokens, 14);
    assert_eq!(response.usage.cache_read_tokens, 1024);
    assert_eq!(response.request_id.as_deref(), Some("req_8f2b"));

    let sent = requests(&server).await;
    assert_eq!(
        header(&sent[0], "authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(header(&sent[0], "content-type"), Some("application/json"));
    let body: serde_json::Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "You triage support tickets."},
                {"role": "user", "content": "My parcel A-1001 is a week late."}
            ],
            "max_completion_tokens": 4096
        })
    );
}

#[tokio::test]
async fn one_and_parallel_tool_calls() {
    let server = MockServer::start().await;
    mount_once(&server, json_fixture(200, "openai/tool_call.json")).await;
    mount(
        &server,
        json_fixture(200, "openai/parallel_tool_calls.json"),
    )
    .await;
    let c = client(&server);
    let one = c.complete(&hello(MODEL)).await.unwrap();
    assert_eq!(one.tool_calls.len(), 1);
    assert_eq!(one.tool_calls[0].id, "call_Xh0N8aWZm4ZJWeV1J4V9PnaQ");
    assert_eq!(one.tool_calls[0].arguments, json!({"order_id": "A-1001"}));
    assert_eq!(one.stop_reason, StopReason::ToolUse);
    assert_eq!(one.text, "");
    let many = c.complete(&hello(MODEL)).await.unwrap();
    let names: Vec<_> = many.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["lookup_order", "lookup_order", "refund_status"]);
    assert_eq!(
        many.tool_calls[2].arguments,
        json!({"order_id": "B-2002", "include_history": true})
    );
}

#[tokio::test]
async fn a_run_echoes_calls_with_string_arguments_and_one_tool_message_each() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "openai/parallel_tool_calls.json"),
    )
    .await;
    mount(
        &server,
        json_fixture(200, "openai/c5_stop_with_tool_calls.json"),
    )
    .await;
    let (lookup, refund) = (CountingTool::lookup_order(), CountingTool::refund_status());
    let config = triage(MODEL, &base(&server))
        .tools(
            agent_core::ToolRegistry::new()
                .with(lookup.clone())
                .with(refund.clone()),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!((lookup.calls(), refund.calls()), (2, 1));

    let bodies = bodies(&server).await;
    let tools = bodies[0]["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .all(|t| t["type"] == "function" && t["function"]["description"].is_string())
    );
    // The OpenAI (non-strict) schema transform is applied to every definition.
    let expected = [
        agent_core::schema::for_openai(&lookup.definition().parameters),
        agent_core::schema::for_openai(&refund.definition().parameters),
        agent_core::schema::for_openai(&triage_schema()),
    ];
    let sent: Vec<_> = tools
        .iter()
        .map(|t| t["function"]["parameters"].clone())
        .collect();
    assert_eq!(sent, expected);
    assert_eq!(bodies[0]["tool_choice"], "auto");
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        6,
        "system, user, assistant, three tool messages"
    );
    let assistant = &messages[2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], serde_json::Value::Null);
    for call in assistant["tool_calls"].as_array().unwrap() {
        let arguments = call["function"]["arguments"].as_str().expect("a string");
        assert!(
            serde_json::from_str::<serde_json::Value>(arguments)
                .unwrap()
                .is_object()
        );
        assert_eq!(call["type"], "function");
    }
    let ids: Vec<_> = messages[3..]
        .iter()
        .map(|m| {
            assert_eq!(m["role"], "tool");
            m["tool_call_id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(ids, ["call_62136354", "call_62136355", "call_62136356"]);
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("in transit")
    );
}

// C5: finish_reason "stop" with tool calls is a tool call turn.
#[tokio::test]
async fn c5_stop_label_with_tool_calls_is_a_submission() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(200, "openai/c5_stop_with_tool_calls.json"),
    )
    .await;
    let response = client(&server).complete(&hello(MODEL)).await.unwrap();
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let config = triage(MODEL, &base(&server)).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.llm_calls, 1);
}

// C5: finish_reason "tool_calls" with an empty list and JSON in the text is plain text.
#[tokio::test]
async fn c5_tool_calls_label_without_calls_is_plain_text() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "openai/c5_tool_calls_label_without_calls.json"),
    )
    .await;
    mount(
        &server,
        json_fixture(200, "openai/c5_stop_with_tool_calls.json"),
    )
    .await;
    let response = client(&server).complete(&hello(MODEL)).await.unwrap();
    assert!(response.tool_calls.is_empty());
    assert!(response.text.starts_with("{\"name\": \"submit_output\""));

    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "openai/c5_tool_calls_label_without_calls.json"),
    )
    .await;
    mount(
        &server,
        json_fixture(200, "openai/c5_stop_with_tool_calls.json"),
    )
    .await;
    let config = triage(MODEL, &base(&server)).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    // The nudge turn forces a tool call.
    assert_eq!(bodies[1]["tool_choice"], "required");
    assert_eq!(bodies[1]["messages"][2]["role"], "assistant");
    assert!(bodies[1]["messages"][2].get("tool_calls").is_none());
}

// C8: truncated arguments: a validation retry that says so; the broken call is re-sent
// with "{}" as its arguments, never the broken text.
#[tokio::test]
async fn c8_truncated_arguments_are_retried_and_resent_sanitized() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "openai/c8_truncated_arguments.json"),
    )
    .await;
    mount(
        &server,
        json_fixture(200, "openai/c5_stop_with_tool_calls.json"),
    )
    .await;
    let config = triage(MODEL, &base(&server)).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    let messages = bodies[1]["messages"].as_array().unwrap();
    let call = &messages[2]["tool_calls"][0];
    assert_eq!(call["id"], "call_c8TruncatedSubmit000001");
    assert_eq!(call["function"]["arguments"], "{}");
    let result_message = &messages[3];
    assert_eq!(
        result_message["tool_call_id"],
        "call_c8TruncatedSubmit000001"
    );
    let content = result_message["content"].as_str().unwrap();
    assert!(content.starts_with("Error: "), "{content}");
    assert!(content.contains("truncated"), "{content}");
}

#[tokio::test]
async fn refusals_are_text_with_a_refusal_stop_reason() {
    let server = MockServer::start().await;
    mount(&server, json_fixture(200, "openai/refusal.json")).await;
    let response = client(&server).complete(&hello(MODEL)).await.unwrap();
    assert_eq!(response.text, "I'm sorry, I can't help with that request.");
    assert_eq!(response.stop_reason, StopReason::Refusal);
}

/// Status, body fixture, extra headers, expected kind.
type ErrorCase = (
    u16,
    &'static str,
    &'static [(&'static str, &'static str)],
    LlmErrorKind,
);

#[tokio::test]
async fn every_error_status_is_classified() {
    let cases: [ErrorCase; 7] = [
        (
            400,
            "openai/error_invalid_request.json",
            &[],
            LlmErrorKind::Permanent,
        ),
        (
            404,
            "openai/error_invalid_request.json",
            &[],
            LlmErrorKind::Permanent,
        ),
        (
            422,
            "openai/error_invalid_request.json",
            &[],
            LlmErrorKind::Permanent,
        ),
        (
            429,
            "openai/error_insufficient_quota.json",
            &[],
            LlmErrorKind::Permanent,
        ),
        (
            429,
            "openai/error_rate_limit.json",
            &[("retry-after-ms", "120")],
            LlmErrorKind::Transient,
        ),
        (
            500,
            "openai/error_server.json",
            &[],
            LlmErrorKind::Transient,
        ),
        (
            503,
            "openai/error_server.json",
            &[("retry-after", "2")],
            LlmErrorKind::Transient,
        ),
    ];
    for (status, file, headers, kind) in cases {
        let server = MockServer::start().await;
        let mut response = json_fixture(status, file).insert_header("x-request-id", "req_e1");
        for (name, value) in headers {
            response = response.insert_header(*name, *value);
        }
        mount(&server, response).await;
        let error = client(&server).complete(&hello(MODEL)).await.unwrap_err();
        assert_eq!(error.kind, kind, "{status} {file}: {error}");
        assert_eq!(error.status, Some(status));
        assert_eq!(error.request_id.as_deref(), Some("req_e1"));
        match (status, headers) {
            (429, [_]) => assert_eq!(error.retry_after, Some(Duration::from_millis(120))),
            (503, _) => assert_eq!(error.retry_after, Some(Duration::from_secs(2))),
            _ => assert_eq!(error.retry_after, None),
        }
        assert_eq!(
            requests(&server).await.len(),
            1,
            "the adapter never retries"
        );
    }
}

// C15: 429 insufficient_quota ends the run after exactly one request.
#[tokio::test]
async fn c15_insufficient_quota_is_permanent_after_one_request() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(429, "openai/error_insufficient_quota.json"),
    )
    .await;
    let config = triage(MODEL, &base(&server)).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::LlmPermanent { error }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(error.status, Some(429));
    assert!(error.message.contains("insufficient_quota"), "{error}");
    assert_eq!(result.category(), Some("llm_permanent_error"));
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn validation_feedback_names_the_field_after_a_bad_submission() {
    let server = MockServer::start().await;
    let bad = fixture("openai/c5_stop_with_tool_calls.json")
        .replace("\\\"severity\\\":2", "\\\"severity\\\":20");
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_raw(bad, "application/json"),
    )
    .await;
    mount(
        &server,
        json_fixture(200, "openai/c5_stop_with_tool_calls.json"),
    )
    .await;
    let config = triage(MODEL, &base(&server)).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    let feedback = bodies[1]["messages"][3]["content"].as_str().unwrap();
    assert!(feedback.starts_with("Error: "), "{feedback}");
    assert!(feedback.contains("/severity"), "{feedback}");
    assert!(feedback.contains('4'), "the bound is named: {feedback}");
}
