//! [`AnthropicClient`]: the Anthropic Messages API (`POST /v1/messages`).
//!
//! Wire format from the Messages API reference (<https://docs.anthropic.com/en/api/messages>)
//! and anthropic-sdk-python; the rules that matter here are in `docs/providers.md`.

use std::fmt;

use reqwest::header::{HeaderMap, HeaderValue};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::ConfigError;
use crate::llm::StreamSink;
use crate::llm::{
    LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, OutputCapabilities, StopReason,
    TokenUsage, ToolChoice,
};
use crate::message::ToolCall;
use crate::providers::anthropic_stream::EventAssembler;
use crate::providers::classify::{ErrorBody, embedded_error, request_id, undecodable};
use crate::providers::encoded::{WireCache, raw};
use crate::providers::history::{self, Turn};
use crate::providers::http::{Reply, Transport, traced};
use crate::providers::normalize::fill_ids;
use crate::providers::sse;
use crate::providers::{ApiKey, ProviderOptions};
use crate::schema;

/// A client of the Anthropic Messages API.
///
/// Sends `x-api-key`, `anthropic-version: 2023-06-01` and a JSON body: `system` at the
/// top level; the conversation as `user` / `assistant` messages of content blocks;
/// every tool result of a turn in the one `user` message after it, tool results first,
/// `is_error` set on failures; no empty or whitespace-only text block (an empty turn is
/// sent as `(empty)`); each tool's parameters through [`schema::for_anthropic`];
/// `tool_choice` auto → `auto`, required → `any`, a named tool → `tool`, none → `none`;
/// `temperature` clamped to Anthropic's 0.0..=1.0.
///
/// Responses: text blocks joined, `tool_use` blocks as calls (in order, ids kept,
/// missing ones synthesised), other block types (thinking, ...) ignored; usage with
/// `input_tokens` = uncached + cache reads + cache writes; `request-id` kept.
pub struct AnthropicClient {
    transport: Transport,
    cache: WireCache,
}

impl fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("transport", &self.transport)
            .finish()
    }
}

impl AnthropicClient {
    /// The API root used when no base URL is given.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The `anthropic-version` header sent.
    pub const API_VERSION: &'static str = "2023-06-01";

    /// A client from explicit options; reads no environment variable. Needs
    /// `options.api_key`; `options.base_url` is the API root (default
    /// [`DEFAULT_BASE_URL`](Self::DEFAULT_BASE_URL); `/v1/messages` is appended, or
    /// `/messages` to a root ending in `/v1`).
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `"anthropic"`) when the key
    /// is missing or unusable in a header, or the base URL is invalid.
    pub fn new(options: &ProviderOptions) -> Result<Self, ConfigError> {
        Self::build(options).map_err(|message| ConfigError::InvalidProvider {
            model: "anthropic".to_owned(),
            message,
        })
    }

    pub(crate) fn build(options: &ProviderOptions) -> Result<Self, String> {
        let key = options
            .api_key
            .clone()
            .ok_or("an API key is required (ANTHROPIC_API_KEY)")?;
        let base = options
            .base_url
            .as_deref()
            .unwrap_or(Self::DEFAULT_BASE_URL)
            .trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        let mut headers = HeaderMap::new();
        Transport::insert_header(
            &mut headers,
            "x-api-key",
            Transport::secret_header(key.expose())?,
        );
        Transport::insert_header(
            &mut headers,
            "anthropic-version",
            HeaderValue::from_static(Self::API_VERSION),
        );
        let transport = Transport::new("anthropic", &url, headers, Some(key), options)?;
        Ok(Self {
            transport,
            cache: WireCache::default(),
        })
    }

    async fn streamed_round_trip(
        &self,
        request: &LlmRequest,
        sink: &mut dyn StreamSink,
    ) -> Result<LlmResponse, LlmError> {
        let body = encode_body(request, &self.cache, true)?;
        let streaming = self.transport.post_streaming(body).await?;
        let status = streaming.status;
        let assembler = EventAssembler::default();
        match sse::read(&self.transport, streaming, assembler, sink).await? {
            sse::Streamed::Done(body, headers) => {
                decode(&sse::reply(status, headers, &body), self.transport.key())
            }
            sse::Streamed::Failed(reply) => decode(&reply, self.transport.key()),
            sse::Streamed::Whole(reply) => {
                let response = decode(&reply, self.transport.key())?;
                crate::llm::replay(&response, sink);
                Ok(response)
            }
        }
    }

    async fn round_trip(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let body = encode(request, &self.cache)?;
        let reply = self.transport.post(body).await?;
        decode(&reply, self.transport.key())
    }
}

