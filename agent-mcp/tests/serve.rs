//! `McpService` over streamable HTTP, with the official MCP Python SDK as the client, and
//! raw HTTP requests that break the protocol.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agent_mcp::McpService;
use tokio_util::sync::CancellationToken;

use crate::common::served::{self, check, events, events_path, python, run_python};

/// The service on 127.0.0.1, an ephemeral port: its `/mcp` URL and its stop token.
async fn start(service: McpService) -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move { service.serve_listener(listener, token).await.unwrap() });
    (url, stop)
}

/// `mode` is the Python client's connect mode, `protocol` the version it must settle on.
async fn python_client_over_http(mode: &'static str, protocol: &str) {
    let Some(python) = python() else { return };
    let path = events_path(&format!("http-{mode}"));
    let (url, stop) = start(served::service(&path, true)).await;
    let report = tokio::task::spawn_blocking(move || {
        run_python(&python, "serve_client.py", &[mode, "--http", &url])
    })
    .await
    .unwrap();
    let lines = events(&path, 4);
    stop.cancel();
    let _ = std::fs::remove_file(&path);
    check(&report, &lines, protocol);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_over_http_handshake() {
    python_client_over_http("legacy", "2025-11-25").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_over_http_discover() {
    python_client_over_http("auto", "2026-07-28").await;
}

/// A body that is not JSON, one over the size limit, and a foreign `Host`: each an HTTP
/// error without a session, and the endpoint answers the next `initialize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_http_requests_are_refused_and_the_server_lives() {
    let path = events_path("http-raw");
    let service = served::service(&path, true).max_request_bytes(64 * 1024);
    let (url, stop) = start(service).await;
    let client = reqwest::Client::new();
    let post = |body: Vec<u8>| {
        client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
    };
    let not_json = post(b"{this is not json".to_vec()).send().await.unwrap();
    assert_eq!(not_json.status().as_u16(), 415);
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(64 * 1024)
    );
    let oversize = post(huge.into_bytes()).send().await.unwrap();
    assert_eq!(oversize.status().as_u16(), 413);
    let text = oversize.text().await.unwrap();
    assert_eq!(text, "Payload Too Large: request body exceeds 65536 bytes");
    let foreign = post(b"{}".to_vec())
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status().as_u16(), 403);
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
    let ok = post(initialize.to_string().into_bytes())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let body = ok.text().await.unwrap();
    assert!(body.contains(r#""protocolVersion":"2025-11-25""#), "{body}");
    stop.cancel();
}
