//! The Converse API wire format: the request body a [`LlmRequest`] is encoded into,
//! and the reply decoded into an [`LlmResponse`]. Source: the Converse reference,
//! <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html>,
//! and its types (`Message`, `ContentBlock`, `ToolConfiguration`, `ToolChoice`,
//! `TokenUsage`), <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_Types_Amazon_Bedrock_Runtime.html>.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::media::{self, Document, Image, Media, Names};
use crate::llm::{
    LlmError, LlmRequest, LlmResponse, RefusalReason, StopReason, TokenUsage, ToolChoice,
};
use crate::message::{Message, ToolCall};
use crate::output::PromptCacheTtl;
use crate::providers::ApiKey;
use crate::providers::classify::{ErrorBody, embedded_error, request_id, undecodable};
use crate::providers::encoded::request_body;
use crate::providers::history::{self, Turn};
use crate::providers::http::Reply;
use crate::providers::normalize::fill_ids;
use crate::schema;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<SystemBlock<'a>>,
    inference_config: InferenceConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
}

/// A `system` block: the prompt's text, or the cache point after it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum SystemBlock<'a> {
    Text(&'a str),
    CachePoint(CachePoint),
}

/// `{"type": "default"}`, with `"ttl": "5m" | "1h"` when the config sets one: cache the
/// prompt up to this point (source:
/// <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CachePointBlock.html>).
#[derive(Clone, Copy, Serialize)]
struct CachePoint {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

/// Which models take cache points, where, and for how long (source: "Supported models,
/// Regions, and limits" of
/// <https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html>): Claude
/// 3.5 Haiku, 3.7 Sonnet and Claude 4 and later in `system`, `messages` and `tools`;
/// Amazon Nova in `system` and `messages` only. The one-hour TTL is taken by Claude 4.5
/// and later (Opus, Sonnet, Haiku 4.5, 4.6, ...). Any other model (Llama, Mistral, Claude
/// 3 and 3.5 Sonnet, ...) rejects a cache point ("You invoked an unsupported model or
/// your request did not allow prompt caching"), so it gets none. A model id is judged by
/// its provider part, after an inference-profile region prefix, as in [`choice_support`];
/// an application inference profile ARN names no model and gets none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheSupport {
    /// `cachePoint` blocks are taken (in `system`).
    pub(crate) points: bool,
    /// A `cachePoint` is taken in `toolConfig.tools`.
    pub(crate) tools: bool,
    /// `ttl: "1h"` is taken.
    pub(crate) one_hour: bool,
}

pub(crate) fn cache_support(model: &str) -> CacheSupport {
    let model = model.to_ascii_lowercase();
    let base = model.rsplit('/').next().unwrap_or(&model);
    let has = |family: &str| base.starts_with(family) || base.contains(&format!(".{family}"));
    let version = base
        .find("anthropic.claude")
        .filter(|_| has("anthropic.claude"))
        .and_then(|at| crate::providers::inline::claude_version(&base[at + "anthropic.".len()..]));
    let claude = match version {
        Some(v) if v >= (3, 7) => true,
        Some((3, 5)) => base.contains("haiku"),
        _ => false,
    };
    let nova = has("amazon.nova");
    CacheSupport {
        points: claude || nova,
        tools: claude,
        one_hour: claude && version.is_some_and(|v| v >= (4, 5)),
    }
}

/// The TTLs `model` takes on Bedrock (see [`CacheSupport`]).
pub(crate) fn cache_ttls(model: &str) -> &'static [PromptCacheTtl] {
    let support = cache_support(model);
    if support.one_hour {
        &[PromptCacheTtl::FiveMinutes, PromptCacheTtl::OneHour]
    } else if support.points {
        &[PromptCacheTtl::FiveMinutes]
    } else {
        &[]
    }
}

