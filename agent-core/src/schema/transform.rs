//! Per-provider transforms of a canonical parameter schema.

use serde_json::{Map, Value, json};

use crate::schema::walk;

/// The schema as sent to Anthropic (`input_schema`): `$schema` dropped, and the root
/// marked `type: object` when it has `properties` but no `type`.
///
/// Anthropic requires an object root and accepts draft 2020-12 otherwise (source:
/// Anthropic Messages API reference, `tools[].input_schema`).
pub fn for_anthropic(schema: &Value) -> Value {
    let mut out = schema.clone();
    if let Value::Object(root) = &mut out {
        root.remove("$schema");
        if !root.contains_key("type") && root.contains_key("properties") {
            root.insert("type".to_owned(), json!("object"));
        }
    }
    out
}

/// The schema as sent to OpenAI Chat Completions and OpenAI-compatible servers
/// (non-strict): as [`for_anthropic`], plus `properties: {}` on an object root without
/// properties (OpenAI rejects an object schema that has none).
pub fn for_openai(schema: &Value) -> Value {
    let mut out = for_anthropic(schema);
    if let Value::Object(root) = &mut out
        && walk::is_object_schema(root)
        && !root.contains_key("properties")
    {
        root.insert("properties".to_owned(), Value::Object(Map::new()));
    }
    out
}

/// String formats OpenAI strict mode supports (source: OpenAI structured outputs guide,
/// "Supported schemas").
const OPENAI_STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// The schema as sent to OpenAI with `strict: true`.
///
/// Every object gets `additionalProperties: false` and lists every property in
/// `required` (an `Option` field stays nullable, so the model sends `null` for "none"; a
/// field that is optional through `#[serde(default)]` becomes mandatory, which the
/// canonical schema accepts); `oneOf` becomes `anyOf`; a one-element `allOf` is merged;
/// the siblings of a `$ref`, `default`, and `format`s strict mode does not know are
/// dropped. Rules: `docs/providers.md`, "Tool schemas per provider".
///
/// What strict mode cannot express is left as it is (a map's `additionalProperties`
/// schema, `patternProperties`, `prefixItems`, the `true` schema of a
/// `serde_json::Value`): check the result with
/// [`openai_strict_violations`](crate::schema::openai_strict_violations) and send the
/// tool with `strict: false` when it reports anything.
pub fn for_openai_strict(schema: &Value) -> Value {
    let mut out = for_openai(schema);
    walk::visit_mut(&mut out, &mut strict_node);
    out
}

fn strict_node(node: &mut Map<String, Value>) {
    if node.contains_key("$ref") {
        node.retain(|k, _| k == "$ref");
        return;
    }
    merge_single_all_of(node);
    if !node.contains_key("anyOf")
        && let Some(one_of) = node.remove("oneOf")
    {
        node.insert("anyOf".to_owned(), one_of);
    }
    node.remove("default");
    let keep_format = node
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| OPENAI_STRICT_FORMATS.contains(&f));
    if !keep_format {
        node.remove("format");
    }
    if walk::is_object_schema(node) {
        let open = matches!(
            node.get("additionalProperties"),
            None | Some(Value::Bool(true))
        );
        if open {
            node.insert("additionalProperties".to_owned(), Value::Bool(false));
        }
        let properties = node
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        let names: Vec<Value> = properties
            .as_object()
            .map(|p| p.keys().map(|k| Value::String(k.clone())).collect())
            .unwrap_or_default();
        node.insert("required".to_owned(), Value::Array(names));
    }
}

/// `{"allOf": [X], ...rest}` to `X` merged under `rest` (rest wins on conflicts).
fn merge_single_all_of(node: &mut Map<String, Value>) {
    let single = matches!(node.get("allOf"), Some(Value::Array(a)) if a.len() == 1);
    if !single {
        return;
    }
    if let Some(Value::Array(mut parts)) = node.remove("allOf")
        && let Some(Value::Object(inner)) = parts.pop()
    {
        for (k, v) in inner {
            node.entry(k).or_insert(v);
        }
    }
}

/// Keywords of the OpenAPI 3.0 subset Gemini accepts (source: Gemini API reference,
/// `Schema`).
pub(crate) const GEMINI_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// The `format`s Gemini accepts, by type (source: Gemini API reference, `Schema.format`).
fn gemini_format_ok(kind: Option<&str>, format: &str) -> bool {
    match kind {
        Some("string") => matches!(format, "enum" | "date-time"),
        Some("integer") => matches!(format, "int32" | "int64"),
        Some("number") => matches!(format, "float" | "double"),
        _ => false,
    }
}

