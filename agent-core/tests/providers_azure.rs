//! Azure OpenAI (`azure/DEPLOYMENT`) over wiremock: the request shape (URL with the
//! deployment and `api-version`, the `api-key` header or a bearer token, no key in
//! `Debug` or errors) and the content filter read as `refused` (C50).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::providers::{OpenAiClient, ProviderOptions};
use agent_core::{
    AgentError,
    llm::{LlmClient, LlmErrorCause, StopReason},
    run_agent,
};
use providers_support::*;
use wiremock::{MockServer, ResponseTemplate};

const DEPLOYMENT: &str = "prod-gpt-4o";
const PATH: &str = "/openai/deployments/prod-gpt-4o/chat/completions";

fn options(server: &MockServer) -> ProviderOptions {
    ProviderOptions::default()
        .with_api_key(KEY)
        .with_base_url(server.uri())
}

#[tokio::test]
async fn azure_requests_name_the_deployment_and_version_and_send_the_key_as_api_key() {
    let server = MockServer::start().await;
    mount_post(&server, PATH, json_fixture(200, "openai/text.json"), None).await;
    let client = OpenAiClient::azure(DEPLOYMENT, &options(&server)).unwrap();
    assert_eq!(client.provider(), "azure.ai.openai");
    assert_eq!(
        client.endpoint(),
        format!("{}{PATH}?api-version=2024-10-21", server.uri())
    );
    let debug = format!("{client:?}");
    assert!(!debug.contains(KEY), "{debug}");
    let response = client.complete(&hello(DEPLOYMENT)).await.unwrap();
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    let request = &sent[0];
    assert_eq!(request.url.path(), PATH);
    assert_eq!(request.url.query(), Some("api-version=2024-10-21"));
    assert_eq!(header(request, "api-key"), Some(KEY));
    assert_eq!(header(request, "authorization"), None);
    // OpenAI's Chat Completions body, through the same adapter.
    let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], DEPLOYMENT);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["max_completion_tokens"], 4096);
}

#[tokio::test]
async fn azure_route_takes_the_version_setting_and_a_bearer_token_instead_of_the_key() {
    let server = MockServer::start().await;
    let submit = json_fixture(200, "openai/c5_stop_with_tool_calls.json");
    mount_post(&server, PATH, submit, None).await;
    let config = agent_core::AgentConfig::<Triage>::builder("triage")
        .model("azure/prod-gpt-4o")
        .output_mode(agent_core::OutputMode::Tool)
        .provider(
            ProviderOptions::default()
                .with_base_url(server.uri())
                .with_bearer_token("entra-token-0123456789")
                .with_api_version("2025-01-01-preview"),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].url.query(), Some("api-version=2025-01-01-preview"));
    assert_eq!(
        header(&sent[0], "authorization"),
        Some("Bearer entra-token-0123456789")
    );
    assert_eq!(header(&sent[0], "api-key"), None);
    let debug = format!("{config:?}");
    assert!(!debug.contains("entra-token-0123456789"), "{debug}");
}

#[tokio::test]
async fn azure_errors_never_hold_the_key() {
    let server = MockServer::start().await;
    let echo = ResponseTemplate::new(401).set_body_json(serde_json::json!({"error": {
        "code": "401",
        "message": format!("Access denied due to invalid subscription key {KEY}.")}}));
    mount_post(&server, PATH, echo, None).await;
    let client = OpenAiClient::azure(DEPLOYMENT, &options(&server)).unwrap();
    let error = client.complete(&hello(DEPLOYMENT)).await.unwrap_err();
    assert_eq!(error.status, Some(401));
    assert_eq!(error.cause, Some(LlmErrorCause::AccessDenied));
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    assert!(
        !shown.contains("api-version"),
        "no query in messages: {shown}"
    );
}

// C50: Azure's 400 `content_filter` (the prompt was filtered) ends the run `refused`, at
// once, and never goes to a fallback model.
#[tokio::test]
async fn c50_azure_content_filter_400_is_refused_and_does_not_fall_back() {
    let server = MockServer::start().await;
    let filtered = json_fixture(400, "azure/content_filter_prompt.json");
    mount_post(&server, PATH, filtered, None).await;
    let backup = MockServer::start().await;
    let submit = json_fixture(200, "openai/c5_stop_with_tool_calls.json");
    mount_post(&backup, "/v1/chat/completions", submit, None).await;
    let config = agent_core::AgentConfig::<Triage>::builder("triage")
        .model("azure/prod-gpt-4o")
        .output_mode(agent_core::OutputMode::Tool)
        .provider(
            ProviderOptions::default()
                .with_api_key(KEY)
                .with_base_url(server.uri()),
        )
        .fallback_model_with(
            "dispatch/backup",
            ProviderOptions::default().with_base_url(format!("{}/v1", backup.uri())),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::Refused {
        stop_reason,
        message,
        ..
    }) = &result.outcome
    else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(*stop_reason, StopReason::ContentFilter);
    assert!(message.contains("content_filter"), "{message}");
    assert!(message.contains("content management policy"), "{message}");
    assert_eq!(result.outcome.as_ref().unwrap_err().category(), "refused");
    assert_eq!(requests(&server).await.len(), 1, "not retried");
    assert_eq!(requests(&backup).await.len(), 0, "no fallback");
    // The adapter's own error says why.
    let client = OpenAiClient::azure(DEPLOYMENT, &options(&server)).unwrap();
    let error = client.complete(&hello(DEPLOYMENT)).await.unwrap_err();
    assert_eq!(error.cause, Some(LlmErrorCause::ContentFilter));
    assert!(!error.falls_back());
}

// C50: a completion stopped by Azure's output filter (`finish_reason: content_filter`)
// ends the run `refused`.
#[tokio::test]
async fn c50_azure_content_filter_finish_reason_is_refused() {
    let server = MockServer::start().await;
    let filtered = json_fixture(200, "azure/content_filter_finish.json");
    mount_post(&server, PATH, filtered, None).await;
    let config = agent_core::AgentConfig::<Triage>::builder("triage")
        .model("azure/prod-gpt-4o")
        .output_mode(agent_core::OutputMode::Tool)
        .provider(
            ProviderOptions::default()
                .with_api_key(KEY)
                .with_base_url(server.uri()),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::Refused { stop_reason, .. }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(*stop_reason, StopReason::ContentFilter);
    assert_eq!(requests(&server).await.len(), 1);
    assert_eq!(result.usage.input_tokens, 96);
    assert_eq!(result.usage.output_tokens, 12);
}
