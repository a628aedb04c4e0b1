//! The OpenAI Responses API (`openai-responses/MODEL`, `azure-responses/DEPLOYMENT`)
//! over wiremock, with fixtures built from the examples of the Responses API reference
//! (<https://platform.openai.com/docs/api-reference/responses>): the request shape,
//! tool and native output, reasoning items carried across turns (stateless) or
//! `previous_response_id` (stored), incomplete responses, refusals, HTTP errors and
//! streams (text, call arguments, cut, `response.failed`, `error`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::time::Duration;

use agent_core::providers::{OpenAiResponsesClient, ProviderOptions};
use agent_core::{
    AgentConfig, AgentError, OutputMode, Tool,
    config::Backoff,
    llm::{LlmClient, LlmErrorKind, LlmResponse, StopReason, StreamDelta, ToolChoice},
    run_agent, run_agent_stream,
};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

const MODEL: &str = "gpt-5-mini";
const ROUTE: &str = "openai-responses/gpt-5-mini";
const PATH: &str = "/v1/responses";

fn base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

fn client(server: &MockServer) -> OpenAiResponsesClient {
    OpenAiResponsesClient::openai(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(base(server)),
    )
    .unwrap()
}

fn reply(path: &str) -> ResponseTemplate {
    json_fixture(200, &format!("responses/{path}"))
}

fn sse(path: &str) -> ResponseTemplate {
    raw_fixture(
        200,
        &format!("streaming/responses/{path}"),
        "text/event-stream",
    )
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, PATH, response, None).await;
}

async fn mount_once(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, PATH, response, Some(1)).await;
}

/// One streamed round trip, with the deltas it produced written as text.
async fn stream_once(
    client: &dyn LlmClient,
) -> (Result<LlmResponse, agent_core::llm::LlmError>, Vec<String>) {
    let mut deltas = Vec::new();
    let mut sink = |delta: StreamDelta<'_>| {
        deltas.push(match delta {
            StreamDelta::Text(t) => format!("text {t}"),
            StreamDelta::ToolCallStarted { index, id, name } => {
                format!("start {index} {id} {name}")
            }
            StreamDelta::ToolCallArguments { index, json } => format!("args {index} {json}"),
            _ => "other".to_owned(),
        });
    };
    let response = client.complete_streaming(&hello(MODEL), &mut sink).await;
    (response, deltas)
}

