//! The Messages API reply decoded into an [`LlmResponse`]: a non-streamed body, or a
//! streamed reply as the stream assembler built it ([`Assembled`], typed: no JSON text
//! is written and read again at the end of a streamed turn).

use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use super::wire::THINKING;
use super::wire::search::{self, SEARCH_BLOCKS, SearchBlock};
use crate::llm::{LlmError, LlmResponse, ProviderSearches, RefusalReason, StopReason, TokenUsage};
use crate::message::ToolCall;
use crate::providers::ApiKey;
use crate::providers::classify::{ErrorBody, embedded_error, request_id, undecodable};
use crate::providers::http::Reply;
use crate::providers::normalize::fill_ids;

#[derive(Deserialize)]
struct WireResponse {
    id: Option<String>,
    model: Option<String>,
    /// The blocks, kept as JSON: a paused turn goes back exactly as it came.
    content: Option<Vec<Value>>,
    stop_reason: Option<String>,
    stop_details: Option<Value>,
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
pub(super) struct WireUsage {
    pub(super) input_tokens: Option<u64>,
    pub(super) output_tokens: Option<u64>,
    pub(super) cache_creation_input_tokens: Option<u64>,
    pub(super) cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// The counts as [`TokenUsage`]: input tokens include the cache reads and writes.
    pub(super) fn tokens(&self) -> TokenUsage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let write = self.cache_creation_input_tokens.unwrap_or(0);
        TokenUsage::new(
            self.input_tokens.unwrap_or(0) + read + write,
            self.output_tokens.unwrap_or(0),
        )
        .with_cache(read, write)
    }
}

/// A streamed reply as the stream assembler built it: the fields of the non-streamed
/// reply, typed, so that it is normalized without going through JSON text.
pub(crate) struct Assembled {
    pub(super) id: Option<String>,
    pub(super) model: Option<String>,
    pub(super) content: Vec<AssembledBlock>,
    pub(super) stop_reason: Option<String>,
    pub(super) stop_details: Option<Value>,
    pub(super) usage: WireUsage,
}

/// A streamed content block.
pub(crate) enum AssembledBlock {
    Text(String),
    /// A `tool_use` block: its `input` is the JSON text of its `input_json_delta`
    /// pieces (a string), or else the input its `content_block_start` gave (`null` when
    /// none).
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// Any other block, kept whole (its deltas applied; a streamed input as a string).
    Other(Value),
}

impl AssembledBlock {
    /// The block as the non-streamed reply's JSON would have it (a streamed input still
    /// as JSON text).
    pub(super) fn to_value(&self) -> Value {
        match self {
            Self::Text(text) => serde_json::json!({"type": "text", "text": text}),
            Self::ToolUse { id, name, input } => {
                serde_json::json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
            Self::Other(block) => block.clone(),
        }
    }
}

/// Normalizes a 2xx reply.
///
/// # Errors
/// Transient when the body is not JSON, is cut off or lacks both `content` and
/// `stop_reason` (case C20; a stop reason alone is an empty turn, C59); an `error`
/// object in a 2xx body is classified by [`embedded_error`].
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
    // A reply that names its stop reason but has no `content` (a proxy's shape of a
    // turn cut by `max_tokens` before any block, C59) is an empty turn of that stop;
    // without either it is a body cut short.
    let content = wire
        .content
        .or_else(|| wire.stop_reason.is_some().then(Vec::new));
    let Some(content) = content else {
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
    let mut turn = Turn::default();
    for block in &content {
        turn.block(block);
    }
    let stop_reason = stop_reason(wire.stop_reason.as_deref());
    // "If the response has a `pause_turn` stop reason, you can provide the response
    // back as-is in a subsequent request to let Claude continue its turn" (server tools,
    // <https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool>,
    // and "Handling stop reasons", <https://docs.anthropic.com/en/api/handling-stop-reasons>).
    let provider_content = (stop_reason == StopReason::PauseTurn)
        .then(|| Value::Array(content.into_iter().map(parsed_input).collect()));
    let usage = wire.usage.map_or_else(TokenUsage::default, |u| u.tokens());
    let refusal = refusal_reason(&stop_reason, wire.stop_details.as_ref());
    let mut response = turn.response(stop_reason, usage);
    response.refusal = refusal;
    response.model = wire.model;
    response.request_id = request_id(&reply.headers).or(wire.id);
    response.provider_content = provider_content;
    Ok(response)
}

/// Normalizes a streamed reply that reached its end, as [`decode`] does the
/// non-streamed body it stands for; `headers` are the response's.
pub(super) fn decode_assembled(assembled: Assembled, headers: &HeaderMap) -> LlmResponse {
    let stop_reason = stop_reason(assembled.stop_reason.as_deref());
    // A paused turn goes back as it came (see `decode`).
    let provider_content = (stop_reason == StopReason::PauseTurn).then(|| {
        Value::Array(
            assembled
                .content
                .iter()
                .map(|block| parsed_input(block.to_value()))
                .collect(),
        )
    });
    let mut turn = Turn::default();
    for block in assembled.content {
        match block {
            AssembledBlock::Text(text) => turn.text.push_str(&text),
            AssembledBlock::ToolUse { id, name, input } => {
                // Parsed (and judged) like a non-streamed input; `null` is none.
                turn.tool_calls
                    .push(ToolCall::from_wire(id, name, Some(&input)));
            }
            AssembledBlock::Other(block) => turn.block(&block),
        }
    }
    let refusal = refusal_reason(&stop_reason, assembled.stop_details.as_ref());
    let mut response = turn.response(stop_reason, assembled.usage.tokens());
    response.refusal = refusal;
    response.model = assembled.model;
    response.request_id = request_id(headers).or(assembled.id);
    response.provider_content = provider_content;
    response
}

/// The text, calls, thinking and tool search blocks of a reply, gathered block by
/// block.
#[derive(Default)]
struct Turn {
    text: String,
    tool_calls: Vec<ToolCall>,
    thinking: Vec<Value>,
    reasoning: String,
    /// The tool search blocks (`server_tool_use` of a search, `tool_search_tool_result`),
    /// as they came (a streamed input parsed).
    searches: Vec<Value>,
    found: ProviderSearches,
}

impl Turn {
    /// Takes a block read as JSON: a thinking block kept (its text as reasoning), a
    /// tool search block kept (its references as revealed tools), a text or tool use
    /// block read, any other ignored.
    fn block(&mut self, block: &Value) {
        match search::search_block(block) {
            Some(SearchBlock::Search) => {
                self.found.searches += 1;
                self.searches.push(parsed_input(block.clone()));
                return;
            }
            Some(SearchBlock::Result) => {
                let names = search::references(block).map(str::to_owned);
                self.found.revealed.extend(names);
                self.searches.push(block.clone());
                return;
            }
            None => {}
        }
        if let Some("thinking" | "redacted_thinking") = block.get("type").and_then(Value::as_str) {
            if let Some(t) = block.get("thinking").and_then(Value::as_str) {
                self.reasoning.push_str(t);
            }
            self.thinking.push(block.clone());
            return;
        }
        // A block of an unknown shape is one more block to ignore, as an unknown type is.
        match WireBlock::deserialize(block).unwrap_or(WireBlock::Other) {
            WireBlock::Text { text: t } => self.text.push_str(&t),
            WireBlock::ToolUse { id, name, input } => {
                self.tool_calls
                    .push(ToolCall::from_wire(id, name, input.as_ref()));
            }
            WireBlock::Other => {}
        }
    }

