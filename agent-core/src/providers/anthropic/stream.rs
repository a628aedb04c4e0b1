//! Messages API streaming: message events assembled into the reply a non-streamed call
//! would have returned ([`Assembled`], the non-streamed body's fields, typed).
//!
//! `message_start` carries the message (id, model, usage with the input tokens);
//! `content_block_start` opens a block at an `index` (`text`, `tool_use` with its id
//! and name, `thinking`, ...); `content_block_delta` adds to it (`text_delta` text,
//! `input_json_delta` a piece of the tool input's JSON, other deltas ignored);
//! `content_block_stop` closes it; `message_delta` carries `stop_reason` (a refusal's
//! `stop_details` with it) and the cumulative `usage` (output tokens); `message_stop`
//! ends the stream (a stream closed after the stop reason without it is whole, C55);
//! `ping` events may come anywhere; an `error` event is an error mid-stream. Source: "Streaming
//! Messages" (<https://docs.anthropic.com/en/docs/build-with-claude/streaming>).
//!
//! Blocks of other types (`thinking` with its `thinking_delta` and `signature_delta`,
//! `server_tool_use` with its `input_json_delta`s, `web_search_tool_result`, ...) are
//! kept whole, as the non-streamed reply has them, so that a paused turn
//! (`pause_turn`, C41) goes back as it came; thinking text goes to the sink as
//! reasoning.
//!
//! Each event is read by [`event::read`] into typed structs that borrow its text (no
//! `serde_json::Value` per event); only the blocks kept whole are `Value`s. The
//! assembled reply goes to [`decode_assembled`](super::response::decode_assembled),
//! which normalizes it as `decode` does the non-streamed body, without writing it as
//! JSON text and reading it again.

mod event;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use super::response::{Assembled, AssembledBlock, WireUsage};
use crate::llm::{StreamDelta, StreamSink};
use crate::providers::sse::{Assembler, Step};
use event::{Delta, Event, StartBlock, Usage};

/// A content block being assembled.
enum Block {
    Text(String),
    ToolUse {
        /// The call's position among the turn's tool calls.
        call: usize,
        id: String,
        name: String,
        /// The input from `content_block_start` (used when no JSON delta comes).
        start: Value,
        json: String,
    },
    /// Any other block: as `content_block_start` gave it; its deltas are applied at the
    /// end.
    Other {
        block: Value,
        /// The `input_json_delta` pieces (a `server_tool_use` input).
        json: String,
        /// The `thinking_delta` and `signature_delta` pieces, once one came (appended to
        /// the block's own text, which a piece replaces when it is not a string); only
        /// for a block that is an object.
        thinking: Option<String>,
        signature: Option<String>,
    },
}

/// The reply so far.
#[derive(Default)]
pub(crate) struct EventAssembler {
    id: Option<String>,
    model: Option<String>,
    /// The blocks by their `index`.
    blocks: Vec<(usize, Block)>,
    calls: usize,
    stop_reason: Option<String>,
    stop_details: Option<Value>,
    /// The usage fields seen (`Some(None)`: sent as `null`).
    usage: Usage,
}

