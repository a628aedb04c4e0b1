//! `McpService` over streamable HTTP, with the official MCP Python SDK as the client, and
//! raw HTTP requests that break the protocol.

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
