//! Messages API streaming: message events assembled into the body of a non-streamed
//! reply.
//!
//! `message_start` carries the message (id, model, usage with the input tokens);
//! `content_block_start` opens a block at an `index` (`text`, `tool_use` with its id
//! and name, `thinking`, ...); `content_block_delta` adds to it (`text_delta` text,
//! `input_json_delta` a piece of the tool input's JSON, other deltas ignored);
//! `content_block_stop` closes it; `message_delta` carries `stop_reason` and the
//! cumulative `usage` (output tokens); `message_stop` ends the stream; `ping` events
//! may come anywhere; an `error` event is an error mid-stream. Source: "Streaming
//! Messages" (<https://docs.anthropic.com/en/docs/build-with-claude/streaming>).
//!
//! Blocks of other types (`thinking` with its `thinking_delta` and `signature_delta`,
//! `server_tool_use` with its `input_json_delta`s, `web_search_tool_result`, ...) are
//! kept whole, as the non-streamed reply has them, so that a paused turn
//! (`pause_turn`, C41) goes back as it came; thinking text goes to the sink as
//! reasoning.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::wire::WireUsage;
use crate::llm::{StreamDelta, StreamSink};
use crate::providers::sse::{Assembler, Step};

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: Value,
    },
    MessageDelta {
        delta: Option<MessageDelta>,
        usage: Option<Map<String, Value>>,
    },
    MessageStop,
    Error {
        error: Value,
    },
    /// `ping`, `content_block_stop` and event types added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    id: Option<String>,
    model: Option<String>,
    usage: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct MessageDelta {
    stop_reason: Option<String>,
}

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
    /// Any other block: as `content_block_start` gave it, with its deltas applied.
    Other {
        block: Value,
        /// The `input_json_delta` pieces (a `server_tool_use` input).
        json: String,
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
    usage: Map<String, Value>,
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

    fn on_start(&mut self, index: usize, block: Value, sink: &mut dyn StreamSink) {
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        let block = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let t = text("text");
                if !t.is_empty() {
                    sink.on_delta(StreamDelta::Text(t));
                }
                Block::Text(t.to_owned())
            }
            Some("tool_use") => {
                let call = self.calls;
                self.calls += 1;
                let (id, name) = (text("id").to_owned(), text("name").to_owned());
                sink.on_delta(StreamDelta::ToolCallStarted {
                    index: call,
                    id: &id,
                    name: &name,
                });
                Block::ToolUse {
                    call,
                    id,
                    name,
                    start: block.get("input").cloned().unwrap_or(Value::Null),
                    json: String::new(),
                }
            }
            _ => Block::Other {
                block,
                json: String::new(),
            },
        };
        self.blocks.push((index, block));
    }

    /// Hands the usage so far to the sink (kept for a stream cut before its end).
    fn report_usage(&self, sink: &mut dyn StreamSink) {
        let map = Value::Object(self.usage.clone());
        if let Ok(usage) = WireUsage::deserialize(&map) {
            sink.on_usage(usage.tokens());
        }
    }

    fn on_delta(&mut self, index: usize, delta: &Value, sink: &mut dyn StreamSink) {
        let field = |key: &str| delta.get(key).and_then(Value::as_str);
        match (field("type"), self.block(index)) {
            (Some("text_delta"), Some(Block::Text(text))) => {
                if let Some(more) = field("text").filter(|t| !t.is_empty()) {
                    text.push_str(more);
                    sink.on_delta(StreamDelta::Text(more));
                }
            }
            (Some("input_json_delta"), Some(Block::ToolUse { call, json, .. })) => {
                if let Some(more) = field("partial_json").filter(|t| !t.is_empty()) {
                    json.push_str(more);
                    sink.on_delta(StreamDelta::ToolCallArguments {
                        index: *call,
                        json: more,
                    });
                }
            }
            (Some("input_json_delta"), Some(Block::Other { json, .. })) => {
                if let Some(more) = field("partial_json") {
                    json.push_str(more);
                }
            }
            (
                Some(kind @ ("thinking_delta" | "signature_delta")),
                Some(Block::Other { block, .. }),
            ) => {
                let key = if kind == "thinking_delta" {
                    "thinking"
                } else {
                    "signature"
                };
                if let (Some(more), Some(map)) = (field(key), block.as_object_mut()) {
                    if kind == "thinking_delta" && !more.is_empty() {
                        sink.on_delta(StreamDelta::Reasoning(more));
                    }
                    match map.get_mut(key) {
                        Some(Value::String(text)) => text.push_str(more),
                        _ => {
                            map.insert(key.to_owned(), Value::String(more.to_owned()));
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

impl Assembler for EventAssembler {
    type Output = Value;

    fn on_event(&mut self, _event: &str, data: &str, sink: &mut dyn StreamSink) -> Step {
        if data.trim().is_empty() {
            return Step::More;
        }
        let event: Event = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(e) => return Step::Undecodable(e),
        };
        match event {
            Event::MessageStart { message } => {
                self.id = message.id;
                self.model = message.model;
                self.usage.extend(message.usage.unwrap_or_default());
                self.report_usage(sink);
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.on_start(index, content_block, sink),
            Event::ContentBlockDelta { index, delta } => self.on_delta(index, &delta, sink),
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                // Cumulative counts: a later value replaces an earlier one.
                for (key, value) in usage.unwrap_or_default() {
                    if !value.is_null() {
                        self.usage.insert(key, value);
                    }
                }
                self.report_usage(sink);
            }
            Event::MessageStop => return Step::End,
            Event::Error { error } => return Step::Failed(error),
            Event::Other => {}
        }
        Step::More
    }

    fn finish(self) -> Value {
        let content: Vec<Value> = self
            .blocks
            .into_iter()
            .map(|(_, block)| match block {
                Block::Text(text) => json!({"type": "text", "text": text}),
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
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                }
                Block::Other { mut block, json } => {
                    if !json.trim().is_empty()
                        && let Some(map) = block.as_object_mut()
                    {
                        map.insert("input".to_owned(), Value::String(json));
                    }
                    block
                }
            })
            .collect();
        json!({
            "id": self.id,
            "model": self.model,
            "content": content,
            "stop_reason": self.stop_reason,
            "usage": self.usage,
        })
    }
}
