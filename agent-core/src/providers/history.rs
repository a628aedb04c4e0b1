//! The conversation as both wire formats need it: every tool call of an assistant turn
//! answered exactly once, right after that turn, in emission order.
//!
//! Anthropic and OpenAI both reject a request whose assistant tool calls are not all
//! answered by the next message, or whose results answer an unknown call id (400). The
//! runner always answers every call; this module makes the adapters total over any
//! history anyway: a missing answer becomes an error result, an extra one is dropped.

use crate::content::Part;
use crate::message::{Message, ToolCall};

/// The text sent in place of an empty turn (providers reject empty text, and an
/// assistant turn with no text and no calls has nothing else to show).
pub(crate) const EMPTY_TURN: &str = "(empty)";

/// The content of the error result for a call the history has no answer for.
pub(crate) const MISSING_RESULT: &str = "No result was recorded for this call.";

/// One answer to one tool call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Answer<'a> {
    /// The id of the call answered.
    pub(crate) call_id: &'a str,
    /// The content shown to the model.
    pub(crate) content: &'a str,
    /// Whether the result reports a failure.
    pub(crate) is_error: bool,
    /// The parts after the content (only where the route takes parts in tool results:
    /// the runner moves them to a user message for the others).
    pub(crate) parts: &'a [Part],
}

/// One unit of the conversation, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Turn<'a> {
    /// From the user: text (never empty: see [`EMPTY_TURN`]), and the parts after it
    /// (only where the route takes them: the runner refuses others before any request).
    User {
        /// The text.
        text: &'a str,
        /// The parts after the text, in order.
        parts: &'a [Part],
    },
    /// A model turn: its text (possibly empty) and calls.
    Assistant {
        /// The text, as the model wrote it.
        text: &'a str,
        /// The calls, in emission order.
        calls: &'a [ToolCall],
    },
    /// The answers to every call of the preceding assistant turn, in its call order.
    Results(Vec<Answer<'a>>),
    /// A paused model turn ([`Message::Paused`]): its text, and the provider's content
    /// to send back unchanged.
    Paused {
        /// The text so far, as the model wrote it.
        text: &'a str,
        /// The content as the provider sent it.
        content: &'a serde_json::Value,
    },
}

/// The conversation as turns, with every call answered exactly once.
pub(crate) fn turns(messages: &[Message]) -> Vec<Turn<'_>> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    let mut pending: &[ToolCall] = &[];
    for message in messages {
        match message {
            Message::User { content, parts } => {
                answer_missing(&mut out, std::mem::take(&mut pending));
                out.push(Turn::User {
                    text: non_empty(content),
                    parts,
                });
            }
            Message::Assistant {
                text, tool_calls, ..
            } => {
                answer_missing(&mut out, std::mem::take(&mut pending));
                out.push(Turn::Assistant {
                    text,
                    calls: tool_calls,
                });
                pending = tool_calls;
            }
            Message::Paused { text, content } => {
                answer_missing(&mut out, std::mem::take(&mut pending));
                out.push(Turn::Paused { text, content });
            }
            Message::Tool { results } => {
                let calls = std::mem::take(&mut pending);
                if calls.is_empty() {
                    tracing::debug!(
                        results = results.len(),
                        "tool results with no preceding tool calls were not sent"
                    );
                    continue;
                }
                let answers = calls
                    .iter()
                    .map(|call| match results.iter().find(|r| r.call_id == call.id) {
                        Some(r) => Answer {
                            call_id: &call.id,
                            content: &r.content,
                            is_error: r.is_error,
                            parts: &r.parts,
                        },
                        None => missing(call),
                    })
                    .collect();
                out.push(Turn::Results(answers));
            }
        }
    }
    answer_missing(&mut out, pending);
    out
}

fn answer_missing<'a>(out: &mut Vec<Turn<'a>>, calls: &'a [ToolCall]) {
    if !calls.is_empty() {
        out.push(Turn::Results(calls.iter().map(missing).collect()));
    }
}

fn missing(call: &ToolCall) -> Answer<'_> {
    Answer {
        call_id: &call.id,
        content: MISSING_RESULT,
        is_error: true,
        parts: &[],
    }
}

/// `text`, or [`EMPTY_TURN`] when it has no visible character.
pub(crate) fn non_empty(text: &str) -> &str {
    if text.trim().is_empty() {
        EMPTY_TURN
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::message::ToolResult;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "t", json!({}))
    }

    #[test]
    fn results_follow_call_order_and_extras_are_dropped() {
        let messages = vec![
            Message::user("hi"),
            Message::assistant("", vec![call("a"), call("b")]),
            Message::tool_results(vec![
                ToolResult::ok("b", "t", "B"),
                ToolResult::ok("zzz", "t", "stray"),
                ToolResult::error("a", "t", "A failed"),
            ]),
        ];
        let turns = turns(&messages);
        assert_eq!(turns.len(), 3);
        let Turn::Results(answers) = &turns[2] else {
            panic!("{turns:?}")
        };
        let ids: Vec<_> = answers
            .iter()
            .map(|a| (a.call_id, a.content, a.is_error))
            .collect();
        assert_eq!(ids, [("a", "A failed", true), ("b", "B", false)]);
    }

    #[test]
    fn unanswered_calls_get_error_results() {
        let messages = vec![
            Message::user("hi"),
            Message::assistant("", vec![call("a")]),
            Message::user("go on"),
            Message::assistant("thinking", vec![call("b")]),
        ];
        let turns = turns(&messages);
        let results: Vec<_> = turns
            .iter()
            .filter_map(|t| match t {
                Turn::Results(a) => Some(a.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(results.len(), 2);
        assert_eq!(results[0][0].call_id, "a");
        assert_eq!(results[0][0].content, MISSING_RESULT);
        assert!(results[1][0].is_error);
        // The missing answer comes before the user text that followed the calls.
        assert!(matches!(turns[2], Turn::Results(_)));
        assert_eq!(
            turns[3],
            Turn::User {
                text: "go on",
                parts: &[]
            }
        );
    }

    #[test]
    fn orphan_results_are_dropped_and_empty_text_replaced() {
        let messages = vec![
            Message::user("  "),
            Message::tool_results(vec![ToolResult::ok("x", "t", "?")]),
        ];
        assert_eq!(
            turns(&messages),
            [Turn::User {
                text: EMPTY_TURN,
                parts: &[]
            }]
        );
    }
}
