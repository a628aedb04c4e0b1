//! `streamGenerateContent` streaming: the chunks of `?alt=sse` assembled into the reply
//! a `generateContent` call would have returned ([`WireResponse`], typed), which
//! [`decode_wire`](super::response::decode_wire) normalizes as it does a plain body
//! (case C61).
//!
//! Each event's data is a whole `GenerateContentResponse` (source: API reference,
//! `models.streamGenerateContent`, <https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent>,
//! and the thought signatures guide, <https://ai.google.dev/gemini-api/docs/thought-signatures>):
//! `candidates[0].content.parts` holds what is new since the last chunk (text pieces,
//! thought summary pieces marked `thought: true`, and each `functionCall` whole, with
//! its `thoughtSignature` on its part; a signature may also come on a last text part
//! with no text); the last chunk has the `finishReason` (with `finishMessage` and
//! `safetyRatings` for a filtered candidate); `usageMetadata` is cumulative (the last
//! one is the call's); `modelVersion` and `responseId` come on every chunk (the first
//! non-empty ones are kept, C57); a blocked prompt is a chunk with
//! `promptFeedback.blockReason` and no candidate; a chunk with `error` is an error
//! mid-stream. The stream has no end marker: it is whole once a finish reason (or a
//! blocked prompt) came and the body ended; a body that ends before is cut mid-way.
//!
//! To the sink: text pieces as text, thought pieces as reasoning, each function call
//! as its start and its arguments' JSON text in one piece.

use serde_json::Value;

use super::response::{
    PromptFeedback, SafetyRating, UsageMetadata, WireCandidate, WireContent, WirePart, WireResponse,
};
use crate::llm::{StreamDelta, StreamSink};
use crate::providers::sse::{Assembler, Step};

/// The reply so far.
#[derive(Default)]
pub(crate) struct ChunkAssembler {
    /// The parts, consecutive text parts of the same kind (thought or not) joined.
    parts: Vec<WirePart>,
    /// The function calls seen.
    calls: usize,
    /// Whether any chunk had a candidate.
    candidate: bool,
    finish_reason: Option<String>,
    finish_message: Option<String>,
    safety_ratings: Option<Vec<SafetyRating>>,
    prompt_feedback: Option<PromptFeedback>,
    usage: Option<UsageMetadata>,
    model_version: Option<String>,
    response_id: Option<String>,
}

impl ChunkAssembler {
    /// Takes one part of a chunk.
    fn on_part(&mut self, part: WirePart, sink: &mut dyn StreamSink) {
        if let Some(call) = &part.function_call {
            let id = call.id.as_deref().unwrap_or("");
            let name = call.name.as_deref().unwrap_or("");
            sink.on_delta(StreamDelta::ToolCallStarted {
                index: self.calls,
                id,
                name,
            });
            if let Some(args) = call.args.as_ref().filter(|a| !a.is_null()) {
                let json = args.to_string();
                sink.on_delta(StreamDelta::ToolCallArguments {
                    index: self.calls,
                    json: &json,
                });
            }
            self.calls += 1;
            self.parts.push(part);
            return;
        }
        let Some(piece) = part.text.as_deref() else {
            // Neither text nor a call (a part of another kind): kept as it came.
            self.parts.push(part);
            return;
        };
        if !piece.is_empty() {
            sink.on_delta(if part.thought {
                StreamDelta::Reasoning(piece)
            } else {
                StreamDelta::Text(piece)
            });
        }
        match self.parts.last_mut() {
            Some(last)
                if last.function_call.is_none()
                    && last.thought == part.thought
                    && last.text.is_some() =>
            {
                if let Some(text) = &mut last.text {
                    crate::llm::push_piece(text, piece);
                }
                if last.thought_signature.is_none() {
                    last.thought_signature = part.thought_signature;
                }
            }
            _ => self.parts.push(part),
        }
    }

    /// Takes one chunk.
    fn on_chunk(&mut self, chunk: WireResponse, sink: &mut dyn StreamSink) {
        let first = |kept: &mut Option<String>, new: Option<String>| {
            if kept.is_none() {
                *kept = new.filter(|v| !v.is_empty());
            }
        };
        first(&mut self.model_version, chunk.model_version);
        first(&mut self.response_id, chunk.response_id);
        if let Some(usage) = chunk.usage_metadata {
            sink.on_usage(usage.tokens());
            self.usage = Some(usage);
        }
        if let Some(feedback) = chunk.prompt_feedback.filter(|f| f.block_reason.is_some()) {
            self.prompt_feedback = Some(feedback);
        }
        let Some(candidate) = chunk.candidates.and_then(|c| c.into_iter().next()) else {
            return;
        };
        self.candidate = true;
        let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
        for part in parts {
            self.on_part(part, sink);
        }
        if candidate.finish_reason.is_some() {
            self.finish_reason = candidate.finish_reason;
        }
        if candidate.finish_message.is_some() {
            self.finish_message = candidate.finish_message;
        }
        if candidate.safety_ratings.is_some() {
            self.safety_ratings = candidate.safety_ratings;
        }
    }
}