impl LlmClient for AnthropicClient {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        Box::pin(traced(self.transport.provider(), self.round_trip(request)))
    }

    /// Streams with `stream: true`, reading the message events up to `message_stop`
    /// (source: Messages API, "Streaming Messages",
    /// <https://docs.anthropic.com/en/docs/build-with-claude/streaming>). The turn is
    /// normalized as a non-streamed one.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a LlmRequest,
        sink: &'a mut dyn StreamSink,
    ) -> LlmFuture<'a> {
        Box::pin(traced(
            self.transport.provider(),
            self.streamed_round_trip(request, sink),
        ))
    }

    fn provider(&self) -> &str {
        "anthropic"
    }

    /// Anthropic enforces `tool_choice` (`any`, `tool`), so `Auto` is tool mode. Native
    /// structured output (`output_config.format`) is generally available on Claude
    /// Opus 4.5, Sonnet 4.5, Haiku 4.5 and later (4.6, ...); older models reject the
    /// field (source: <https://platform.claude.com/docs/en/build-with-claude/structured-outputs>,
    /// read 2026-12-01). A model name is judged by its version: `claude-<family>-4-5...`
    /// and newer take it; `claude-3-...`, `claude-<family>-4-<date>`, `-4-1` do not.
    fn output_capabilities(&self, model: &str) -> OutputCapabilities {
        OutputCapabilities::new(true, anthropic_native_output(model))
    }

    /// Anthropic takes a temperature from 0.0 to 1.0 (source: Messages API reference,
    /// `temperature`); a higher one is clamped to 1.0.
    fn effective_temperature(&self, _model: &str, requested: f32) -> Option<f32> {
        Some(clamp_temperature(requested))
    }
}

fn clamp_temperature(t: f32) -> f32 {
    t.clamp(0.0, 1.0)
}

/// Whether a Claude model takes `output_config.format`: version 4.5 or newer, read from
/// names like `claude-sonnet-4-5-20250929`, `claude-opus-4-6`, `claude-haiku-4-5`
/// (a number of 100 or more after the major version is a date, i.e. minor 0).
fn anthropic_native_output(model: &str) -> bool {
    let numbers: Vec<u64> = model
        .split('-')
        .skip(1)
        .filter_map(|part| part.parse::<u64>().ok())
        .collect();
    let (major, minor) = match numbers.as_slice() {
        [major, minor, ..] if *minor < 100 => (*major, *minor),
        [major, ..] => (*major, 0),
        [] => return false,
    };
    (major, minor) >= (4, 5)
}

// ---- request ----

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<System<'a>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "is_false")]
    stream: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Input<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        content: &'a str,
        #[serde(skip_serializing_if = "is_false")]
        is_error: bool,
    },
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_false(b: &bool) -> bool {
    !*b
}

/// Tool-use input: the arguments when they are an object, else `{}` (Anthropic requires
/// an object; `from_wire` already sanitizes, this covers hand-built calls).
struct Input<'a>(&'a Value);

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => map.serialize(serializer),
            _ => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

