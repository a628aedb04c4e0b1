//! The provider-facing side of streaming: the pieces of a turn ([`StreamDelta`]) a
//! client hands to a [`StreamSink`] as they arrive, and [`replay`] for clients that
//! answer in one piece.

use super::{LlmResponse, TokenUsage};

/// One piece of a streamed model turn, as a client reads it off the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamDelta<'a> {
    /// More of the turn's text.
    Text(&'a str),
    /// A tool call began: its position in the turn (0-based, the order of the calls in
    /// the response), its id and its tool name as the provider sent them.
    ToolCallStarted {
        /// The call's position in the turn (0-based).
        index: usize,
        /// The call id (may be empty: ids are filled in when the turn is complete).
        id: &'a str,
        /// The tool name.
        name: &'a str,
    },
    /// More of a tool call's arguments, as JSON text (a fragment: the concatenation of
    /// a call's fragments is its arguments).
    ToolCallArguments {
        /// The call's position in the turn (0-based).
        index: usize,
        /// The fragment of JSON text.
        json: &'a str,
    },
    /// More of the reasoning the provider sends apart from the answer (compatible
    /// servers' `reasoning_content` / `reasoning`, Anthropic `thinking_delta`): never
    /// part of the answer, but tokens the call costs (a cut or cancelled call is counted
    /// from what arrived, case C40).
    Reasoning(&'a str),
}

/// Receives a streamed turn's [`StreamDelta`]s, in order, as they arrive.
///
/// Called inline on the run's task: keep it quick. What it receives is a preview: the
/// [`LlmResponse`](crate::llm::LlmResponse) the client returns is what the run goes on
/// with, and a turn that fails mid-way (see
/// [`LlmClient::complete_streaming`](crate::llm::LlmClient::complete_streaming)) is retried
/// as a whole.
pub trait StreamSink: Send {
    /// Handles one piece of the turn.
    fn on_delta(&mut self, delta: StreamDelta<'_>);

    /// The pieces handed over so far arrived together (for example in one network
    /// read): a client calls this before it waits for more, and when the turn ends. A
    /// sink may act on a batch here rather than on every piece (the runner's sink sends
    /// one [`StreamEvent::PartialOutput`](crate::stream::StreamEvent::PartialOutput) per batch). Does nothing by default; calling
    /// it again without new pieces must do nothing either.
    fn flush(&mut self) {}

    /// The token usage the provider reported so far in the stream (Anthropic's
    /// `message_start` and `message_delta`, the last chunk of a Chat Completions stream
    /// with `include_usage`): cumulative, so a later report replaces an earlier one.
    /// The runner keeps it for a call cut off before its end (case C40); the returned
    /// response carries the final usage anyway. Does nothing by default.
    fn on_usage(&mut self, usage: TokenUsage) {
        let _ = usage;
    }
}

impl<F> StreamSink for F
where
    F: FnMut(StreamDelta<'_>) + Send,
{
    fn on_delta(&mut self, delta: StreamDelta<'_>) {
        self(delta);
    }
}

/// Appends a streamed piece to the text assembled so far, reserving
/// [`FIRST_PIECE_RESERVE`] bytes (or the piece's length, if longer) at the first: a
/// turn's text and arguments arrive in many small pieces, and growing from the first
/// piece's few bytes would reallocate and copy four or five times before 128 bytes.
pub(crate) fn push_piece(text: &mut String, piece: &str) {
    if text.capacity() == 0 {
        text.reserve(piece.len().max(FIRST_PIECE_RESERVE));
    }
    text.push_str(piece);
}

/// What [`push_piece`] reserves for the first piece (bytes): enough for the arguments
/// of a typical tool call, a few words of text.
const FIRST_PIECE_RESERVE: usize = 128;

/// Hands a whole turn to `sink`: its text, then each tool call (start, then its
/// arguments as JSON text), as one batch.
pub(crate) fn replay(response: &LlmResponse, sink: &mut dyn StreamSink) {
    if !response.text.is_empty() {
        sink.on_delta(StreamDelta::Text(&response.text));
    }
    for (index, call) in response.tool_calls.iter().enumerate() {
        sink.on_delta(StreamDelta::ToolCallStarted {
            index,
            id: &call.id,
            name: &call.name,
        });
        let json = call.arguments.to_string();
        sink.on_delta(StreamDelta::ToolCallArguments { index, json: &json });
    }
    sink.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_piece_reserves_room_for_the_next_ones() {
        let mut text = String::new();
        push_piece(&mut text, "{\"a\"");
        assert_eq!(text.capacity(), FIRST_PIECE_RESERVE);
        let before = text.as_ptr();
        for _ in 0..30 {
            push_piece(&mut text, ":1,\"");
        }
        assert_eq!(text.len(), 4 + 30 * 4);
        assert_eq!(text.as_ptr(), before, "no reallocation below the reserve");
        assert!(text.starts_with("{\"a\":1,\""));

        let long = "x".repeat(3 * FIRST_PIECE_RESERVE);
        let mut text = String::new();
        push_piece(&mut text, &long);
        assert_eq!(text, long);
        assert!(text.capacity() >= long.len());

        // Text that already has room is only appended to.
        let mut text = String::with_capacity(8);
        push_piece(&mut text, "ab");
        assert_eq!((text.as_str(), text.capacity()), ("ab", 8));
    }
}
