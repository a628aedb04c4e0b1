//! Chat Completions streaming: `chat.completion.chunk` events assembled into the body
//! of a non-streamed reply.
//!
//! Each chunk has `choices[0].delta` with `content` (text), `refusal`,
//! `reasoning_content` / `reasoning` (compatible servers' reasoning parsers) and
//! `tool_calls` fragments keyed by `index` (the first carries `id` and
//! `function.name`, every one a piece of `function.arguments`); `finish_reason` on the
//! last chunk of the choice; with `stream_options.include_usage`, a final chunk with
//! empty `choices` and the `usage`; then `data: [DONE]`. A chunk with `error` is an
//! error mid-stream. Source: Chat Completions API reference, "The chat completion chunk
//! object" (<https://platform.openai.com/docs/api-reference/chat-streaming>).
//!
//! What servers do besides: a name sent in pieces, or whole in every fragment (joined,
//! C54); a stream closed after the finish (and usage) chunk without `[DONE]` (whole,
//! C55); a first chunk with an empty `id` and `model` (Azure's prompt filter results:
//! the first non-empty ones are kept, C57); Azure's `content_filter_results` on a
//! choice (the filtered categories, a content filter's reason, C58).

mod chunk;

use std::borrow::Cow;

use serde_json::Value;

use super::response::{
    FilterResults, WireCallOut, WireChoiceOut, WireFunctionOut, WireMessageOut, WireResponse,
    WireUsage,
};
use crate::llm::{StreamDelta, StreamSink};
use crate::providers::sse::{Assembler, Step};

/// A tool call being assembled.
struct Call {
    /// The wire `index` it is keyed by.
    wire_index: usize,
    id: Option<Value>,
    name: String,
    arguments: String,
    /// Whether its start went to the sink: once its name is whole (its arguments
    /// began, another call opened, or the choice finished; case C54).
    announced: bool,
}

/// The reply so far.
#[derive(Default)]
pub(crate) struct ChunkAssembler {
    id: Option<Value>,
    model: Option<String>,
    text: String,
    refusal: String,
    reasoning: String,
    calls: Vec<Call>,
    finish_reason: Option<String>,
    /// The content filter categories marked `filtered` (Azure's
    /// `content_filter_results`), in the order first seen.
    pub(super) filtered: Vec<String>,
    usage: Option<WireUsage>,
    /// The arguments piece of the tool call fragment being read (kept for its
    /// capacity: no allocation per fragment).
    fragment: String,
}

impl ChunkAssembler {
    /// Hands the start of every call up to `last` (by position) that was not announced
    /// yet to the sink, in order, each with its name as assembled so far.
    fn announce_through(&mut self, last: usize, sink: &mut dyn StreamSink) {
        for (index, call) in self.calls.iter_mut().enumerate().take(last + 1) {
            if call.announced {
                continue;
            }
            call.announced = true;
            let shown: Cow<'_, str> = match &call.id {
                Some(Value::String(s)) => Cow::Borrowed(s),
                Some(Value::Number(n)) => Cow::Owned(n.to_string()),
                _ => Cow::Borrowed(""),
            };
            sink.on_delta(StreamDelta::ToolCallStarted {
                index,
                id: &shown,
                name: &call.name,
            });
        }
    }

    /// Hands every call's start not yet announced to the sink: the choice finished.
    pub(super) fn announce_all(&mut self, sink: &mut dyn StreamSink) {
        if let Some(last) = self.calls.len().checked_sub(1) {
            self.announce_through(last, sink);
        }
    }

    /// Records a finish reason; the calls are then whole, and announced.
    pub(super) fn on_finish(&mut self, reason: String, sink: &mut dyn StreamSink) {
        self.finish_reason = Some(reason);
        self.announce_all(sink);
    }

    /// Applies one tool call fragment: the call keyed by `wire_index` starts (with its
    /// id and name) or grows by `arguments`.
    ///
    /// A fragment that carries a new non-empty id, different from the id of the call
    /// open at its `index`, opens a new call (case C34: some compatible servers send
    /// every call of a turn at `index: 0`, each with its own id); a repeated id, or a
    /// fragment without one, continues the call open at that index.
    ///
    /// A name in a later fragment of the same call is joined to the name so far (case
    /// C54): appended when it is a piece (`"lookup_"`, `"order"`), ignored when it
    /// repeats the whole name so far (servers that send the name in every fragment),
    /// taken instead when it extends it (a server that sends the name so far each
    /// time). So a piece equal to the whole name before it (`"ab"` sent as `"ab"`,
    /// `"ab"`) reads as a repeat. The call's start goes to the sink once its name is
    /// whole: at its first arguments piece, when another call opens, or when the
    /// choice finishes.
    fn on_call(
        &mut self,
        wire_index: usize,
        id: Option<Value>,
        name: Option<String>,
        arguments: &str,
        sink: &mut dyn StreamSink,
    ) {
        let open = self
            .calls
            .iter()
            .rposition(|c| c.wire_index == wire_index)
            .filter(|&at| !opens_new_call(self.calls[at].id.as_ref(), id.as_ref()));
        let at = match open {
            Some(at) => {
                let call = &mut self.calls[at];
                if call.id.is_none() {
                    call.id = id;
                }
                if let Some(piece) = name {
                    join_name(&mut call.name, piece);
                }
                at
            }
            None => {
                // The calls before this one are whole.
                self.announce_all(sink);
                self.calls.push(Call {
                    wire_index,
                    id,
                    name: name.unwrap_or_default(),
                    arguments: String::new(),
                    announced: false,
                });
                self.calls.len() - 1
            }
        };
        if !arguments.is_empty() {
            self.announce_through(at, sink);
            crate::llm::push_piece(&mut self.calls[at].arguments, arguments);
            sink.on_delta(StreamDelta::ToolCallArguments {
                index: at,
                json: arguments,
            });
        }
    }
}

