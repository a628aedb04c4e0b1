//! A fast, stateless mock of the OpenAI Chat Completions endpoint, shared by every
//! framework in the peer benchmarks.
//!
//! `POST .../chat/completions` answers with one tool call:
//! - when no message of the request has role `tool`: a call of the user tool
//!   (`lookup_order` if offered, else the first tool that is not an output tool);
//! - otherwise: a call of the framework's output tool, found by name in the request's
//!   `tools` list (`submit_output` for agent-core, `final_result` for PydanticAI and
//!   rig's output-tool mode, `submit` for rig's extractor; else the last tool), with
//!   valid arguments for the benchmark's `Triage` struct.
//!
//! `POST .../messages` answers the same turns in the Anthropic Messages API format
//! (module [`anthropic`]), so a client can be measured on that wire too.
//!
//! Every reply is a standard `chat.completion` object with `usage`; a request with
//! `"stream": true` gets the same completion as `chat.completion.chunk` events.
//! `GET /stats` reports `{"requests", "inflight", "peak_inflight", "bad_requests"}`;
//! `POST /stats/reset` zeroes them.
//!
//! Usage: `mock-server [--port N] [--delay-ms MS] [--threads N]`. It prints
//! `listening 127.0.0.1:PORT` on its first line of stdout (port 0 picks a free port).
//! `--delay-ms` holds every completion that long before answering (the parked-memory
//! scenario uses 5000).

mod anthropic;

use std::borrow::Cow;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::net::TcpSocket;

/// The output tool names the server recognizes, in order of preference.
const OUTPUT_TOOLS: [&str; 3] = ["submit_output", "final_result", "submit"];

/// The user tool every framework registers.
const USER_TOOL: &str = "lookup_order";

/// The user tool's arguments, as the JSON text the model "writes".
const TOOL_ARGS: &str = r#"{"order_id":"A-1001"}"#;

/// Valid output arguments for `Triage { severity: 1..=4, queue, summary }`.
const OUTPUT_ARGS: &str = r#"{"severity":2,"queue":"shipping","summary":"Order A-1001 is late; the customer asks when it will arrive."}"#;

#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    inflight: AtomicU64,
    peak_inflight: AtomicU64,
    bad_requests: AtomicU64,
}

struct Server {
    delay: Duration,
    stats: Stats,
    next_id: AtomicU64,
    /// `TOOL_ARGS` and `OUTPUT_ARGS` as JSON string literals (escaped once).
    tool_args_json: String,
    output_args_json: String,
    /// The arguments in `STREAM_FRAGMENTS` pieces, each a JSON string, for streamed
    /// replies.
    tool_args_fragments: Vec<String>,
    output_args_fragments: Vec<String>,
}

/// How many chunks a streamed reply splits the arguments into.
const STREAM_FRAGMENTS: usize = 4;

/// `text` in `n` pieces of about equal length (on char boundaries), each as a JSON
/// string.
fn fragments(text: &str, n: usize) -> Result<Vec<String>, serde_json::Error> {
    let size = text.len().div_ceil(n).max(1);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(serde_json::to_string(&text[start..end])?);
        start = end;
    }
    Ok(out)
}

#[derive(Deserialize)]
struct ChatRequest<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    messages: Vec<RoleOnly<'a>>,
    #[serde(borrow, default)]
    tools: Option<Vec<ToolSpec<'a>>>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Deserialize)]
struct RoleOnly<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ToolSpec<'a> {
    #[serde(borrow)]
    function: FunctionName<'a>,
}

#[derive(Deserialize)]
struct FunctionName<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

struct Args {
    port: u16,
    delay_ms: u64,
    threads: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        port: 0,
        delay_ms: 0,
        threads: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => args.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--delay-ms" => {
                args.delay_ms = value()?.parse().map_err(|e| format!("--delay-ms: {e}"))?;
            }
            "--threads" => {
                args.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?;
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(args)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    runtime.block_on(serve(args))
}

