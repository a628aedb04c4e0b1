//! Produces a value that satisfies a JSON Schema, for the test model.

use serde_json::{Map, Number, Value};

const MAX_DEPTH: usize = 24;

/// A value valid under `schema` for the schemas `schemars` emits: objects (required
/// properties), strings (length, common formats, enums), integers and numbers (bounds),
/// booleans, arrays (minItems), `const`, `enum`, `oneOf`/`anyOf` (first non-null
/// branch), `allOf`, type arrays, and local `$ref`s into `$defs`/`definitions`.
///
/// Regex `pattern`s are not solved: a pattern-constrained string gets a plain value
/// that may not match.
pub fn example_for_schema(schema: &Value) -> Value {
    generate(schema, schema, 0)
}

fn generate(schema: &Value, root: &Value, depth: usize) -> Value {
    let Value::Object(s) = schema else {
        return Value::Null;
    };
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(reference) = s.get("$ref").and_then(Value::as_str)
        && let Some(target) = resolve(root, reference)
    {
        return generate(target, root, depth + 1);
    }
    if let Some(value) = s.get("const") {
        return value.clone();
    }
    if let Some(Value::Array(options)) = s.get("enum") {
        return options
            .iter()
            .find(|v| !v.is_null())
            .or(options.first())
            .cloned()
            .unwrap_or(Value::Null);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = s.get(key) {
            let pick = branches
                .iter()
                .find(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                .or(branches.first());
            if let Some(branch) = pick {
                return generate(branch, root, depth + 1);
            }
        }
    }
    if let Some(Value::Array(parts)) = s.get("allOf")
        && let Some(first) = parts.first()
    {
        return generate(first, root, depth + 1);
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ => "null",
    };
    match ty {
        "object" => object(s, root, depth),
        "array" => array(s, root, depth),
        "string" => string(s),
        "integer" => integer(s),
        "number" => number(s),
        "boolean" => Value::Bool(true),
        _ => Value::Null,
    }
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

fn object(s: &Map<String, Value>, root: &Value, depth: usize) -> Value {
    let mut out = Map::new();
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(Value::Object(props)) = s.get("properties") {
        for (name, prop) in props {
            if required.contains(&name.as_str()) {
                out.insert(name.clone(), generate(prop, root, depth + 1));
            }
        }
    }
    Value::Object(out)
}

fn array(s: &Map<String, Value>, root: &Value, depth: usize) -> Value {
    let min = s
        .get("minItems")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .min(16);
    let max = s
        .get("maxItems")
        .and_then(Value::as_u64)
        .unwrap_or(u64::MAX);
    let count = min.min(max);
    let item_schema = s.get("items").cloned().unwrap_or(Value::Bool(true));
    let mut items: Vec<Value> = Vec::new();
    for i in 0..count {
        let mut item = generate(&item_schema, root, depth + 1);
        // uniqueItems: vary strings and numbers by index.
        if i > 0 {
            item = match item {
                Value::String(text) => Value::String(format!("{text}{i}")),
                Value::Number(n) => n.as_i64().map_or(Value::Number(n), |v| {
                    Value::from(v.saturating_add(i as i64))
                }),
                other => other,
            };
        }
        items.push(item);
    }
    Value::Array(items)
}

fn string(s: &Map<String, Value>) -> Value {
    let base = match s.get("format").and_then(Value::as_str) {
        Some("date-time") => "2025-01-01T00:00:00Z",
        Some("date") => "2025-01-01",
        Some("time") => "00:00:00Z",
        Some("email") => "test@example.com",
        Some("uri") | Some("url") => "https://example.com/",
        Some("uuid") => "00000000-0000-4000-8000-000000000000",
        Some("ipv4") => "127.0.0.1",
        _ => "example",
    };
    let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
    let max = s
        .get("maxLength")
        .and_then(Value::as_u64)
        .map_or(usize::MAX, |m| m as usize);
    let mut text = base.to_owned();
    while text.chars().count() < min {
        text.push('x');
    }
    if text.chars().count() > max {
        text = text.chars().take(max).collect();
    }
    Value::String(text)
}

fn bound(s: &Map<String, Value>, key: &str) -> Option<f64> {
    s.get(key).and_then(Value::as_f64)
}

fn integer(s: &Map<String, Value>) -> Value {
    let low = bound(s, "minimum").or_else(|| bound(s, "exclusiveMinimum").map(|v| v.floor() + 1.0));
    let high = bound(s, "maximum").or_else(|| bound(s, "exclusiveMaximum").map(|v| v.ceil() - 1.0));
    let pick = match (low, high) {
        (Some(lo), _) => lo.ceil(),
        (None, Some(hi)) => hi.floor().min(0.0),
        (None, None) => 0.0,
    };
    Value::Number(Number::from(pick as i64))
}

fn number(s: &Map<String, Value>) -> Value {
    let low = bound(s, "minimum").or_else(|| bound(s, "exclusiveMinimum").map(|v| v + 0.5));
    let high = bound(s, "maximum").or_else(|| bound(s, "exclusiveMaximum").map(|v| v - 0.5));
    let pick = match (low, high) {
        (Some(lo), Some(hi)) => (lo + hi) / 2.0,
        (Some(lo), None) => lo,
        (None, Some(hi)) => hi.min(0.0),
        (None, None) => 0.0,
    };
    Number::from_f64(pick).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::SchemaValidator;
    use serde_json::json;

    fn assert_valid(schema: Value) {
        let value = example_for_schema(&schema);
        let v = SchemaValidator::new(&schema).unwrap();
        assert!(
            v.validate(&value).is_ok(),
            "{value} under {schema}: {:?}",
            v.validate(&value)
        );
    }

    #[test]
    fn examples_satisfy_their_schemas() {
        assert_valid(json!({
            "type": "object",
            "properties": {
                "severity": {"type": "integer", "minimum": 1, "maximum": 4},
                "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "summary": {"type": "string", "minLength": 12, "maxLength": 40},
                "queue": {"$ref": "#/$defs/Queue"},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": true},
                "note": {"type": ["string", "null"]},
                "kind": {"oneOf": [{"const": "a", "description": "A"}, {"const": "b"}]},
                "nested": {"anyOf": [{"$ref": "#/$defs/Axis"}, {"type": "null"}]},
                "when": {"type": "string", "format": "date"},
                "ok": {"type": "boolean"}
            },
            "required": ["severity", "score", "summary", "queue", "tags", "note", "kind", "nested", "when", "ok"],
            "additionalProperties": false,
            "$defs": {
                "Queue": {"type": "string", "enum": ["billing", "shipping"]},
                "Axis": {"type": "object", "properties": {"min": {"type": "integer", "minimum": -3}}, "required": ["min"]}
            }
        }));
    }

    #[test]
    fn optional_properties_are_left_out() {
        let v = example_for_schema(&json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "required": ["a"]
        }));
        assert_eq!(v, json!({"a": "example"}));
    }

    #[test]
    fn recursion_terminates() {
        let schema = json!({
            "type": "object",
            "properties": {"child": {"$ref": "#"}},
            "required": ["child"]
        });
        let v = example_for_schema(&schema);
        assert!(v.is_object());
    }
}