/// The schema in the OpenAPI 3.0 subset Gemini accepts.
///
/// Every `$ref` is inlined (a recursive type is cut at its second occurrence, which
/// becomes `{"type": "object"}`); a type array `[T, "null"]` and an `anyOf` branch
/// `{type: null}` become `nullable: true`; `oneOf` becomes `anyOf`; `const` becomes a
/// one-value `enum`; keywords outside Gemini's subset (`$schema`, `$defs`,
/// `additionalProperties`, `patternProperties`, `prefixItems`, exclusive bounds, ...) and
/// unsupported `format`s are dropped; a `true` schema becomes `{}`. Rules:
/// `docs/providers.md`, "Tool schemas per provider".
pub fn for_gemini(schema: &Value) -> Value {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = inline_refs(schema, schema, &defs, &mut Vec::new());
    gemini_node(&mut out);
    out
}

/// Replaces every `$ref` by the schema it names; a name already being inlined (a cycle)
/// becomes `{"type": "object"}`.
fn inline_refs(
    node: &Value,
    root: &Value,
    defs: &Map<String, Value>,
    stack: &mut Vec<String>,
) -> Value {
    let Value::Object(map) = node else {
        return node.clone();
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        let target = if reference == "#" {
            Some(root)
        } else {
            reference
                .strip_prefix("#/$defs/")
                .and_then(|name| defs.get(name))
        };
        let mut resolved = if stack.iter().any(|r| r == reference) || target.is_none() {
            json!({"type": "object"})
        } else {
            stack.push(reference.to_owned());
            let inlined = target.map_or(Value::Null, |t| inline_refs(t, root, defs, stack));
            stack.pop();
            inlined
        };
        if let Value::Object(resolved_map) = &mut resolved {
            resolved_map.remove("$defs");
            for (k, v) in map {
                if k != "$ref" {
                    resolved_map.insert(k.clone(), inline_refs(v, root, defs, stack));
                }
            }
        }
        return resolved;
    }
    let mut out = map.clone();
    out.remove("$defs");
    walk::children_mut(&mut out, |child| {
        *child = inline_refs(child, root, defs, stack);
    });
    Value::Object(out)
}

fn gemini_node(node: &mut Value) {
    if let Value::Bool(_) = node {
        *node = Value::Object(Map::new());
        return;
    }
    let Value::Object(map) = node else {
        return;
    };
    if let Some(one_of) = map.remove("oneOf") {
        map.entry("anyOf").or_insert(one_of);
    }
    merge_single_all_of(map);
    if let Some(value) = map.remove("const") {
        map.entry("enum")
            .or_insert_with(|| Value::Array(vec![value]));
    }
    split_nullable_type(map);
    if lift_null_branch(map) {
        // The lifted branch may itself need these steps.
        gemini_node(node);
        return;
    }
    let kind = map.get("type").and_then(Value::as_str).map(str::to_owned);
    let format_ok = map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| gemini_format_ok(kind.as_deref(), f));
    if !format_ok {
        map.remove("format");
    }
    map.retain(|k, _| GEMINI_KEYWORDS.contains(&k.as_str()));
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.values_mut().for_each(gemini_node);
    }
    if let Some(items) = map.get_mut("items") {
        gemini_node(items);
    }
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        branches.iter_mut().for_each(gemini_node);
    }
}

/// `type: ["string", "null"]` to `type: "string", nullable: true`; several non-null
/// types become an `anyOf` of one type each.
fn split_nullable_type(map: &mut Map<String, Value>) {
    let Some(Value::Array(types)) = map.get("type") else {
        return;
    };
    let nullable = types.iter().any(|t| t == "null");
    let rest: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
    map.remove("type");
    if nullable {
        map.insert("nullable".to_owned(), Value::Bool(true));
    }
    match rest.len() {
        0 => {}
        1 => {
            if let Some(t) = rest.into_iter().next() {
                map.insert("type".to_owned(), t);
            }
        }
        _ => {
            let branches = rest.into_iter().map(|t| json!({"type": t})).collect();
            map.insert("anyOf".to_owned(), Value::Array(branches));
        }
    }
}

/// `anyOf: [X, {type: null}]` to `X` with `nullable: true` (the outer description
/// wins). Whether anything changed.
fn lift_null_branch(map: &mut Map<String, Value>) -> bool {
    let Some(Value::Array(branches)) = map.get_mut("anyOf") else {
        return false;
    };
    let before = branches.len();
    branches.retain(|b| b.get("type").and_then(Value::as_str) != Some("null"));
    if branches.len() == before {
        return false;
    }
    map.insert("nullable".to_owned(), Value::Bool(true));
    let single = matches!(map.get("anyOf"), Some(Value::Array(b)) if b.len() == 1);
    if single
        && let Some(Value::Array(mut rest)) = map.remove("anyOf")
        && let Some(Value::Object(inner)) = rest.pop()
    {
        for (k, v) in inner {
            map.entry(k).or_insert(v);
        }
    }
    true
}
