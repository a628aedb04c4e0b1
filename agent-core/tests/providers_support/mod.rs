//! Shared helpers of the provider adapter tests: fixtures, a triage output type with a
//! hand-written `AgentOutput`, tools that count their calls, and wiremock helpers.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub(crate) mod batch_server;

use agent_core::providers::ProviderOptions;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agent_core::{
    AgentConfig, AgentConfigBuilder, AgentOutput, Tool, ToolContext,
    config::Backoff,
    llm::{LlmRequest, Message},
    observe::RunEvent,
    output::SUBMIT_OUTPUT,
    schema::{SchemaValidator, ValidationErrors},
    tool::{ToolDefinition, ToolFuture},
};
use serde::Deserialize;
use serde_json::{Value, json};
use wiremock::{MockServer, Request, ResponseTemplate};

/// The key every test configures; searched for in the secrets test.
pub(crate) const KEY: &str = "sk-test-7f3c9a1e5b2d4c6e8a0b";

/// A fixture file's text (`tests/fixtures/<path>`).
pub(crate) fn fixture(path: &str) -> String {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// A response with a fixture as its JSON body.
pub(crate) fn json_fixture(status: u16, path: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(fixture(path), "application/json")
}

/// A response with a fixture as a body of the given content type.
pub(crate) fn raw_fixture(status: u16, path: &str, content_type: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(fixture(path), content_type)
}

/// Mounts a POST mock on `path`, answering `times` times (every time when `None`).
pub(crate) async fn mount_post(
    server: &MockServer,
    path: &str,
    response: ResponseTemplate,
    times: Option<u64>,
) {
    let mock = wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path(path))
        .respond_with(response);
    let mock = match times {
        Some(n) => mock.up_to_n_times(n),
        None => mock,
    };
    mock.mount(server).await;
}

/// The JSON bodies of every request the server received, in order.
pub(crate) async fn bodies(server: &MockServer) -> Vec<Value> {
    requests(server)
        .await
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("request body is JSON"))
        .collect()
}

/// Every request the server received.
pub(crate) async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap_or_default()
}

/// A header of a request, as text.
pub(crate) fn header<'r>(request: &'r Request, name: &str) -> Option<&'r str> {
    request.headers.get(name).and_then(|v| v.to_str().ok())
}

/// A request with one user message and no tools.
pub(crate) fn hello(model: &str) -> LlmRequest {
    LlmRequest::new(model)
        .with_system("You triage support tickets.")
        .with_message(Message::user("My parcel A-1001 is a week late."))
}

/// Where a ticket goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Queue {
    /// Payments and invoices.
    Billing,
    /// Deliveries.
    Shipping,
    /// Bugs and outages.
    Technical,
    /// Logins and profiles.
    Account,
}

/// Triage decision for one support ticket.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Triage {
    /// Severity from 1 (lowest) to 4 (critical).
    pub severity: u8,
    /// The queue.
    pub queue: Queue,
    /// One sentence.
    pub summary: String,
}

/// The schema `#[agent_output]` would give `Triage`.
pub(crate) fn triage_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "severity": {"type": "integer", "minimum": 1, "maximum": 4,
                          "description": "Severity from 1 (lowest) to 4 (critical)."},
            "queue": {"type": "string", "enum": ["billing", "shipping", "technical", "account"],
                       "description": "Where the ticket goes."},
            "summary": {"type": "string", "minLength": 1, "description": "One sentence."}
        },
        "required": ["severity", "queue", "summary"],
        "additionalProperties": false
    })
}

impl AgentOutput for Triage {
    fn output_tool() -> Option<ToolDefinition> {
        Some(ToolDefinition::new(
            SUBMIT_OUTPUT,
            "Triage decision for one support ticket.",
            triage_schema(),
        ))
    }

    fn from_arguments(arguments: &Value) -> Result<Self, ValidationErrors> {
        static VALIDATOR: OnceLock<SchemaValidator> = OnceLock::new();
        VALIDATOR
            .get_or_init(|| SchemaValidator::new(&triage_schema()).unwrap())
            .validate_into(arguments)
    }
}

/// The triage answer of the fixtures.
pub(crate) fn expected_triage() -> Triage {
    Triage {
        severity: 2,
        queue: Queue::Shipping,
        summary: "Parcel A-1001 is a week late.".to_owned(),
    }
}

/// A tool that answers with fixed text and counts its executions.
#[derive(Clone)]
pub(crate) struct CountingTool {
    name: &'static str,
    parameters: Value,
    calls: Arc<AtomicU32>,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl CountingTool {
    /// `lookup_order(order_id: string)`.
    pub(crate) fn lookup_order() -> Self {
        Self::new(
            "lookup_order",
            json!({
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"]
            }),
        )
    }

    /// `refund_status(order_id, include_history?)`.
    pub(crate) fn refund_status() -> Self {
        Self::new(
            "refund_status",
            json!({
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "include_history": {"type": "boolean"}},
                "required": ["order_id"]
            }),
        )
    }

    /// `ping()`: no parameters.
    pub(crate) fn ping() -> Self {
        Self::new("ping", json!({"type": "object", "properties": {}}))
    }

