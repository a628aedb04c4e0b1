//! Answers given as text (native and prompted output modes): the system-prompt
//! instruction of prompted mode, and reading the JSON object out of a reply.

use serde_json::Value;

use super::OutputSpec;

/// What a reply's text holds.
#[derive(Debug, PartialEq)]
pub(crate) enum Extracted {
    /// A JSON value: the whole text, a fenced block, or the one object in the text.
    Value(Value),
    /// A JSON object starts but never ends (the reply was cut off).
    Truncated,
    /// No JSON object at all.
    NotJson,
    /// This many different JSON values, each of which could be the answer: none is
    /// picked.
    Ambiguous(usize),
}

/// How many `{` positions are tried before the text is judged not to hold JSON.
const MAX_STARTS: usize = 32;

/// Reads the answer out of a reply, leniently. First the reasoning the model wrote
/// into its text is set aside (`<think>` blocks and their kin, see
/// [`reasoning`](super::reasoning)): a draft in it is never the answer. Then, in this
/// order:
/// 1. the whole text is JSON;
/// 2. the JSON values in the text: every fenced block (```` ```json ... ``` ```` or
///    ```` ``` ... ``` ````) that is JSON, and every complete object outside them, text
///    before and after ignored ("Here you go: {...} Hope this helps"). One value (or
///    the same value more than once) is the answer; different ones are
///    [`Extracted::Ambiguous`]: a reply that holds two candidate answers is never
///    resolved to one of them.
///
/// A JSON string that itself holds a JSON object (a double-encoded answer) is unwrapped
/// once. When some `{` starts a value that runs to the end of the text without closing,
/// and no complete object is found, the reply was cut off: [`Extracted::Truncated`].
pub(crate) fn extract_json(text: &str) -> Extracted {
    let visible = super::reasoning::without_reasoning(text);
    let trimmed = visible.trim();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return Extracted::Value(unwrap_encoded(value));
    }
    let mut candidates: Vec<Value> = Vec::new();
    let mut add = |value: Value| {
        if !candidates.contains(&value) {
            candidates.push(value);
        }
    };
    // Fenced blocks first (an array or a string is an answer only there), then the
    // objects of the text with the fences' bodies blanked out.
    let mut outside = String::with_capacity(trimmed.len());
    let mut rest = trimmed;
    while let Some((before, body, after)) = fenced_block(rest) {
        if let Ok(value) = serde_json::from_str::<Value>(body.trim()) {
            add(unwrap_encoded(value));
            outside.push_str(before);
        } else {
            outside.push_str(&rest[..rest.len() - after.len()]);
        }
        outside.push('\n');
        rest = after;
    }
    outside.push_str(rest);
    let mut truncated = false;
    let mut tries = 0;
    let mut from = 0;
    while let Some(found) = outside[from..].find('{') {
        let start = from + found;
        let mut values = serde_json::Deserializer::from_str(&outside[start..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(value)) => {
                add(value);
                from = start + values.byte_offset().max(1);
                continue;
            }
            Some(Err(e)) if e.is_eof() => truncated = true,
            _ => {}
        }
        tries += 1;
        if tries >= MAX_STARTS {
            break;
        }
        from = start + 1;
    }
    match candidates.len() {
        1 => Extracted::Value(candidates.remove(0)),
        0 if truncated => Extracted::Truncated,
        0 => Extracted::NotJson,
        n => Extracted::Ambiguous(n),
    }
}

/// The first fenced code block of the text: the text before it, its body, and the
/// text after it.
fn fenced_block(text: &str) -> Option<(&str, &str, &str)> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    // Skip the info string (`json`, `JSON`, ...) up to the end of the line.
    let body_start = after.find('\n').map_or(0, |i| i + 1);
    let body = &after[body_start..];
    let close = body.find("```")?;
    Some((&text[..open], &body[..close], &body[close + 3..]))
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
            crate::output::AnswerMode::Prompted,
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
