//! The Messages API wire format: the request body a [`LlmRequest`] is encoded into
//! (the reply is decoded in [`response`](super::response)).

use std::sync::Arc;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::clamp_temperature;
use crate::content::Part;
use crate::llm::{LlmError, LlmRequest, ToolChoice};
use crate::message::ToolCall;
use crate::output::PromptCacheTtl;
use crate::providers::encoded::{WireCache, raw, request_body};
use crate::providers::history::{self, Turn};
use crate::schema;
use media::MediaBlock;

pub(crate) use media::{FILES_BETA, capabilities, names_a_file};

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
    /// Extended thinking: `{"type": "enabled", "budget_tokens": n}` (source: "Building
    /// with extended thinking",
    /// <https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking>).
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Value>,
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
        #[serde(skip_serializing_if = "ResultContent::is_empty")]
        content: ResultContent<'a>,
        #[serde(skip_serializing_if = "is_false")]
        is_error: bool,
    },
    /// An image or a document (see [`media`]).
    #[serde(untagged)]
    Media(MediaBlock<'a>),
    /// A block of a paused turn, sent back exactly as it came.
    #[serde(untagged)]
    Raw(&'a Value),
}

/// The key of a call's provider data that holds its turn's thinking blocks.
pub(super) const THINKING: &str = "anthropic_thinking";

/// Whether Anthropic can send `reasoning` for `model`: Claude 3.7 Sonnet and the
/// Claude 4 models think; the budget (an effort as its budget) is at least 1,024 tokens
/// and less than `max_tokens` (source: the extended thinking page above).
///
/// # Errors
/// Why it cannot.
pub(crate) fn check_reasoning(
    model: &str,
    reasoning: &crate::llm::Reasoning,
    max_tokens: u32,
) -> Result<(), &'static str> {
    let thinks = model.starts_with("claude-3-7")
        || ["claude-opus-4", "claude-sonnet-4", "claude-haiku-4"]
            .iter()
            .any(|p| model.starts_with(p));
    if !thinks {
        return Err("the model does not think (Claude 3.7 Sonnet and the Claude 4 models do)");
    }
    let budget = reasoning.budget_or_effort().unwrap_or(0);
    if budget < 1_024 {
        return Err("Anthropic's thinking budget is at least 1,024 tokens");
    }
    if budget >= max_tokens {
        return Err("the thinking budget must be less than max_tokens");
    }
    Ok(())
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
    /// With the tool search tool: the tool is loaded only when a search finds it.
    #[serde(skip_serializing_if = "is_false")]
    defer_loading: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

/// An entry of `tools` with the tool search tool on: the search tool, or a tool.
#[derive(Serialize)]
#[serde(untagged)]
enum Entry<'a> {
    Search(search::SearchTool<CacheControl>),
    Tool(WireTool<'a>),
}

/// The `tools` array with the tool search tool (see [`search`]): the search tool
/// first, then every tool, deferred as `native` says; the cache breakpoint on the last
/// entry that is not deferred (a deferred tool is not part of the prompt).
fn searched_tools<'a>(
    request: &'a LlmRequest,
    native: &crate::llm::NativeToolSearch,
    mark: Option<CacheControl>,
) -> Vec<Entry<'a>> {
    let referenced = search::referenced(&request.messages);
    let mut entries = Vec::with_capacity(request.tools.len() + 1);
    entries.push(Entry::Search(search::SearchTool {
        kind: search::TOOL_TYPE,
        name: search::TOOL_NAME,
        cache_control: None,
    }));
    for def in request.tools.iter() {
        entries.push(Entry::Tool(WireTool {
            name: &def.name,
            description: &def.description,
            input_schema: schema::for_anthropic(&def.parameters),
            defer_loading: native.defers(&def.name, &referenced),
            cache_control: None,
        }));
    }
    let last = entries.iter_mut().rev().find_map(|e| match e {
        Entry::Search(tool) => Some(&mut tool.cache_control),
        Entry::Tool(tool) if !tool.defer_loading => Some(&mut tool.cache_control),
        Entry::Tool(_) => None,
    });
    if let Some(slot) = last {
        *slot = mark;
    }
    entries
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

/// `{"type": "ephemeral"}`, with `"ttl": "5m" | "1h"` when the config sets one: cache
/// the prompt up to and including this block (tools, then system, then messages, in that
/// order; source: <https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching>,
/// "Cache duration").
#[derive(Clone, Copy, Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

