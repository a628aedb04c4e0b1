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

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::providers::sse::{Assembler, Step};
use crate::stream::{StreamDelta, StreamSink};

#[derive(Deserialize)]
struct Chunk {
    id: Option<Value>,
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<Value>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<Value>,
    refusal: Option<String>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: Option<usize>,
    id: Option<Value>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<Value>,
}

/// A tool call being assembled.
struct Call {
    /// The wire `index` it is keyed by.
    wire_index: usize,
    id: Option<Value>,
    name: String,
    arguments: String,
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
    usage: Option<Value>,
}

/// Delta text: a string (anything else carries no text).
fn text_of(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) => Some(s),
        _ => None,
    }
}

impl ChunkAssembler {
    fn on_call(&mut self, position: usize, delta: CallDelta, sink: &mut dyn StreamSink) {
        let wire_index = delta.index.unwrap_or(position);
        let (name, arguments) = delta
            .function
            .map(|f| (f.name, f.arguments))
            .unwrap_or_default();
        let at = match self.calls.iter().position(|c| c.wire_index == wire_index) {
            Some(at) => at,
            None => {
                self.calls.push(Call {
                    wire_index,
                    id: delta.id.clone(),
                    name: name.clone().unwrap_or_default(),
                    arguments: String::new(),
                });
                let at = self.calls.len() - 1;
                let call = &self.calls[at];
                let id = match &call.id {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => String::new(),
                };
                sink.on_delta(StreamDelta::ToolCallStarted {
                    index: at,
                    id: &id,
                    name: &call.name,
                });
                at
            }
        };
        let call = &mut self.calls[at];
        if call.id.is_none() {
            call.id = delta.id;
        }
        if call.name.is_empty()
            && let Some(name) = name
        {
            call.name = name;
        }
        let fragment = match arguments {
            Some(Value::String(s)) => s,
            // Some servers send the arguments as an object, whole.
            Some(Value::Object(map)) => Value::Object(map).to_string(),
            _ => return,
        };
        if !fragment.is_empty() {
            call.arguments.push_str(&fragment);
            sink.on_delta(StreamDelta::ToolCallArguments {
                index: at,
                json: &fragment,
            });
        }
    }
}

impl Assembler for ChunkAssembler {
    fn on_event(&mut self, _event: &str, data: &str, sink: &mut dyn StreamSink) -> Step {
        let data = data.trim();
        if data == "[DONE]" {
            return Step::End;
        }
        if data.is_empty() {
            return Step::More;
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => return Step::Undecodable(e),
        };
        if let Some(error) = chunk.error {
            return Step::Failed(error);
        }
        if self.id.is_none() {
            self.id = chunk.id;
        }
        if self.model.is_none() {
            self.model = chunk.model;
        }
        if chunk.usage.as_ref().is_some_and(Value::is_object) {
            self.usage = chunk.usage;
        }
        // One choice is asked for (no `n`): the first is the turn.
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.as_ref().and_then(text_of)
                    && !text.is_empty()
                {
                    self.text.push_str(text);
                    sink.on_delta(StreamDelta::Text(text));
                }
                if let Some(refusal) = delta.refusal {
                    self.refusal.push_str(&refusal);
                }
                if let Some(reasoning) = delta
                    .reasoning_content
                    .as_ref()
                    .or(delta.reasoning.as_ref())
                    .and_then(text_of)
                {
                    self.reasoning.push_str(reasoning);
                }
                for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
                    self.on_call(position, call, sink);
                }
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Step::More
    }

    fn finish(self) -> Value {
        let mut message = Map::new();
        message.insert("content".into(), Value::String(self.text));
        if !self.refusal.is_empty() {
            message.insert("refusal".into(), Value::String(self.refusal));
        }
        if !self.reasoning.is_empty() {
            message.insert("reasoning_content".into(), Value::String(self.reasoning));
        }
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .into_iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    })
                })
                .collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        json!({
            "id": self.id,
            "model": self.model,
            "choices": [{"message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage,
        })
    }
}
