//! ConverseStream: the events of the binary event stream assembled into the body of a
//! Converse reply, so that [`wire::decode`](super::wire::decode) normalizes both alike.
//!
//! Events (source: `ConverseStreamOutput`,
//! <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStreamOutput.html>):
//! `messageStart {role}`; `contentBlockStart {contentBlockIndex, start: {toolUse:
//! {toolUseId, name}}}` opens a tool-use block (a text block has no start event);
//! `contentBlockDelta {contentBlockIndex, delta}` with `delta.text`,
//! `delta.toolUse.input` (a piece of the input's JSON text) or
//! `delta.reasoningContent.text`; `contentBlockStop {contentBlockIndex}`;
//! `messageStop {stopReason}`; `metadata {usage, metrics}`, the last event, taken as
//! the end marker (a stream closed after `messageStop` without it is whole, its usage
//! then estimated by the runner; C55). An exception event (`throttlingException`,
//! `modelStreamErrorException`, `validationException`, `internalServerException`,
//! `serviceUnavailableException`), or an event-stream `error` message, ends the stream
//! with that error.

use serde::Deserialize;
use serde_json::{Value, json};

use super::wire::WireUsage;
use crate::llm::{StreamDelta, StreamSink};
use crate::providers::eventstream::ERROR_EVENT;
use crate::providers::sse::{Assembler, Step};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Indexed {
    #[serde(default)]
    content_block_index: usize,
    start: Option<Value>,
    delta: Option<Value>,
}

/// A content block being assembled.
enum Block {
    Text(String),
    /// `reasoningContent` text (the model's reasoning, apart from the answer).
    Reasoning(String),
    ToolUse {
        /// The call's position among the turn's tool calls.
        call: usize,
        id: String,
        name: String,
        json: String,
    },
}

/// The reply so far.
#[derive(Default)]
pub(crate) struct EventAssembler {
    /// The blocks by their `contentBlockIndex`.
    blocks: Vec<(usize, Block)>,
    calls: usize,
    stop_reason: Option<String>,
    usage: Option<Value>,
}

impl EventAssembler {
    /// The block open at `index`: the last one started there.
    fn block(&mut self, index: usize) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
    }

    fn on_start(&mut self, index: usize, start: &Value, sink: &mut dyn StreamSink) {
        let Some(tool) = start.get("toolUse") else {
            return;
        };
        let text = |key: &str| tool.get(key).and_then(Value::as_str).unwrap_or_default();
        let (id, name) = (text("toolUseId").to_owned(), text("name").to_owned());
        let call = self.calls;
        self.calls += 1;
        sink.on_delta(StreamDelta::ToolCallStarted {
            index: call,
            id: &id,
            name: &name,
        });
        self.blocks.push((
            index,
            Block::ToolUse {
                call,
                id,
                name,
                json: String::new(),
            },
        ));
    }

    fn on_delta(&mut self, index: usize, delta: &Value, sink: &mut dyn StreamSink) {
        if let Some(more) = delta.get("text").and_then(Value::as_str) {
            if self.block(index).is_none() {
                self.blocks.push((index, Block::Text(String::new())));
            }
            if let Some(Block::Text(text)) = self.block(index)
                && !more.is_empty()
            {
                crate::llm::push_piece(text, more);
                sink.on_delta(StreamDelta::Text(more));
            }
        } else if let Some(more) = delta.pointer("/toolUse/input").and_then(Value::as_str) {
            if let Some(Block::ToolUse { call, json, .. }) = self.block(index)
                && !more.is_empty()
            {
                crate::llm::push_piece(json, more);
                sink.on_delta(StreamDelta::ToolCallArguments {
                    index: *call,
                    json: more,
                });
            }
        } else if let Some(more) = delta
            .pointer("/reasoningContent/text")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            if self.block(index).is_none() {
                self.blocks.push((index, Block::Reasoning(String::new())));
            }
            if let Some(Block::Reasoning(text)) = self.block(index) {
                crate::llm::push_piece(text, more);
            }
            sink.on_delta(StreamDelta::Reasoning(more));
        }
    }
}

impl Assembler for EventAssembler {
    type Output = Value;

    fn on_event(&mut self, event: &str, data: &str, sink: &mut dyn StreamSink) -> Step {
        let payload: Value = if data.trim().is_empty() {
            json!({})
        } else {
            match serde_json::from_str(data) {
                Ok(payload) => payload,
                Err(e) => return Step::Undecodable(e),
            }
        };
        if event == ERROR_EVENT {
            return Step::Failed(payload);
        }
        if event.ends_with("Exception") {
            let message = payload.get("message").or_else(|| payload.get("Message"));
            return Step::Failed(json!({"type": event, "message": message}));
        }
        match event {
            "contentBlockStart" | "contentBlockDelta" => {
                let Ok(indexed) = Indexed::deserialize(&payload) else {
                    return Step::More;
                };
                let index = indexed.content_block_index;
                if let Some(start) = &indexed.start {
                    self.on_start(index, start, sink);
                }
                if let Some(delta) = &indexed.delta {
                    self.on_delta(index, delta, sink);
                }
            }
            "messageStop" => {
                self.stop_reason = payload
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            "metadata" => {
                self.usage = payload.get("usage").cloned();
                if let Some(usage) = &self.usage
                    && let Ok(usage) = WireUsage::deserialize(usage)
                {
                    sink.on_usage(usage.tokens());
                }
                return Step::End;
            }
            // `messageStart`, `contentBlockStop` and event types added later.
            _ => {}
        }
        Step::More
    }

    /// `messageStop` brought the stop reason (C55).
    fn complete(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn finish(self) -> Value {
        let content: Vec<Value> = self
            .blocks
            .into_iter()
            .map(|(_, block)| match block {
                Block::Text(text) => json!({"text": text}),
                Block::Reasoning(text) => {
                    json!({"reasoningContent": {"reasoningText": {"text": text}}})
                }
                Block::ToolUse { id, name, json, .. } => {
                    // The input as JSON text, parsed (and judged) like a non-streamed one.
                    json!({"toolUse": {"toolUseId": id, "name": name, "input": json}})
                }
            })
            .collect();
        json!({
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": self.stop_reason,
            "usage": self.usage,
        })
    }
}