impl Assembler for ChunkAssembler {
    type Output = WireResponse;

    fn on_event(&mut self, _event: &str, data: &str, sink: &mut dyn StreamSink) -> Step {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Step::More;
        }
        let mut chunk: WireResponse = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => return Step::Undecodable(e),
        };
        if let Some(error) = chunk.error.take().filter(|e| !e.is_null()) {
            return Step::Failed(error);
        }
        self.on_chunk(chunk, sink);
        Step::More
    }

    /// A finish reason, or a blocked prompt, came: the stream has no end marker.
    fn complete(&self) -> bool {
        self.finish_reason.is_some()
            || self
                .prompt_feedback
                .as_ref()
                .is_some_and(|f| f.block_reason.is_some())
    }

    fn finish(self) -> WireResponse {
        let candidates = self.candidate.then(|| {
            vec![WireCandidate {
                content: Some(WireContent {
                    parts: Some(self.parts),
                }),
                finish_reason: self.finish_reason,
                finish_message: self.finish_message,
                safety_ratings: self.safety_ratings,
            }]
        });
        WireResponse {
            candidates,
            prompt_feedback: self.prompt_feedback,
            usage_metadata: self.usage,
            model_version: self.model_version,
            response_id: self.response_id,
            error: None::<Value>,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::ChunkAssembler;
    use crate::llm::StreamDelta;
    use crate::providers::sse::{Assembler, Step};

    #[test]
    fn pieces_are_joined_calls_kept_whole_and_errors_told_apart() {
        let mut assembler = ChunkAssembler::default();
        let mut deltas = Vec::new();
        let mut sink = |delta: StreamDelta<'_>| {
            deltas.push(match delta {
                StreamDelta::Text(t) => format!("text {t}"),
                StreamDelta::ToolCallStarted { index, id, name } => {
                    format!("start {index} {id} {name}")
                }
                StreamDelta::ToolCallArguments { index, json } => format!("args {index} {json}"),
                StreamDelta::Reasoning(r) => format!("reasoning {r}"),
            });
        };
        for data in [
            r#"{"candidates":[{"content":{"parts":[{"text":"hm","thought":true}]}}],"responseId":"","modelVersion":""}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"A "}]}}],"responseId":"r1","modelVersion":"m1"}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"b"},{"functionCall":{"name":"f","args":{"x":1}},"thoughtSignature":"s1"}]}}],"responseId":"r2"}"#,
        ] {
            assert!(matches!(
                assembler.on_event("", data, &mut sink),
                Step::More
            ));
        }
        assert!(!assembler.complete(), "no finish reason yet");
        let last = r#"{"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"s2"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2}}"#;
        assert!(matches!(
            assembler.on_event("", last, &mut sink),
            Step::More
        ));
        assert!(assembler.complete());
        assert!(matches!(
            assembler.on_event("", r#"{"error":{"code":503,"status":"UNAVAILABLE"}}"#, &mut sink),
            Step::Failed(e) if e["status"] == "UNAVAILABLE"
        ));
        assert!(matches!(
            assembler.on_event("", r#"{"candidates":"x"}"#, &mut sink),
            Step::Undecodable(_)
        ));
        assert_eq!(
            deltas,
            [
                "reasoning hm",
                "text A ",
                "text b",
                "start 0  f",
                "args 0 {\"x\":1}"
            ]
        );
        let reply = assembler.finish();
        assert_eq!(reply.response_id.as_deref(), Some("r1"));
        assert_eq!(reply.model_version.as_deref(), Some("m1"));
        let parts = reply
            .candidates
            .unwrap()
            .remove(0)
            .content
            .unwrap()
            .parts
            .unwrap();
        let texts: Vec<Option<&str>> = parts.iter().map(|p| p.text.as_deref()).collect();
        assert_eq!(texts, [Some("hm"), Some("A b"), None, Some("")]);
        assert_eq!(parts[2].thought_signature.as_deref(), Some("s1"));
    }
}
