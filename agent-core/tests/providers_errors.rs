//! Failures end to end through `run_agent` (C15-C20) and at the transport: timeouts,
//! refused connections, bodies cut off mid-read, bodies over the cap.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::time::Duration;

use agent_core::providers::{OpenAiClient, ProviderOptions};
use agent_core::{
    AgentError,
    config::Backoff,
    llm::{LlmClient, LlmErrorKind},
    run_agent,
};
use providers_support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use wiremock::{MockServer, ResponseTemplate};

const MODEL: &str = "gpt-4.1";

fn base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, "/v1/chat/completions", response, None).await;
}

async fn mount_once(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, "/v1/chat/completions", response, Some(1)).await;
}

fn submit() -> ResponseTemplate {
    json_fixture(200, "openai/c5_stop_with_tool_calls.json")
}

fn client_at(base_url: &str, options: ProviderOptions) -> OpenAiClient {
    OpenAiClient::openai(&options.with_api_key(KEY).with_base_url(base_url)).unwrap()
}

// C17: 500 with x-should-retry: false is not retried.
#[tokio::test]
async fn c17_should_retry_false_is_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(500, "openai/error_server.json").insert_header("x-should-retry", "false"),
    )
    .await;
    let config = triage(MODEL, &base(&server)).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::LlmPermanent { error }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(error.status, Some(500));
    assert_eq!(requests(&server).await.len(), 1, "exactly one request");
}

// C18: a 429 with retry-after-ms: 20 is retried after 20 ms, not after the backoff.
#[tokio::test]
async fn c18_retry_after_ms_beats_the_backoff() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(429, "openai/error_rate_limit.json").insert_header("retry-after-ms", "20"),
    )
    .await;
    mount(&server, submit()).await;
    let delays = Delays::default();
    let slow = Backoff::exponential(Duration::from_secs(30), Duration::from_secs(30));
    let config = triage(MODEL, &base(&server))
        .backoff(slow)
        .observer(delays.observer())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(delays.get(), [Duration::from_millis(20)]);
    assert_eq!(requests(&server).await.len(), 2);
}

// C18: a server delay over 60 s falls back to the (capped) backoff.
#[tokio::test]
async fn c18_retry_after_over_a_minute_falls_back_to_the_backoff() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(429, "openai/error_rate_limit.json").insert_header("retry-after", "120"),
    )
    .await;
    mount(&server, submit()).await;
    let delays = Delays::default();
    let mut backoff = Backoff::exponential(Duration::from_millis(5), Duration::from_millis(5));
    backoff.jitter = 0.0;
    let config = triage(MODEL, &base(&server))
        .backoff(backoff)
        .observer(delays.observer())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(delays.get(), [Duration::from_millis(5)]);
}

// C20 with max_llm_retries: consecutive 503s end the run with every failure kept.
#[tokio::test]
async fn consecutive_transient_failures_exhaust_the_retries() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(503, "openai/error_server.json").insert_header("x-request-id", "req_503"),
    )
    .await;
    let config = triage(MODEL, &base(&server))
        .max_llm_retries(3)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::MaxLlmRetries { failures }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(failures.len(), 3);
    assert!(
        failures
            .iter()
            .all(|f| f.status == Some(503) && f.request_id.as_deref() == Some("req_503"))
    );
    assert_eq!(requests(&server).await.len(), 3);
    assert_eq!(result.usage.llm_calls, 3);
}

#[tokio::test]
async fn a_slow_server_is_a_transient_timeout() {
    let server = MockServer::start().await;
    mount(&server, submit().set_delay(Duration::from_secs(5))).await;
    let options = ProviderOptions::default().with_request_timeout(Duration::from_millis(200));
    let error = client_at(&base(&server), options)
        .complete(&hello(MODEL))
        .await
        .unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert!(error.message.contains("timed out"), "{error}");
    assert_eq!(error.status, None);

    let config = triage_with(MODEL, &base(&server), |o| {
        o.with_request_timeout(Duration::from_millis(200))
    })
    .max_llm_retries(1)
    .build()
    .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.category(), Some("max_llm_retries"));
}

#[tokio::test]
async fn a_refused_connection_is_transient() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let error = client_at(
        &format!("http://127.0.0.1:{port}/v1"),
        ProviderOptions::default(),
    )
    .complete(&hello(MODEL))
    .await
    .unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert!(error.message.contains("cannot connect"), "{error}");
    assert!(!error.message.contains(KEY));
}

#[tokio::test]
async fn a_body_over_the_cap_is_a_permanent_error() {
    let server = MockServer::start().await;
    mount(&server, json_fixture(200, "openai/text.json")).await;
    let options = ProviderOptions::default().with_max_response_bytes(256);
    let error = client_at(&base(&server), options)
        .complete(&hello(MODEL))
        .await
        .unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Permanent);
    assert!(
        error.message.contains("max_response_bytes (256 bytes)"),
        "{error}"
    );
}

#[tokio::test]
async fn a_huge_error_page_is_still_classified_by_its_status() {
    let server = MockServer::start().await;
    let page = format!(
        "<html><body>{}</body></html>",
        "Service Unavailable ".repeat(10_000)
    );
    mount(
        &server,
        ResponseTemplate::new(503).set_body_raw(page, "text/html"),
    )
    .await;
    let options = ProviderOptions::default().with_max_response_bytes(1024);
    let error = client_at(&base(&server), options)
        .complete(&hello(MODEL))
        .await
        .unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert_eq!(error.status, Some(503));
    assert!(error.message.len() < 600, "{}", error.message.len());
}

/// A one-connection HTTP server that answers any request with `head` then `body`, then
/// keeps writing `repeat` forever (until the client goes away), or closes.
async fn raw_server(head: &'static str, body: &'static str, repeat: Option<String>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        if !crate::providers_support::read_request(&mut socket).await {
            return;
        }
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(body.as_bytes()).await;
        if let Some(chunk) = repeat {
            while socket.write_all(chunk.as_bytes()).await.is_ok() {}
        }
    });
    format!("http://{addr}/v1")
}

// C20 at the transport: the connection drops before the announced length arrived.
#[tokio::test]
async fn c20_a_body_cut_off_mid_read_is_transient() {
    let url = raw_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\nx-request-id: req_cut\r\n\r\n",
        "{\"choices\":[{\"message\":",
        None,
    )
    .await;
    let error = client_at(&url, ProviderOptions::default())
        .complete(&hello(MODEL))
        .await
        .unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient, "{error}");
    assert_eq!(error.status, Some(200));
    assert_eq!(error.request_id.as_deref(), Some("req_cut"));
    assert!(
        error.message.contains("reading the response body"),
        "{error}"
    );
}

// An endless chunked body stops at the cap: an error, never an out-of-memory.
#[tokio::test]
async fn an_endless_chunked_body_stops_at_the_cap() {
    let url = raw_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        "",
        Some(format!("400\r\n{}\r\n", " ".repeat(0x400))),
    )
    .await;
    let options = ProviderOptions::default().with_max_response_bytes(64 * 1024);
    let error = client_at(&url, options)
        .complete(&hello(MODEL))
        .await
        .unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Permanent, "{error}");
    assert!(error.message.contains("max_response_bytes"), "{error}");
}
