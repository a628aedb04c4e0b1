//! Reading one Messages API stream event into typed, borrowing structs.
//!
//! No `serde_json::Value` is built for the events that come many times a turn: a
//! `content_block_delta`'s text or JSON piece is borrowed from the event's data (or, when
//! it holds escapes, unescaped once into a `Cow`), and fields the reply never uses are
//! skipped. The event's `type` is read first (the API always sends it first); an event
//! whose `type` comes later is read in two passes, the type, then the fields. Only the
//! rare blocks kept whole (`thinking`, `server_tool_use`, ...) and the `error` object
//! become a `Value`, as the assembled reply holds them.
//!
//! Leniency is the same as reading the event into a `Value` and picking fields: inside
//! a `content_block` or a `content_block_delta`'s `delta`, a field of another type than
//! a string is no text, and a `delta` that is not an object is no delta; the event
//! fields themselves (`index`, `message`, `usage`, `stop_reason`) must have their type.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// One event, as far as the reply needs it.
pub(super) enum Event<'a> {
    /// `message_start`: the message's id, model and first usage.
    MessageStart(StartMessage),
    /// `content_block_start`: a block opens at `index`.
    BlockStart {
        index: usize,
        /// The block as sent (read by [`StartBlock`], or kept whole).
        block: &'a RawValue,
    },
    /// `content_block_delta`: a piece for the block at `index`.
    BlockDelta { index: usize, delta: Delta<'a> },
    /// `message_delta`: the stop reason (with a refusal's `stop_details`) and the
    /// cumulative usage.
    MessageDelta {
        stop_reason: Option<String>,
        stop_details: Option<Value>,
        usage: Option<Usage>,
    },
    /// `message_stop`: the end marker.
    MessageStop,
    /// `error`: the error object.
    Error(Value),
    /// `ping`, `content_block_stop` and event types added later.
    Other,
}

/// Reads the event `data` (a JSON object with a `type`).
///
/// # Errors
/// `data` is not JSON, has no string `type`, or a known event lacks a field it needs
/// or has one of the wrong type.
pub(super) fn read(data: &str) -> Result<Event<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(data);
    let event = de.deserialize_map(TypeFirst)?;
    de.end()?;
    match event {
        Some(event) => Ok(event),
        None => {
            // `type` was not the first field: find it, then read the fields.
            let Tag { kind } = serde_json::from_str(data)?;
            let mut de = serde_json::Deserializer::from_str(data);
            let event = kind.read(&mut de)?;
            de.end()?;
            Ok(event)
        }
    }
}

/// The event types read.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Kind {
    MessageStart,
    ContentBlockStart,
    ContentBlockDelta,
    MessageDelta,
    MessageStop,
    Error,
    /// `ping`, `content_block_stop`, and any other.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct Tag {
    #[serde(rename = "type")]
    kind: Kind,
}

#[derive(Deserialize)]
#[serde(field_identifier)]
enum FirstKey {
    #[serde(rename = "type")]
    Type,
    #[serde(other)]
    Other,
}

impl Kind {
    /// Reads the event's fields (other than `type`, which is skipped if met) from `de`.
    fn read<'de, D: Deserializer<'de>>(self, de: D) -> Result<Event<'de>, D::Error> {
        Ok(match self {
            Self::MessageStart => Event::MessageStart(MessageStart::deserialize(de)?.message),
            Self::ContentBlockStart => {
                let BlockStart {
                    index,
                    content_block,
                } = BlockStart::deserialize(de)?;
                Event::BlockStart {
                    index,
                    block: content_block,
                }
            }
            Self::ContentBlockDelta => {
                let BlockDelta { index, delta } = BlockDelta::deserialize(de)?;
                Event::BlockDelta {
                    index,
                    delta: delta.0.unwrap_or_default(),
                }
            }
            Self::MessageDelta => {
                let MessageDelta { delta, usage } = MessageDelta::deserialize(de)?;
                let (stop_reason, stop_details) = match delta {
                    Some(d) => (d.stop_reason, d.stop_details.filter(|v| !v.is_null())),
                    None => (None, None),
                };
                Event::MessageDelta {
                    stop_reason,
                    stop_details,
                    usage,
                }
            }
            Self::MessageStop => {
                IgnoredAny::deserialize(de)?;
                Event::MessageStop
            }
            Self::Error => Event::Error(ErrorEvent::deserialize(de)?.error),
            Self::Other => {
                IgnoredAny::deserialize(de)?;
                Event::Other
            }
        })
    }
}

/// Reads the event when `type` is its first field; `None` (the object skipped) when it
/// is not.
struct TypeFirst;

impl<'de> Visitor<'de> for TypeFirst {
    type Value = Option<Event<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Messages API stream event")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        match map.next_key()? {
            Some(FirstKey::Type) => {
                let kind: Kind = map.next_value()?;
                kind.read(MapAccessDeserializer::new(map)).map(Some)
            }
            Some(FirstKey::Other) => {
                map.next_value::<IgnoredAny>()?;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            None => Err(serde::de::Error::missing_field("type")),
        }
    }
}

