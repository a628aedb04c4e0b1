//! The size of a message in the request's token estimate (bytes of text, tool calls and
//! results, parts counted by the provider's token rule).

use crate::content::TokenRule;
use crate::message::Message;

/// The bytes of one message in the estimate of
/// [`LlmRequest::estimated_input_tokens`](super::LlmRequest::estimated_input_tokens): text, tool call names and arguments as JSON,
/// tool results' content.
pub(crate) fn message_bytes(m: &Message) -> usize {
    message_bytes_with(m, TokenRule::Conservative)
}

/// [`message_bytes`] with parts counted by `rule`.
pub(crate) fn message_bytes_with(m: &Message, rule: TokenRule) -> usize {
    let part_bytes = |part: &crate::content::Part| {
        usize::try_from(rule.tokens(part))
            .unwrap_or(usize::MAX)
            .saturating_mul(4)
    };
    match m {
        Message::User { content, parts } if parts.is_empty() => content.len(),
        // A part counts as the text of its estimated tokens (see `content`'s estimates).
        Message::User { content, parts } => {
            content.len() + parts.iter().map(part_bytes).sum::<usize>()
        }
        Message::Assistant {
            text, tool_calls, ..
        } => {
            text.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        }
        Message::Tool { results } => results
            .iter()
            .map(|r| {
                r.content.len()
                    + if r.parts.is_empty() {
                        0
                    } else {
                        r.parts.iter().map(part_bytes).sum::<usize>()
                    }
            })
            .sum(),
        Message::Paused { text, content } => text.len().max(content.to_string().len()),
    }
}