impl EventAssembler {
    /// The block open at `index`: the last one started there (a server that reuses an
    /// index for a new block never feeds the earlier one).
    fn block(&mut self, index: usize) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
    }

    fn on_start(
        &mut self,
        index: usize,
        raw: &serde_json::value::RawValue,
        sink: &mut dyn StreamSink,
    ) -> Result<(), serde_json::Error> {
        let start = StartBlock::read(raw)?;
        self.preview_whole_inputs(sink);
        let text = |t: &event::Text<'_>| t.get().unwrap_or_default().to_owned();
        let block = match start.kind.get() {
            Some("text") => {
                let t = text(&start.text);
                if !t.is_empty() {
                    sink.on_delta(StreamDelta::Text(&t));
                }
                Block::Text(t)
            }
            Some("tool_use") => {
                let call = self.calls;
                self.calls += 1;
                let (id, name) = (text(&start.id), text(&start.name));
                sink.on_delta(StreamDelta::ToolCallStarted {
                    index: call,
                    id: &id,
                    name: &name,
                });
                let start = match start.input {
                    Some(input) => serde_json::from_str(input.get())?,
                    None => Value::Null,
                };
                Block::ToolUse {
                    call,
                    id,
                    name,
                    start,
                    json: String::new(),
                }
            }
            _ => Block::Other {
                block: serde_json::from_str(raw.get())?,
                json: String::new(),
                thinking: None,
                signature: None,
            },
        };
        self.blocks.push((index, block));
        Ok(())
    }

    /// Hands the usage so far to the sink (kept for a stream cut before its end).
    fn report_usage(&self, sink: &mut dyn StreamSink) {
        sink.on_usage(wire_usage(&self.usage).tokens());
    }

    /// Takes the fields of a `message_start` usage (every one present, `null` too) or of
    /// a `message_delta` usage (cumulative counts: a later value replaces an earlier
    /// one; `null` is skipped).
    fn add_usage(&mut self, usage: Usage, nulls: bool) {
        let merge = |to: &mut Option<Option<u64>>, from: Option<Option<u64>>| {
            if let Some(value) = from.filter(|v| nulls || v.is_some()) {
                *to = Some(value);
            }
        };
        let u = &mut self.usage;
        merge(&mut u.input_tokens, usage.input_tokens);
        merge(&mut u.output_tokens, usage.output_tokens);
        merge(
            &mut u.cache_creation_input_tokens,
            usage.cache_creation_input_tokens,
        );
        merge(
            &mut u.cache_read_input_tokens,
            usage.cache_read_input_tokens,
        );
    }

    /// Previews the input of each `tool_use` block that got no `input_json_delta` but
    /// whose `content_block_start` held the whole input (C60's kind: Anthropic sends
    /// `input: {}` there and the input in deltas, but compatible servers and proxies
    /// send the input whole at the start, <https://docs.anthropic.com/en/docs/build-with-claude/streaming>
    /// "Input JSON delta"). Called once the block's deltas are over (the next block
    /// starts, or `message_delta` brings the stop reason); the input's JSON text then
    /// stands as the block's pieces, so the call is decoded from the same text.
    fn preview_whole_inputs(&mut self, sink: &mut dyn StreamSink) {
        for (_, block) in &mut self.blocks {
            if let Block::ToolUse {
                call, start, json, ..
            } = block
                && json.is_empty()
                && start.as_object().is_some_and(|o| !o.is_empty())
            {
                *json = start.to_string();
                sink.on_delta(StreamDelta::ToolCallArguments {
                    index: *call,
                    json: json.as_str(),
                });
            }
        }
    }

    fn on_delta(&mut self, index: usize, delta: &Delta<'_>, sink: &mut dyn StreamSink) {
        match (delta.kind.get(), self.block(index)) {
            (Some("text_delta"), Some(Block::Text(text))) => {
                if let Some(more) = delta.text.get().filter(|t| !t.is_empty()) {
                    crate::llm::push_piece(text, more);
                    sink.on_delta(StreamDelta::Text(more));
                }
            }
            (Some("input_json_delta"), Some(Block::ToolUse { call, json, .. })) => {
                if let Some(more) = delta.partial_json.get().filter(|t| !t.is_empty()) {
                    crate::llm::push_piece(json, more);
                    sink.on_delta(StreamDelta::ToolCallArguments {
                        index: *call,
                        json: more,
                    });
                }
            }
            (Some("input_json_delta"), Some(Block::Other { json, .. })) => {
                if let Some(more) = delta.partial_json.get() {
                    crate::llm::push_piece(json, more);
                }
            }
            (
                Some(kind @ ("thinking_delta" | "signature_delta")),
                Some(Block::Other {
                    block,
                    thinking,
                    signature,
                    ..
                }),
            ) if block.is_object() => {
                let (more, to) = if kind == "thinking_delta" {
                    (delta.thinking.get(), thinking)
                } else {
                    (delta.signature.get(), signature)
                };
                if let Some(more) = more {
                    if kind == "thinking_delta" && !more.is_empty() {
                        sink.on_delta(StreamDelta::Reasoning(more));
                    }
                    to.get_or_insert_default().push_str(more);
                }
            }
            _ => {}
        }
    }
}