#[tokio::test]
async fn a_text_answer_its_usage_and_the_stateless_request() {
    let server = MockServer::start().await;
    mount(
        &server,
        reply("text.json").insert_header("x-request-id", "req_r1"),
    )
    .await;
    let client = client(&server);
    assert_eq!(client.endpoint(), format!("{}/v1/responses", server.uri()));
    assert!(!format!("{client:?}").contains(KEY));
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
    assert_eq!(response.usage.input_tokens, 1219);
    assert_eq!(
        response.usage.output_tokens, 214,
        "reasoning tokens included"
    );
    assert_eq!(response.usage.cache_read_tokens, 1024);
    assert_eq!(response.request_id.as_deref(), Some("req_r1"));
    assert_eq!(response.model.as_deref(), Some("gpt-5-mini-2025-08-07"));
    let sent = requests(&server).await;
    assert_eq!(
        header(&sent[0], "authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["instructions"], "You triage support tickets.");
    assert_eq!(
        body["input"],
        json!([{"type": "message", "role": "user", "content": "My parcel A-1001 is a week late."}])
    );
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["max_output_tokens"], 4096);
    // gpt-5-mini is a reasoning model: no temperature.
    assert!(body.get("temperature").is_none(), "{body}");
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    assert!(body.get("previous_response_id").is_none());
    assert!(body.get("messages").is_none());
}

#[tokio::test]
async fn a_tool_call_then_submit_output_carries_the_reasoning_items_back() {
    let server = MockServer::start().await;
    mount_once(&server, reply("tool_call.json")).await;
    mount(&server, reply("submit.json")).await;
    let lookup = CountingTool::lookup_order();
    let config = triage(ROUTE, &base(&server))
        .tool(lookup.clone())
        .build()
        .unwrap();
    let result = run_agent(&config, "My parcel A-1001 is a week late.").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.seen(), [json!({"order_id": "A-1001"})]);
    assert_eq!(result.usage.llm_calls, 2);
    assert_eq!(result.usage.input_tokens, 180 + 236);
    assert_eq!(result.usage.output_tokens, 96 + 58);
    assert_eq!(result.usage.cache_read_tokens, 128);
    // Priced as gpt-5-mini: USD 0.25 input, 0.025 cached input, 2.00 output per MTok.
    let cost = result.usage.cost_usd.unwrap();
    let expected = ((180.0 + 236.0 - 128.0) * 0.25 + 128.0 * 0.025 + (96.0 + 58.0) * 2.0) / 1e6;
    assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    // The flat function tool shape, not strict; tool choice auto with a real tool.
    let tools = bodies[0]["tools"].as_array().unwrap();
    let lookup_def = tools.iter().find(|t| t["name"] == "lookup_order").unwrap();
    assert_eq!(lookup_def["type"], "function");
    assert_eq!(lookup_def["description"], "The lookup_order tool.");
    assert_eq!(lookup_def["parameters"]["required"], json!(["order_id"]));
    assert_eq!(lookup_def["strict"], false);
    assert!(lookup_def.get("function").is_none());
    assert!(tools.iter().any(|t| t["name"] == "submit_output"));
    assert_eq!(bodies[0]["tool_choice"], "auto");
    // The second request: the user message, the reasoning item exactly as it came, the
    // call, and its output.
    let input = bodies[1]["input"].as_array().unwrap();
    assert_eq!(input.len(), 4, "{input:?}");
    assert_eq!(input[0]["role"], "user");
    assert_eq!(
        input[1],
        json!({"id": "rs_68af1c30772c81a0tool", "type": "reasoning", "summary": [],
               "encrypted_content": "gAAAAABor_tool_reasoning_blob=="})
    );
    assert_eq!(
        input[2],
        json!({"type": "function_call", "call_id": "call_Xh0N8aWZm4ZJWeV1J4V9PnaQ",
               "name": "lookup_order", "arguments": "{\"order_id\":\"A-1001\"}"})
    );
    assert_eq!(input[3]["type"], "function_call_output");
    assert_eq!(input[3]["call_id"], "call_Xh0N8aWZm4ZJWeV1J4V9PnaQ");
    assert_eq!(
        input[3]["output"],
        "{\"order_id\":\"A-1001\",\"status\":\"in transit\"}"
    );
    assert_eq!(bodies[1]["store"], false);
    assert!(bodies[1].get("previous_response_id").is_none());
}

#[tokio::test]
async fn a_forced_tool_is_named_and_required_is_spelled_out() {
    let server = MockServer::start().await;
    mount(&server, reply("submit.json")).await;
    let client = client(&server);
    let tools = vec![
        CountingTool::lookup_order().definition(),
        <Triage as agent_core::AgentOutput>::output_tool().unwrap(),
    ];
    for choice in [
        ToolChoice::Tool("submit_output".into()),
        ToolChoice::Required,
        ToolChoice::None,
    ] {
        let request = hello(MODEL)
            .with_tools(tools.clone())
            .with_tool_choice(choice);
        let response = client.complete(&request).await.unwrap();
        assert_eq!(response.tool_calls[0].name, "submit_output");
    }
    let bodies = bodies(&server).await;
    assert_eq!(
        bodies[0]["tool_choice"],
        json!({"type": "function", "name": "submit_output"})
    );
    assert_eq!(bodies[1]["tool_choice"], "required");
    assert_eq!(bodies[2]["tool_choice"], "none");
}

