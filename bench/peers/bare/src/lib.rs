//! The floor of the HTTP scenarios: a bare reqwest client that sends the same two
//! Chat Completions requests a framework sends (system + user message and both tool
//! definitions; then the same plus the assistant's tool call and the tool result),
//! parses each reply into typed structs, runs the tool and deserializes the
//! submitted arguments. No agent loop, no schema validation, no retries: the least
//! work that produces the same traffic.
//!
//! Streamed (`bare-stream-bench`, reported as `bare-stream`): the same requests with
//! `stream: true` and `stream_options.include_usage`; the body's server-sent events
//! are parsed by `sse-stream` (the crate agent-core uses) and each chunk's JSON into
//! typed structs (only the tool-call fields), the calls assembled from their
//! fragments. The floor of streaming: the work any Rust client must do to read the
//! same stream, and nothing else (no events handed anywhere, no partial values).

use std::borrow::Cow;
use std::sync::Arc;

use peers_common::{
    INPUT, OUTPUT_DESCRIPTION, SYSTEM_PROMPT, TOOL_DESCRIPTION, TOOL_NAME, Triage, check_triage,
    lookup_order, lookup_order_schema, parse_cli, run_scenario, triage_schema,
};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: Vec<OutMessage<'a>>,
    tools: &'a Value,
    tool_choice: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum OutMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<&'a str>,
        tool_calls: &'a [WireToolCall],
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Deserialize)]
struct ChatReply {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: ReplyMessage,
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Serialize, Deserialize)]
struct WireToolCall {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    function: WireFunction,
}

#[derive(Serialize, Deserialize)]
struct WireFunction {
    name: String,
    arguments: String,
}

/// One `chat.completion.chunk`: only what assembles the tool calls.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<ChunkChoice<'a>>,
}

#[derive(Deserialize)]
struct ChunkChoice<'a> {
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    tool_calls: Vec<CallDelta<'a>>,
}

#[derive(Deserialize)]
struct CallDelta<'a> {
    index: usize,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<Cow<'a, str>>,
}

struct Bare {
    client: reqwest::Client,
    endpoint: String,
    tools: Value,
    stream: bool,
}

impl Bare {
    async fn send(&self, body: &ChatBody<'_>) -> Result<Vec<WireToolCall>, String> {
        if self.stream {
            return self.send_streamed(body).await;
        }
        let bytes = self
            .client
            .post(&self.endpoint)
            .bearer_auth("sk-bench")
            .json(body)
            .send()
            .await
            .map_err(|e| format!("send: {e}"))?
            .error_for_status()
            .map_err(|e| format!("status: {e}"))?
            .bytes()
            .await
            .map_err(|e| format!("body: {e}"))?;
        let reply: ChatReply = serde_json::from_slice(&bytes).map_err(|e| format!("reply: {e}"))?;
        reply
            .choices
            .into_iter()
            .next()
            .map(|c| c.message.tool_calls)
            .ok_or_else(|| "no choice".to_owned())
    }

