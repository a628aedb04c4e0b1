//! AWS Bedrock Converse (`bedrock/MODEL_ID`) over wiremock, with fixtures built from the
//! examples and shapes of the Converse and ConverseStream references
//! (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html>,
//! <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html>):
//! the request shape, SigV4 and bearer authorization, tool use then `submit_output`,
//! each stop reason, the documented errors, and streams of binary event-stream
//! messages (text, tool-use input deltas, usage, an exception event, a cut stream)
//! built here with `aws-smithy-eventstream`'s encoder.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::time::Duration;

use agent_core::providers::{AwsCredentials, BedrockClient, ProviderOptions};
use agent_core::{
    AgentError, Tool,
    config::Backoff,
    llm::{LlmClient, LlmErrorKind, LlmRequest, LlmResponse, StopReason, StreamDelta, ToolChoice},
    run_agent,
};
use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

const MODEL: &str = "anthropic.claude-sonnet-4-5-20250929-v1:0";
const ROUTE: &str = "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0";
const PATH: &str = "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse";
const STREAM_PATH: &str = "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream";
/// Fake credentials, in the format of the AWS documentation's examples.
const AKID: &str = "AKIDEXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const SESSION: &str = "FwoGZXIvYXdzEXAMPLEsessiontoken";

fn credentials() -> AwsCredentials {
    AwsCredentials::new(AKID, SECRET).with_session_token(SESSION)
}

/// A SigV4 client at the mock server (explicit options: no environment read).
fn client(server: &MockServer) -> BedrockClient {
    BedrockClient::new(
        &ProviderOptions::default()
            .with_aws_region("us-east-1")
            .with_aws_credentials(credentials())
            .with_base_url(server.uri()),
    )
    .unwrap()
}

fn reply(path: &str) -> ResponseTemplate {
    json_fixture(200, &format!("bedrock/{path}"))
}

/// An AWS error response: the type in `x-amzn-errortype`, the message in the body.
fn aws_error(status: u16, kind: &str, file: &str) -> ResponseTemplate {
    json_fixture(status, &format!("bedrock/{file}"))
        .insert_header(
            "x-amzn-errortype",
            format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/").as_str(),
        )
        .insert_header("x-amzn-requestid", "9d1f6c1e-7c41-4f1b-9d0e-1b2c3d4e5f60")
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, PATH, response, None).await;
}

async fn mount_once(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, PATH, response, Some(1)).await;
}

fn string(value: &str) -> HeaderValue {
    HeaderValue::String(value.to_owned().into())
}

/// One event-stream message: `:message-type` `event` named `name`, or `exception` of
/// type `name`, with a JSON payload.
fn frame(kind: &str, name: &str, payload: &Value) -> Vec<u8> {
    let type_header = if kind == "event" {
        ":event-type"
    } else {
        ":exception-type"
    };
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(":message-type", string(kind)))
        .add_header(Header::new(type_header, string(name)))
        .add_header(Header::new(":content-type", string("application/json")));
    let mut out = Vec::new();
    write_message_to(&message, &mut out).unwrap();
    out
}

/// The frames of a stream fixture (`[[event, payload], ...]`).
fn stream_fixture(path: &str) -> Vec<u8> {
    let events: Vec<(String, Value)> =
        serde_json::from_str(&fixture(&format!("streaming/bedrock/{path}"))).unwrap();
    events
        .iter()
        .flat_map(|(name, payload)| frame("event", name, payload))
        .collect()
}

fn event_stream(body: Vec<u8>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "application/vnd.amazon.eventstream")
}

