//! Each provider's rules for tool parameter schemas, as checkers.
//!
//! Every checker returns the violations it finds, each as `"<JSON pointer>: <rule>"`
//! (the root is `/`); an empty list means the provider accepts the schema as far as the
//! rules in `docs/providers.md` ("Tool schemas per provider") go.

use serde_json::{Map, Value};

use crate::schema::transform::GEMINI_KEYWORDS;
use crate::schema::walk::{self, display_pointer};
use crate::validate::SchemaValidator;

/// OpenAI strict mode limits (source: OpenAI structured outputs guide, "Supported
/// schemas", <https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>).
const STRICT_MAX_NESTING: usize = 10;
const STRICT_MAX_PROPERTIES: usize = 5000;
const STRICT_MAX_ENUM_VALUES: usize = 1000;

/// Violations of Anthropic's `input_schema` rules: the root must be `type: object`
/// without a top-level `oneOf`/`anyOf`/`allOf`, and the schema must be valid draft
/// 2020-12.
pub fn anthropic_violations(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    object_root(schema, &mut out);
    compiles(schema, &mut out);
    out
}

/// Violations of OpenAI's (non-strict) function `parameters` rules: an object root with
/// `properties`, valid JSON Schema.
pub fn openai_violations(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    object_root(schema, &mut out);
    if schema.get("properties").is_none() {
        out.push("/: an object schema needs `properties`".to_owned());
    }
    compiles(schema, &mut out);
    out
}

/// Violations of OpenAI strict mode (`strict: true`): every object has
/// `additionalProperties: false` and lists every property in `required`; the root is an
/// object, not an `anyOf`; no `oneOf`, `allOf`, `not`, `if`/`then`/`else`,
/// `patternProperties`, `prefixItems`, `default` or boolean schemas; a `$ref` has no
/// sibling keys; at most 10 levels of object nesting, 5000 properties and 1000 enum
/// values in all.
pub fn openai_strict_violations(schema: &Value) -> Vec<String> {
    let mut out = openai_violations(schema);
    let mut properties = 0_usize;
    let mut enum_values = 0_usize;
    walk::visit(schema, "", &mut |pointer, node| {
        let at = display_pointer(pointer);
        let Value::Object(map) = node else {
            // `additionalProperties: false` is required, not a boolean subschema.
            if !pointer.is_empty() && !pointer.ends_with("/additionalProperties") {
                out.push(format!("{at}: boolean schemas are not allowed"));
            }
            return;
        };
        if map.contains_key("$ref") && map.len() > 1 {
            out.push(format!("{at}: `$ref` may not have sibling keys"));
        }
        for key in [
            "oneOf",
            "allOf",
            "not",
            "if",
            "then",
            "else",
            "patternProperties",
            "prefixItems",
            "default",
        ] {
            if map.contains_key(key) {
                out.push(format!("{at}: `{key}` is not supported"));
            }
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            enum_values += values.len();
        }
        if walk::is_object_schema(map) {
            strict_object(map, at, &mut out);
            properties += map
                .get("properties")
                .and_then(Value::as_object)
                .map_or(0, Map::len);
        }
    });
    let depth = object_depth(schema);
    if depth > STRICT_MAX_NESTING {
        out.push(format!(
            "/: {depth} levels of object nesting, more than {STRICT_MAX_NESTING}"
        ));
    }
    if properties > STRICT_MAX_PROPERTIES {
        out.push(format!(
            "/: {properties} properties, more than {STRICT_MAX_PROPERTIES}"
        ));
    }
    if enum_values > STRICT_MAX_ENUM_VALUES {
        out.push(format!(
            "/: {enum_values} enum values, more than {STRICT_MAX_ENUM_VALUES}"
        ));
    }
    out
}

fn strict_object(map: &Map<String, Value>, at: &str, out: &mut Vec<String>) {
    if map.get("additionalProperties") != Some(&Value::Bool(false)) {
        out.push(format!(
            "{at}: an object needs `additionalProperties: false`"
        ));
    }
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(Value::Object(props)) = map.get("properties") {
        for name in props.keys() {
            if !required.contains(&name.as_str()) {
                out.push(format!(
                    "{at}: property `{name}` must be in `required` (use a nullable type for an optional one)"
                ));
            }
        }
    }
}

/// Violations of Gemini's OpenAPI 3.0 subset: no `$schema`, `$ref`, `$defs`,
/// `additionalProperties`, `const`, `oneOf`, `allOf`, `patternProperties` or
/// `prefixItems` (any keyword outside the subset), no type arrays, no boolean schemas, no
/// `anyOf` with sibling keys (`description`, `nullable`, ...: they belong in each branch),
/// no `null` in an `enum` (`nullable: true` says it).
pub fn gemini_violations(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    object_root(schema, &mut out);
    walk::visit(schema, "", &mut |pointer, node| {
        let at = display_pointer(pointer);
        let Value::Object(map) = node else {
            out.push(format!("{at}: boolean schemas are not allowed"));
            return;
        };
        for key in map.keys() {
            if !GEMINI_KEYWORDS.contains(&key.as_str()) {
                out.push(format!("{at}: `{key}` is not supported"));
            }
        }
        if let Some(t) = map.get("type")
            && !t.is_string()
        {
            out.push(format!(
                "{at}: `type` must be one string (use `nullable` for null)"
            ));
        }
        if map.contains_key("anyOf") && map.len() > 1 {
            let siblings: Vec<String> = map
                .keys()
                .filter(|k| *k != "anyOf")
                .map(|k| format!("`{k}`"))
                .collect();
            out.push(format!(
                "{at}: `anyOf` may not have sibling keys ({}): move them into each branch",
                siblings.join(", ")
            ));
        }
        if let Some(Value::Array(values)) = map.get("enum")
            && values.iter().any(Value::is_null)
        {
            out.push(format!(
                "{at}: `enum` may not contain null (use `nullable: true`)"
            ));
        }
    });
    out
}

fn object_root(schema: &Value, out: &mut Vec<String>) {
    let Some(root) = schema.as_object() else {
        out.push("/: the root must be an object schema".to_owned());
        return;
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        out.push("/: the root must have `type: object`".to_owned());
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if root.contains_key(key) {
            out.push(format!("/: `{key}` is not allowed at the root"));
        }
    }
}

fn compiles(schema: &Value, out: &mut Vec<String>) {
    if let Err(message) = SchemaValidator::new(schema) {
        out.push(format!("/: {message}"));
    }
}

/// The deepest chain of nested object schemas (the root object is level 1).
fn object_depth(schema: &Value) -> usize {
    let Value::Object(map) = schema else {
        return 0;
    };
    let own = usize::from(walk::is_object_schema(map));
    let mut deepest = 0;
    walk::children(map, |segment, child| {
        if !segment.starts_with("/$defs") {
            deepest = deepest.max(object_depth(child));
        }
    });
    own + deepest
}
