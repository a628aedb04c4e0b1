//! Reading one `chat.completion.chunk` straight into the [`ChunkAssembler`].
//!
//! serde visitors walk the event's JSON and hand each field to the reply as it is
//! read: no chunk struct is built and moved, a text or argument fragment is appended
//! where it goes (unescaped once, never allocated on its own), and what the reply
//! already knows (`id`, `model`) or never uses (`object`, `created`, `logprobs`, ...)
//! is skipped. The layout read is the one described in the parent module.

use std::fmt::{self, Write as _};

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::ChunkAssembler;
use crate::llm::{StreamDelta, StreamSink};
use crate::providers::openai::response::{FilterResults, WireUsage};

/// Reads the chunk `data` into `reply`, handing its pieces to `sink` as they are read.
/// Returns the chunk's `error` object, if it has one (`null` is none).
///
/// # Errors
/// `data` is not a JSON object of the chunk's shape (a field of the wrong type, say).
/// Pieces read before the fault may have reached `reply` and `sink`; the turn is then
/// void anyway (an undecodable stream is a failed LLM call).
pub(super) fn read(
    data: &str,
    reply: &mut ChunkAssembler,
    sink: &mut dyn StreamSink,
) -> Result<Option<Value>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(data);
    let error = de.deserialize_map(ChunkVisitor { reply, sink })?;
    de.end()?;
    Ok(error)
}

/// A seed that reads its value with the visitor it is (`Self`, whose `Value` it
/// returns), through the deserializer method given.
macro_rules! seed {
    ($seed:ident, $method:ident) => {
        impl<'de> DeserializeSeed<'de> for $seed<'_> {
            type Value = <Self as Visitor<'de>>::Value;

            fn deserialize<D: Deserializer<'de>>(
                self,
                deserializer: D,
            ) -> Result<Self::Value, D::Error> {
                deserializer.$method(self)
            }
        }
    };
}

/// In a visitor whose value is `()`: `null` is nothing.
macro_rules! null_is_nothing {
    () => {
        fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
            Ok(())
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
            Ok(())
        }
    };
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ChunkField {
    Id,
    Model,
    Choices,
    Usage,
    Error,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ChoiceField {
    Delta,
    FinishReason,
    ContentFilterResults,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum DeltaField {
    Content,
    Refusal,
    ReasoningContent,
    Reasoning,
    ToolCalls,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum CallField {
    Index,
    Id,
    Function,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum FunctionField {
    Name,
    Arguments,
    #[serde(other)]
    Other,
}

/// An id as a value: a string, or a number (some servers send numeric ids). Read raw
/// first, so an id that is not a usable value (a number out of range, a lone surrogate)
/// is no id rather than an undecodable chunk; `null` and `""` are no id either (case
/// C57: Azure's first chunk, its prompt filter results, has `"id": ""`).
fn id(raw: Option<&RawValue>) -> Option<Value> {
    raw.and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        .filter(|v| !v.is_null() && v.as_str() != Some(""))
}

/// The chunk object.
struct ChunkVisitor<'s> {
    reply: &'s mut ChunkAssembler,
    sink: &'s mut dyn StreamSink,
}

impl<'de> Visitor<'de> for ChunkVisitor<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a chat.completion.chunk object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        let Self { reply, sink } = self;
        let mut error = None;
        while let Some(field) = map.next_key()? {
            match field {
                ChunkField::Id if reply.id.is_none() => reply.id = id(map.next_value()?),
                ChunkField::Model if reply.model.is_none() => {
                    // The first non-empty model (C57, as for the id).
                    reply.model = map
                        .next_value::<Option<String>>()?
                        .filter(|m| !m.is_empty());
                }
                ChunkField::Choices => map.next_value_seed(Choices {
                    reply: &mut *reply,
                    sink: &mut *sink,
                })?,
                ChunkField::Usage => {
                    if let Some(usage) = map.next_value::<Option<WireUsage>>()? {
                        sink.on_usage(usage.tokens());
                        reply.usage = Some(usage);
                    }
                }
                ChunkField::Error => error = map.next_value()?,
                ChunkField::Id | ChunkField::Model | ChunkField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(error)
    }
}

/// `choices`: `null`, or an array whose first element is the turn (one choice is
/// asked for); the others are skipped.
struct Choices<'s> {
    reply: &'s mut ChunkAssembler,
    sink: &'s mut dyn StreamSink,
}

seed!(Choices, deserialize_any);

impl<'de> Visitor<'de> for Choices<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of choices")
    }

    null_is_nothing!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let first = Choice {
            reply: self.reply,
            sink: self.sink,
        };
        if seq.next_element_seed(first)?.is_some() {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
        }
        Ok(())
    }
}