/// One streamed round trip, with the deltas it produced written as text.
async fn stream_once(
    client: &dyn LlmClient,
    request: &LlmRequest,
) -> (Result<LlmResponse, agent_core::llm::LlmError>, Vec<String>) {
    let mut deltas = Vec::new();
    let mut sink = |delta: StreamDelta<'_>| {
        deltas.push(match delta {
            StreamDelta::Text(t) => format!("text {t}"),
            StreamDelta::ToolCallStarted { index, id, name } => {
                format!("start {index} {id} {name}")
            }
            StreamDelta::ToolCallArguments { index, json } => format!("args {index} {json}"),
            StreamDelta::Reasoning(r) => format!("reasoning {r}"),
            _ => "other".to_owned(),
        });
    };
    let response = client.complete_streaming(request, &mut sink).await;
    (response, deltas)
}

#[tokio::test]
async fn a_text_turn_signed_with_sigv4() {
    let server = MockServer::start().await;
    mount(
        &server,
        reply("text.json")
            .insert_header("x-amzn-requestid", "b1c2d3e4-0000-4000-8000-000000000001"),
    )
    .await;
    let client = client(&server);
    let debug = format!("{client:?}");
    assert!(
        !debug.contains(SECRET) && !debug.contains(SESSION),
        "{debug}"
    );
    let response = client
        .complete(&hello(MODEL).with_temperature(0.2))
        .await
        .unwrap();
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    // Input = uncached + cache reads + cache writes.
    assert_eq!(response.usage.input_tokens, 30 + 1000 + 24);
    assert_eq!(response.usage.output_tokens, 17);
    assert_eq!(response.usage.cache_read_tokens, 1000);
    assert_eq!(response.usage.cache_write_tokens, 24);
    assert_eq!(
        response.request_id.as_deref(),
        Some("b1c2d3e4-0000-4000-8000-000000000001")
    );
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].url.path(), PATH);
    let date = header(&sent[0], "x-amz-date").unwrap();
    assert_eq!(date.len(), 16, "{date}");
    assert!(date.ends_with('Z') && date.as_bytes()[8] == b'T', "{date}");
    let auth = header(&sent[0], "authorization").unwrap();
    let scope = format!(
        "AWS4-HMAC-SHA256 Credential={AKID}/{}/us-east-1/bedrock/aws4_request, SignedHeaders=",
        &date[..8]
    );
    assert!(auth.starts_with(&scope), "{auth}");
    assert!(auth.contains("x-amz-date"), "{auth}");
    let signature = auth.rsplit("Signature=").next().unwrap();
    assert_eq!(signature.len(), 64, "{auth}");
    assert!(!auth.contains(SECRET));
    assert_eq!(header(&sent[0], "x-amz-security-token"), Some(SESSION));
    assert_eq!(header(&sent[0], "content-type"), Some("application/json"));
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "messages": [{"role": "user", "content": [{"text": "My parcel A-1001 is a week late."}]}],
            "system": [{"text": "You triage support tickets."}],
            "inferenceConfig": {"maxTokens": 4096, "temperature": 0.2}
        })
    );
}

