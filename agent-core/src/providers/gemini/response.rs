//! The `generateContent` reply decoded into an [`LlmResponse`]: a non-streamed body, or
//! a streamed reply as the chunk assembler built it (the same [`WireResponse`], typed:
//! no JSON text is written and read again at the end of a streamed turn).

use serde::Deserialize;
use serde_json::Value;

use crate::llm::{LlmError, LlmResponse, RefusalReason, StopReason, TokenUsage};
use crate::message::ToolCall;
use crate::providers::ApiKey;
use crate::providers::classify::{ErrorBody, embedded_error, request_id, undecodable};
use crate::providers::http::Reply;
use crate::providers::normalize::fill_ids;

/// A `GenerateContentResponse` (one of a stream's chunks has the same shape).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireResponse {
    pub(super) candidates: Option<Vec<WireCandidate>>,
    pub(super) prompt_feedback: Option<PromptFeedback>,
    pub(super) usage_metadata: Option<UsageMetadata>,
    pub(super) model_version: Option<String>,
    pub(super) response_id: Option<String>,
    pub(super) error: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireCandidate {
    pub(super) content: Option<WireContent>,
    pub(super) finish_reason: Option<String>,
    pub(super) finish_message: Option<String>,
    pub(super) safety_ratings: Option<Vec<SafetyRating>>,
}

#[derive(Deserialize, Default)]
pub(super) struct WireContent {
    pub(super) parts: Option<Vec<WirePart>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct WirePart {
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) thought: bool,
    pub(super) thought_signature: Option<String>,
    pub(super) function_call: Option<WireFunctionCall>,
}

