//! The model side of a run: the transcript made valid for another provider (a fallback
//! switch, a handoff), the sink that turns a streamed call's pieces into events
//! (`sink.rs`), the `chat` span of a call (`spans.rs`) and what it captures of the
//! conversation (`content.rs`).

pub(crate) mod content;
pub(crate) mod sink;
pub(crate) mod spans;

use serde_json::Value;

use crate::message::Message;

/// Drops from a transcript what only the provider (and model) that wrote it can read,
/// so the next provider gets a valid conversation: every tool call's thought signature
/// (Gemini's signatures are tied to the model that made them; the Gemini adapter sends
/// its documented placeholder for an unsigned call) and provider data (the OpenAI
/// Responses API's encrypted reasoning items and response id), and a paused turn's provider
/// content (Anthropic's content blocks): a paused turn with text becomes an assistant
/// turn of that text, one without is removed. Calls and their results stay, so every
/// call id is still answered.
pub(crate) fn strip_provider_parts(messages: &mut Vec<Message>) {
    messages.retain_mut(|message| match message {
        Message::Assistant { tool_calls, .. } => {
            for call in tool_calls {
                call.thought_signature = None;
                call.provider_data = None;
            }
            true
        }
        Message::Paused { text, content } => {
            *content = Value::Null;
            if text.trim().is_empty() {
                false
            } else {
                *message = Message::assistant(std::mem::take(text), Vec::new());
                true
            }
        }
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::message::{ToolCall, ToolResult};
    use serde_json::json;

    #[test]
    fn a_switch_drops_signatures_and_paused_content_and_keeps_every_call() {
        let mut messages = vec![
            Message::user("go"),
            Message::Paused {
                text: String::new(),
                content: json!([{"type": "server_tool_use"}]),
            },
            Message::Paused {
                text: "searching".to_owned(),
                content: json!([{"type": "text", "text": "searching"}]),
            },
            Message::assistant(
                "",
                vec![
                    ToolCall::new("c1", "lookup", json!({"id": 1}))
                        .with_thought_signature("SIG")
                        .with_provider_data(json!({"reasoning": [{"type": "reasoning"}]})),
                ],
            ),
            Message::tool_results(vec![ToolResult::ok("c1", "lookup", "found")]),
        ];
        strip_provider_parts(&mut messages);
        assert_eq!(
            messages,
            vec![
                Message::user("go"),
                Message::assistant("searching", Vec::new()),
                Message::assistant("", vec![ToolCall::new("c1", "lookup", json!({"id": 1}))]),
                Message::tool_results(vec![ToolResult::ok("c1", "lookup", "found")]),
            ]
        );
    }
}