    /// `send` with `stream: true`: reads the events to `data: [DONE]`.
    async fn send_streamed(&self, body: &ChatBody<'_>) -> Result<Vec<WireToolCall>, String> {
        let response = self
            .client
            .post(&self.endpoint)
            .bearer_auth("sk-bench")
            .json(body)
            .send()
            .await
            .map_err(|e| format!("send: {e}"))?
            .error_for_status()
            .map_err(|e| format!("status: {e}"))?;
        let chunks = futures::stream::unfold(response, |mut response| async move {
            match response.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), response)),
                Ok(None) => None,
                Err(e) => Some((Err(e), response)),
            }
        });
        let mut events = std::pin::pin!(sse_stream::SseByteStream::new(chunks));
        let mut calls: Vec<WireToolCall> = Vec::new();
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| format!("stream: {e}"))?;
            let data = event.data.as_deref().unwrap_or_default();
            if data == "[DONE]" {
                return Ok(calls);
            }
            let chunk: Chunk<'_> =
                serde_json::from_str(data).map_err(|e| format!("chunk: {e}"))?;
            let Some(delta) = chunk.choices.into_iter().next().and_then(|c| c.delta) else {
                continue;
            };
            for part in delta.tool_calls {
                if part.index >= calls.len() {
                    calls.push(WireToolCall {
                        id: String::new(),
                        kind: "function".to_owned(),
                        function: WireFunction {
                            name: String::new(),
                            arguments: String::new(),
                        },
                    });
                }
                let call = calls.get_mut(part.index).ok_or("call index out of order")?;
                if let Some(id) = part.id {
                    call.id = id.into_owned();
                }
                if let Some(function) = part.function {
                    if let Some(name) = function.name {
                        call.function.name = name.into_owned();
                    }
                    if let Some(arguments) = function.arguments {
                        call.function.arguments.push_str(&arguments);
                    }
                }
            }
        }
        Err("the stream ended before [DONE]".to_owned())
    }

    async fn run(&self) -> Result<(), String> {
        let mut messages = vec![
            OutMessage::System {
                content: SYSTEM_PROMPT,
            },
            OutMessage::User { content: INPUT },
        ];
        let body = ChatBody {
            model: "mock",
            messages,
            tools: &self.tools,
            tool_choice: "auto",
            max_tokens: 4096,
            stream: self.stream,
            stream_options: self.stream.then_some(StreamOptions {
                include_usage: true,
            }),
        };
        let calls = self.send(&body).await?;
        messages = body.messages;
        let call = calls.first().ok_or("turn 1 has no tool call")?;
        if call.function.name != TOOL_NAME {
            return Err(format!("turn 1 called {}", call.function.name));
        }
        let args: peers_common::LookupOrderArgs =
            serde_json::from_str(&call.function.arguments).map_err(|e| format!("args: {e}"))?;
        let result =
            serde_json::to_string(&lookup_order(args.order_id)).map_err(|e| e.to_string())?;
        messages.push(OutMessage::Assistant {
            content: None,
            tool_calls: &calls,
        });
        messages.push(OutMessage::Tool {
            tool_call_id: &call.id,
            content: &result,
        });
        let body = ChatBody {
            model: "mock",
            messages,
            tools: &self.tools,
            tool_choice: "auto",
            max_tokens: 4096,
            stream: self.stream,
            stream_options: self.stream.then_some(StreamOptions {
                include_usage: true,
            }),
        };
        let calls = self.send(&body).await?;
        let submit = calls.first().ok_or("turn 2 has no tool call")?;
        let triage: Triage =
            serde_json::from_str(&submit.function.arguments).map_err(|e| format!("output: {e}"))?;
        check_triage(&triage)
    }
}

/// Runs the scenario of the command line; `stream`: with `stream: true`, reported as
/// `bare-stream`.
///
/// # Errors
/// A bad command line.
pub fn main_for(stream: bool) -> Result<(), Box<dyn std::error::Error>> {
    let scenario = parse_cli()?;
    run_scenario(
        if stream { "bare-stream" } else { "bare" },
        &scenario,
        None::<fn() -> std::future::Ready<Result<(), String>>>,
        |url| {
            let client = reqwest::Client::builder()
                .no_proxy()
                .build()
                .map_err(|e| e.to_string())?;
            let bare = Arc::new(Bare {
                client,
                endpoint: format!("{}/chat/completions", url.trim_end_matches('/')),
                tools: json!([
                    {"type": "function", "function": {
                        "name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                        "parameters": lookup_order_schema()}},
                    {"type": "function", "function": {
                        "name": "submit_output", "description": OUTPUT_DESCRIPTION,
                        "parameters": triage_schema()}},
                ]),
                stream,
            });
            Ok(move || {
                let bare = Arc::clone(&bare);
                async move { bare.run().await }
            })
        },
    )?;
    Ok(())
}