    fn new(name: &'static str, parameters: Value) -> Self {
        Self {
            name,
            parameters,
            calls: Arc::default(),
            seen: Arc::default(),
        }
    }

    /// How many times it ran.
    pub(crate) fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The arguments of every execution.
    pub(crate) fn seen(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }
}

impl Tool for CountingTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name,
            format!("The {} tool.", self.name),
            self.parameters.clone(),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let order = arguments
                .get("order_id")
                .and_then(Value::as_str)
                .unwrap_or("-")
                .to_owned();
            self.seen.lock().unwrap().push(arguments);
            Ok(format!(
                "{{\"order_id\":\"{order}\",\"status\":\"in transit\"}}"
            ))
        })
    }
}

/// A triage config for `model` at `base_url`, with the test key and no backoff, in tool
/// output mode (the wire facts these tests pin are tool mode's; the output modes have
/// their own tests).
pub(crate) fn triage(model: &str, base_url: &str) -> AgentConfigBuilder<Triage> {
    triage_with(model, base_url, |options| options)
}

/// [`triage`] with more provider options than the test key and `base_url` (`more`
/// adds them).
pub(crate) fn triage_with(
    model: &str,
    base_url: &str,
    more: impl FnOnce(ProviderOptions) -> ProviderOptions,
) -> AgentConfigBuilder<Triage> {
    let options = ProviderOptions::default()
        .with_api_key(KEY)
        .with_base_url(base_url);
    AgentConfig::<Triage>::builder("triage")
        .model(model)
        .output_mode(agent_core::OutputMode::Tool)
        .provider(more(options))
        .system_prompt("You triage support tickets.")
        .backoff(Backoff::none())
}

/// The retry delays a run scheduled, recorded by an observer.
#[derive(Clone, Default)]
pub(crate) struct Delays(Arc<Mutex<Vec<Duration>>>);

impl Delays {
    /// An observer that records each `RetryScheduled` delay.
    pub(crate) fn observer(&self) -> impl Fn(&RunEvent<'_>) + Send + Sync + 'static {
        let delays = Arc::clone(&self.0);
        move |event| {
            if let RunEvent::RetryScheduled { delay, .. } = event {
                delays.lock().unwrap().push(*delay);
            }
        }
    }

    /// The delays so far.
    pub(crate) fn get(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

/// The text-only conversation the parts tests send to check that a request without
/// parts is byte for byte what it was: a question, a `lookup_order` call (`call_id`)
/// and its result, at 512 output tokens.
pub(crate) fn text_only_request(model: &str, call_id: &str) -> LlmRequest {
    LlmRequest::new(model)
        .with_max_tokens(512)
        .with_message(agent_core::llm::Message::user("Where is A-1001?"))
        .with_message(agent_core::llm::Message::assistant(
            "",
            vec![agent_core::llm::ToolCall::new(
                call_id,
                "lookup_order",
                json!({"id": "A-1001"}),
            )],
        ))
        .with_message(agent_core::llm::Message::tool_results(vec![
            agent_core::llm::ToolResult::ok(call_id, "lookup_order", "shipped"),
        ]))
}

/// `lookup_order` (the name the fixtures call) returning its part with the text "a
/// photo of the parcel".
pub(crate) struct Photo(pub(crate) agent_core::content::Part);

impl agent_core::Tool for Photo {
    fn definition(&self) -> agent_core::tool::ToolDefinition {
        agent_core::tool::ToolDefinition::new(
            "lookup_order",
            "Look an order up.",
            json!({"type": "object", "properties": {"order_id": {"type": "string"}}}),
        )
    }

    fn call<'a>(
        &'a self,
        _arguments: Value,
        _context: agent_core::ToolContext,
    ) -> agent_core::tool::ToolFuture<'a> {
        Box::pin(async { Ok("a photo of the parcel".to_owned()) })
    }

    fn call_content<'a>(
        &'a self,
        _arguments: Value,
        _context: agent_core::ToolContext,
    ) -> agent_core::tool::ContentFuture<'a> {
        let part = self.0.clone();
        Box::pin(async move {
            Ok(agent_core::tool::ToolContent::text("a photo of the parcel").part(part))
        })
    }
}

/// Reads one HTTP request from `socket`: its head and its body (`Content-Length`)
/// before a hand-written server answers; `false` when the client closed first.
pub(crate) async fn read_request(socket: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut request = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        // A read error is the client gone, as a close is.
        let n = socket.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return false;
        }
        request.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let length = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= head_end + 4 + length {
                return true;
            }
        }
    }
}

/// A one-shot server that answers with `body` (of `content_type`: an event stream)
/// written in pieces of `piece` bytes, each flushed on its own; returns its base URL.
/// What a stream split at any byte looks like to the reader (C61).
pub(crate) async fn trickle_server(body: Vec<u8>, content_type: &str, piece: usize) -> String {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let head =
        format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n");
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        socket.set_nodelay(true).unwrap();
        read_request(&mut socket).await;
        socket.write_all(head.as_bytes()).await.unwrap();
        for bytes in body.chunks(piece) {
            socket.write_all(bytes).await.unwrap();
            socket.flush().await.unwrap();
            tokio::task::yield_now().await;
        }
    });
    format!("http://{addr}")
}