async fn serve(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    // The kernel caps the backlog at net.core.somaxconn; ask for the most.
    let listener = socket.listen(65_535)?;
    let local = listener.local_addr()?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening {local}")?;
        out.flush()?;
    }
    let server = Arc::new(Server {
        delay: Duration::from_millis(args.delay_ms),
        stats: Stats::default(),
        next_id: AtomicU64::new(1),
        tool_args_json: serde_json::to_string(TOOL_ARGS)?,
        output_args_json: serde_json::to_string(OUTPUT_ARGS)?,
        tool_args_fragments: fragments(TOOL_ARGS, STREAM_FRAGMENTS)?,
        output_args_fragments: fragments(OUTPUT_ARGS, STREAM_FRAGMENTS)?,
    });
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: wait a little, keep serving.
                eprintln!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let server = Arc::clone(&server);
                async move { Ok::<_, Infallible>(server.handle(req).await) }
            });
            let _ = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn json_response(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    typed_response(status, body, "application/json")
}

fn typed_response(
    status: StatusCode,
    body: String,
    content_type: &'static str,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn error_response(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({
        "error": {"message": message, "type": "invalid_request_error", "code": null}
    });
    json_response(status, body.to_string())
}

/// Decrements the in-flight count when a completion ends (or its connection drops).
struct InflightGuard<'a>(&'a AtomicU64);

impl Drop for InflightGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Server {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = req.uri().path();
        match (req.method(), path) {
            (&Method::GET, "/stats") => return self.stats_response(),
            (&Method::POST, "/stats/reset") => {
                for counter in [
                    &self.stats.requests,
                    &self.stats.peak_inflight,
                    &self.stats.bad_requests,
                ] {
                    counter.store(0, Ordering::Relaxed);
                }
                return self.stats_response();
            }
            (&Method::POST, p) if p.ends_with("/chat/completions") => {}
            (&Method::POST, p) if p.ends_with("/messages") => {}
            _ => return error_response(StatusCode::NOT_FOUND, "not found"),
        }
        let messages_api = path.ends_with("/messages");
        let stats = &self.stats;
        stats.requests.fetch_add(1, Ordering::Relaxed);
        let now = stats.inflight.fetch_add(1, Ordering::Relaxed) + 1;
        stats.peak_inflight.fetch_max(now, Ordering::Relaxed);
        let _guard = InflightGuard(&stats.inflight);
        let body = match req.into_body().collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => {
                stats.bad_requests.fetch_add(1, Ordering::Relaxed);
                return error_response(StatusCode::BAD_REQUEST, &format!("body: {e}"));
            }
        };
        let reply = if messages_api {
            self.message(&body)
        } else {
            self.completion(&body)
        };
        let response = match reply {
            Ok(Reply::Json(text)) => json_response(StatusCode::OK, text),
            Ok(Reply::Events(text)) => typed_response(StatusCode::OK, text, "text/event-stream"),
            Err(message) => {
                stats.bad_requests.fetch_add(1, Ordering::Relaxed);
                eprintln!("bad request: {message}");
                return error_response(StatusCode::BAD_REQUEST, &message);
            }
        };
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        response
    }

    fn stats_response(&self) -> Response<Full<Bytes>> {
        let s = &self.stats;
        let body = serde_json::json!({
            "requests": s.requests.load(Ordering::Relaxed),
            "inflight": s.inflight.load(Ordering::Relaxed),
            "peak_inflight": s.peak_inflight.load(Ordering::Relaxed),
            "bad_requests": s.bad_requests.load(Ordering::Relaxed),
        });
        json_response(StatusCode::OK, body.to_string())
    }

    /// The completion for one request body: JSON text, or with `"stream": true` the
    /// same completion as server-sent `chat.completion.chunk` events (the arguments
    /// in `STREAM_FRAGMENTS` pieces; the usage in a last chunk when
    /// `stream_options.include_usage`; then `data: [DONE]`), sent at once.
    fn completion(&self, body: &[u8]) -> Result<Reply, String> {
        let request: ChatRequest<'_> =
            serde_json::from_slice(body).map_err(|e| format!("invalid JSON body: {e}"))?;
        let stream = request.stream == Some(true);
        let include_usage = request
            .stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false);
        let names: Vec<&str> = request
            .tools
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|t| t.function.name.as_ref())
            .collect();
        if names.is_empty() {
            return Err("the request offers no tools".to_owned());
        }
        let has_tool_result = request.messages.iter().any(|m| m.role == "tool");
        let (name, output) = pick_tool(&names, has_tool_result)?;
        let (arguments, pieces) = self.arguments(output);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let model = serde_json::to_string(request.model.as_deref().unwrap_or("mock"))
            .map_err(|e| e.to_string())?;
        let name = serde_json::to_string(name).map_err(|e| e.to_string())?;
        let prompt_tokens = body.len() / 4;
        let completion_tokens = 24;
        if stream {
            let head = format!(
                r#"{{"id":"chatcmpl-{id}","object":"chat.completion.chunk","created":{created},"model":{model},"choices":[{{"index":0,"delta":"#
            );
            let tail = r#","logprobs":null,"finish_reason":null}],"usage":null}"#;
            let mut out = String::with_capacity(2048);
            out.push_str("data: ");
            out.push_str(&head);
            out.push_str(&format!(
                r#"{{"role":"assistant","content":null,"tool_calls":[{{"index":0,"id":"call_{id}","type":"function","function":{{"name":{name},"arguments":""}}}}]}}"#
            ));
            out.push_str(tail);
            out.push_str("\n\n");
            for piece in pieces {
                out.push_str("data: ");
                out.push_str(&head);
                out.push_str(&format!(
                    r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":{piece}}}}}]}}"#
                ));
                out.push_str(tail);
                out.push_str("\n\n");
            }
            out.push_str(&format!(
                r#"data: {head}{{}},"logprobs":null,"finish_reason":"tool_calls"}}],"usage":null}}"#
            ));
            out.push_str("\n\n");
            if include_usage {
                out.push_str(&format!(
                    r#"data: {{"id":"chatcmpl-{id}","object":"chat.completion.chunk","created":{created},"model":{model},"choices":[],"usage":{{"prompt_tokens":{prompt_tokens},"completion_tokens":{completion_tokens},"total_tokens":{total}}}}}"#,
                    total = prompt_tokens + completion_tokens,
                ));
                out.push_str("\n\n");
            }
            out.push_str("data: [DONE]\n\n");
            return Ok(Reply::Events(out));
        }
        Ok(Reply::Json(format!(
            concat!(
                r#"{{"id":"chatcmpl-{id}","object":"chat.completion","created":{created},"model":{model},"#,
                r#""choices":[{{"index":0,"message":{{"role":"assistant","content":null,"tool_calls":["#,
                r#"{{"id":"call_{id}","type":"function","function":{{"name":{name},"arguments":{arguments}}}}}]}},"#,
                r#""logprobs":null,"finish_reason":"tool_calls"}}],"#,
                r#""usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion},"total_tokens":{total}}}}}"#
            ),
            id = id,
            created = created,
            model = model,
            name = name,
            arguments = arguments,
            prompt = prompt_tokens,
            completion = completion_tokens,
            total = prompt_tokens + completion_tokens,
        )))
    }
}