#[tokio::test]
async fn a_bedrock_api_key_is_sent_as_a_bearer_token_without_a_signature() {
    let server = MockServer::start().await;
    mount(&server, reply("text.json")).await;
    let client = BedrockClient::new(
        &ProviderOptions::default()
            .with_aws_region("us-west-2")
            .with_bearer_token(KEY)
            .with_base_url(server.uri()),
    )
    .unwrap();
    assert!(!format!("{client:?}").contains(KEY));
    client.complete(&hello(MODEL)).await.unwrap();
    let sent = requests(&server).await;
    assert_eq!(
        header(&sent[0], "authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(header(&sent[0], "x-amz-date").is_none());
    // Without a region or credentials, the client is not built; no secret is named.
    let missing = |options: ProviderOptions| BedrockClient::new(&options).unwrap_err().to_string();
    let no_region = missing(ProviderOptions::default().with_bearer_token(KEY));
    assert!(
        no_region.contains("AWS_REGION") && !no_region.contains(KEY),
        "{no_region}"
    );
    let no_key = missing(ProviderOptions::default().with_aws_region("us-east-1"));
    assert!(no_key.contains("AWS_ACCESS_KEY_ID"), "{no_key}");
}

#[tokio::test]
async fn a_tool_call_then_submit_output() {
    let server = MockServer::start().await;
    mount_once(&server, reply("tool_use.json")).await;
    mount(&server, reply("submit.json")).await;
    let lookup = CountingTool::lookup_order();
    let config = triage_with(ROUTE, &server.uri(), |o| o.with_aws_region("us-east-1"))
        .tool(lookup.clone())
        .build()
        .unwrap();
    let result = run_agent(&config, "My parcel A-1001 is a week late.").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.seen(), [json!({"order_id": "A-1001"})]);
    assert_eq!(result.usage.llm_calls, 2);
    assert_eq!(result.usage.input_tokens, 412 + 530);
    assert_eq!(result.usage.output_tokens, 64 + 58);
    let sent = requests(&server).await;
    // The builder's API key is the Bedrock API key.
    assert_eq!(
        header(&sent[0], "authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let tools = bodies[0]["toolConfig"]["tools"].as_array().unwrap();
    let spec = &tools
        .iter()
        .find(|t| t["toolSpec"]["name"] == "lookup_order")
        .unwrap()["toolSpec"];
    assert_eq!(spec["description"], "The lookup_order tool.");
    assert_eq!(spec["inputSchema"]["json"]["required"], json!(["order_id"]));
    assert!(
        tools
            .iter()
            .any(|t| t["toolSpec"]["name"] == "submit_output")
    );
    assert_eq!(bodies[0]["toolConfig"]["toolChoice"], json!({"auto": {}}));
    // The second request: the user turn, the assistant's text and toolUse, and the
    // toolResult answering it in the next user message.
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"text": "Let me look up that order."},
            {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "lookup_order",
                         "input": {"order_id": "A-1001"}}}
        ]})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"toolResult": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
                            "content": [{"text": "{\"order_id\":\"A-1001\",\"status\":\"in transit\"}"}]}}
        ]})
    );
    assert!(bodies[1]["toolConfig"].is_object());
}

#[tokio::test]
async fn tool_choice_follows_what_each_model_takes() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        "/model/meta.llama3-70b-instruct-v1%3A0/converse",
        reply("submit.json"),
        None,
    )
    .await;
    mount_post(
        &server,
        "/model/mistral.mistral-large-2407-v1%3A0/converse",
        reply("submit.json"),
        None,
    )
    .await;
    mount_post(
        &server,
        "/model/us.amazon.nova-pro-v1%3A0/converse",
        reply("submit.json"),
        None,
    )
    .await;
    mount(&server, reply("submit.json")).await;
    let client = client(&server);
    let tools = vec![
        CountingTool::lookup_order().definition(),
        <Triage as agent_core::AgentOutput>::output_tool().unwrap(),
    ];
    let forced = ToolChoice::Tool("submit_output".into());
    let cases = [
        (
            MODEL,
            forced.clone(),
            Some(json!({"tool": {"name": "submit_output"}})),
        ),
        (MODEL, ToolChoice::Required, Some(json!({"any": {}}))),
        (MODEL, ToolChoice::Auto, Some(json!({"auto": {}}))),
        (MODEL, ToolChoice::None, None),
        (
            "us.amazon.nova-pro-v1:0",
            forced.clone(),
            Some(json!({"tool": {"name": "submit_output"}})),
        ),
        (
            "mistral.mistral-large-2407-v1:0",
            forced.clone(),
            Some(json!({"any": {}})),
        ),
        (
            "meta.llama3-70b-instruct-v1:0",
            forced.clone(),
            Some(json!({"auto": {}})),
        ),
        (
            "meta.llama3-70b-instruct-v1:0",
            ToolChoice::Required,
            Some(json!({"auto": {}})),
        ),
    ];
    for (i, (model, choice, expected)) in cases.iter().enumerate() {
        let request = hello(model)
            .with_tools(tools.clone())
            .with_tool_choice(choice.clone());
        client.complete(&request).await.unwrap();
        let body = &bodies(&server).await[i];
        assert_eq!(
            body["toolConfig"].get("toolChoice"),
            expected.as_ref(),
            "{model} {choice:?}"
        );
        assert_eq!(body["toolConfig"]["tools"].as_array().unwrap().len(), 2);
    }
    // A forced answer is guaranteed only where `tool` is taken.
    assert!(client.output_capabilities(MODEL).forced_tool_choice);
    assert!(
        client
            .output_capabilities("us.amazon.nova-pro-v1:0")
            .forced_tool_choice
    );
    assert!(
        !client
            .output_capabilities("meta.llama3-70b-instruct-v1:0")
            .forced_tool_choice
    );
}

