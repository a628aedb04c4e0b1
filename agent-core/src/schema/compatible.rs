//! The schema sent to OpenAI-compatible servers (llama.cpp, vLLM, Ollama's OpenAI
//! endpoint), whose grammar-based decoders turn a schema into the grammar the model
//! must follow.

use serde_json::{Map, Value};

use crate::schema::walk;

use super::transform::for_openai;

/// The schema as sent to OpenAI-compatible servers, for tool parameters and native
/// output (`response_format`): as [`for_openai`], with two changes for grammar-based
/// servers (llama.cpp turns both into a grammar the model must follow):
///
/// - every `pattern` rewritten so the grammar can enforce it: the shorthand classes `\d`
///   and `\w` become `[0-9]` and `[A-Za-z0-9_]` (their exact ECMA-262 meanings).
///   llama.cpp's JSON-Schema-to-grammar converter rejects `\d` ("unsupported escape")
///   and then accepts any string, so `^NW-\d{5}$` would not bind the model at all;
/// - every optional property whose schema accepts `null` (an `Option` field) listed in
///   `required`, so the model writes it, `null` for "none". llama.cpp's converter puts
///   the optional properties after the required ones, as a tail the model may leave
///   out, and a small model always does: Qwen2.5-Coder-1.5B left `order_id` out of
///   every triage answer, even when told the id (measured in bench/HISTORY.md, "Live:
///   the prompt chosen by a sweep"). The canonical schema still accepts the field left
///   out; a non-nullable optional property (`#[serde(default)]`) stays optional, as
///   `null` would not deserialize.
pub fn for_compatible_output(schema: &Value) -> Value {
    let mut out = for_openai(schema);
    walk::visit_mut(&mut out, &mut |node| {
        if let Some(Value::String(pattern)) = node.get_mut("pattern") {
            *pattern = expand_class_escapes(pattern);
        }
        require_nullable(node);
    });
    out
}

/// Adds the nullable properties of an object schema to its `required` list, in
/// property order.
fn require_nullable(node: &mut Map<String, Value>) {
    let Some(Value::Object(properties)) = node.get("properties") else {
        return;
    };
    let mut required: Vec<Value> = match node.get("required") {
        Some(Value::Array(list)) => list.clone(),
        _ => Vec::new(),
    };
    let before = required.len();
    for (name, property) in properties {
        let listed = required.iter().any(|r| r.as_str() == Some(name.as_str()));
        if !listed && accepts_null(property) {
            required.push(Value::String(name.clone()));
        }
    }
    if required.len() > before {
        node.insert("required".to_owned(), Value::Array(required));
    }
}

/// Whether a schema accepts `null`: `type` `"null"` or a type list with it, a `null`
/// in `enum`, `const: null`, or an `anyOf` / `oneOf` branch that does.
fn accepts_null(schema: &Value) -> bool {
    let Value::Object(node) = schema else {
        return false;
    };
    let typed = match node.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        _ => false,
    };
    let listed = match node.get("enum") {
        Some(Value::Array(values)) => values.iter().any(Value::is_null),
        _ => false,
    };
    let constant = node.get("const").is_some_and(Value::is_null);
    let branch = ["anyOf", "oneOf"].iter().any(|key| match node.get(*key) {
        Some(Value::Array(branches)) => branches.iter().any(accepts_null),
        _ => false,
    });
    typed || listed || constant || branch
}

/// `\d` and `\w` spelled out as character ranges, inside or outside a class.
fn expand_class_escapes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d') if in_class => out.push_str("0-9"),
                Some('d') => out.push_str("[0-9]"),
                Some('w') if in_class => out.push_str("A-Za-z0-9_"),
                Some('w') => out.push_str("[A-Za-z0-9_]"),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn class_escapes_are_spelled_out_for_grammars() {
        assert_eq!(expand_class_escapes(r"^NW-\d{5}$"), "^NW-[0-9]{5}$");
        assert_eq!(expand_class_escapes(r"[\d-]+\w*"), "[0-9-]+[A-Za-z0-9_]*");
        assert_eq!(expand_class_escapes(r"a\.b\\d"), r"a\.b\\d");
        assert_eq!(expand_class_escapes(r"\s+\D"), r"\s+\D");
        let schema = json!({"type": "object", "properties": {
            "id": {"type": ["string", "null"], "pattern": "^NW-\\d{5}$"}}});
        assert_eq!(
            for_compatible_output(&schema)["properties"]["id"]["pattern"],
            "^NW-[0-9]{5}$"
        );
    }

    #[test]
    fn nullable_optional_properties_are_required_for_grammars() {
        let schema = json!({"type": "object", "required": ["queue"], "properties": {
            "queue": {"type": "string"},
            "order_id": {"type": ["string", "null"]},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "count": {"type": "integer", "default": 0},
            "nested": {"type": "object", "properties": {"tag": {"enum": ["a", null]}}}
        }});
        let out = for_compatible_output(&schema);
        assert_eq!(out["required"], json!(["queue", "order_id", "note"]));
        assert_eq!(out["properties"]["nested"]["required"], json!(["tag"]));
        // The canonical schema is unchanged: the runner still accepts a field left out.
        assert_eq!(schema["required"], json!(["queue"]));
        let closed = json!({"type": "object", "properties": {"count": {"type": "integer"}}});
        assert!(for_compatible_output(&closed).get("required").is_none());
    }
}