/// One choice: its `delta` and `finish_reason`.
struct Choice<'s> {
    reply: &'s mut ChunkAssembler,
    sink: &'s mut dyn StreamSink,
}

seed!(Choice, deserialize_map);

impl<'de> Visitor<'de> for Choice<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a choice object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Self { reply, sink } = self;
        while let Some(field) = map.next_key()? {
            match field {
                ChoiceField::Delta => map.next_value_seed(Delta {
                    reply: &mut *reply,
                    sink: &mut *sink,
                })?,
                ChoiceField::FinishReason => {
                    if let Some(reason) = map.next_value::<Option<String>>()? {
                        reply.on_finish(reason, &mut *sink);
                    }
                }
                ChoiceField::ContentFilterResults => {
                    let FilterResults(filtered) = map.next_value()?;
                    for category in filtered {
                        if !reply.filtered.contains(&category) {
                            reply.filtered.push(category);
                        }
                    }
                }
                ChoiceField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A choice's `delta` (`null` is an empty one).
struct Delta<'s> {
    reply: &'s mut ChunkAssembler,
    sink: &'s mut dyn StreamSink,
}

seed!(Delta, deserialize_any);

impl<'de> Visitor<'de> for Delta<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a delta object")
    }

    null_is_nothing!();

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Self { reply, sink } = self;
        // `reasoning_content` wins over `reasoning` when a delta has both: where the
        // latter came first, its text is taken back.
        let mut reasoning_content = false;
        let mut reasoning_from: Option<usize> = None;
        let reasoning_start = reply.reasoning.len();
        while let Some(field) = map.next_key()? {
            match field {
                DeltaField::Content => {
                    let start = reply.text.len();
                    map.next_value_seed(Append::text(&mut reply.text))?;
                    if reply.text.len() > start {
                        sink.on_delta(StreamDelta::Text(&reply.text[start..]));
                    }
                }
                DeltaField::Refusal => {
                    map.next_value_seed(Append::text(&mut reply.refusal))?;
                }
                DeltaField::ReasoningContent => {
                    let start = reply.reasoning.len();
                    if map.next_value_seed(Append::text(&mut reply.reasoning))? {
                        reasoning_content = true;
                        if let Some(from) = reasoning_from.take() {
                            // Keep what this field added, drop what `reasoning` did.
                            let added = reply.reasoning.split_off(start);
                            reply.reasoning.truncate(from);
                            reply.reasoning.push_str(&added);
                        }
                    }
                }
                DeltaField::Reasoning if !reasoning_content => {
                    let start = reply.reasoning.len();
                    if map.next_value_seed(Append::text(&mut reply.reasoning))? {
                        reasoning_from = Some(start);
                    }
                }
                DeltaField::ToolCalls => map.next_value_seed(Calls {
                    reply: &mut *reply,
                    sink: &mut *sink,
                })?,
                DeltaField::Reasoning | DeltaField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if reply.reasoning.len() > reasoning_start {
            sink.on_delta(StreamDelta::Reasoning(&reply.reasoning[reasoning_start..]));
        }
        Ok(())
    }
}