#[tokio::test]
async fn stored_mode_chains_with_previous_response_id() {
    let server = MockServer::start().await;
    mount_once(&server, reply("tool_call.json")).await;
    mount(&server, reply("submit.json")).await;
    let config = triage_with(ROUTE, &base(&server), |o| o.with_store_responses(true))
        .tool(CountingTool::lookup_order())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    assert_eq!(bodies[0]["store"], true);
    assert!(bodies[0].get("include").is_none());
    assert!(bodies[0].get("previous_response_id").is_none());
    assert_eq!(
        bodies[1]["previous_response_id"],
        "resp_68af1c300c1481a0tool"
    );
    // Only what the stored response does not hold: the call's output.
    let input = bodies[1]["input"].as_array().unwrap();
    assert_eq!(input.len(), 1, "{input:?}");
    assert_eq!(input[0]["type"], "function_call_output");
    assert_eq!(input[0]["call_id"], "call_Xh0N8aWZm4ZJWeV1J4V9PnaQ");
    assert_eq!(bodies[1]["instructions"], "You triage support tickets.");
}

#[tokio::test]
async fn native_mode_sends_a_strict_json_schema_text_format() {
    let server = MockServer::start().await;
    mount(&server, reply("native.json")).await;
    let config = triage(ROUTE, &base(&server))
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    let format = &bodies[0]["text"]["format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["strict"], true);
    assert!(format["name"].as_str().is_some_and(|n| !n.is_empty()));
    assert_eq!(format["schema"]["additionalProperties"], false);
    assert_eq!(
        format["schema"]["required"],
        json!(["severity", "queue", "summary"])
    );
    assert!(bodies[0].get("tools").is_none(), "no tool in native mode");
}

#[tokio::test]
async fn prompted_mode_puts_the_schema_in_the_instructions() {
    let server = MockServer::start().await;
    mount(&server, reply("native.json")).await;
    let config = triage(ROUTE, &base(&server))
        .output_mode(OutputMode::Prompted)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    assert!(bodies[0].get("text").is_none());
    assert!(
        bodies[0]["instructions"]
            .as_str()
            .unwrap()
            .contains("\"severity\""),
        "{}",
        bodies[0]["instructions"]
    );
}

#[tokio::test]
async fn incomplete_responses_are_classified_by_their_reason() {
    let server = MockServer::start().await;
    mount_once(&server, reply("incomplete_max_output_tokens.json")).await;
    mount_once(&server, reply("incomplete_content_filter.json")).await;
    let client = client(&server);
    let cut = client.complete(&hello(MODEL)).await.unwrap();
    assert_eq!(cut.stop_reason, StopReason::MaxTokens);
    assert_eq!(cut.usage.output_tokens, 4096);
    assert!(cut.text.is_empty() && cut.tool_calls.is_empty());
    let filtered = client.complete(&hello(MODEL)).await.unwrap();
    assert_eq!(filtered.stop_reason, StopReason::ContentFilter);
    assert_eq!(filtered.text, "The parcel");
}

#[tokio::test]
async fn a_content_filter_incomplete_ends_the_run_refused() {
    let server = MockServer::start().await;
    mount(&server, reply("incomplete_content_filter.json")).await;
    let config = triage(ROUTE, &base(&server)).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::Refused { stop_reason, .. }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(*stop_reason, StopReason::ContentFilter);
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn a_refusal_ends_the_run_refused_with_its_text() {
    let server = MockServer::start().await;
    mount(&server, reply("refusal.json")).await;
    let response = client(&server).complete(&hello(MODEL)).await.unwrap();
    assert_eq!(response.stop_reason, StopReason::Refusal);
    assert_eq!(response.text, "I'm sorry, I can't help with that request.");
    let config = triage(ROUTE, &base(&server)).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::Refused {
        stop_reason,
        message,
        ..
    }) = &result.outcome
    else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(*stop_reason, StopReason::Refusal);
    assert!(message.contains("can't help"), "{message}");
    assert_eq!(result.outcome.as_ref().unwrap_err().category(), "refused");
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_that_delay() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(429, "responses/error_rate_limit.json").insert_header("retry-after", "0.02"),
    )
    .await;
    mount(&server, reply("submit.json")).await;
    let error = client(&server).complete(&hello(MODEL)).await.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert_eq!(error.status, Some(429));
    assert_eq!(error.retry_after, Some(Duration::from_millis(20)));
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(429, "responses/error_rate_limit.json").insert_header("retry-after", "0.02"),
    )
    .await;
    mount(&server, reply("submit.json")).await;
    let delays = Delays::default();
    let slow = Backoff::exponential(Duration::from_secs(30), Duration::from_secs(30));
    let config = triage(ROUTE, &base(&server))
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
async fn a_400_is_permanent_and_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(400, "responses/error_invalid_request.json"),
    )
    .await;
    let error = client(&server).complete(&hello(MODEL)).await.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Permanent);
    assert_eq!(error.status, Some(400));
    assert!(error.message.contains("invalid_request_error"), "{error}");
    let config = triage(ROUTE, &base(&server))
        .backoff(Backoff::exponential(
            Duration::from_millis(1),
            Duration::from_millis(1),
        ))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert!(
        matches!(result.outcome, Err(AgentError::LlmPermanent { .. })),
        "{:?}",
        result.outcome
    );
    assert_eq!(requests(&server).await.len(), 2, "one each, no retry");
}

