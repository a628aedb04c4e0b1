//! Conversation types: the messages of a run, tool calls and tool results.
//!
//! These are provider-neutral. Adapters translate them to each provider's wire format
//! (for example, Anthropic wants every [`ToolResult`] of a turn in one user message).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::Part;

/// One message of a conversation.
///
/// The system prompt is not a message: it travels in [`LlmRequest::system`](crate::llm::LlmRequest).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Message {
    /// From the user: the run's input, or a nudge written by the runner.
    User {
        /// The text; never empty when written by the runner.
        content: String,
        /// The parts after the text (images, documents, audio, more text), in order;
        /// empty for a message of text alone. Absent from serialized messages when
        /// empty, so records written before parts still load.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<Part>,
    },
    /// One model turn: optional text and zero or more tool calls, in emission order,
    /// with the reasoning the provider sent apart from the answer.
    Assistant {
        /// The turn's text (all text blocks joined); empty when the model wrote none.
        text: String,
        /// The tool calls of the turn, in the order the model emitted them.
        tool_calls: Vec<ToolCall>,
        /// The reasoning (thinking) text the provider returned beside the answer:
        /// Anthropic `thinking` blocks, OpenAI Responses `reasoning` summaries,
        /// compatible servers' `reasoning_content` / `reasoning`, Gemini thought
        /// summaries, Bedrock `reasoningContent`; all of a turn's joined, empty when
        /// none. For people and stores only: no adapter sends it back to a model
        /// (providers that need their reasoning back get it from
        /// [`ToolCall::provider_data`] or [`ToolCall::thought_signature`], with its
        /// signature), and it is in spans only with content capture on. Absent from
        /// serialized messages when empty, so records written before it still load.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
    },
    /// The answers to every tool call of the preceding assistant turn, in emission order.
    ///
    /// The runner always answers every call id exactly once.
    Tool {
        /// One result per tool call of the preceding assistant turn.
        results: Vec<ToolResult>,
    },
    /// A model turn the provider paused before its end
    /// ([`StopReason::PauseTurn`](crate::llm::StopReason::PauseTurn): Anthropic `pause_turn`,
    /// while a server tool such as web search runs). Not an answer and not a call to
    /// run: the adapter that produced it sends `content` back unchanged, as the
    /// assistant's turn, and the model continues it (case C41). Other adapters send
    /// only `text`, as an assistant turn.
    Paused {
        /// The turn's text so far (all text blocks joined); empty when none.
        text: String,
        /// The provider's content exactly as it came (for Anthropic, the array of
        /// content blocks, `server_tool_use` and its results included).
        content: Value,
    },
}

impl Message {
    /// A user message of text.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
            parts: Vec::new(),
        }
    }

    /// A user message of text and the parts after it.
    pub fn user_with(content: impl Into<String>, parts: Vec<Part>) -> Self {
        Self::User {
            content: content.into(),
            parts,
        }
    }

    /// The parts of a user message or of a tool-results message (each result's, in
    /// order); empty for every other.
    pub fn parts(&self) -> impl Iterator<Item = &Part> {
        let (user, results): (&[Part], &[ToolResult]) = match self {
            Self::User { parts, .. } => (parts, &[]),
            Self::Tool { results } => (&[], results),
            _ => (&[], &[]),
        };
        user.iter()
            .chain(results.iter().flat_map(|r| r.parts.iter()))
    }

    /// An assistant message with text and tool calls (and no reasoning; see
    /// [`with_reasoning`](Self::with_reasoning)).
    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self::Assistant {
            text: text.into(),
            tool_calls,
            reasoning: String::new(),
        }
    }

    /// This message with its reasoning text set, when it is an assistant turn; any
    /// other message is returned unchanged.
    #[must_use]
    pub fn with_reasoning(mut self, text: impl Into<String>) -> Self {
        if let Self::Assistant { reasoning, .. } = &mut self {
            *reasoning = text.into();
        }
        self
    }

    /// The reasoning text of an assistant turn; empty for every other message.
    pub fn reasoning(&self) -> &str {
        match self {
            Self::Assistant { reasoning, .. } => reasoning,
            _ => "",
        }
    }

    /// A message answering the tool calls of the preceding assistant turn.
    pub fn tool_results(results: Vec<ToolResult>) -> Self {
        Self::Tool { results }
    }
}

