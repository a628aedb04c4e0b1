//! Answers given as text (native and prompted output modes): the system-prompt
//! instruction of prompted mode, and reading the JSON object out of a reply.

use serde_json::Value;

use super::OutputSpec;

/// What a reply's text holds.
#[derive(Debug, PartialEq)]
pub(crate) enum Extracted {
    /// A JSON value: the whole text, a fenced block, or the first object in the text.
    Value(Value),
    /// A JSON object starts but never ends (the reply was cut off).
    Truncated,
    /// No JSON object at all.
    NotJson,
}

/// How many `{` positions are tried before the text is judged not to hold JSON.
const MAX_STARTS: usize = 32;

/// Reads the answer out of a reply, leniently, in this order:
/// 1. the whole text is JSON;
/// 2. a fenced block (```` ```json ... ``` ```` or ```` ``` ... ``` ````) is JSON;
/// 3. the first `{` that starts a complete JSON value; text before and after it is
///    ignored ("Here you go: {...} Hope this helps").
///
/// A JSON string that itself holds a JSON object (a double-encoded answer) is unwrapped
/// once. When some `{` starts a value that runs to the end of the text without closing,
/// and no complete object is found, the reply was cut off: [`Extracted::Truncated`].
pub(crate) fn extract_json(text: &str) -> Extracted {
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return Extracted::Value(unwrap_encoded(value));
    }
    if let Some(block) = fenced_block(trimmed)
        && let Ok(value) = serde_json::from_str::<Value>(block.trim())
    {
        return Extracted::Value(unwrap_encoded(value));
    }
    let mut truncated = false;
    for (start, _) in trimmed.match_indices('{').take(MAX_STARTS) {
        let rest = &trimmed[start..];
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match values.next() {
            Some(Ok(value)) => return Extracted::Value(value),
            Some(Err(e)) if e.is_eof() => truncated = true,
            _ => {}
        }
    }
    if truncated {
        Extracted::Truncated
    } else {
        Extracted::NotJson
    }
}

/// The content of the first fenced code block, if the text has one.
fn fenced_block(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    // Skip the info string (`json`, `JSON`, ...) up to the end of the line.
    let body_start = after.find('\n').map_or(0, |i| i + 1);
    let body = &after[body_start..];
    let close = body.find("```")?;
    Some(&body[..close])
}

/// A string holding a JSON object or array, parsed once; anything else unchanged.
fn unwrap_encoded(value: Value) -> Value {
    if let Value::String(inner) = &value {
        let inner = inner.trim();
        if (inner.starts_with('{') || inner.starts_with('['))
            && let Ok(parsed) = serde_json::from_str::<Value>(inner)
        {
            return parsed;
        }
    }
    value
}

/// The system prompt of prompted mode: the user's prompt, then the answer's
/// description, its JSON Schema, and how to give it.
pub(crate) fn prompted_system(system: Option<&str>, spec: &OutputSpec) -> String {
    let schema = serde_json::to_string_pretty(&spec.schema).unwrap_or_else(|_| "{}".to_owned());
    let mut out = String::new();
    if let Some(system) = system.filter(|s| !s.trim().is_empty()) {
        out.push_str(system.trim_end());
        out.push_str("\n\n");
    }
    out.push_str("When you have the answer, reply with only a JSON object, and no other text");
    if !spec.description.trim().is_empty() {
        out.push_str(": ");
        out.push_str(spec.description.trim());
    } else {
        out.push('.');
    }
    out.push_str("\nThe object must match this JSON Schema:\n```json\n");
    out.push_str(&schema);
    out.push_str("\n```");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn value(text: &str) -> Value {
        match extract_json(text) {
            Extracted::Value(v) => v,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn bare_fenced_and_embedded_objects_are_read() {
        let want = json!({"severity": 2, "queue": "billing"});
        assert_eq!(value(r#"{"severity": 2, "queue": "billing"}"#), want);
        assert_eq!(value("  {\"severity\":2,\"queue\":\"billing\"}\n\n"), want);
        assert_eq!(
            value("```json\n{\"severity\": 2, \"queue\": \"billing\"}\n```"),
            want
        );
        assert_eq!(
            value("Sure!\n```\n{\"severity\": 2, \"queue\": \"billing\"}\n```\nAnything else?"),
            want
        );
        assert_eq!(
            value("Here you go: {\"severity\": 2, \"queue\": \"billing\"} Hope this helps {"),
            want
        );
        assert_eq!(
            value("I think {maybe} this: {\"severity\": 2, \"queue\": \"billing\"}"),
            want
        );
    }

    #[test]
    fn double_encoded_answers_are_unwrapped_once() {
        let text = serde_json::to_string(&json!({"a": 1}).to_string()).unwrap();
        assert_eq!(value(&text), json!({"a": 1}));
        // A plain string stays a string (and fails validation later, with its path).
        assert_eq!(value("\"hello\""), json!("hello"));
    }

    #[test]
    fn cut_off_objects_and_plain_text_are_told_apart() {
        assert_eq!(
            extract_json(r#"{"severity": 2, "summary": "The parcel"#),
            Extracted::Truncated
        );
        assert_eq!(
            extract_json("Let me think. {\"severity\": 2, "),
            Extracted::Truncated
        );
        assert_eq!(extract_json("The customer is upset."), Extracted::NotJson);
        assert_eq!(extract_json("a {broken} reply"), Extracted::NotJson);
        assert_eq!(extract_json(""), Extracted::NotJson);
    }

    #[test]
    fn the_prompted_instruction_carries_the_description_and_schema() {
        let spec = OutputSpec::new(
            crate::OutputMode::Prompted,
            "output",
            "Triage decision.",
            json!({"type": "object"}),
        );
        assert_eq!(
            prompted_system(Some("You triage tickets."), &spec),
            "You triage tickets.\n\nWhen you have the answer, reply with only a JSON object, \
             and no other text: Triage decision.\nThe object must match this JSON Schema:\n\
             ```json\n{\n  \"type\": \"object\"\n}\n```"
        );
        assert!(prompted_system(None, &spec).starts_with("When you have"));
    }
}