#[tokio::test]
async fn a_failed_response_body_is_a_transient_error() {
    let server = MockServer::start().await;
    mount(&server, reply("failed.json")).await;
    let error = client(&server).complete(&hello(MODEL)).await.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert!(error.message.contains("server_error"), "{error}");
}

#[tokio::test]
async fn a_streamed_text_answer() {
    let server = MockServer::start().await;
    mount(&server, sse("text.sse")).await;
    let (response, deltas) = stream_once(&client(&server)).await;
    let response = response.unwrap();
    assert_eq!(
        deltas,
        [
            "text The parcel is",
            "text  late; I would route it to shipping."
        ]
    );
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.usage.input_tokens, 1219);
    assert_eq!(response.usage.cache_read_tokens, 1024);
    let body: Value = serde_json::from_slice(&requests(&server).await[0].body).unwrap();
    assert_eq!(body["stream"], true);
    assert_eq!(
        header(&requests(&server).await[0], "accept"),
        Some("text/event-stream")
    );
}

#[tokio::test]
async fn streamed_function_call_arguments_and_a_streamed_run() {
    let server = MockServer::start().await;
    mount(&server, sse("submit.sse")).await;
    let (response, deltas) = stream_once(&client(&server)).await;
    let response = response.unwrap();
    assert_eq!(deltas.len(), 3, "{deltas:?}");
    assert_eq!(
        deltas[0],
        "start 0 call_S9a1mZ0rXyQ2TriageOut submit_output"
    );
    let joined: String = deltas[1..]
        .iter()
        .map(|d| d.strip_prefix("args 0 ").unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&joined).unwrap(),
        json!({"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."})
    );
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].name, "submit_output");
    let data = response.tool_calls[0].provider_data.as_ref().unwrap();
    assert_eq!(data["reasoning"][0]["id"], "rs_68af1c3aa09081a0subm");
    let config = triage(ROUTE, &base(&server)).build().unwrap();
    let mut stream = run_agent_stream(&config, "ticket");
    let mut outcome = None;
    while let Some(event) = stream.next().await {
        if let agent_core::stream::StreamEvent::Finished(result) = event {
            outcome = Some(result.outcome);
        }
    }
    assert_eq!(outcome, Some(Ok(expected_triage())));
}

#[tokio::test]
async fn a_streamed_incomplete_response_ends_the_stream() {
    let server = MockServer::start().await;
    mount(&server, sse("incomplete.sse")).await;
    let (response, _) = stream_once(&client(&server)).await;
    assert_eq!(response.unwrap().stop_reason, StopReason::MaxTokens);
}