/// Joins a name piece to a call's name so far (see [`ChunkAssembler::on_call`]).
fn join_name(name: &mut String, piece: String) {
    if piece.is_empty() || piece == *name {
        return;
    }
    if piece.starts_with(name.as_str()) {
        *name = piece;
    } else {
        name.push_str(&piece);
    }
}

/// Whether a fragment's id names a call other than the one open at its index: both
/// ids are present and non-empty, and they differ.
fn opens_new_call(open: Option<&Value>, fragment: Option<&Value>) -> bool {
    let usable = |id: &Value| match id {
        Value::String(s) => !s.is_empty(),
        Value::Null => false,
        _ => true,
    };
    match (open, fragment) {
        (Some(open), Some(fragment)) => usable(open) && usable(fragment) && open != fragment,
        _ => false,
    }
}

impl Assembler for ChunkAssembler {
    type Output = WireResponse;

    fn on_event(&mut self, _event: &str, data: &str, sink: &mut dyn StreamSink) -> Step {
        let data = data.trim();
        if data == "[DONE]" {
            self.announce_all(sink);
            return Step::End;
        }
        if data.is_empty() {
            return Step::More;
        }
        match chunk::read(data, self, sink) {
            Ok(None) => Step::More,
            Ok(Some(error)) => Step::Failed(error),
            Err(e) => Step::Undecodable(e),
        }
    }

    /// The choice's finish reason came (case C55: a server may close the stream after
    /// it, and after the usage chunk, without `[DONE]`).
    fn complete(&self) -> bool {
        self.finish_reason.is_some()
    }