/// A tool call made by the model.
///
/// `arguments` is always a JSON value that can be re-sent to any provider. When the
/// model's arguments could not be used as they came (truncated or malformed JSON, a
/// non-object), `arguments` holds `{}` and [`arguments_error`](Self::arguments_error)
/// says what was wrong; the runner feeds that back to the model instead of running the tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The call id (provider-given, or synthesised when the provider sent none).
    pub id: String,
    /// The tool name as the model wrote it.
    pub name: String,
    /// The arguments: a JSON object (`{}` when absent or unusable).
    pub arguments: Value,
    /// Why the arguments as sent could not be used, if they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_error: Option<String>,
    /// An opaque token the provider attached to the call and wants back, unchanged, when
    /// the call is sent again in the history: Gemini's `thoughtSignature` (required for
    /// function calling on Gemini 3, see `docs/providers.md`, "Google Gemini"). Other
    /// adapters neither set nor send it. Set it with
    /// [`with_thought_signature`](Self::with_thought_signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// What the provider sent with the call that only it can read and that must go back
    /// with the call when the history is sent again: for the OpenAI Responses API
    /// ([`OpenAiResponsesClient`](crate::providers::OpenAiResponsesClient)), an object
    /// `{"reasoning": [ITEM, ..], "response_id": "resp_.."}` holding the `reasoning`
    /// output items (with their `encrypted_content`) that came before the call, sent
    /// back ahead of it, and the id of the response (for `previous_response_id`). Other
    /// adapters neither set nor send it; a switch to a fallback model drops it, as it
    /// drops thought signatures. Set it with
    /// [`with_provider_data`](Self::with_provider_data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_data: Option<Value>,
}

impl ToolCall {
    /// A tool call with well-formed arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
            arguments_error: None,
            thought_signature: None,
            provider_data: None,
        }
    }

    /// Sets the provider's opaque [`thought_signature`](Self::thought_signature).
    #[must_use]
    pub fn with_thought_signature(mut self, signature: impl Into<String>) -> Self {
        self.thought_signature = Some(signature.into());
        self
    }

    /// Sets the provider's opaque [`provider_data`](Self::provider_data).
    #[must_use]
    pub fn with_provider_data(mut self, data: Value) -> Self {
        self.provider_data = Some(data);
        self
    }

    /// A tool call whose arguments arrived unusable (for example truncated JSON).
    ///
    /// `arguments` is set to `{}` so the call can be re-sent safely; `error` is fed back
    /// to the model.
    pub fn with_invalid_arguments(
        id: impl Into<String>,
        name: impl Into<String>,
        error: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: Value::Object(serde_json::Map::new()),
            arguments_error: Some(error.into()),
            thought_signature: None,
            provider_data: None,
        }
    }

    /// Builds a call from arguments as a provider sent them: a JSON string, an object,
    /// `""`, `null` or absent (all of the last three mean "no arguments", case C6).
    ///
    /// A string that does not parse (for example cut off by `max_tokens`, case C8), or
    /// JSON that is not an object, gives a call with `{}` and an
    /// [`arguments_error`](Self::arguments_error).
    pub fn from_wire(id: impl Into<String>, name: impl Into<String>, raw: Option<&Value>) -> Self {
        let (id, name) = (id.into(), name.into());
        match raw {
            None | Some(Value::Null) => Self::new(id, name, empty_object()),
            Some(Value::Object(map)) => Self::new(id, name, Value::Object(map.clone())),
            Some(Value::String(text)) => Self::from_json_text(id, name, text),
            Some(other) => Self::with_invalid_arguments(
                id,
                name,
                format!(
                    "the arguments must be a JSON object, got {}",
                    json_kind(other)
                ),
            ),
        }
    }

    /// Builds a call from arguments given as JSON text (see [`from_wire`](Self::from_wire)).
    /// Text that is a JSON string holding the object (double-encoded arguments, case
    /// C30) is unwrapped once.
    pub fn from_json_text(id: impl Into<String>, name: impl Into<String>, text: &str) -> Self {
        let (id, name) = (id.into(), name.into());
        if text.trim().is_empty() {
            return Self::new(id, name, empty_object());
        }
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Self::new(id, name, Value::Object(map)),
            Ok(Value::Null) => Self::new(id, name, empty_object()),
            // Double-encoded (C30): a JSON string whose content is the arguments' JSON.
            // Unwrapped once; a string inside that is an error like any other.
            Ok(Value::String(inner)) if inner.trim_start().starts_with('{') => {
                match serde_json::from_str::<Value>(&inner) {
                    Ok(Value::Object(map)) => Self::new(id, name, Value::Object(map)),
                    _ => Self::with_invalid_arguments(
                        id,
                        name,
                        "the arguments must be a JSON object, got a string that is not one",
                    ),
                }
            }
            Ok(other) => Self::with_invalid_arguments(
                id,
                name,
                format!(
                    "the arguments must be a JSON object, got {}",
                    json_kind(&other)
                ),
            ),
            Err(e) if e.is_eof() => Self::with_invalid_arguments(
                id,
                name,
                format!(
                    "the arguments were truncated JSON ({e}); the output was probably cut off: send shorter arguments"
                ),
            ),
            Err(e) => Self::with_invalid_arguments(
                id,
                name,
                format!("the arguments were not valid JSON ({e})"),
            ),
        }
    }
}

