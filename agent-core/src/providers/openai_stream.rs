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
    #[serde(borrow, default)]
    content: Piece<'a>,
    #[serde(borrow)]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Piece<'a>,
    #[serde(borrow, default)]
    reasoning: Piece<'a>,
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
    #[serde(borrow, default)]
    arguments: Piece<'a>,
}

/// A delta's text field: a JSON string read once (borrowed from the event's data
/// where it has no escapes), or an object kept as its JSON text (some servers send a
/// call's arguments whole, as an object); anything else (`null`, absent, numbers,
/// arrays) is nothing.
#[derive(Default)]
enum Piece<'a> {
    #[default]
    Nothing,
    Text(Cow<'a, str>),
    Object(String),
}

impl<'a> Piece<'a> {
    /// The string's text; `None` for an object or nothing.
    fn text(self) -> Option<Cow<'a, str>> {
        match self {
            Piece::Text(text) => Some(text),
            Piece::Nothing | Piece::Object(_) => None,
        }
    }

    /// The text of a string, or the JSON text of an object.
    fn text_or_json(self) -> Option<Cow<'a, str>> {
        match self {
            Piece::Text(text) => Some(text),
            Piece::Object(json) => Some(Cow::Owned(json)),
            Piece::Nothing => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Piece<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PieceVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for PieceVisitor<'a> {
            type Value = Piece<'a>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string, an object or null")
            }

            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(Piece::Text(Cow::Borrowed(v)))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Piece::Text(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Piece::Text(Cow::Owned(v)))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                let value = Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(Piece::Object(value.to_string()))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<Self::Value, A::Error> {
                serde::de::IgnoredAny::deserialize(serde::de::value::SeqAccessDeserializer::new(
                    seq,
                ))?;
                Ok(Piece::Nothing)
            }

            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(Piece::Nothing)
            }

            fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(Piece::Nothing)
            }

            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Piece::Nothing)
            }

            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Piece::Nothing)
            }

            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Piece::Nothing)
            }

            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Piece::Nothing)
            }
        }
        deserializer.deserialize_any(PieceVisitor(std::marker::PhantomData))
    }
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
        let Some(fragment) = arguments.text_or_json() else {
            return;
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
                if let Some(text) = delta.content.text()
                    && !text.is_empty()
                {
                    self.text.push_str(&text);
                    sink.on_delta(StreamDelta::Text(&text));
                }
                if let Some(refusal) = delta.refusal {
                    self.refusal.push_str(&refusal);
                }
                let reasoning = match delta.reasoning_content {
                    Piece::Nothing => delta.reasoning,
                    given => given,
                };
                if let Some(reasoning) = reasoning.text() {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use serde_json::{Value, json};

    use super::ChunkAssembler;
    use crate::providers::sse::{Assembler, Step};
    use crate::stream::StreamDelta;

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
    fn reasoning_is_read_from_either_field() {
        let (_, reply) = assemble(&[
            r#"{"choices":[{"delta":{"reasoning_content":"first "}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":null,"reasoning":"then"}}]}"#,
        ]);
        assert_eq!(message(&reply).reasoning_content, Some(json!("first then")));
    }
}