    fn finish(self) -> WireResponse {
        let tool_calls = (!self.calls.is_empty()).then(|| {
            self.calls
                .into_iter()
                .map(|c| WireCallOut {
                    id: c.id,
                    function: Some(WireFunctionOut {
                        name: Some(c.name),
                        arguments: Some(Value::String(c.arguments)),
                    }),
                })
                .collect()
        });
        let message = WireMessageOut {
            content: Some(Value::String(self.text)),
            refusal: (!self.refusal.is_empty()).then_some(self.refusal),
            tool_calls,
            reasoning_content: (!self.reasoning.is_empty())
                .then_some(Value::String(self.reasoning)),
            reasoning: None,
        };
        WireResponse {
            id: self.id,
            model: self.model,
            choices: Some(vec![WireChoiceOut {
                message: Some(message),
                finish_reason: self.finish_reason,
                content_filter_results: Some(FilterResults(self.filtered)),
            }]),
            usage: self.usage,
            error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use serde_json::{Value, json};

    use super::ChunkAssembler;
    use crate::llm::StreamDelta;
    use crate::providers::sse::{Assembler, Step};

    /// Feeds `events` (data lines) to an assembler; returns the deltas as text and the
    /// assembled reply.
    fn assemble(events: &[&str]) -> (Vec<String>, super::WireResponse) {
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
        for data in events {
            match assembler.on_event("", data, &mut sink) {
                Step::More | Step::End => {}
                Step::Failed(e) => panic!("error event {e}"),
                Step::Undecodable(e) => panic!("undecodable {e}"),
            }
        }
        (deltas, assembler.finish())
    }

    fn message(reply: &super::WireResponse) -> &super::WireMessageOut {
        reply.choices.as_ref().unwrap()[0].message.as_ref().unwrap()
    }

    #[test]
    fn escaped_fragments_are_unescaped_once_and_objects_kept_whole() {
        let (deltas, reply) = assemble(&[
            r#"{"choices":[{"delta":{"content":"say \"hi\"\n","tool_calls":[{"index":0,"id":"c1","function":{"name":"a","arguments":"{\"x\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"\"\\u00e9\"}"}}]}}]}"#,
            // A server that sends a call's arguments as an object, whole.
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":7,"function":{"name":"b","arguments":{"y":[1,2]}}}]}}]}"#,
            // Numbers and arrays where text is expected are nothing.
            r#"{"choices":[{"delta":{"content":5,"reasoning":["r"],"tool_calls":[{"index":1,"function":{"arguments":null}}]},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            deltas,
            [
                "text say \"hi\"\n",
                "start 0 c1 a",
                "args 0 {\"x\":",
                // The JSON text's own escape stays: it is JSON for the arguments.
                "args 0 \"\\u00e9\"}",
                "start 1 7 b",
                "args 1 {\"y\":[1,2]}",
            ]
        );
        let message = message(&reply);
        assert_eq!(message.content, Some(json!("say \"hi\"\n")));
        assert!(message.reasoning_content.is_none());
        let calls = message.tool_calls.as_ref().unwrap();
        let arguments: Vec<&Value> = calls
            .iter()
            .map(|c| c.function.as_ref().unwrap().arguments.as_ref().unwrap())
            .collect();
        assert_eq!(
            arguments,
            [&json!("{\"x\":\"\\u00e9\"}"), &json!("{\"y\":[1,2]}")]
        );
        assert_eq!(calls[1].id, Some(json!(7)));
    }

    #[test]
    fn reasoning_content_wins_over_reasoning_in_either_order() {
        let (_, reply) = assemble(&[
            r#"{"choices":[{"delta":{"reasoning":"r1 ","reasoning_content":"a "}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"b ","reasoning":"r2 "}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"c"}}]}"#,
        ]);
        assert_eq!(message(&reply).reasoning_content, Some(json!("a b c")));
    }

    #[test]
    fn fragment_fields_in_any_order_and_unknown_fields_skipped() {
        let (deltas, reply) = assemble(&[
            // `index` after `function`; unknown fields at every level.
            r#"{"x":{"y":[1]},"choices":[{"logprobs":null,"delta":{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"a\":","name":"f"},"type":"function","index":3,"id":"c9"}]}}],"model":"m1","id":"r1"}"#,
            // No `index`: keyed by its position in the array.
            r#"{"id":"r2","model":"m2","choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":3,"function":{"arguments":"1}"}}]},"finish_reason":"tool_calls"}],"usage":null}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}"#,
        ]);
        assert_eq!(
            deltas,
            [
                "start 0 c9 f",
                "args 0 {\"a\":",
                "start 1  ",
                "args 1 1}",
                "args 0 1}",
            ]
        );
        // The first id and model are kept.
        assert_eq!(reply.id, Some(json!("r1")));
        assert_eq!(reply.model.as_deref(), Some("m1"));
        assert_eq!(
            reply.choices.as_ref().unwrap()[0].finish_reason.as_deref(),
            Some("tool_calls")
        );
        let usage = reply.usage.as_ref().unwrap();
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (Some(7), Some(2))
        );
        let calls = message(&reply).tool_calls.as_ref().unwrap();
        assert_eq!(
            calls[0].function.as_ref().unwrap().arguments,
            Some(json!("{\"a\":1}"))
        );
    }

    #[test]
    fn error_chunks_and_malformed_chunks_are_told_apart() {
        let mut assembler = ChunkAssembler::default();
        let mut sink = |_: StreamDelta<'_>| {};
        let error = r#"{"error":{"message":"boom","type":"server_error"}}"#;
        assert!(matches!(
            assembler.on_event("", error, &mut sink),
            Step::Failed(e) if e["type"] == "server_error"
        ));
        for bad in [
            r#"["not", "an", "object"]"#,
            r#"{"choices":"none"}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":"zero"}]}}]}"#,
            r#"{"choices":[{"delta":{}}]"#,
        ] {
            assert!(
                matches!(assembler.on_event("", bad, &mut sink), Step::Undecodable(_)),
                "{bad}"
            );
        }
        // An id that is not a usable value is no id, not an undecodable chunk.
        let odd_ids = r#"{"id":1e400,"choices":[{"delta":{"tool_calls":[{"index":0,"id":"\ud800","function":{"name":"f"}}]}}]}"#;
        assert!(matches!(
            assembler.on_event("", odd_ids, &mut sink),
            Step::More
        ));
        assert!(assembler.id.is_none() && assembler.calls[0].id.is_none());
        // `null` where an object or an array may be is nothing.
        let nulls = r#"{"error":null,"choices":[{"delta":null,"finish_reason":null}]}"#;
        assert!(matches!(
            assembler.on_event("", nulls, &mut sink),
            Step::More
        ));
        let nulls = r#"{"choices":null,"usage":null}"#;
        assert!(matches!(
            assembler.on_event("", nulls, &mut sink),
            Step::More
        ));
    }

    // C34: calls that share `index: 0` but carry different ids are two calls.
    #[test]
    fn c34_a_new_id_at_the_same_index_opens_a_new_call() {
        let (deltas, reply) = assemble(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]}}]}"#,
            // The same id again, and no id: the same call.
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_b","function":{"name":"read_file","arguments":"{\"path\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"","function":{"arguments":":\"b\"}"}}]},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            deltas,
            [
                "start 0 call_a read_file",
                "args 0 {\"path\":\"a\"}",
                "start 1 call_b read_file",
                "args 1 {\"path\"",
                "args 1 :\"b\"}",
            ]
        );
        let calls = message(&reply).tool_calls.as_ref().unwrap();
        let got: Vec<(Value, Value)> = calls
            .iter()
            .map(|c| {
                let f = c.function.as_ref().unwrap();
                (c.id.clone().unwrap(), f.arguments.clone().unwrap())
            })
            .collect();
        assert_eq!(
            got,
            [
                (json!("call_a"), json!("{\"path\":\"a\"}")),
                (json!("call_b"), json!("{\"path\":\"b\"}")),
            ]
        );
    }

    // C54: a name in pieces is joined, a name repeated whole is kept once, and the
    // call's start waits for the whole name.
    #[test]
    fn c54_name_pieces_are_joined_and_the_start_waits_for_the_whole_name() {
        let (deltas, reply) = assemble(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read_","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"file"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            // Repeated whole, and the name so far sent again each time (extended).
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"ping"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"ping"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":2,"id":"c3","function":{"name":"look"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":2,"function":{"name":"lookup"}}]}}],"id":""}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(
            deltas,
            [
                "start 0 c1 read_file",
                "args 0 {}",
                "start 1 c2 ping",
                "start 2 c3 lookup"
            ]
        );
        let names: Vec<String> = message(&reply)
            .tool_calls
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.function.as_ref().unwrap().name.clone().unwrap())
            .collect();
        assert_eq!(names, ["read_file", "ping", "lookup"]);
    }

    #[test]
    fn reasoning_is_read_from_either_field() {
        let (_, reply) = assemble(&[
            r#"{"choices":[{"delta":{"reasoning_content":"first "}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":null,"reasoning":"then"}}]}"#,
        ]);
        assert_eq!(message(&reply).reasoning_content, Some(json!("first then")));
    }
}