#[tokio::test]
async fn every_stop_reason_is_mapped() {
    let cases = [
        ("end_turn", StopReason::EndTurn),
        ("tool_use", StopReason::ToolUse),
        ("max_tokens", StopReason::MaxTokens),
        ("stop_sequence", StopReason::StopSequence),
        ("guardrail_intervened", StopReason::ContentFilter),
        ("content_filtered", StopReason::ContentFilter),
        (
            "model_context_window_exceeded",
            StopReason::ContextWindowExceeded,
        ),
        (
            "malformed_tool_use",
            StopReason::Other("malformed_tool_use".into()),
        ),
    ];
    for (wire, expected) in cases {
        let server = MockServer::start().await;
        let body = fixture("bedrock/text.json").replace("\"end_turn\"", &format!("\"{wire}\""));
        mount(
            &server,
            ResponseTemplate::new(200).set_body_raw(body, "application/json"),
        )
        .await;
        let response = client(&server).complete(&hello(MODEL)).await.unwrap();
        assert_eq!(response.stop_reason, expected, "{wire}");
        assert_eq!(
            response.text,
            "The parcel is late; I would route it to shipping."
        );
    }
}

#[tokio::test]
async fn a_guardrail_intervention_ends_the_run_refused() {
    let server = MockServer::start().await;
    let body = fixture("bedrock/text.json").replace("\"end_turn\"", "\"guardrail_intervened\"");
    mount(
        &server,
        ResponseTemplate::new(200).set_body_raw(body, "application/json"),
    )
    .await;
    let config = triage_with(ROUTE, &server.uri(), |o| o.with_aws_region("us-east-1"))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::Refused { stop_reason, .. }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(*stop_reason, StopReason::ContentFilter);
}

