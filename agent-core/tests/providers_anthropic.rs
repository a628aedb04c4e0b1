//! The Anthropic adapter against wiremock: request bodies and headers, responses,
//! errors, and whole runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::time::Duration;

use agent_core::providers::{AnthropicClient, ProviderOptions};
use agent_core::{
    AgentError,
    llm::{LlmClient, LlmErrorKind, StopReason},
    run_agent,
};
use providers_support::*;
use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

const MODEL: &str = "claude-sonnet-4-5";

fn client(server: &MockServer) -> AnthropicClient {
    AnthropicClient::new(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(server.uri()),
    )
    .unwrap()
}

fn lookup_definition() -> agent_core::tool::ToolDefinition {
    use agent_core::Tool;
    CountingTool::lookup_order().definition()
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, "/v1/messages", response, None).await;
}

async fn mount_once(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, "/v1/messages", response, Some(1)).await;
}

#[tokio::test]
async fn text_response_and_request_headers() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(200, "anthropic/text.json").insert_header("request-id", "req_011CText"),
    )
    .await;
    let response = client(&server)
        .complete(&hello(MODEL).with_temperature(0.3))
        .await
        .unwrap();
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (21, 14)
    );
    assert_eq!(response.request_id.as_deref(), Some("req_011CText"));
    assert_eq!(
        response.model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(header(&sent[0], "x-api-key"), Some(KEY));
    assert_eq!(header(&sent[0], "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(&sent[0], "content-type"), Some("application/json"));
    assert_eq!(header(&sent[0], "authorization"), None);
    let body: serde_json::Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": MODEL,
            "max_tokens": 4096,
            "system": "You triage support tickets.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "My parcel A-1001 is a week late."}]}],
            "temperature": 0.3
        })
    );
}

#[tokio::test]
async fn one_tool_call_with_text_and_cache_usage() {
    let server = MockServer::start().await;
    mount(&server, json_fixture(200, "anthropic/tool_use.json")).await;
    let response = client(&server).complete(&hello(MODEL)).await.unwrap();
    assert_eq!(response.text, "I'll look up that order first.");
    assert_eq!(response.tool_calls.len(), 1);
    let call = &response.tool_calls[0];
    assert_eq!(call.id, "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(call.name, "lookup_order");
    assert_eq!(call.arguments, json!({"order_id": "A-1001"}));
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    // input = uncached + cache writes + cache reads.
    assert_eq!(response.usage.input_tokens, 472 + 120 + 2048);
    assert_eq!(response.usage.cache_read_tokens, 2048);
    assert_eq!(response.usage.cache_write_tokens, 120);
    assert_eq!(response.usage.output_tokens, 61);
    // No request-id header: the message id stands in.
    assert_eq!(response.request_id.as_deref(), Some("msg_01Aq9w938a90dw8q"));
}

#[tokio::test]
async fn parallel_tool_calls_and_unknown_blocks_are_tolerated() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(200, "anthropic/parallel_tool_use.json"),
    )
    .await;
    let response = client(&server).complete(&hello(MODEL)).await.unwrap();
    assert_eq!(response.text, "", "the thinking block is not text");
    let ids: Vec<_> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "toolu_01T1x1fJ34qAmk2tNTrN7Up7"
        ]
    );
    assert_eq!(
        response.tool_calls[1].arguments,
        json!({"order_id": "B-2002"})
    );
}

#[tokio::test]
async fn a_run_groups_parallel_results_in_one_user_message_results_first() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "anthropic/parallel_tool_use.json"),
    )
    .await;
    mount(&server, json_fixture(200, "anthropic/submit.json")).await;
    let lookup = CountingTool::lookup_order();
    let config = triage(MODEL, &server.uri())
        .tools(agent_core::ToolRegistry::new().with(lookup.clone()))
        .build()
        .unwrap();
    let result = run_agent(&config, "Parcels A-1001 and B-2002 are late.").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.calls(), 2);
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);

    // Tools: input_schema on every definition, submit_output last, tool_choice auto.
    let tools = bodies[0]["tools"].as_array().unwrap();
    let names: Vec<_> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["lookup_order", "submit_output"]);
    // The Anthropic schema transform is applied to every definition.
    assert_eq!(
        tools[0]["input_schema"],
        agent_core::schema::for_anthropic(&lookup_definition().parameters)
    );
    assert_eq!(
        tools[1]["input_schema"],
        agent_core::schema::for_anthropic(&triage_schema())
    );
    assert_eq!(bodies[0]["tool_choice"], json!({"type": "auto"}));

    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    // The assistant turn: no empty text block, both tool_use blocks.
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "lookup_order", "input": {"order_id": "A-1001"}},
            {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up7", "name": "lookup_order", "input": {"order_id": "B-2002"}}
        ]})
    );
    // Both results in the one user message after it, in call order.
    assert_eq!(messages[2]["role"], "user");
    let content = messages[2]["content"].as_array().unwrap();
    assert_eq!(content.len(), 2);
    assert!(content.iter().all(|b| b["type"] == "tool_result"));
    assert_eq!(content[0]["tool_use_id"], "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    assert_eq!(content[1]["tool_use_id"], "toolu_01T1x1fJ34qAmk2tNTrN7Up7");
    assert!(content[0].get("is_error").is_none());
}