/// The cache point of `request`, when it asks for one and its model takes it.
fn cache_point(request: &LlmRequest) -> Option<CachePoint> {
    if !request.prompt_cache || !cache_support(&request.model).points {
        return None;
    }
    Some(CachePoint {
        kind: "default",
        ttl: request
            .prompt_cache_ttl
            .filter(|t| cache_ttls(&request.model).contains(t))
            .map(PromptCacheTtl::as_str),
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InferenceConfig {
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Block<'a> {
    Text(&'a str),
    Image(Image<'a>),
    Document(Document<'a>),
    ToolUse(ToolUse<'a>),
    ToolResult(ToolResult<'a>),
}

/// A block of a `toolResult`'s content.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum ResultBlock<'a> {
    Text(&'a str),
    Image(Image<'a>),
    Document(Document<'a>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolUse<'a> {
    tool_use_id: &'a str,
    name: &'a str,
    input: Input<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult<'a> {
    tool_use_id: &'a str,
    content: Vec<ResultBlock<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
}

/// Tool-use input: the arguments when they are an object, else `{}` (a hand-built call
/// with other arguments; `ToolCall::from_wire` already sanitizes the model's).
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
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireChoice<'a>>,
}

/// A `tools` entry: a tool's spec, or the cache point after the last one.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum WireTool<'a> {
    ToolSpec(ToolSpec<'a>),
    CachePoint(CachePoint),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolSpec<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    input_schema: InputSchema,
}

#[derive(Serialize)]
struct InputSchema {
    json: Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum WireChoice<'a> {
    Auto(Empty),
    Any(Empty),
    Tool { name: &'a str },
}

#[derive(Serialize)]
struct Empty {}

/// Which `toolChoice` values a model takes besides `auto`. The API reference says of
/// `tool` "Only supported by Anthropic Claude 3 and Amazon Nova models"
/// (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ToolChoice.html>);
/// the user guide's tool-use page lists `any` for Claude 3+, Mistral Large and Nova
/// (<https://docs.aws.amazon.com/bedrock/latest/userguide/tool-use-inference-call.html>).
/// A model id is judged by its provider part, after an inference-profile region
/// prefix (`us.`, `eu.`, `apac.`, `global.`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChoiceSupport {
    /// `{"any": {}}` is taken.
    pub(crate) any: bool,
    /// `{"tool": {"name"}}` is taken.
    pub(crate) tool: bool,
}

pub(crate) fn choice_support(model: &str) -> ChoiceSupport {
    let model = model.to_ascii_lowercase();
    let base = model.rsplit('/').next().unwrap_or(&model);
    let has = |family: &str| base.starts_with(family) || base.contains(&format!(".{family}"));
    let claude = has("anthropic.claude");
    let nova = has("amazon.nova");
    let mistral_large = has("mistral.mistral-large");
    ChoiceSupport {
        any: claude || nova || mistral_large,
        tool: claude || nova,
    }
}

/// The JSON body of a Converse (or ConverseStream: the same body) request.
///
/// # Errors
/// A permanent [`LlmError`] if serialization fails (it does not for these types).
pub(crate) fn encode(request: &LlmRequest) -> Result<Vec<u8>, LlmError> {
    let support = choice_support(&request.model);
    let system_text = request.system.as_deref().filter(|s| !s.trim().is_empty());
    // Prompt caching: one cache point at the end of the stable prefix, after the system
    // prompt when there is one (which caches the tools before it too), else after the
    // tools (where the model takes one there), as Anthropic's breakpoint.
    let point = cache_point(request);
    let tools_point =
        point.filter(|_| system_text.is_none() && cache_support(&request.model).tools);
    let tool_config = (!request.tools.is_empty()).then(|| ToolConfig {
        tools: request
            .tools
            .iter()
            .map(|def| {
                WireTool::ToolSpec(ToolSpec {
                    name: &def.name,
                    description: &def.description,
                    input_schema: InputSchema {
                        json: schema::for_anthropic(&def.parameters),
                    },
                })
            })
            .chain(tools_point.map(WireTool::CachePoint))
            .collect(),
        // Converse has no `none`: the tools stay (a history with tool blocks needs
        // them) and the model decides, as with `auto`.
        tool_choice: match &request.tool_choice {
            ToolChoice::Tool(name) if support.tool => Some(WireChoice::Tool { name }),
            ToolChoice::Tool(_) | ToolChoice::Required if support.any => {
                Some(WireChoice::Any(Empty {}))
            }
            ToolChoice::None => None,
            _ => Some(WireChoice::Auto(Empty {})),
        },
    });
    let system = match system_text {
        Some(text) => std::iter::once(SystemBlock::Text(text))
            .chain(point.map(SystemBlock::CachePoint))
            .collect(),
        None => Vec::new(),
    };
    let body = Body {
        messages: messages(&request.messages)?,
        system,
        inference_config: InferenceConfig {
            max_tokens: request.max_tokens,
            temperature: request.temperature,
        },
        tool_config,
    };
    request_body(&body, request, None)
        .map_err(|e| LlmError::permanent(format!("cannot serialize the bedrock request: {e}")))
}

/// The conversation as Converse messages: roles alternate (Converse rejects two
/// messages of the same role in a row), so user text and tool results that follow
/// each other share one `user` message, tool results first; a paused turn (Anthropic
/// only) is sent as its text. A user turn's parts follow its text (a turn of parts
/// alone sends no `(empty)` text); a tool result's follow its text.
///
/// # Errors
/// A part Converse cannot carry (see [`media::block`]).
fn messages(history: &[Message]) -> Result<Vec<WireMessage<'_>>, LlmError> {
    let mut out: Vec<WireMessage<'_>> = Vec::new();
    let mut names = Names::default();
    for turn in history::turns(history) {
        match turn {
            Turn::User { text, parts } => {
                let blocks = blocks_of(&mut out, "user");
                if parts.is_empty() || text != history::EMPTY_TURN {
                    blocks.push(Block::Text(text));
                }
                for part in parts {
                    blocks.push(match part.as_text() {
                        Some(text) => Block::Text(text),
                        None => match media::block(part, &mut names)? {
                            Media::Image(image) => Block::Image(image),
                            Media::Document(document) => Block::Document(document),
                        },
                    });
                }
            }
            Turn::Results(answers) => {
                let mut results = Vec::with_capacity(answers.len());
                for a in answers {
                    let mut content = Vec::with_capacity(1 + a.parts.len());
                    if a.parts.is_empty() || !a.content.trim().is_empty() {
                        content.push(ResultBlock::Text(history::non_empty(a.content)));
                    }
                    for part in a.parts {
                        content.push(match part.as_text() {
                            Some(text) => ResultBlock::Text(text),
                            None => match media::block(part, &mut names)? {
                                Media::Image(image) => ResultBlock::Image(image),
                                Media::Document(document) => ResultBlock::Document(document),
                            },
                        });
                    }
                    results.push(Block::ToolResult(ToolResult {
                        tool_use_id: a.call_id,
                        content,
                        status: a.is_error.then_some("error"),
                    }));
                }
                let blocks = blocks_of(&mut out, "user");
                let at = blocks
                    .iter()
                    .position(|b| !matches!(b, Block::ToolResult(_)))
                    .unwrap_or(blocks.len());
                blocks.splice(at..at, results);
            }
            Turn::Paused { text, .. } => {
                blocks_of(&mut out, "assistant").push(Block::Text(history::non_empty(text)));
            }
            Turn::Assistant { text, calls } => {
                let blocks = blocks_of(&mut out, "assistant");
                if !text.trim().is_empty() {
                    blocks.push(Block::Text(text));
                }
                blocks.extend(calls.iter().map(|c: &ToolCall| {
                    Block::ToolUse(ToolUse {
                        tool_use_id: &c.id,
                        name: &c.name,
                        input: Input(&c.arguments),
                    })
                }));
                if blocks.is_empty() {
                    blocks.push(Block::Text(history::EMPTY_TURN));
                }
            }
        }
    }
    Ok(out)
}

/// The blocks of the trailing message of `role`, starting one if the last has another
/// role.
fn blocks_of<'m, 'a>(
    out: &'m mut Vec<WireMessage<'a>>,
    role: &'static str,
) -> &'m mut Vec<Block<'a>> {
    if out.last().is_none_or(|m| m.role != role) {
        out.push(WireMessage {
            role,
            content: Vec::new(),
        });
    }
    let last = out.len() - 1;
    &mut out[last].content
}

// ---- response ----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    output: Option<Output>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
    /// An error in a 2xx body: an exception event of a stream, set by its assembler.
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Output {
    message: Option<OutputMessage>,
}

#[derive(Deserialize, Default)]
struct OutputMessage {
    #[serde(default)]
    content: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireToolUse {
    #[serde(default)]
    tool_use_id: String,
    #[serde(default)]
    name: String,
    input: Option<Value>,
}

/// `TokenUsage` (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_TokenUsage.html>):
/// `inputTokens` counts the uncached input only, `totalTokens` adds the cache reads
/// and writes, so the input reported here is their sum, as for Anthropic.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_write_input_tokens: Option<u64>,
}

impl WireUsage {
    pub(super) fn tokens(&self) -> TokenUsage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let write = self.cache_write_input_tokens.unwrap_or(0);
        TokenUsage::new(
            self.input_tokens.unwrap_or(0) + read + write,
            self.output_tokens.unwrap_or(0),
        )
        .with_cache(read, write)
    }
}

/// `stopReason` (Converse reference, "Response Elements"): `end_turn`, `tool_use`,
/// `max_tokens`, `stop_sequence`, `guardrail_intervened`, `content_filtered`,
/// `malformed_model_output`, `malformed_tool_use`, `model_context_window_exceeded`.
/// A guardrail or content filter that stopped the turn is a refusal (what the other
/// adapters report for a content filter), never an answer.
pub(crate) fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("end_turn") | None => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("guardrail_intervened" | "content_filtered") => StopReason::ContentFilter,
        Some("model_context_window_exceeded") => StopReason::ContextWindowExceeded,
        Some(other) => StopReason::Other(other.to_owned()),
    }
}

/// Normalizes a 2xx reply (a Converse body, or a stream assembled into one).
///
/// # Errors
/// Transient when the body is not JSON or lacks `output.message`; an `error` object
/// (an exception event of a stream) is classified by [`embedded_error`].
pub(crate) fn decode(reply: &Reply, key: Option<&ApiKey>) -> Result<LlmResponse, LlmError> {
    let undecodable_body = |e: &serde_json::Error| {
        undecodable("bedrock", reply.status, &reply.headers, &reply.body, e, key)
    };
    let wire: WireResponse =
        serde_json::from_slice(&reply.body).map_err(|e| undecodable_body(&e))?;
    if let Some(error) = wire.error.and_then(ErrorBody::from_value) {
        return Err(embedded_error(
            "bedrock",
            reply.status,
            &reply.headers,
            error,
            key,
        ));
    }
    // A reply that names its stop but has no message (a turn cut by `max_tokens`
    // before any block, C59) is an empty turn of that stop; without either it is not
    // a reply.
    let message = match wire.output.and_then(|o| o.message) {
        Some(message) => message,
        None if wire.stop_reason.is_some() => OutputMessage::default(),
        None => {
            let missing = <serde_json::Error as serde::de::Error>::missing_field("output.message");
            return Err(undecodable_body(&missing));
        }
    };
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for block in &message.content {
        if let Some(t) = block.get("text").and_then(Value::as_str) {
            text.push_str(t);
        } else if let Some(t) = block
            .pointer("/reasoningContent/reasoningText/text")
            .and_then(Value::as_str)
        {
            // Reasoning models (DeepSeek-R1, Claude with thinking) send their reasoning
            // in its own block (`ReasoningContentBlock`); redacted reasoning has no text.
            reasoning.push_str(t);
        } else if let Some(call) = block.get("toolUse") {
            // A block of an unknown shape is ignored, as an unknown block type is.
            if let Ok(call) = WireToolUse::deserialize(call) {
                // A streamed input is JSON text (its deltas joined): parsed and judged
                // by `from_wire` as a non-streamed object is.
                tool_calls.push(ToolCall::from_wire(
                    call.tool_use_id,
                    call.name,
                    call.input.as_ref(),
                ));
            }
        }
    }
    fill_ids(&mut tool_calls);
    let usage = wire.usage.unwrap_or_default().tokens();
    let stop = stop_reason(wire.stop_reason.as_deref());
    // A guardrail or content filter names no category on the reply (the guardrail's
    // assessments come only in a `trace` the request asks for); the stop reason is
    // the refusal's category (C58).
    let refusal = (stop == StopReason::ContentFilter)
        .then(|| {
            RefusalReason::new()
                .with_category(wire.stop_reason.clone().unwrap_or_default())
                .non_empty()
        })
        .flatten();
    let mut response = LlmResponse::tool_calls(tool_calls)
        .with_text(text)
        .with_stop_reason(stop)
        .with_usage(usage);
    response.refusal = refusal;
    response.request_id = request_id(&reply.headers);
    response.reasoning = reasoning;
    Ok(response)
}