#[tokio::test]
async fn a_cut_stream_is_transient() {
    let server = MockServer::start().await;
    mount(&server, sse("cut.sse")).await;
    let (response, deltas) = stream_once(&client(&server)).await;
    let error = response.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert!(error.message.contains("cut mid-way"), "{}", error.message);
    assert_eq!(deltas, ["text The parcel is"]);
}

#[tokio::test]
async fn response_failed_and_error_events_are_classified() {
    let server = MockServer::start().await;
    mount_once(&server, sse("failed.sse")).await;
    mount_once(&server, sse("error.sse")).await;
    let client = client(&server);
    let (failed, _) = stream_once(&client).await;
    let failed = failed.unwrap_err();
    assert_eq!(failed.kind, LlmErrorKind::Transient, "{failed}");
    assert!(failed.message.contains("server had an error"), "{failed}");
    let (error, _) = stream_once(&client).await;
    let error = error.unwrap_err();
    // `invalid_prompt`: the request itself was refused; the same request fails again.
    assert_eq!(error.kind, LlmErrorKind::Permanent, "{error}");
    assert!(error.message.contains("invalid_prompt"), "{error}");
}

#[tokio::test]
async fn azure_responses_post_to_the_v1_path_with_the_deployment_as_model() {
    let server = MockServer::start().await;
    mount_post(&server, "/openai/v1/responses", reply("submit.json"), None).await;
    let config = AgentConfig::<Triage>::builder("triage")
        .model("azure-responses/prod-gpt-5")
        .output_mode(OutputMode::Tool)
        .provider(
            ProviderOptions::default()
                .with_api_key(KEY)
                .with_base_url(server.uri()),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let sent = requests(&server).await;
    assert_eq!(sent[0].url.path(), "/openai/v1/responses");
    assert_eq!(sent[0].url.query(), None);
    assert_eq!(header(&sent[0], "api-key"), Some(KEY));
    assert_eq!(header(&sent[0], "authorization"), None);
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(body["model"], "prod-gpt-5");
    let client = OpenAiResponsesClient::azure(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(format!("{}/openai/", server.uri())),
    )
    .unwrap();
    assert_eq!(client.provider(), "azure.ai.openai");
    assert_eq!(
        client.endpoint(),
        format!("{}/openai/v1/responses", server.uri())
    );
}

#[tokio::test]
async fn a_fallback_switch_drops_the_reasoning_items() {
    // The Responses turn's call carries its reasoning; after a switch to Chat
    // Completions, the next request has the call and its result, and nothing else.
    let primary = MockServer::start().await;
    mount_once(&primary, reply("tool_call.json")).await;
    mount(
        &primary,
        json_fixture(404, "openai/error_invalid_request.json"),
    )
    .await;
    let backup = MockServer::start().await;
    mount_post(
        &backup,
        "/v1/chat/completions",
        json_fixture(200, "openai/c5_stop_with_tool_calls.json"),
        None,
    )
    .await;
    let config = triage(ROUTE, &base(&primary))
        .tool(CountingTool::lookup_order())
        .fallback_model_with(
            "dispatch/backup",
            ProviderOptions::default().with_base_url(format!("{}/v1", backup.uri())),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let sent = bodies(&backup).await;
    assert_eq!(sent.len(), 1);
    let text = sent[0].to_string();
    assert!(!text.contains("encrypted_content"), "{text}");
    assert!(!text.contains("rs_68af1c30772c81a0tool"), "{text}");
    assert!(text.contains("call_Xh0N8aWZm4ZJWeV1J4V9PnaQ"), "{text}");
}

#[test]
fn a_key_never_shows_in_debug() {
    let client =
        OpenAiResponsesClient::openai(&ProviderOptions::default().with_api_key(KEY)).unwrap();
    assert_eq!(client.endpoint(), "https://api.openai.com/v1/responses");
    assert!(!format!("{client:?}").contains(KEY));
    assert!(OpenAiResponsesClient::openai(&ProviderOptions::default()).is_err());
    let _ = CountingTool::ping().definition();
}