#[tokio::test]
async fn throttling_is_retried_after_its_delay_then_succeeds() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        aws_error(429, "ThrottlingException", "error_throttling.json")
            .insert_header("retry-after", "0.02"),
    )
    .await;
    mount(&server, reply("submit.json")).await;
    let error = client(&server).complete(&hello(MODEL)).await.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert_eq!(error.status, Some(429));
    assert_eq!(error.retry_after, Some(Duration::from_millis(20)));
    assert!(
        error
            .message
            .contains("ThrottlingException: Too many requests"),
        "{error}"
    );
    assert_eq!(
        error.request_id.as_deref(),
        Some("9d1f6c1e-7c41-4f1b-9d0e-1b2c3d4e5f60")
    );
    let server = MockServer::start().await;
    mount_once(
        &server,
        aws_error(429, "ThrottlingException", "error_throttling.json")
            .insert_header("retry-after", "0.02"),
    )
    .await;
    mount(&server, reply("submit.json")).await;
    let delays = Delays::default();
    let slow = Backoff::exponential(Duration::from_secs(30), Duration::from_secs(30));
    let config = triage_with(ROUTE, &server.uri(), |o| o.with_aws_region("us-east-1"))
        .backoff(slow)
        .observer(delays.observer())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(delays.get(), [Duration::from_millis(20)]);
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn documented_errors_are_classified() {
    let cases = [
        (
            400,
            "ValidationException",
            "error_validation.json",
            LlmErrorKind::Permanent,
        ),
        (
            403,
            "AccessDeniedException",
            "error_access_denied.json",
            LlmErrorKind::Permanent,
        ),
        (
            404,
            "ResourceNotFoundException",
            "error_access_denied.json",
            LlmErrorKind::Permanent,
        ),
        (
            424,
            "ModelErrorException",
            "error_model_error.json",
            LlmErrorKind::Permanent,
        ),
        (
            408,
            "ModelTimeoutException",
            "error_internal.json",
            LlmErrorKind::Transient,
        ),
        (
            429,
            "ModelNotReadyException",
            "error_model_not_ready.json",
            LlmErrorKind::Transient,
        ),
        (
            500,
            "InternalServerException",
            "error_internal.json",
            LlmErrorKind::Transient,
        ),
        (
            503,
            "ServiceUnavailableException",
            "error_internal.json",
            LlmErrorKind::Transient,
        ),
    ];
    for (status, kind, file, expected) in cases {
        let server = MockServer::start().await;
        mount(&server, aws_error(status, kind, file)).await;
        let error = client(&server).complete(&hello(MODEL)).await.unwrap_err();
        assert_eq!(error.kind, expected, "{status} {kind}: {error}");
        assert_eq!(error.status, Some(status));
        assert!(error.message.contains(&format!("HTTP {status}")), "{error}");
        assert!(error.message.contains(kind), "{error}");
        assert!(!error.message.contains(SECRET));
        assert_eq!(
            requests(&server).await.len(),
            1,
            "the adapter never retries"
        );
    }
}

#[tokio::test]
async fn a_validation_error_ends_the_run_permanent_without_a_retry() {
    let server = MockServer::start().await;
    mount(
        &server,
        aws_error(400, "ValidationException", "error_validation.json"),
    )
    .await;
    let config = triage_with(ROUTE, &server.uri(), |o| o.with_aws_region("us-east-1"))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::LlmPermanent { error }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(error.status, Some(400));
    assert!(error.message.contains("roles must alternate"), "{error}");
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn a_streamed_text_turn_with_its_usage() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        STREAM_PATH,
        event_stream(stream_fixture("text.json")),
        None,
    )
    .await;
    let client = client(&server);
    let (response, deltas) = stream_once(&client, &hello(MODEL)).await;
    let response = response.unwrap();
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.usage.input_tokens, 1054);
    assert_eq!(response.usage.output_tokens, 17);
    assert_eq!(response.usage.cache_read_tokens, 1000);
    assert_eq!(
        deltas,
        [
            "text The parcel is late; ",
            "text I would route it to shipping."
        ]
    );
    let sent = requests(&server).await;
    assert_eq!(sent[0].url.path(), STREAM_PATH);
    assert_eq!(
        header(&sent[0], "accept"),
        Some("application/vnd.amazon.eventstream")
    );
    assert!(
        header(&sent[0], "authorization")
            .unwrap()
            .starts_with("AWS4-HMAC-SHA256 ")
    );
}

#[tokio::test]
async fn a_streamed_tool_use_assembles_its_input_deltas() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        STREAM_PATH,
        event_stream(stream_fixture("tool_use.json")),
        None,
    )
    .await;
    let (response, deltas) = stream_once(&client(&server), &hello(MODEL)).await;
    let response = response.unwrap();
    assert_eq!(response.text, "Let me look up that order.");
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.tool_calls.len(), 1);
    let call = &response.tool_calls[0];
    assert_eq!(call.id, "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q");
    assert_eq!(call.name, "lookup_order");
    assert_eq!(call.arguments, json!({"order_id": "A-1001"}));
    assert_eq!(response.usage.input_tokens, 412);
    assert_eq!(response.usage.output_tokens, 64);
    assert_eq!(
        deltas,
        [
            "text Let me look up that order.",
            "start 0 tooluse_kZJMlvQmRJ6eAyJE5GIl7Q lookup_order",
            "args 0 {\"order_id\"",
            "args 0 : \"A-1001\"}",
        ]
    );
}