/// The answer to one tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The name of the tool that was called (as the model wrote it).
    pub name: String,
    /// The content shown to the model: the tool's output, or the error message.
    pub content: String,
    /// Whether this result reports a failure (unknown tool, invalid arguments, tool
    /// error, panic, timeout, limit reached, rejected submission).
    pub is_error: bool,
    /// The parts after the content (images, documents, audio a tool returned), in
    /// order; empty for a result of text alone. Absent from serialized results when
    /// empty, so records written before parts still load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            name: name.into(),
            content: content.into(),
            is_error: false,
            parts: Vec::new(),
        }
    }

    /// A result marked as an error.
    pub fn error(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            name: name.into(),
            content: content.into(),
            is_error: true,
            parts: Vec::new(),
        }
    }

    /// This result with parts after its content (images, documents, audio).
    #[must_use]
    pub fn with_parts(mut self, parts: Vec<Part>) -> Self {
        self.parts = parts;
        self
    }
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// JSON with object keys sorted and no whitespace, so `{"b":1, "a":2}` and
/// `{"a":2,"b":1}` compare equal.
pub(crate) fn canonical_json(value: &Value) -> String {
    // Room for a usual call's arguments at once, instead of growing from 8 bytes.
    let mut out = Vec::with_capacity(64);
    write_canonical(value, &mut out);
    // Only serde_json's own output and ASCII punctuation went in: always UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends `value` to `out` canonically; strings and scalars as serde_json writes them
/// (written straight into `out`: no text per key or scalar).
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            out.push(b'{');
            // Keys that come sorted (one key, or written in the schema's order when it
            // is alphabetical) are written in place, without a sorted copy.
            if map.keys().is_sorted() {
                for (i, (key, v)) in map.iter().enumerate() {
                    write_entry(i, key, v, out);
                }
            } else {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_unstable();
                for (i, key) in keys.into_iter().enumerate() {
                    if let Some(v) = map.get(key) {
                        write_entry(i, key, v, out);
                    }
                }
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// Appends the `i`-th entry of an object (`,` before all but the first).
fn write_entry(i: usize, key: &str, value: &Value, out: &mut Vec<u8>) {
    if i > 0 {
        out.push(b',');
    }
    // Writing to a Vec cannot fail, and a string always serializes.
    let _ = serde_json::to_writer(&mut *out, key);
    out.push(b':');
    write_canonical(value, out);
}

/// `value` as compact JSON text. `serde_json::to_string` writes into a byte buffer;
/// `Value`'s `Display` (`value.to_string()`) goes through `fmt::Write` a piece at a
/// time and costs about twice the instructions. The text is the same.
pub(crate) fn json_text(value: &Value) -> String {
    // A `Value` always serializes (its map keys are strings).
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// The JSON kind of a value, for messages ("a string", "an array", ...).
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn canonical_json_ignores_key_order_and_whitespace() {
        let a: Value = serde_json::from_str(r#"{"b": [1, {"y":1,"x":2}], "a": "s"}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":"s","b":[1,{"x":2,"y":1}]}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":"s","b":[1,{"x":2,"y":1}]}"#);
        // Sorted outside, unsorted inside, escapes and an empty object.
        let c = json!({"a": {"z": 1, "b": "q\"x"}, "b": [], "c": {}});
        assert_eq!(
            canonical_json(&c),
            r#"{"a":{"b":"q\"x","z":1},"b":[],"c":{}}"#
        );
    }

    use super::*;
    use serde_json::json;

    // C6: "", null, "{}" and {} are the same empty object.
    #[test]
    fn c6_empty_arguments_in_every_spelling_are_an_empty_object() {
        let spellings = [json!(""), json!(null), json!("{}"), json!({})];
        for raw in &spellings {
            let call = ToolCall::from_wire("id", "ping", Some(raw));
            assert_eq!(call.arguments, json!({}), "{raw}");
            assert_eq!(call.arguments_error, None, "{raw}");
        }
        let absent = ToolCall::from_wire("id", "ping", None);
        assert_eq!(absent.arguments, json!({}));
    }

    // C7: arguments as a JSON object are accepted as they are.
    #[test]
    fn c7_object_arguments_are_accepted() {
        let call = ToolCall::from_wire("id", "lookup", Some(&json!({"order_id": "A1"})));
        assert_eq!(call.arguments, json!({"order_id": "A1"}));
        assert!(call.arguments_error.is_none());
    }

    // C8: truncated JSON becomes {} plus an error that says it was truncated.
    #[test]
    fn c8_truncated_arguments_are_sanitized_and_explained() {
        let call = ToolCall::from_wire("id", "lookup", Some(&json!("{\"order_id\": \"A1")));
        assert_eq!(call.arguments, json!({}));
        let err = call.arguments_error.unwrap();
        assert!(err.contains("truncated"), "{err}");
    }

    #[test]
    fn non_object_arguments_are_rejected_with_their_kind() {
        let call = ToolCall::from_wire("id", "lookup", Some(&json!("[1,2]")));
        assert_eq!(call.arguments, json!({}));
        assert_eq!(
            call.arguments_error.as_deref(),
            Some("the arguments must be a JSON object, got an array")
        );
        let call = ToolCall::from_wire("id", "lookup", Some(&json!(7)));
        assert!(call.arguments_error.unwrap().contains("a number"));
    }

    #[test]
    fn garbage_arguments_are_invalid_json_not_truncated() {
        let call = ToolCall::from_wire("id", "lookup", Some(&json!("{order_id: A1}")));
        let err = call.arguments_error.unwrap();
        assert!(
            err.starts_with("the arguments were not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn messages_round_trip_through_serde() {
        let msgs = vec![
            Message::user("hi"),
            Message::assistant("", vec![ToolCall::new("c1", "t", json!({"a": 1}))]),
            Message::tool_results(vec![ToolResult::error("c1", "t", "boom")]),
        ];
        let text = serde_json::to_string(&msgs).unwrap();
        let back: Vec<Message> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, msgs);
    }

    #[test]
    fn reasoning_is_kept_when_set_and_absent_when_empty() {
        let plain = Message::assistant("ok", vec![]);
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            json!({"role": "assistant", "text": "ok", "tool_calls": []})
        );
        // A record written before the field loads with no reasoning.
        let old: Message =
            serde_json::from_value(json!({"role": "assistant", "text": "ok", "tool_calls": []}))
                .unwrap();
        assert_eq!(old.reasoning(), "");
        let thought = plain.with_reasoning("Parcel late: shipping.");
        let value = serde_json::to_value(&thought).unwrap();
        assert_eq!(value["reasoning"], "Parcel late: shipping.");
        let back: Message = serde_json::from_value(value).unwrap();
        assert_eq!(back.reasoning(), "Parcel late: shipping.");
        assert_eq!(back, thought);
        // Only assistant turns carry reasoning.
        assert_eq!(Message::user("hi").with_reasoning("x"), Message::user("hi"));
    }
}
