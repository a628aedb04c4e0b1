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

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::providers::openai::{
    WireCallOut, WireChoiceOut, WireFunctionOut, WireMessageOut, WireResponse, WireUsage,
};
use crate::providers::sse::{Assembler, Step};
use crate::stream::{StreamDelta, StreamSink};

// Borrowed from the event's data where the text has no escapes: a chunk is read once.

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    /// The first choice only (one is asked for): no `Vec` per chunk.
    #[serde(default, borrow, deserialize_with = "first_choice")]
    choices: Option<ChunkChoice<'a>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice<'a> {
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning_content: Option<&'a RawValue>,
    #[serde(borrow)]
    reasoning: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_calls: Option<Vec<CallDelta<'a>>>,
}

#[derive(Deserialize)]
struct CallDelta<'a> {
    index: Option<usize>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// The first element of the `choices` array (`null` reads as none); the others are
/// skipped without being kept.
fn first_choice<'de, D>(deserializer: D) -> Result<Option<ChunkChoice<'de>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct First;
    impl<'de> serde::de::Visitor<'de> for First {
        type Value = Option<ChunkChoice<'de>>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array of choices")
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let first = seq.next_element::<ChunkChoice<'de>>()?;
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(first)
        }
    }
    deserializer.deserialize_any(First)
}

/// A JSON string's text (borrowed when it has no escapes); `None` for anything else
/// (`null`, arrays, ...).
fn string_of(raw: Option<&RawValue>) -> Option<Cow<'_, str>> {
    let raw = raw?;
    let text = raw.get();
    if !text.starts_with('"') {
        return None;
    }
    if !text.contains('\\') {
        // No escapes: the text between the quotes is the string.
        return text.get(1..text.len() - 1).map(Cow::Borrowed);
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

/// An id as a value: a string, or a number (some servers send numeric ids).
fn id_of(raw: &RawValue) -> Option<Value> {
    serde_json::from_str::<Value>(raw.get())
        .ok()
        .filter(|v| !v.is_null())
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
    usage: Option<WireUsage>,
}

impl ChunkAssembler {
    fn on_call(&mut self, position: usize, delta: CallDelta<'_>, sink: &mut dyn StreamSink) {
        let wire_index = delta.index.unwrap_or(position);
        let (name, arguments) = delta
            .function
            .map(|f| (f.name, f.arguments))
            .unwrap_or_default();
        let at = match self.calls.iter().position(|c| c.wire_index == wire_index) {
            Some(at) => at,
            None => {
                let id = delta.id.and_then(id_of);
                let shown = match &id {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => String::new(),
                };
                let name = name.clone().unwrap_or_default().into_owned();
                sink.on_delta(StreamDelta::ToolCallStarted {
                    index: self.calls.len(),
                    id: &shown,
                    name: &name,
                });
                self.calls.push(Call {
                    wire_index,
                    id,
                    name,
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at];
        if call.id.is_none() {
            call.id = delta.id.and_then(id_of);
        }
        if call.name.is_empty()
            && let Some(name) = name
        {
            call.name = name.into_owned();
        }
        let Some(raw) = arguments else { return };
        let fragment: Cow<'_, str> = match string_of(Some(raw)) {
            Some(text) => text,
            // Some servers send the arguments as an object, whole.
            None if raw.get().starts_with('{') => Cow::Borrowed(raw.get()),
            None => return,
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
    type Output = WireResponse;

    fn on_event(&mut self, _event: &str, data: &str, sink: &mut dyn StreamSink) -> Step {
        let data = data.trim();
        if data == "[DONE]" {
            return Step::End;
        }
        if data.is_empty() {
            return Step::More;
        }
        let chunk: Chunk<'_> = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => return Step::Undecodable(e),
        };
        if let Some(error) = chunk.error {
            return Step::Failed(error);
        }
        if self.id.is_none() {
            self.id = chunk.id.and_then(id_of);
        }
        if self.model.is_none() {
            self.model = chunk.model.map(Cow::into_owned);
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        // One choice is asked for (no `n`): the first is the turn.
        if let Some(choice) = chunk.choices {
            if let Some(delta) = choice.delta {
                if let Some(text) = string_of(delta.content)
                    && !text.is_empty()
                {
                    self.text.push_str(&text);
                    sink.on_delta(StreamDelta::Text(&text));
                }
                if let Some(refusal) = delta.refusal {
                    self.refusal.push_str(&refusal);
                }
                if let Some(reasoning) = string_of(delta.reasoning_content.or(delta.reasoning)) {
                    self.reasoning.push_str(&reasoning);
                }
                for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
                    self.on_call(position, call, sink);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason.into_owned());
            }
        }
        Step::More
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
            }]),
            usage: self.usage,
            error: None,
        }
    }
}