/// The tool a reply calls: the output tool once the request holds a tool result (found
/// by name in `names`, the request's tools), else the user tool. `true` with the
/// output tool.
fn pick_tool<'n>(names: &[&'n str], has_tool_result: bool) -> Result<(&'n str, bool), String> {
    if has_tool_result {
        let output = OUTPUT_TOOLS
            .iter()
            .find_map(|o| names.iter().find(|n| *n == o).copied())
            .or_else(|| names.last().copied())
            .ok_or("the request offers no tools")?;
        return Ok((output, true));
    }
    let user = if let Some(user) = names.iter().find(|n| **n == USER_TOOL) {
        user
    } else {
        names
            .iter()
            .find(|n| !OUTPUT_TOOLS.contains(n))
            .copied()
            .ok_or("the request offers no user tool")?
    };
    Ok((user, false))
}

impl Server {
    /// The arguments of the user tool's call or (`output`) the output tool's: as one
    /// JSON string, and in `STREAM_FRAGMENTS` pieces, each a JSON string.
    fn arguments(&self, output: bool) -> (&String, &Vec<String>) {
        if output {
            (&self.output_args_json, &self.output_args_fragments)
        } else {
            (&self.tool_args_json, &self.tool_args_fragments)
        }
    }
}

/// A completion: a JSON body, or server-sent events.
enum Reply {
    Json(String),
    Events(String),
}