    /// The response of the turn.
    fn response(mut self, stop_reason: StopReason, usage: TokenUsage) -> LlmResponse {
        fill_ids(&mut self.tool_calls);
        // Thinking blocks go back with the tool calls that follow them, unchanged
        // (signatures included), as the API requires within a tool loop; a turn without
        // calls drops them (earlier turns' thinking need not be sent).
        // Tool search blocks go back with them too, in a request that has the search
        // tool (see `wire::search`).
        if let Some(first) = self.tool_calls.first_mut() {
            let mut data = serde_json::Map::new();
            if !self.thinking.is_empty() {
                data.insert(THINKING.to_owned(), Value::Array(self.thinking));
            }
            if !self.searches.is_empty() {
                data.insert(SEARCH_BLOCKS.to_owned(), Value::Array(self.searches));
            }
            if !data.is_empty() {
                first.provider_data = Some(Value::Object(data));
            }
        }
        let mut response = LlmResponse::tool_calls(self.tool_calls)
            .with_text(self.text)
            .with_stop_reason(stop_reason)
            .with_usage(usage);
        response.reasoning = self.reasoning;
        response.provider_searches = (!self.found.is_empty()).then(|| Box::new(self.found));
        response
    }
}

/// The stop reason of a `stop_reason` (none: the end of the turn).
fn stop_reason(wire: Option<&str>) -> StopReason {
    match wire {
        Some("end_turn") | None => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        Some("model_context_window_exceeded") => StopReason::ContextWindowExceeded,
        Some("pause_turn") => StopReason::PauseTurn,
        Some(other) => StopReason::Other(other.to_owned()),
    }
}

/// A refusal's structured reason: `stop_details: {type: "refusal", category,
/// explanation}`, both nullable (source: Messages API reference, `stop_details`,
/// <https://docs.anthropic.com/en/api/messages>; C58). `None` for another stop reason or
/// without details.
fn refusal_reason(stop_reason: &StopReason, details: Option<&Value>) -> Option<RefusalReason> {
    if *stop_reason != StopReason::Refusal {
        return None;
    }
    let details = details?;
    let text = |key: &str| details.get(key).and_then(Value::as_str).unwrap_or("");
    RefusalReason::new()
        .with_category(text("category"))
        .with_explanation(text("explanation"))
        .non_empty()
}

/// A block whose `input` arrived as JSON text (a streamed `tool_use` or
/// `server_tool_use`, assembled from its deltas) with that input parsed, as the
/// non-streamed reply has it; any other block unchanged.
fn parsed_input(mut block: Value) -> Value {
    if let Some(input) = block.get_mut("input")
        && let Value::String(text) = input
        && let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(text)
    {
        *input = parsed;
    }
    block
}