#[derive(Deserialize)]
struct MessageStart {
    message: StartMessage,
}

/// `message_start`'s `message`.
#[derive(Deserialize)]
pub(super) struct StartMessage {
    pub(super) id: Option<String>,
    pub(super) model: Option<String>,
    pub(super) usage: Option<Usage>,
}

/// A `usage` object's counts: `None` when the field is absent, `Some(None)` when it is
/// `null`.
#[derive(Deserialize, Default, Clone, Copy)]
pub(super) struct Usage {
    #[serde(default, deserialize_with = "present")]
    pub(super) input_tokens: Option<Option<u64>>,
    #[serde(default, deserialize_with = "present")]
    pub(super) output_tokens: Option<Option<u64>>,
    #[serde(default, deserialize_with = "present")]
    pub(super) cache_creation_input_tokens: Option<Option<u64>>,
    #[serde(default, deserialize_with = "present")]
    pub(super) cache_read_input_tokens: Option<Option<u64>>,
}

/// A field that is present: its value, `null` as `None`.
fn present<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Option<u64>>, D::Error> {
    Option::<u64>::deserialize(de).map(Some)
}

#[derive(Deserialize)]
struct BlockStart<'a> {
    index: usize,
    #[serde(borrow)]
    content_block: &'a RawValue,
}

#[derive(Deserialize)]
struct BlockDelta<'a> {
    index: usize,
    #[serde(borrow)]
    delta: Object<Delta<'a>>,
}

/// A `content_block_delta`'s `delta`: each field a string or nothing.
#[derive(Deserialize, Default)]
pub(super) struct Delta<'a> {
    #[serde(rename = "type", default, borrow)]
    pub(super) kind: Text<'a>,
    #[serde(default, borrow)]
    pub(super) text: Text<'a>,
    #[serde(default, borrow)]
    pub(super) partial_json: Text<'a>,
    #[serde(default, borrow)]
    pub(super) thinking: Text<'a>,
    #[serde(default, borrow)]
    pub(super) signature: Text<'a>,
}

/// A `content_block_start`'s block, as far as text and tool use blocks are read.
#[derive(Deserialize, Default)]
pub(super) struct StartBlock<'a> {
    #[serde(rename = "type", default, borrow)]
    pub(super) kind: Text<'a>,
    #[serde(default, borrow)]
    pub(super) text: Text<'a>,
    #[serde(default, borrow)]
    pub(super) id: Text<'a>,
    #[serde(default, borrow)]
    pub(super) name: Text<'a>,
    #[serde(default, borrow)]
    pub(super) input: Option<&'a RawValue>,
}

impl<'a> StartBlock<'a> {
    /// Reads a block; one that is not an object has no fields.
    pub(super) fn read(block: &'a RawValue) -> Result<Self, serde_json::Error> {
        let Object(block) = serde_json::from_str(block.get())?;
        Ok(block.unwrap_or_default())
    }
}

#[derive(Deserialize)]
struct MessageDelta {
    delta: Option<StopReason>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct StopReason {
    stop_reason: Option<String>,
    /// A refusal's structured reason (`{type: "refusal", category, explanation}`).
    stop_details: Option<Value>,
}

#[derive(Deserialize)]
struct ErrorEvent {
    error: Value,
}

/// A string's text (borrowed when it has no escape), or `None` for any other value.
#[derive(Default)]
pub(super) struct Text<'a>(pub(super) Option<Cow<'a, str>>);

impl<'a> Text<'a> {
    /// The text, if the field was a string.
    pub(super) fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_any(TextVisitor(PhantomData))
    }
}

struct TextVisitor<'a>(PhantomData<&'a ()>);

/// A value that is not read: nothing.
macro_rules! nothing {
    ($($method:ident: $ty:ty),*) => {
        $(fn $method<E: serde::de::Error>(self, _: $ty) -> Result<Self::Value, E> {
            Ok(Default::default())
        })*
    };
}

/// Containers that are not read: skipped, nothing.
macro_rules! skip_containers {
    (map) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
        skip_containers!();
    };
    () => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }

        nothing!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64);
    };
}

impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
    type Value = Text<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Text<'a>, E> {
        Ok(Text(Some(Cow::Borrowed(v))))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text<'a>, E> {
        Ok(Text(Some(Cow::Owned(v.to_owned()))))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Text<'a>, E> {
        Ok(Text(Some(Cow::Owned(v))))
    }

    skip_containers!(map);
}

/// An object read as `T`, or `None` for any other value.
struct Object<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_any(ObjectVisitor(PhantomData))
    }
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = Object<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|t| Object(Some(t)))
    }

    nothing!(visit_str: &str);

    skip_containers!();
}
