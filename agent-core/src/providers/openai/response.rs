//! The Chat Completions reply decoded into an [`LlmResponse`]: a non-streamed body, or a
//! streamed reply as the chunk assembler built it (the same [`WireResponse`]).

use serde::Deserialize;
use serde_json::Value;

use crate::llm::{LlmError, LlmResponse, RefusalReason, StopReason, TokenUsage};
use crate::message::ToolCall;
use crate::providers::ApiKey;
use crate::providers::classify::{ErrorBody, embedded_error, request_id, undecodable};
use crate::providers::http::Reply;
use crate::providers::normalize::{fill_ids, recover_tool_calls};

#[derive(Deserialize)]
pub(crate) struct WireResponse {
    pub(super) id: Option<Value>,
    pub(super) model: Option<String>,
    pub(super) choices: Option<Vec<WireChoiceOut>>,
    pub(super) usage: Option<WireUsage>,
    pub(super) error: Option<Value>,
}

#[derive(Deserialize)]
pub(crate) struct WireChoiceOut {
    pub(super) message: Option<WireMessageOut>,
    pub(super) finish_reason: Option<String>,
    /// Azure OpenAI's content filter results for the choice.
    pub(super) content_filter_results: Option<FilterResults>,
}

/// The categories a content filter marked `filtered: true`, in the order sent: Azure
/// OpenAI's `content_filter_results` (`{"violence": {"filtered": true, "severity":
/// "high"}, ...}`; source:
/// <https://learn.microsoft.com/en-us/azure/ai-services/openai/concepts/content-filter>,
/// "Annotations"). Entries of another shape are skipped; a value that is not an object
/// is none.
#[derive(Default)]
pub(crate) struct FilterResults(pub(crate) Vec<String>);

impl FilterResults {
    /// The refusal reason they give: the filtered categories joined with `, `.
    pub(crate) fn reason(&self) -> Option<RefusalReason> {
        RefusalReason::new()
            .with_category(self.0.join(", "))
            .non_empty()
    }
}

impl<'de> Deserialize<'de> for FilterResults {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        /// One entry: its `filtered` flag, when it is an object that has one.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Entry {
            Flag {
                #[serde(default)]
                filtered: bool,
            },
            Other(serde::de::IgnoredAny),
        }
        let map = Option::<Value>::deserialize(de)?;
        let Some(Value::Object(map)) = map else {
            return Ok(Self::default());
        };
        let filtered = map
            .into_iter()
            .filter(|(_, v)| matches!(Entry::deserialize(v), Ok(Entry::Flag { filtered: true })))
            .map(|(k, _)| k)
            .collect();
        Ok(Self(filtered))
    }
}

#[derive(Deserialize, Default)]
pub(crate) struct WireMessageOut {
    pub(super) content: Option<Value>,
    pub(super) refusal: Option<String>,
    pub(super) tool_calls: Option<Vec<WireCallOut>>,
    /// vLLM's and LM Studio's reasoning parsers.
    pub(super) reasoning_content: Option<Value>,
    /// Ollama's.
    pub(super) reasoning: Option<Value>,
}

#[derive(Deserialize)]
pub(crate) struct WireCallOut {
    pub(super) id: Option<Value>,
    pub(super) function: Option<WireFunctionOut>,
}

#[derive(Deserialize)]
pub(crate) struct WireFunctionOut {
    pub(super) name: Option<String>,
    pub(super) arguments: Option<Value>,
}

#[derive(Deserialize)]
pub(crate) struct WireUsage {
    pub(super) prompt_tokens: Option<u64>,
    pub(super) completion_tokens: Option<u64>,
    pub(super) total_tokens: Option<u64>,
    pub(super) prompt_tokens_details: Option<PromptDetails>,
    pub(super) completion_tokens_details: Option<CompletionDetails>,
}