#[tokio::test]
async fn exception_events_are_classified() {
    let cases = [
        ("throttlingException", LlmErrorKind::Transient),
        ("modelStreamErrorException", LlmErrorKind::Transient),
        ("internalServerException", LlmErrorKind::Transient),
        ("serviceUnavailableException", LlmErrorKind::Transient),
        ("validationException", LlmErrorKind::Permanent),
    ];
    for (kind, expected) in cases {
        let server = MockServer::start().await;
        let mut body = stream_fixture("text.json");
        // The exception arrives after the first two events.
        let first: Vec<u8> = frame("event", "messageStart", &json!({"role": "assistant"}));
        body.truncate(first.len());
        body.extend(frame(
            "exception",
            kind,
            &json!({"message": "The stream failed."}),
        ));
        mount_post(&server, STREAM_PATH, event_stream(body), None).await;
        let (response, _) = stream_once(&client(&server), &hello(MODEL)).await;
        let error = response.unwrap_err();
        assert_eq!(error.kind, expected, "{kind}: {error}");
        assert!(error.message.contains(kind), "{error}");
        assert!(error.message.contains("The stream failed."), "{error}");
    }
}

#[tokio::test]
async fn an_error_message_in_the_stream_is_a_transient_error() {
    // `:message-type: error` with `:error-code` and `:error-message` headers, no payload.
    let message = Message::new(Vec::new())
        .add_header(Header::new(":message-type", string("error")))
        .add_header(Header::new(":error-code", string("InternalFailure")))
        .add_header(Header::new(
            ":error-message",
            string("The request processing has failed."),
        ));
    let mut body = frame("event", "messageStart", &json!({"role": "assistant"}));
    write_message_to(&message, &mut body).unwrap();
    let server = MockServer::start().await;
    mount_post(&server, STREAM_PATH, event_stream(body), None).await;
    let (response, _) = stream_once(&client(&server), &hello(MODEL)).await;
    let error = response.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient, "{error}");
    assert!(
        error
            .message
            .contains("InternalFailure: The request processing has failed."),
        "{error}"
    );
}

#[tokio::test]
async fn a_cut_stream_is_transient() {
    // Cut before `messageStop` (a stream closed after it, without the `metadata` end
    // marker, is whole: C55), and cut in the middle of that message.
    let whole = stream_fixture("text.json");
    let (stop, metadata) = {
        let events: Vec<(String, Value)> =
            serde_json::from_str(&fixture("streaming/bedrock/text.json")).unwrap();
        let len = |(name, payload): &(String, Value)| frame("event", name, payload).len();
        (
            len(&events[events.len() - 2]),
            len(&events[events.len() - 1]),
        )
    };
    let before_stop = whole.len() - metadata - stop;
    for cut in [before_stop, before_stop + stop / 2] {
        let server = MockServer::start().await;
        mount_post(
            &server,
            STREAM_PATH,
            event_stream(whole[..cut].to_vec()),
            None,
        )
        .await;
        let (response, deltas) = stream_once(&client(&server), &hello(MODEL)).await;
        let error = response.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Transient, "{error}");
        assert!(error.message.contains("before its end marker"), "{error}");
        assert_eq!(deltas.len(), 2, "the text before the cut was streamed");
    }
    // A corrupted message (its CRC no longer matches) is a malformed stream.
    let server = MockServer::start().await;
    let mut corrupt = whole.clone();
    corrupt[20] ^= 0xff;
    mount_post(&server, STREAM_PATH, event_stream(corrupt), None).await;
    let (response, _) = stream_once(&client(&server), &hello(MODEL)).await;
    let error = response.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient, "{error}");
    assert!(error.message.contains("malformed event stream"), "{error}");
}

