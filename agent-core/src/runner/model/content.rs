//! Content capture (the config's `capture_content`, off by default): the conversation as
//! the OpenTelemetry GenAI conventions' opt-in attributes, JSON text in their message
//! format (`{"role", "parts": [{"type": "text" | "tool_call" | "tool_call_response", ..}]}`,
//! <https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/>).
//!
//! Only what the model sees or says is written: texts, the reasoning text a provider
//! returned (a `reasoning` part), tool calls (id, name, arguments) and tool results. Providers' opaque tokens (thought signatures, the Responses API's encrypted
//! reasoning in `provider_data`), request state and keys are not part of it.

use serde_json::{Value, json};

use crate::llm::LlmResponse;
use crate::message::{Message, ToolCall};

/// `gen_ai.system_instructions`: `[{"type": "text", "content": system}]`.
pub(crate) fn system_instructions(system: &str) -> String {
    json!([{"type": "text", "content": system}]).to_string()
}

/// `gen_ai.input.messages`: every message sent, oldest first.
pub(crate) fn input_messages(messages: &[Message]) -> String {
    let out: Vec<Value> = messages
        .iter()
        .map(|message| match message {
            Message::User { content, parts } => {
                let mut out = vec![json!({"type": "text", "content": content})];
                out.extend(parts.iter().map(part_of));
                json!({"role": "user", "parts": out})
            }
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => json!({
                "role": "assistant",
                "parts": assistant_parts(reasoning, text, tool_calls),
            }),
            // The provider's own blocks are not the conventions' parts: the text.
            Message::Paused { text, .. } => json!({
                "role": "assistant",
                "parts": assistant_parts("", text, &[]),
            }),
            Message::Tool { results } => json!({
                "role": "tool",
                "parts": results
                    .iter()
                    .map(|r| {
                        let mut part = json!({
                            "type": "tool_call_response",
                            "id": r.call_id,
                            "response": r.content,
                        });
                        if !r.parts.is_empty() {
                            part["parts"] = r.parts.iter().map(part_of).collect();
                        }
                        part
                    })
                    .collect::<Vec<_>>(),
            }),
        })
        .collect();
    Value::Array(out).to_string()
}

/// A part as the conventions' parts show one, without its bytes: a `text` part, else a
/// `blob` (bytes: their media type, size and SHA-256, never the bytes), a `uri` (a URL)
/// or a `file` (a provider file id), with its `modality`.
fn part_of(part: &crate::content::Part) -> Value {
    use crate::content::Source;
    let Some(media) = part.media() else {
        return json!({"type": "text", "content": part.as_text().unwrap_or_default()});
    };
    let modality = part.kind().as_str();
    match &media.source {
        Source::Bytes(bytes) => json!({
            "type": "blob",
            "modality": modality,
            "mime_type": media.media_type,
            "size": bytes.len(),
            "sha256": bytes.sha256(),
        }),
        Source::Url(url) => json!({
            "type": "uri", "modality": modality, "mime_type": media.media_type, "uri": url,
        }),
        Source::File(id) => json!({
            "type": "file", "modality": modality, "mime_type": media.media_type, "file_id": id,
        }),
    }
}

/// `gen_ai.output.messages`: the reply, with its finish reason.
pub(crate) fn output_messages(response: &LlmResponse) -> String {
    json!([{
        "role": "assistant",
        "parts": assistant_parts(&response.reasoning, &response.text, &response.tool_calls),
        "finish_reason": response.stop_reason.as_str(),
    }])
    .to_string()
}

/// A turn's parts: its reasoning (`{"type": "reasoning"}`, the conventions' part for
/// the model's thinking), its text, then its tool calls.
fn assistant_parts(reasoning: &str, text: &str, calls: &[ToolCall]) -> Vec<Value> {
    let mut parts = Vec::with_capacity(calls.len() + 2);
    if !reasoning.is_empty() {
        parts.push(json!({"type": "reasoning", "content": reasoning}));
    }
    if !text.is_empty() {
        parts.push(json!({"type": "text", "content": text}));
    }
    parts.extend(calls.iter().map(|call| {
        json!({
            "type": "tool_call",
            "id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        })
    }));
    parts
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn captured_parts_show_their_type_size_and_hash_never_their_bytes() {
        let png = crate::content::Part::from_base64(
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
            "image/png",
        )
        .unwrap();
        let text = input_messages(&[Message::user_with("look", vec![png])]);
        let value: Value = serde_json::from_str(&text).unwrap();
        let blob = &value[0]["parts"][1];
        assert_eq!(blob["type"], "blob");
        assert_eq!(blob["modality"], "image");
        assert_eq!(blob["size"], 70);
        assert_eq!(blob["sha256"].as_str().unwrap().len(), 64);
        assert!(!text.contains("iVBOR"), "{text}");
    }
    use crate::message::ToolResult;

    #[test]
    fn messages_follow_the_conventions_format_without_signatures() {
        let messages = vec![
            Message::user("hi"),
            Message::assistant(
                "",
                vec![
                    ToolCall::new("c1", "lookup", json!({"id": 1}))
                        .with_thought_signature("SIG")
                        .with_provider_data(json!({"reasoning": [{"encrypted_content": "ENC"}]})),
                ],
            )
            .with_reasoning("The id is 1; look it up."),
            Message::tool_results(vec![ToolResult::ok("c1", "lookup", "found")]),
        ];
        let text = input_messages(&messages);
        assert!(!text.contains("SIG") && !text.contains("ENC"), "{text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            json!([
                {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
                {"role": "assistant", "parts": [
                    {"type": "reasoning", "content": "The id is 1; look it up."},
                    {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"id": 1}}
                ]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "found"}]}
            ])
        );
        let out: Value =
            serde_json::from_str(&output_messages(&LlmResponse::text("done"))).unwrap();
        assert_eq!(
            out,
            json!([{"role": "assistant", "parts": [{"type": "text", "content": "done"}], "finish_reason": "stop"}])
        );
    }
}