impl WireUsage {
    /// The counts as [`TokenUsage`], cached prompt tokens as cache reads, and every
    /// billed output token as output (case C56).
    ///
    /// OpenAI counts `completion_tokens_details.reasoning_tokens` inside
    /// `completion_tokens` (source: Chat Completions reference, the usage object,
    /// <https://platform.openai.com/docs/api-reference/chat/object>); xAI counts them
    /// apart, "separately from completion_tokens, but ... in the total_tokens"
    /// (<https://docs.x.ai/docs/key-information/consumption-and-rate-limits>), and
    /// bills them at the output rate, as other servers following it do. So the
    /// reasoning tokens are added to the output when they are outside the completion
    /// count: when `total_tokens` holds prompt + completion + reasoning, or, without a
    /// total, when there are more of them than completion tokens (they cannot be a part
    /// of it). Otherwise they are a part of `completion_tokens`, never counted twice.
    pub(crate) fn tokens(&self) -> TokenUsage {
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        let prompt = self.prompt_tokens.unwrap_or(0);
        let completion = self.completion_tokens.unwrap_or(0);
        let reasoning = self
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or(0);
        let outside = reasoning > 0
            && match self.total_tokens {
                Some(total) => total >= prompt.saturating_add(completion).saturating_add(reasoning),
                None => reasoning > completion,
            };
        let output = if outside {
            completion.saturating_add(reasoning)
        } else {
            completion
        };
        TokenUsage::new(prompt, output).with_cache(cached, 0)
    }
}