#[derive(Deserialize)]
pub(super) struct WireFunctionCall {
    pub(super) id: Option<String>,
    pub(super) name: Option<String>,
    pub(super) args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptFeedback {
    pub(super) block_reason: Option<String>,
    pub(super) block_reason_message: Option<String>,
    /// The prompt's ratings; the one marked `blocked` names the harm of a prompt
    /// blocked for `SAFETY`.
    pub(super) safety_ratings: Option<Vec<SafetyRating>>,
}

/// The harm a safety block was for: the category of the rating marked `blocked`
/// (source: API reference, `SafetyRating.blocked`, "Was this content blocked because
/// of this rating?", <https://ai.google.dev/api/generate-content#safetyrating>), the
/// first if several; for a `SAFETY` block whose ratings mark none, the one rated most
/// probable (`HIGH`, then `MEDIUM`).
fn harm_category(ratings: Option<&[SafetyRating]>, reason: Option<&str>) -> Option<String> {
    let ratings = ratings.unwrap_or_default();
    let rated = |level: &str| {
        ratings
            .iter()
            .find(|r| r.probability.as_deref() == Some(level))
    };
    ratings
        .iter()
        .find(|r| r.blocked)
        .or_else(|| {
            (reason == Some("SAFETY"))
                .then(|| rated("HIGH").or_else(|| rated("MEDIUM")))
                .flatten()
        })
        .and_then(|r| r.category.clone())
}

#[derive(Deserialize)]
pub(super) struct SafetyRating {
    pub(super) category: Option<String>,
    pub(super) probability: Option<String>,
    #[serde(default)]
    pub(super) blocked: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UsageMetadata {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    tool_use_prompt_token_count: Option<u64>,
}

impl UsageMetadata {
    /// The counts as [`TokenUsage`]: input = `promptTokenCount` +
    /// `toolUsePromptTokenCount`; output = `candidatesTokenCount` +
    /// `thoughtsTokenCount` (thinking is counted apart from the candidates and billed
    /// as output, C56); cache reads = `cachedContentTokenCount`.
    pub(super) fn tokens(&self) -> TokenUsage {
        let thoughts = self.thoughts_token_count.unwrap_or(0);
        TokenUsage::new(
            self.prompt_token_count
                .unwrap_or(0)
                .saturating_add(self.tool_use_prompt_token_count.unwrap_or(0)),
            self.candidates_token_count
                .unwrap_or(0)
                .saturating_add(thoughts),
        )
        .with_cache(self.cached_content_token_count.unwrap_or(0), 0)
    }
}

/// A candidate's `finishReason` as a stop reason (`docs/providers.md`, "Stop reasons";
/// values from the API reference, `Candidate.FinishReason`). Filters of every kind
/// (safety, recitation, blocklists, prohibited content, personal data, an unsupported
/// language, image filters) are `ContentFilter`; a malformed or unexpected function call
/// and unknown values are kept as `Other`, so the turn is judged by its content.
pub(super) fn stop_reason(finish: Option<&str>, has_calls: bool) -> StopReason {
    match finish {
        None | Some("STOP" | "FINISH_REASON_UNSPECIFIED") if has_calls => StopReason::ToolUse,
        None | Some("STOP" | "FINISH_REASON_UNSPECIFIED") => StopReason::EndTurn,
        Some("MAX_TOKENS") => StopReason::MaxTokens,
        Some(
            "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "LANGUAGE"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION"
            | "MODEL_ARMOR",
        ) => StopReason::ContentFilter,
        Some(other) => StopReason::Other(other.to_ascii_lowercase()),
    }
}

/// Normalizes a 2xx reply.
///
/// # Errors
/// Transient when the body is not JSON, is cut off, or has neither `candidates` nor a
/// blocked prompt (case C20); an `error` object in a 2xx body is classified by
/// [`embedded_error`].
pub(crate) fn decode(reply: &Reply, key: Option<&ApiKey>) -> Result<LlmResponse, LlmError> {
    let wire: WireResponse = serde_json::from_slice(&reply.body)
        .map_err(|e| undecodable("gemini", reply.status, &reply.headers, &reply.body, &e, key))?;
    decode_wire(wire, reply, key)
}

/// Normalizes a reply already read into its wire form (a streamed reply is assembled
/// into one; `reply` then has an empty body).
///
/// A blocked prompt's blocked safety rating (else its `blockReason`) and
/// `blockReasonMessage`, and a filtered candidate's blocked safety rating (else its
/// `finishReason`) and `finishMessage`, are the refusal's reason (C58).
///
/// # Errors
/// As [`decode`].
pub(super) fn decode_wire(
    wire: WireResponse,
    reply: &Reply,
    key: Option<&ApiKey>,
) -> Result<LlmResponse, LlmError> {
    let usage = wire
        .usage_metadata
        .as_ref()
        .map_or_else(TokenUsage::default, UsageMetadata::tokens);
    let request_id = request_id(&reply.headers).or(wire.response_id);
    let candidate = wire.candidates.and_then(|c| c.into_iter().next());
    let Some(candidate) = candidate else {
        if let Some(feedback) = wire.prompt_feedback.filter(|f| f.block_reason.is_some()) {
            // The prompt itself was blocked: no candidate at all.
            let reason = feedback.block_reason.unwrap_or_default();
            let mut response =
                LlmResponse::text(format!("Gemini blocked the prompt (blockReason {reason})"))
                    .with_stop_reason(StopReason::ContentFilter)
                    .with_usage(usage);
            // The blocked rating names the harm (C58); else the block reason.
            let category =
                harm_category(feedback.safety_ratings.as_deref(), Some(&reason)).unwrap_or(reason);
            response.refusal = RefusalReason::new()
                .with_category(category)
                .with_explanation(feedback.block_reason_message.unwrap_or_default())
                .non_empty();
            response.model = wire.model_version;
            response.request_id = request_id;
            return Ok(response);
        }
        if let Some(error) = wire.error.and_then(ErrorBody::from_value) {
            return Err(embedded_error(
                "gemini",
                reply.status,
                &reply.headers,
                error,
                key,
            ));
        }
        let missing = <serde_json::Error as serde::de::Error>::missing_field("candidates");
        return Err(undecodable(
            "gemini",
            reply.status,
            &reply.headers,
            &reply.body,
            &missing,
            key,
        ));
    };
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
    for part in parts {
        if let Some(call) = part.function_call {
            let mut call = ToolCall::from_wire(
                call.id.unwrap_or_default(),
                call.name.unwrap_or_default(),
                call.args.as_ref(),
            );
            call.thought_signature = part.thought_signature;
            tool_calls.push(call);
        } else if let Some(t) = part.text {
            if part.thought {
                reasoning.push_str(&t);
            } else {
                text.push_str(&t);
            }
        }
    }
    fill_ids(&mut tool_calls);
    let finish = candidate.finish_reason.as_deref();
    let stop_reason = stop_reason(finish, !tool_calls.is_empty());
    let mut refusal = None;
    if stop_reason == StopReason::ContentFilter {
        let blocked = harm_category(candidate.safety_ratings.as_deref(), finish);
        refusal = RefusalReason::new()
            .with_category(
                blocked
                    .or_else(|| finish.map(str::to_owned))
                    .unwrap_or_default(),
            )
            .with_explanation(candidate.finish_message.clone().unwrap_or_default())
            .non_empty();
        if text.trim().is_empty() {
            text = candidate.finish_message.unwrap_or_else(|| {
                format!(
                    "Gemini stopped the response (finishReason {})",
                    finish.unwrap_or("")
                )
            });
        }
    }
    let mut response = LlmResponse::tool_calls(tool_calls)
        .with_text(text)
        .with_stop_reason(stop_reason)
        .with_usage(usage);
    response.refusal = refusal;
    response.model = wire.model_version;
    response.reasoning = reasoning;
    response.request_id = request_id;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reasons_map_to_stop_reasons() {
        assert_eq!(stop_reason(Some("STOP"), false), StopReason::EndTurn);
        assert_eq!(stop_reason(None, true), StopReason::ToolUse);
        assert_eq!(stop_reason(Some("MAX_TOKENS"), true), StopReason::MaxTokens);
        for filter in [
            "SAFETY",
            "RECITATION",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "LANGUAGE",
        ] {
            assert_eq!(
                stop_reason(Some(filter), false),
                StopReason::ContentFilter,
                "{filter}"
            );
        }
        assert_eq!(
            stop_reason(Some("MALFORMED_FUNCTION_CALL"), false),
            StopReason::Other("malformed_function_call".into())
        );
        assert_eq!(
            stop_reason(Some("OTHER"), false),
            StopReason::Other("other".into())
        );
    }
}