#[tokio::test]
async fn failed_results_carry_is_error_and_text_follows_results() {
    // A submit with an invalid value, then a valid one: the rejection goes back as a
    // tool_result with is_error.
    let server = MockServer::start().await;
    let invalid = fixture("anthropic/submit.json").replace("\"severity\": 2", "\"severity\": 9");
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_raw(invalid, "application/json"),
    )
    .await;
    mount(&server, json_fixture(200, "anthropic/submit.json")).await;
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    let last = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    let block = &last["content"][0];
    assert_eq!(block["type"], "tool_result");
    assert_eq!(block["tool_use_id"], "toolu_01Vh3DLqq7RjMsGDLSTPTCZa");
    assert_eq!(block["is_error"], true);
    assert!(
        block["content"].as_str().unwrap().contains("/severity"),
        "{block}"
    );
}

#[tokio::test]
async fn plain_text_then_nudge_forces_any_and_empty_turns_are_rendered() {
    let server = MockServer::start().await;
    mount_once(&server, json_fixture(200, "anthropic/text.json")).await;
    let empty = json!({"id": "msg_empty", "type": "message", "role": "assistant", "model": MODEL,
        "content": [], "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 0}});
    mount_once(&server, ResponseTemplate::new(200).set_body_json(empty)).await;
    mount(&server, json_fixture(200, "anthropic/submit.json")).await;
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[1]["tool_choice"], json!({"type": "any"}));
    let messages = bodies[2]["messages"].as_array().unwrap();
    // user, assistant text, user nudge, assistant (empty), user nudge.
    assert_eq!(messages.len(), 5);
    assert_eq!(
        messages[3],
        json!({"role": "assistant", "content": [{"type": "text", "text": "(empty)"}]})
    );
    for message in messages {
        for block in message["content"].as_array().unwrap() {
            if block["type"] == "text" {
                assert!(
                    !block["text"].as_str().unwrap().trim().is_empty(),
                    "{message}"
                );
            }
        }
    }
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
    let cases: [ErrorCase; 8] = [
        (
            400,
            "anthropic/error_invalid_request.json",
            &[],
            LlmErrorKind::Permanent,
        ),
        (
            401,
            "anthropic/error_authentication.json",
            &[],
            LlmErrorKind::Permanent,
        ),
        (
            402,
            "anthropic/error_billing.json",
            &[],
            LlmErrorKind::Permanent,
        ),
        (
            429,
            "anthropic/error_rate_limit.json",
            &[("retry-after", "7")],
            LlmErrorKind::Transient,
        ),
        (
            500,
            "anthropic/error_api.json",
            &[],
            LlmErrorKind::Transient,
        ),
        (
            504,
            "anthropic/error_api.json",
            &[],
            LlmErrorKind::Transient,
        ),
        (
            529,
            "anthropic/error_overloaded.json",
            &[("x-should-retry", "true")],
            LlmErrorKind::Transient,
        ),
        (
            500,
            "anthropic/error_api.json",
            &[("x-should-retry", "false")],
            LlmErrorKind::Permanent,
        ),
    ];
    for (status, file, headers, kind) in cases {
        let server = MockServer::start().await;
        let mut response = json_fixture(status, file).insert_header("request-id", "req_err");
        for (name, value) in headers {
            response = response.insert_header(*name, *value);
        }
        mount(&server, response).await;
        let error = client(&server).complete(&hello(MODEL)).await.unwrap_err();
        assert_eq!(error.kind, kind, "{status} {file}: {error}");
        assert_eq!(error.status, Some(status));
        assert_eq!(error.request_id.as_deref(), Some("req_err"));
        assert!(error.message.contains(&format!("HTTP {status}")), "{error}");
        if status == 429 {
            assert_eq!(error.retry_after, Some(Duration::from_secs(7)));
            assert!(error.message.contains("rate_limit_error"), "{error}");
        }
        assert_eq!(
            requests(&server).await.len(),
            1,
            "the adapter never retries"
        );
    }
}

// C19: an HTML 413 from a proxy is permanent, with the status in the message.
#[tokio::test]
async fn c19_html_413_from_a_proxy_is_permanent() {
    let server = MockServer::start().await;
    mount(
        &server,
        raw_fixture(413, "anthropic/error_413_proxy.html", "text/html"),
    )
    .await;
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::LlmPermanent { error }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(error.status, Some(413));
    assert!(error.message.contains("HTTP 413"), "{error}");
    assert!(
        error.message.contains("413 Request Entity Too Large"),
        "{error}"
    );
    assert_eq!(requests(&server).await.len(), 1);
}

// C16: 529 overloaded with x-should-retry: true, then success.
#[tokio::test]
async fn c16_overloaded_with_should_retry_is_retried_then_succeeds() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(529, "anthropic/error_overloaded.json")
            .insert_header("x-should-retry", "true"),
    )
    .await;
    mount(&server, json_fixture(200, "anthropic/submit.json")).await;
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.llm_calls, 2);
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[0], bodies[1],
        "the retry re-sends the identical request"
    );
}