/// The TTLs Anthropic takes (`ttl`: `5m`, the default, or `1h`).
pub(crate) const CACHE_TTLS: &[PromptCacheTtl] =
    &[PromptCacheTtl::FiveMinutes, PromptCacheTtl::OneHour];

/// The breakpoint of `request`: `ephemeral`, with its TTL when one is set (and taken).
fn breakpoint(request: &LlmRequest) -> CacheControl {
    CacheControl {
        kind: "ephemeral",
        ttl: request
            .prompt_cache_ttl
            .filter(|t| CACHE_TTLS.contains(t))
            .map(PromptCacheTtl::as_str),
    }
}

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
#[cfg(test)]
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
    let mark = breakpoint(request);
    // The tool search tool (see `search`): encoded per request, as which tools are
    // deferred follows the run's reveals.
    let native = (request.native_tool_search.as_deref()).filter(|_| !request.tools.is_empty());
    let searched = match native {
        Some(native) => Some(
            raw(&searched_tools(request, native, mark_tools.then_some(mark))).map_err(failed)?,
        ),
        None => None,
    };
    let tools = if request.tools.is_empty() || searched.is_some() {
        searched.map(Arc::from)
    } else {
        let set = match (mark_tools, mark.ttl) {
            (false, _) => &cache.tools,
            (true, None) => &cache.tools_marked,
            (true, Some("1h")) => &cache.tools_marked_1h,
            (true, Some(_)) => &cache.tools_marked_5m,
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
                        defer_loading: false,
                        cache_control: (mark_tools && i == last).then_some(mark),
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
                cache_control: mark,
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
    let mut thinking = request
        .reasoning
        .and_then(|r| r.budget_or_effort())
        .map(|budget| serde_json::json!({"type": "enabled", "budget_tokens": budget}));
    if thinking.is_some() && unsigned_tool_loop(&request.messages) {
        // With thinking on, the assistant turn a tool loop continues must start with
        // its signed thinking block ("Preserving thinking blocks", in the page above);
        // a turn another provider or model wrote has none (it was dropped at the switch
        // or handoff, C53), so this request goes without thinking.
        tracing::info!(
            model = %request.model,
            "extended thinking is off for this request: the tool loop it continues began \
             with a turn that has no signed thinking block (written by another model)"
        );
        thinking = None;
    }
    let body = Body {
        model: &request.model,
        max_tokens: request.max_tokens,
        system,
        messages: messages(&request.messages, thinking.is_some(), native.is_some())?,
        tools: tools.as_deref(),
        // With extended thinking, only `auto` and `none` are accepted ("Tool use with
        // extended thinking" in the page above): a forced choice goes as `auto`.
        tool_choice: if request.tools.is_empty() {
            None
        } else {
            Some(match &request.tool_choice {
                ToolChoice::Required | ToolChoice::Tool(_) if thinking.is_some() => {
                    WireChoice::Auto
                }
                ToolChoice::Required => WireChoice::Any,
                ToolChoice::Tool(name) => WireChoice::Tool { name },
                ToolChoice::None => WireChoice::None,
                _ => WireChoice::Auto,
            })
        },
        // Thinking takes no temperature but the default.
        temperature: request
            .temperature
            .filter(|_| thinking.is_none())
            .map(clamp_temperature),
        output_config: output_config.as_deref(),
        thinking,
        stream,
    };
    request_body(&body, request, None).map_err(failed)
}

/// Whether the conversation continues a tool loop (its last assistant turn has calls,
/// and only their results follow) whose turn carries no thinking blocks of this
/// provider's.
fn unsigned_tool_loop(history: &[crate::message::Message]) -> bool {
    use crate::message::Message;
    let Some(at) = history
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. } | Message::User { .. }))
    else {
        return false;
    };
    match &history[at] {
        Message::Assistant { tool_calls, .. } => {
            !tool_calls.is_empty()
                && !tool_calls.iter().any(|c| {
                    c.provider_data
                        .as_ref()
                        .is_some_and(|d| d.get(THINKING).is_some())
                })
        }
        _ => false,
    }
}

