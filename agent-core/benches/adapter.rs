//! One round trip through the OpenAI-compatible adapter against a local mock server,
//! beside a bare reqwest POST of the same body. The difference is the adapter's own cost
//! (building the wire request from an `LlmRequest`, serializing, parsing and normalizing
//! the response); the target is at most 50 us.
//!
//! ```text
//! cargo bench -p agent-core --bench adapter
//! ```
//!
//! The mock is a minimal keep-alive HTTP/1.1 server on its own thread that answers every
//! request with the same llama.cpp-style tool-call response, so both sides pay the same
//! network and server cost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::providers::{OpenAiClient, ProviderOptions};
use agent_core::{
    llm::{LlmClient, LlmRequest, Message, ToolCall, ToolResult},
    tool::ToolDefinition,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RESPONSE: &str = r#"{"choices":[{"finish_reason":"tool_calls","index":0,"message":{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"submit_output","arguments":"{\"severity\":2,\"queue\":\"shipping\",\"summary\":\"Parcel A-1001 is a week late; tracking has not moved since Monday.\"}"},"id":"Dq3uCIpZ2BfyJ5Z0WUbKlXrfPBxRMAvT"}]}}],"created":1752061300,"model":"gemma","system_fingerprint":"b6490-3c3635d2","object":"chat.completion","usage":{"completion_tokens":40,"prompt_tokens":301,"total_tokens":341,"prompt_tokens_details":{"cached_tokens":256}},"id":"chatcmpl-9GqYk2mJ0bXr5nTcPz1WvL8sAeDuHfQo","timings":{"prompt_n":45,"prompt_ms":118.2,"predicted_n":40,"predicted_ms":296.5}}"#;

/// The first request body the mock received.
type FirstBody = Arc<Mutex<Option<Vec<u8>>>>;

/// Serves `RESPONSE` to every request, keep-alive, until the process ends; keeps the
/// first request body.
fn start_mock() -> (SocketAddr, FirstBody) {
    let first: FirstBody = Arc::default();
    let keep = Arc::clone(&first);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            loop {
                let (socket, _) = listener.accept().await.unwrap();
                socket.set_nodelay(true).unwrap();
                tokio::spawn(serve(socket, Arc::clone(&keep)));
            }
        });
    });
    (rx.recv().unwrap(), first)
}

async fn serve(mut socket: TcpStream, first: FirstBody) {
    let reply = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-request-id: req_bench\r\ncontent-length: {}\r\n\r\n{RESPONSE}",
        RESPONSE.len()
    );
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 8192];
    loop {
        // One request: the head, then content-length bytes of body.
        let (head_end, length) = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                break (end + 4, length);
            }
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        while buf.len() < head_end + length {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        {
            let mut first = first.lock().unwrap();
            if first.is_none() {
                *first = Some(buf[head_end..head_end + length].to_vec());
            }
        }
        buf.drain(..head_end + length);
        if socket.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// A mid-run request: system prompt, ticket, a tool call and its result, two tools.
fn request() -> LlmRequest {
    let lookup = ToolDefinition::new(
        "lookup_order",
        "Look up an order by its id.",
        json!({"type": "object", "properties": {"order_id": {"type": "string", "description": "The order id, e.g. A-1001."}}, "required": ["order_id"]}),
    );
    let submit = ToolDefinition::new(
        "submit_output",
        "Triage decision for one support ticket.",
        json!({
            "type": "object",
            "properties": {
                "severity": {"type": "integer", "minimum": 1, "maximum": 4, "description": "Severity from 1 (lowest) to 4 (critical)."},
                "queue": {"type": "string", "enum": ["billing", "shipping", "technical", "account"]},
                "summary": {"type": "string", "minLength": 1}
            },
            "required": ["severity", "queue", "summary"],
            "additionalProperties": false
        }),
    );
    LlmRequest::new("gemma")
        .with_system("You triage support tickets. Look orders up before deciding, then call submit_output.")
        .with_message(Message::user(
            "My parcel A-1001 was due a week ago and tracking has not moved since Monday.",
        ))
        .with_message(Message::assistant(
            "Let me look that order up.",
            vec![ToolCall::new("call_1", "lookup_order", json!({"order_id": "A-1001"}))],
        ))
        .with_message(Message::tool_results(vec![ToolResult::ok(
            "call_1",
            "lookup_order",
            r#"{"order_id":"A-1001","status":"in transit","last_scan":"2025-06-02","carrier":"DHL"}"#,
        )]))
        .with_tools(vec![lookup, submit])
}

fn round_trip(c: &mut Criterion) {
    let (addr, first) = start_mock();
    let base = format!("http://{addr}/v1");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client =
        OpenAiClient::compatible("dispatch", &ProviderOptions::default().with_base_url(&base))
            .unwrap();
    let request = request();

    // The bare side posts the very body the adapter sends (captured by the mock).
    let response = rt.block_on(client.complete(&request)).unwrap();
    assert_eq!(response.tool_calls.len(), 1);
    let body: Vec<u8> = first.lock().unwrap().clone().unwrap();
    let bare = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .unwrap();
    let url = format!("{base}/chat/completions");

    let mut group = c.benchmark_group("openai_compatible_round_trip");
    group.bench_function("bare_reqwest_post", |b| {
        b.iter(|| {
            rt.block_on(async {
                let response = bare
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                black_box(response.bytes().await.unwrap())
            })
        });
    });
    group.bench_function("adapter_complete", |b| {
        b.iter(|| rt.block_on(async { black_box(client.complete(&request).await.unwrap()) }));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(8)).sample_size(100);
    targets = round_trip
}
criterion_main!(benches);