/// A delta's `tool_calls`: `null`, or an array of call fragments.
struct Calls<'s> {
    reply: &'s mut ChunkAssembler,
    sink: &'s mut dyn StreamSink,
}

seed!(Calls, deserialize_any);

impl<'de> Visitor<'de> for Calls<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of tool call fragments")
    }

    null_is_nothing!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Self { reply, sink } = self;
        let mut position = 0;
        while seq
            .next_element_seed(Call {
                reply: &mut *reply,
                sink: &mut *sink,
                position,
            })?
            .is_some()
        {
            position += 1;
        }
        Ok(())
    }
}

/// One tool call fragment: `index`, `id` (the first fragment), `function.name` (the
/// first) and a piece of `function.arguments`. Applied once the fragment is read, as
/// `index` may come after `function`.
struct Call<'s> {
    reply: &'s mut ChunkAssembler,
    sink: &'s mut dyn StreamSink,
    /// Its position in the `tool_calls` array (the key when `index` is missing).
    position: usize,
}

seed!(Call, deserialize_map);

impl<'de> Visitor<'de> for Call<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool call fragment")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Self {
            reply,
            sink,
            position,
        } = self;
        let mut index: Option<usize> = None;
        let mut id: Option<Value> = None;
        let mut name: Option<String> = None;
        // The arguments piece goes to a buffer the reply keeps (no allocation per
        // fragment), then to its call.
        let mut arguments = std::mem::take(&mut reply.fragment);
        arguments.clear();
        let read: Result<(), A::Error> = (|| {
            while let Some(field) = map.next_key()? {
                match field {
                    CallField::Index => index = map.next_value()?,
                    CallField::Id => id = self::id(map.next_value()?),
                    CallField::Function => map.next_value_seed(Function {
                        name: &mut name,
                        arguments: &mut arguments,
                    })?,
                    CallField::Other => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(())
        })();
        if read.is_ok() {
            reply.on_call(index.unwrap_or(position), id, name, &arguments, sink);
        }
        reply.fragment = arguments;
        read
    }
}

/// A fragment's `function` (`null` is none): `name`, and `arguments` appended to
/// `arguments`.
struct Function<'s> {
    name: &'s mut Option<String>,
    arguments: &'s mut String,
}

seed!(Function, deserialize_any);

impl<'de> Visitor<'de> for Function<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a function object")
    }

    null_is_nothing!();

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(field) = map.next_key()? {
            match field {
                FunctionField::Name => {
                    if let Some(name) = map.next_value::<Option<String>>()? {
                        *self.name = Some(name);
                    }
                }
                FunctionField::Arguments => {
                    map.next_value_seed(Append::json(self.arguments))?;
                }
                FunctionField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A text field read onto the end of `to`: a string's text (unescaped once, straight
/// from the event's data or serde_json's scratch buffer), or, with `objects`, an
/// object's JSON text (some servers send a call's arguments whole, as an object).
/// Anything else (`null`, numbers, arrays, an object without `objects`) adds nothing.
/// Its value: whether the field held a string or an object.
struct Append<'s> {
    to: &'s mut String,
    objects: bool,
}

impl<'s> Append<'s> {
    /// Strings only.
    fn text(to: &'s mut String) -> Self {
        Self { to, objects: false }
    }

    /// Strings, and objects as their JSON text.
    fn json(to: &'s mut String) -> Self {
        Self { to, objects: true }
    }
}

seed!(Append, deserialize_any);

impl<'de> Visitor<'de> for Append<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, an object or null")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
        self.to.push_str(v);
        Ok(true)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        if self.objects {
            let value = Value::deserialize(MapAccessDeserializer::new(map))?;
            // Writing to a `String` cannot fail.
            let _ = write!(self.to, "{value}");
        } else {
            IgnoredAny::deserialize(MapAccessDeserializer::new(map))?;
        }
        Ok(true)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        IgnoredAny::deserialize(SeqAccessDeserializer::new(seq))?;
        Ok(false)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
}