#[derive(Deserialize)]
pub(crate) struct PromptDetails {
    pub(super) cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(crate) struct CompletionDetails {
    pub(super) reasoning_tokens: Option<u64>,
}

/// A string, or a number written as text (some servers send numeric ids).
fn id_text(value: Option<Value>) -> String {
    match value {
        Some(Value::String(s)) => s,
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Message content as text: a string, or the `text` of each part of an array.
fn content_text(content: Option<Value>) -> String {
    match content {
        Some(Value::String(s)) => s,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// Normalizes a 2xx reply (`compatible`: recover `<tool_call>` text).
///
/// # Errors
/// Transient when the body is not JSON, is cut off, or has no `choices[0].message`
/// (case C20; a choice that ended for `length` or `content_filter` without one is an
/// empty message, C59); an `error` object in a 2xx body is classified by
/// [`embedded_error`].
pub(crate) fn decode(
    reply: &Reply,
    provider: &str,
    compatible: bool,
    key: Option<&ApiKey>,
) -> Result<LlmResponse, LlmError> {
    let wire: WireResponse = serde_json::from_slice(&reply.body)
        .map_err(|e| undecodable(provider, reply.status, &reply.headers, &reply.body, &e, key))?;
    decode_wire(wire, reply, provider, compatible, key)
}

/// Normalizes a reply already read into its wire form (a streamed reply is assembled
/// into one; `reply` then has an empty body).
///
/// # Errors
/// As [`decode`].
pub(super) fn decode_wire(
    wire: WireResponse,
    reply: &Reply,
    provider: &str,
    compatible: bool,
    key: Option<&ApiKey>,
) -> Result<LlmResponse, LlmError> {
    let choice = wire.choices.and_then(|c| c.into_iter().next());
    // A choice without `message` whose finish reason says why (cut by the cap, or
    // filtered) is an empty message of that finish (C59); without one it is a body
    // cut short (C20).
    let Some((message, finish_reason, filtered)) = choice.and_then(|c| {
        let ended = matches!(
            c.finish_reason.as_deref(),
            Some("length" | "content_filter")
        );
        let message = c.message.or_else(|| ended.then(WireMessageOut::default))?;
        Some((message, c.finish_reason, c.content_filter_results))
    }) else {
        if let Some(error) = wire.error.and_then(ErrorBody::from_value) {
            return Err(embedded_error(
                provider,
                reply.status,
                &reply.headers,
                error,
                key,
            ));
        }
        let missing = <serde_json::Error as serde::de::Error>::missing_field("choices[0].message");
        return Err(undecodable(
            provider,
            reply.status,
            &reply.headers,
            &reply.body,
            &missing,
            key,
        ));
    };
    let usage = wire
        .usage
        .as_ref()
        .map_or_else(TokenUsage::default, WireUsage::tokens);
    if finish_reason.as_deref() == Some("error") {
        return Err(reported_error(wire.error, reply, provider, usage, key));
    }
    let mut text = content_text(message.content);
    let reasoning = content_text(message.reasoning_content.or(message.reasoning));
    let mut tool_calls: Vec<ToolCall> = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| {
            let (name, arguments) = call
                .function
                .map(|f| (f.name.unwrap_or_default(), f.arguments))
                .unwrap_or_default();
            ToolCall::from_wire(id_text(call.id), name, arguments.as_ref())
        })
        .collect();
    if compatible
        && tool_calls.is_empty()
        && let Some((rest, recovered)) = recover_tool_calls(&text)
    {
        tracing::debug!(
            calls = recovered.len(),
            "recovered tool calls written as <tool_call> text"
        );
        text = rest;
        tool_calls = recovered;
    }
    fill_ids(&mut tool_calls);
    let mut stop_reason = match finish_reason.as_deref() {
        Some("stop") | None => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::ContentFilter,
        Some(other) => StopReason::Other(other.to_owned()),
    };
    // A refusal is its own stop reason, whatever `finish_reason` says (OpenAI sends
    // "stop" with it); its text is the answer's text when there is no other.
    let mut refusal_text = None;
    if tool_calls.is_empty()
        && let Some(refusal) = message.refusal.filter(|r| !r.trim().is_empty())
    {
        if text.trim().is_empty() {
            text = refusal.clone();
        }
        refusal_text = Some(refusal);
        stop_reason = StopReason::Refusal;
    }
    // The filter's categories, and the `refusal` text (the model's own explanation,
    // <https://platform.openai.com/docs/guides/structured-outputs#refusals>), are a
    // refusal's reason (C58).
    let refusal = matches!(stop_reason, StopReason::ContentFilter | StopReason::Refusal)
        .then(|| {
            let reason = filtered.and_then(|f| f.reason()).unwrap_or_default();
            match refusal_text {
                Some(explanation) => reason.with_explanation(explanation),
                None => reason,
            }
            .non_empty()
        })
        .flatten();
    let mut response = LlmResponse::tool_calls(tool_calls)
        .with_text(text)
        .with_stop_reason(stop_reason)
        .with_usage(usage);
    response.refusal = refusal;
    response.model = wire.model.filter(|m| !m.is_empty());
    response.reasoning = reasoning;
    let body_id = Some(id_text(wire.id)).filter(|id| !id.is_empty());
    response.request_id = request_id(&reply.headers).or(body_id);
    Ok(response)
}

/// The failure for a 200 whose choice ends with `finish_reason: "error"` (case C39): the
/// server says the generation failed (OpenRouter documents `error` among its
/// normalized finish reasons, <https://openrouter.ai/docs/api-reference/overview>,
/// "Finish Reason"; vLLM and other servers send it when the engine fails mid-request),
/// so whatever content came is not a turn. An `error` object beside the choice is
/// classified as an embedded error; without one the failure is transient (the same
/// request may succeed). The usage the body reports is kept: the call cost it.
fn reported_error(
    error: Option<Value>,
    reply: &Reply,
    provider: &str,
    usage: TokenUsage,
    key: Option<&ApiKey>,
) -> LlmError {
    let error = match error.and_then(ErrorBody::from_value) {
        Some(error) => embedded_error(provider, reply.status, &reply.headers, error, key),
        None => {
            let message = format!(
                "{provider} returned HTTP {} but the provider reported an error: the choice \
                 ended with finish_reason \"error\"",
                reply.status
            );
            let mut out = LlmError::transient(message).with_status(reply.status);
            if let Some(id) = request_id(&reply.headers) {
                out = out.with_request_id(id);
            }
            out
        }
    };
    if usage.input_tokens > 0 || usage.output_tokens > 0 {
        error.with_usage(usage)
    } else {
        error
    }
}