/// The system prompt: a string, or one text block carrying a prompt-cache breakpoint.
#[derive(Serialize)]
#[serde(untagged)]
enum System<'a> {
    Text(&'a str),
    Blocks([SystemBlock<'a>; 1]),
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    cache_control: CacheControl,
}

/// `{"type": "ephemeral"}`: cache the prompt up to and including this block (tools,
/// then system, then messages, in that order).
#[derive(Clone, Copy, Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireChoice<'a> {
    Auto,
    Any,
    Tool { name: &'a str },
    None,
}

/// The JSON body for a request.
///
/// # Errors
/// A permanent [`LlmError`] if serialization fails (it does not for these types).
pub(crate) fn encode(request: &LlmRequest, cache: &WireCache) -> Result<Vec<u8>, LlmError> {
    encode_body(request, cache, false)
}

/// [`encode`], with `stream: true` when `stream`.
///
/// # Errors
/// As [`encode`].
pub(crate) fn encode_body(
    request: &LlmRequest,
    cache: &WireCache,
    stream: bool,
) -> Result<Vec<u8>, LlmError> {
    let failed = |e: serde_json::Error| {
        LlmError::permanent(format!("cannot serialize the anthropic request: {e}"))
    };
    let system = request.system.as_deref().filter(|s| !s.trim().is_empty());
    // Prompt caching: one breakpoint at the end of the stable prefix, the system prompt
    // when there is one (which caches the tools before it too), else the last tool.
    let mark_tools = request.prompt_cache && system.is_none();
    let tools = if request.tools.is_empty() {
        None
    } else {
        let set = if mark_tools {
            &cache.tools_marked
        } else {
            &cache.tools
        };
        Some(
            set.get_or_encode(&request.tools, |defs| {
                let last = defs.len().saturating_sub(1);
                raw(&defs
                    .iter()
                    .enumerate()
                    .map(|(i, def)| WireTool {
                        name: &def.name,
                        description: &def.description,
                        input_schema: schema::for_anthropic(&def.parameters),
                        cache_control: (mark_tools && i == last).then_some(EPHEMERAL),
                    })
                    .collect::<Vec<_>>())
            })
            .map_err(failed)?,
        )
    };
    let system = system.map(|text| {
        if request.prompt_cache {
            System::Blocks([SystemBlock {
                kind: "text",
                text,
                cache_control: EPHEMERAL,
            }])
        } else {
            System::Text(text)
        }
    });
    // Native output mode, the GA shape (no beta header):
    // `output_config: {format: {type: "json_schema", schema}}`.
    let output_config = match request.output.as_ref().filter(|spec| spec.is_native()) {
        Some(spec) => Some(
            cache
                .output
                .get_or_encode(spec, |spec| {
                    raw(&serde_json::json!({"format": {
                        "type": "json_schema",
                        "schema": schema::for_anthropic_output(&spec.schema),
                    }}))
                })
                .map_err(failed)?,
        ),
        None => None,
    };
    let body = Body {
        model: &request.model,
        max_tokens: request.max_tokens,
        system,
        messages: messages(&request.messages),
        tools: tools.as_deref(),
        tool_choice: if request.tools.is_empty() {
            None
        } else {
            Some(match &request.tool_choice {
                ToolChoice::Required => WireChoice::Any,
                ToolChoice::Tool(name) => WireChoice::Tool { name },
                ToolChoice::None => WireChoice::None,
                _ => WireChoice::Auto,
            })
        },
        temperature: request.temperature.map(clamp_temperature),
        output_config: output_config.as_deref(),
        stream,
    };
    serde_json::to_vec(&body).map_err(failed)
}

/// The conversation as Anthropic messages: user-side turns (text and tool results) that
/// follow each other are merged into one `user` message, tool results first.
fn messages(history: &[crate::message::Message]) -> Vec<WireMessage<'_>> {
    let mut out: Vec<WireMessage<'_>> = Vec::new();
    for turn in history::turns(history) {
        match turn {
            Turn::User(text) => user_blocks(&mut out).push(Block::Text { text }),
            Turn::Results(answers) => {
                let blocks = user_blocks(&mut out);
                // Results go before any text already in this user message.
                let at = blocks
                    .iter()
                    .position(|b| !matches!(b, Block::ToolResult { .. }))
                    .unwrap_or(blocks.len());
                blocks.splice(
                    at..at,
                    answers.into_iter().map(|a| Block::ToolResult {
                        tool_use_id: a.call_id,
                        content: a.content,
                        is_error: a.is_error,
                    }),
                );
            }
            Turn::Assistant { text, calls } => {
                let mut content = Vec::with_capacity(calls.len() + 1);
                if !text.trim().is_empty() {
                    content.push(Block::Text { text });
                }
                content.extend(calls.iter().map(|c: &ToolCall| Block::ToolUse {
                    id: &c.id,
                    name: &c.name,
                    input: Input(&c.arguments),
                }));
                if content.is_empty() {
                    content.push(Block::Text {
                        text: history::EMPTY_TURN,
                    });
                }
                out.push(WireMessage {
                    role: "assistant",
                    content,
                });
            }
        }
    }
    out
}

/// The blocks of the trailing `user` message, starting one if the last is not a user's.
fn user_blocks<'m, 'a>(out: &'m mut Vec<WireMessage<'a>>) -> &'m mut Vec<Block<'a>> {
    if out.last().is_none_or(|m| m.role != "user") {
        out.push(WireMessage {
            role: "user",
            content: Vec::new(),
        });
    }
    let last = out.len() - 1;
    &mut out[last].content
}

// ---- response ----

#[derive(Deserialize)]
struct WireResponse {
    id: Option<String>,
    model: Option<String>,
    content: Option<Vec<WireBlock>>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        input: Option<Value>,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

/// Normalizes a 2xx reply.
///
/// # Errors
/// Transient when the body is not JSON, is cut off or lacks `content` (case C20); an
/// `error` object in a 2xx body is classified by [`embedded_error`].
pub(crate) fn decode(reply: &Reply, key: Option<&ApiKey>) -> Result<LlmResponse, LlmError> {
    let wire: WireResponse = serde_json::from_slice(&reply.body).map_err(|e| {
        undecodable(
            "anthropic",
            reply.status,
            &reply.headers,
            &reply.body,
            &e,
            key,
        )
    })?;
    let Some(content) = wire.content else {
        if let Some(error) = wire.error.and_then(ErrorBody::from_value) {
            return Err(embedded_error(
                "anthropic",
                reply.status,
                &reply.headers,
                error,
                key,
            ));
        }
        let missing = <serde_json::Error as serde::de::Error>::missing_field("content");
        return Err(undecodable(
            "anthropic",
            reply.status,
            &reply.headers,
            &reply.body,
            &missing,
            key,
        ));
    };
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block {
            WireBlock::Text { text: t } => text.push_str(&t),
            WireBlock::ToolUse { id, name, input } => {
                tool_calls.push(ToolCall::from_wire(id, name, input.as_ref()));
            }
            WireBlock::Other => {}
        }
    }
    fill_ids(&mut tool_calls);
    let stop_reason = match wire.stop_reason.as_deref() {
        Some("end_turn") | None => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        Some("model_context_window_exceeded") => StopReason::ContextWindowExceeded,
        Some(other) => StopReason::Other(other.to_owned()),
    };
    let usage = wire.usage.map_or_else(TokenUsage::default, |u| {
        let read = u.cache_read_input_tokens.unwrap_or(0);
        let write = u.cache_creation_input_tokens.unwrap_or(0);
        TokenUsage::new(
            u.input_tokens.unwrap_or(0) + read + write,
            u.output_tokens.unwrap_or(0),
        )
        .with_cache(read, write)
    });
    let mut response = LlmResponse::tool_calls(tool_calls)
        .with_text(text)
        .with_stop_reason(stop_reason)
        .with_usage(usage);
    response.model = wire.model;
    response.request_id = request_id(&reply.headers).or(wire.id);
    Ok(response)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::message::{Message, ToolResult};
    use serde_json::json;

    fn body(request: &LlmRequest) -> Value {
        serde_json::from_slice(&encode(request, &WireCache::default()).unwrap()).unwrap()
    }

    #[test]
    fn tool_results_follow_their_turn_first_with_is_error() {
        let request = LlmRequest::new("claude-x")
            .with_message(Message::user("hi"))
            .with_message(Message::assistant(
                "  ",
                vec![
                    ToolCall::new("toolu_1", "a", json!({"x": 1})),
                    ToolCall::new("toolu_2", "b", json!("not an object")),
                ],
            ))
            .with_message(Message::tool_results(vec![
                ToolResult::ok("toolu_1", "a", "one"),
                ToolResult::error("toolu_2", "b", "boom"),
            ]))
            .with_message(Message::user("now submit"));
        let b = body(&request);
        assert_eq!(
            b["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "a", "input": {"x": 1}},
                    {"type": "tool_use", "id": "toolu_2", "name": "b", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "one"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": true},
                    {"type": "text", "text": "now submit"}
                ]}
            ])
        );
        assert!(b.get("tools").is_none() && b.get("tool_choice").is_none());
    }

    #[test]
    fn empty_assistant_turn_is_rendered_safely() {
        let request = LlmRequest::new("claude-x")
            .with_message(Message::user("hi"))
            .with_message(Message::assistant("", vec![]))
            .with_message(Message::user("call the tool"));
        let b = body(&request);
        assert_eq!(
            b["messages"][1],
            json!({"role": "assistant", "content": [{"type": "text", "text": "(empty)"}]})
        );
    }

    #[test]
    fn tool_choice_and_temperature_are_mapped() {
        let tools = vec![crate::tool::ToolDefinition::new(
            "submit_output",
            "Submit.",
            json!({"type": "object"}),
        )];
        let base = LlmRequest::new("m")
            .with_message(Message::user("x"))
            .with_tools(tools)
            .with_temperature(1.7);
        let cases = [
            (ToolChoice::Auto, json!({"type": "auto"})),
            (ToolChoice::Required, json!({"type": "any"})),
            (
                ToolChoice::Tool("submit_output".into()),
                json!({"type": "tool", "name": "submit_output"}),
            ),
            (ToolChoice::None, json!({"type": "none"})),
        ];
        for (choice, wire) in cases {
            let b = body(&base.clone().with_tool_choice(choice));
            assert_eq!(b["tool_choice"], wire);
            assert_eq!(b["temperature"], json!(1.0));
            assert_eq!(
                b["tools"],
                json!([{"name": "submit_output", "description": "Submit.", "input_schema": {"type": "object"}}])
            );
        }
    }
}