/// The conversation as Anthropic messages: user-side turns (text and tool results) that
/// follow each other are merged into one `user` message, tool results first; a user
/// turn's parts follow its text (a turn of parts alone sends no `(empty)` text). A
/// turn's tool search blocks go back, after its thinking, only when the request has
/// the search tool (`searching`).
///
/// # Errors
/// A part this wire cannot encode (see [`media::block`]).
fn messages(
    history: &[crate::message::Message],
    thinking: bool,
    searching: bool,
) -> Result<Vec<WireMessage<'_>>, LlmError> {
    let mut out: Vec<WireMessage<'_>> = Vec::new();
    for turn in history::turns(history) {
        match turn {
            Turn::User { text, parts } => {
                let blocks = user_blocks(&mut out);
                if parts.is_empty() || text != history::EMPTY_TURN {
                    blocks.push(Block::Text { text });
                }
                for part in parts {
                    blocks.push(part_block(part)?);
                }
            }
            Turn::Results(answers) => {
                let mut results = Vec::with_capacity(answers.len());
                for a in answers {
                    results.push(Block::ToolResult {
                        tool_use_id: a.call_id,
                        content: result_content(a.content, a.parts)?,
                        is_error: a.is_error,
                    });
                }
                let blocks = user_blocks(&mut out);
                // Results go before any text already in this user message.
                let at = blocks
                    .iter()
                    .position(|b| !matches!(b, Block::ToolResult { .. }))
                    .unwrap_or(blocks.len());
                blocks.splice(at..at, results);
            }
            // A paused turn goes back as it came (C41); the turn that continues it is
            // the same assistant turn, so it joins this message.
            Turn::Paused { text, content } => {
                let content = match content {
                    Value::Array(blocks) if !blocks.is_empty() => {
                        blocks.iter().map(Block::Raw).collect()
                    }
                    _ => vec![Block::Text {
                        text: history::non_empty(text),
                    }],
                };
                match out.last_mut().filter(|m| m.role == "assistant") {
                    // A pause that continues a paused turn.
                    Some(open) => open.content.extend(content),
                    None => out.push(WireMessage {
                        role: "assistant",
                        content,
                    }),
                }
            }
            Turn::Assistant { text, calls } => {
                let mut content = Vec::with_capacity(calls.len() + 1);
                // The turn's thinking blocks, as they came, before its text and calls
                // (only when this request thinks too).
                if let (true, Some(Value::Array(blocks))) = (
                    thinking,
                    calls
                        .first()
                        .and_then(|c| c.provider_data.as_ref())
                        .and_then(|d| d.get(THINKING)),
                ) {
                    content.extend(blocks.iter().map(Block::Raw));
                }
                if let (true, Some(first)) = (searching, calls.first()) {
                    content.extend(search::blocks_of(first).iter().map(Block::Raw));
                }
                if !text.trim().is_empty() {
                    content.push(Block::Text { text });
                }
                content.extend(calls.iter().map(|c: &ToolCall| Block::ToolUse {
                    id: &c.id,
                    name: &c.name,
                    input: Input(&c.arguments),
                }));
                if let Some(paused) = out.last_mut().filter(|m| m.role == "assistant") {
                    // Only a paused turn leaves an assistant message open.
                    paused.content.extend(content);
                    continue;
                }
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
    Ok(out)
}

/// The block of a part: a text block, or an image or document block.
///
/// # Errors
/// As [`media::block`].
fn part_block(part: &Part) -> Result<Block<'_>, LlmError> {
    match part.as_text() {
        Some(text) => Ok(Block::Text { text }),
        None => media::block(part).map(Block::Media),
    }
}

/// A tool result's `content`: a string (no parts: as before parts existed), or blocks
/// (its text, then its parts).
enum ResultContent<'a> {
    Text(&'a str),
    Blocks(Vec<Block<'a>>),
}

impl ResultContent<'_> {
    fn is_empty(&self) -> bool {
        matches!(self, ResultContent::Text(text) if text.is_empty())
    }
}

impl Serialize for ResultContent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ResultContent::Text(text) => serializer.serialize_str(text),
            ResultContent::Blocks(blocks) => blocks.serialize(serializer),
        }
    }
}

/// A tool result's content: its text alone when it has no parts, else its text (when
/// any) then its parts.
///
/// # Errors
/// As [`media::block`].
fn result_content<'a>(content: &'a str, parts: &'a [Part]) -> Result<ResultContent<'a>, LlmError> {
    if parts.is_empty() {
        return Ok(ResultContent::Text(content));
    }
    let mut blocks = Vec::with_capacity(parts.len() + 1);
    if !content.is_empty() {
        blocks.push(Block::Text { text: content });
    }
    for part in parts {
        blocks.push(part_block(part)?);
    }
    Ok(ResultContent::Blocks(blocks))
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

mod media;
pub(crate) mod search;
#[cfg(test)]
mod tests;