/// The usage seen, as the non-streamed reply's.
fn wire_usage(usage: &Usage) -> WireUsage {
    WireUsage {
        input_tokens: usage.input_tokens.flatten(),
        output_tokens: usage.output_tokens.flatten(),
        cache_creation_input_tokens: usage.cache_creation_input_tokens.flatten(),
        cache_read_input_tokens: usage.cache_read_input_tokens.flatten(),
    }
}

/// Appends the streamed `more` to the text at `key` of `block` (an object): to its
/// string, or in place of a value that is not one.
fn append(block: &mut Map<String, Value>, key: &str, more: Option<String>) {
    let Some(more) = more else { return };
    match block.get_mut(key) {
        Some(Value::String(text)) => text.push_str(&more),
        _ => {
            block.insert(key.to_owned(), Value::String(more));
        }
    }
}

impl Assembler for EventAssembler {
    type Output = Assembled;

    fn on_event(&mut self, _event: &str, data: &str, sink: &mut dyn StreamSink) -> Step {
        if data.trim().is_empty() {
            return Step::More;
        }
        let event = match event::read(data) {
            Ok(event) => event,
            Err(e) => return Step::Undecodable(e),
        };
        match event {
            Event::MessageStart(message) => {
                self.id = message.id;
                self.model = message.model;
                self.add_usage(message.usage.unwrap_or_default(), true);
                self.report_usage(sink);
            }
            Event::BlockStart { index, block } => {
                if let Err(e) = self.on_start(index, block, sink) {
                    return Step::Undecodable(e);
                }
            }
            Event::BlockDelta { index, delta } => self.on_delta(index, &delta, sink),
            Event::MessageDelta {
                stop_reason,
                stop_details,
                usage,
            } => {
                if let Some(reason) = stop_reason {
                    self.stop_reason = Some(reason);
                }
                self.preview_whole_inputs(sink);
                if stop_details.is_some() {
                    self.stop_details = stop_details;
                }
                self.add_usage(usage.unwrap_or_default(), false);
                self.report_usage(sink);
            }
            Event::MessageStop => return Step::End,
            Event::Error(error) => return Step::Failed(error),
            Event::Other => {}
        }
        Step::More
    }

    /// `message_delta` brought the stop reason (C55: a stream closed there, without
    /// `message_stop`, is whole).
    fn complete(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn finish(self) -> Assembled {
        let content = self
            .blocks
            .into_iter()
            .map(|(_, block)| match block {
                Block::Text(text) => AssembledBlock::Text(text),
                Block::ToolUse {
                    id,
                    name,
                    start,
                    json,
                    ..
                } => {
                    // The input as JSON text, parsed (and judged) like a non-streamed one.
                    let input = if json.trim().is_empty() {
                        start
                    } else {
                        Value::String(json)
                    };
                    AssembledBlock::ToolUse { id, name, input }
                }
                Block::Other {
                    mut block,
                    json,
                    thinking,
                    signature,
                } => {
                    if let Some(map) = block.as_object_mut() {
                        append(map, "thinking", thinking);
                        append(map, "signature", signature);
                        if !json.trim().is_empty() {
                            map.insert("input".to_owned(), Value::String(json));
                        }
                    }
                    AssembledBlock::Other(block)
                }
            })
            .collect();
        Assembled {
            id: self.id,
            model: self.model,
            content,
            stop_reason: self.stop_reason,
            stop_details: self.stop_details,
            usage: wire_usage(&self.usage),
        }
    }
}