#[tokio::test]
async fn claude_through_the_global_profile_is_priced_as_anthropic_lists_it() {
    let server = MockServer::start().await;
    let global = "/model/global.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse";
    mount_post(&server, global, reply("submit.json"), None).await;
    mount(&server, reply("submit.json")).await;
    let run = |route: &'static str| {
        let config = triage_with(route, &server.uri(), |o| o.with_aws_region("us-east-1"))
            .build()
            .unwrap();
        async move { run_agent(&config, "ticket").await }
    };
    let priced = run("bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0").await;
    assert_eq!(priced.outcome, Ok(expected_triage()));
    // Claude Sonnet 4.5: USD 3 input, 15 output per MTok.
    let expected = (530.0 * 3.0 + 58.0 * 15.0) / 1e6;
    let cost = priced.usage.cost_usd.unwrap();
    assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
    // The in-Region id costs more for this model: unpriced.
    let regional = run(ROUTE).await;
    assert_eq!(regional.outcome, Ok(expected_triage()));
    assert_eq!(regional.usage.cost_usd, None);
}

#[tokio::test]
async fn reasoning_content_is_read_into_the_transcript_and_never_sent_back() {
    let server = MockServer::start().await;
    mount_once(&server, reply("reasoning_tool_use.json")).await;
    mount(&server, reply("submit.json")).await;
    let lookup = CountingTool::lookup_order();
    let config = triage_with(ROUTE, &server.uri(), |o| o.with_aws_region("us-east-1"))
        .tool(lookup.clone())
        .build()
        .unwrap();
    let result = run_agent(&config, "My parcel A-1001 is a week late.").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.calls(), 1);
    let reasoning: Vec<&str> = result
        .transcript
        .iter()
        .map(agent_core::llm::Message::reasoning)
        .filter(|r| !r.is_empty())
        .collect();
    assert_eq!(
        reasoning,
        ["The ticket names A-1001; look it up before routing."]
    );
    // The second request sends the turn's toolUse alone: no reasoning text, no signature.
    let bodies = bodies(&server).await;
    let sent = bodies[1].to_string();
    assert!(!sent.contains("look it up before routing"), "{sent}");
    assert!(!sent.contains("SIGNATURE"), "{sent}");
    assert_eq!(
        bodies[1]["messages"][1]["content"],
        json!([{"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "lookup_order",
                            "input": {"order_id": "A-1001"}}}])
    );
}

#[tokio::test]
async fn streamed_reasoning_content_arrives_as_reasoning_deltas() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        STREAM_PATH,
        event_stream(stream_fixture("reasoning_text.json")),
        None,
    )
    .await;
    let (response, deltas) = stream_once(&client(&server), &hello(MODEL)).await;
    let response = response.unwrap();
    assert_eq!(response.text, "Route it to shipping.");
    assert_eq!(response.reasoning, "Late parcel: shipping.");
    assert_eq!(response.usage.output_tokens, 21);
    assert_eq!(
        deltas,
        [
            "reasoning Late parcel: ",
            "reasoning shipping.",
            "text Route it to shipping."
        ]
    );
}

#[test]
fn reasoning_settings_are_a_config_error_on_bedrock() {
    let err = triage_with(ROUTE, "http://127.0.0.1:9", |o| {
        o.with_aws_region("us-east-1")
    })
    .reasoning(agent_core::llm::Reasoning::budget(2_048))
    .max_tokens(8_000)
    .build()
    .map(|_| ())
    .unwrap_err();
    match err {
        agent_core::ConfigError::InvalidSetting {
            setting: "reasoning",
            reason,
            ..
        } => assert!(reason.contains("bedrock/"), "{reason}"),
        other => panic!("not a reasoning error: {other}"),
    }
}
