//! The Messages API reply decoded into an [`LlmResponse`].

use serde::Deserialize;
use serde_json::Value;

use super::wire::THINKING;
use crate::llm::{LlmError, LlmResponse, StopReason, TokenUsage};
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
    let mut thinking: Vec<Value> = Vec::new();
    let mut reasoning = String::new();
    for block in &content {
        if let Some("thinking" | "redacted_thinking") = block.get("type").and_then(Value::as_str) {
            if let Some(t) = block.get("thinking").and_then(Value::as_str) {
                reasoning.push_str(t);
            }
            thinking.push(block.clone());
            continue;
        }
        // A block of an unknown shape is one more block to ignore, as an unknown type is.
        match WireBlock::deserialize(block).unwrap_or(WireBlock::Other) {
            WireBlock::Text { text: t } => text.push_str(&t),
            WireBlock::ToolUse { id, name, input } => {
                tool_calls.push(ToolCall::from_wire(id, name, input.as_ref()));
            }
            WireBlock::Other => {}
        }
    }
    fill_ids(&mut tool_calls);
    // Thinking blocks go back with the tool calls that follow them, unchanged
    // (signatures included), as the API requires within a tool loop; a turn without
    // calls drops them (earlier turns' thinking need not be sent).
    if let (false, Some(first)) = (thinking.is_empty(), tool_calls.first_mut()) {
        first.provider_data = Some(serde_json::json!({ THINKING: thinking }));
    }
    let stop_reason = match wire.stop_reason.as_deref() {
        Some("end_turn") | None => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        Some("model_context_window_exceeded") => StopReason::ContextWindowExceeded,
        Some("pause_turn") => StopReason::PauseTurn,
        Some(other) => StopReason::Other(other.to_owned()),
    };
    // "If the response has a `pause_turn` stop reason, you can provide the response
    // back as-is in a subsequent request to let Claude continue its turn" (server tools,
    // <https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool>,
    // and "Handling stop reasons", <https://docs.anthropic.com/en/api/handling-stop-reasons>).
    let provider_content = (stop_reason == StopReason::PauseTurn)
        .then(|| Value::Array(content.into_iter().map(parsed_input).collect()));
    let usage = wire.usage.map_or_else(TokenUsage::default, |u| u.tokens());
    let mut response = LlmResponse::tool_calls(tool_calls)
        .with_text(text)
        .with_stop_reason(stop_reason)
        .with_usage(usage);
    response.model = wire.model;
    response.request_id = request_id(&reply.headers).or(wire.id);
    response.provider_content = provider_content;
    response.reasoning = reasoning;
    Ok(response)
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
