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

/// Keywords OpenAI strict mode rejects (source: OpenAI structured outputs guide,
/// "Supported schemas", <https://platform.openai.com/docs/guides/structured-outputs>;
/// the same list as PydanticAI's OpenAI profile). Kept as a note in the description.
const OPENAI_STRICT_INCOMPATIBLE: &[&str] = &[
    "minLength",
    "maxLength",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
];

/// The schema as sent to OpenAI with `strict: true`.
///
/// Every object gets `additionalProperties: false` and lists every property in
/// `required` (an `Option` field stays nullable, so the model sends `null` for "none"; a
/// field that is optional through `#[serde(default)]` becomes mandatory, which the
/// canonical schema accepts); `oneOf` becomes `anyOf`; a one-element `allOf` is merged;
/// the siblings of a `$ref`, `default`, and `format`s strict mode does not know are
/// dropped; keywords strict mode rejects (`minLength`, `maxLength`, `uniqueItems`, ...)
/// move into the description as a note (`(maxLength: 400)`), so the model still sees
/// them and the runner's validation still enforces them. Rules: `docs/providers.md`,
/// "Strict mode".
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
    move_to_description(node, |key, _| OPENAI_STRICT_INCOMPATIBLE.contains(&key));
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

/// Removes the keywords `moved` selects and appends them to the node's description as
/// a note: `"Severity. (minimum: 1, maximum: 4)"`. Only schema nodes (maps with a
/// keyword, not property maps) are touched by the callers.
fn move_to_description(node: &mut Map<String, Value>, moved: impl Fn(&str, &Value) -> bool) {
    let keys: Vec<String> = node
        .iter()
        .filter(|(k, v)| moved(k, v))
        .map(|(k, _)| k.clone())
        .collect();
    if keys.is_empty() {
        return;
    }
    let notes: Vec<String> = keys
        .iter()
        .filter_map(|k| node.remove(k).map(|v| format!("{k}: {v}")))
        .collect();
    let note = format!("({})", notes.join(", "));
    let description = match node.get("description").and_then(Value::as_str) {
        Some(own) if !own.trim().is_empty() => format!("{own} {note}"),
        _ => note,
    };
    node.insert("description".to_owned(), Value::String(description));
}

/// String formats Anthropic structured outputs support (source: Anthropic structured
/// outputs guide, "JSON Schema limitations",
/// <https://platform.claude.com/docs/en/build-with-claude/structured-outputs>).
const ANTHROPIC_OUTPUT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

/// The schema as sent in Anthropic's `output_config.format` (native structured output).
///
/// Anthropic's structured outputs need `additionalProperties: false` on every object
/// and do not take numeric, string or array constraints (`minimum`, `maximum`,
/// `multipleOf`, `minLength`, `maxLength`, `pattern`, `maxItems`, `minItems` above 1,
/// `uniqueItems`) nor formats outside its list; like the official SDKs, this moves them
/// into the description as a note and leaves their enforcement to the client (the
/// runner validates every answer against the canonical schema). `oneOf` becomes
/// `anyOf`; `default` is dropped. Recursive schemas are not supported by Anthropic at
/// all. Source: <https://platform.claude.com/docs/en/build-with-claude/structured-outputs>.
pub fn for_anthropic_output(schema: &Value) -> Value {
    let mut out = for_anthropic(schema);
    walk::visit_mut(&mut out, &mut anthropic_output_node);
    out
}

fn anthropic_output_node(node: &mut Map<String, Value>) {
    if !node.contains_key("anyOf")
        && let Some(one_of) = node.remove("oneOf")
    {
        node.insert("anyOf".to_owned(), one_of);
    }
    node.remove("default");
    let format_ok = node
        .get("format")
        .and_then(Value::as_str)
        .is_none_or(|f| ANTHROPIC_OUTPUT_FORMATS.contains(&f));
    move_to_description(node, |key, value| match key {
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf"
        | "minLength" | "maxLength" | "pattern" | "maxItems" | "uniqueItems" => true,
        "minItems" => value.as_u64().is_some_and(|n| n > 1),
        "format" => !format_ok,
        _ => false,
    });
    if walk::is_object_schema(node)
        && matches!(
            node.get("additionalProperties"),
            None | Some(Value::Bool(true))
        )
    {
        node.insert("additionalProperties".to_owned(), Value::Bool(false));
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
/// becomes `{"type": "object"}`); a type array `[T, "null"]`, an `anyOf` branch
/// `{type: null}` and a `null` in an `enum` become `nullable: true`; `oneOf` becomes
/// `anyOf`; `const` becomes a one-value `enum`; an `anyOf` keeps no sibling keys (its
/// `description`, `nullable` and constraints move into every branch, and a single branch
/// replaces the node); keywords outside Gemini's subset (`$schema`, `$defs`,
/// `additionalProperties`, `patternProperties`, `prefixItems`, exclusive bounds, ...) and
/// unsupported `format`s are dropped; a `true` schema becomes `{}`. Rules:
/// `docs/providers.md`, "Google Gemini".
///
/// For a documented tagged enum field `next: Action` (schemars: a `oneOf` of variants
/// with the field's doc beside it), each variant's description becomes
/// `"<field doc>\n<variant doc>"`; for `Option<Action>` each variant is also
/// `nullable`.
pub fn for_gemini(schema: &Value) -> Value {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = inline_refs(schema, schema, &defs, &mut Vec::new());
    gemini_root(&mut out);
    out
}

/// The root keeps its siblings of an `anyOf` (a struct with a flattened enum): moving
/// `type: object` into the branches would leave a root that is not an object, which no
/// provider takes; [`gemini_violations`](crate::schema::gemini_violations) reports such a
/// root.
fn gemini_root(root: &mut Value) {
    let Value::Object(map) = root else {
        gemini_node(root);
        return;
    };
    let Some(any_of) = map.remove("anyOf").or_else(|| map.remove("oneOf")) else {
        gemini_node(root);
        return;
    };
    gemini_node(root);
    let mut branches = any_of;
    if let Value::Array(items) = &mut branches {
        items.iter_mut().for_each(gemini_node);
    }
    if let Value::Object(map) = root {
        map.insert("anyOf".to_owned(), branches);
    }
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
    lift_null_enum_value(map);
    if distribute_any_of_siblings(map) {
        // One branch was left and became the node: it needs every step.
        gemini_node(node);
        return;
    }
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

/// `enum: ["a", "b", null]` (schemars' `Option` of a unit enum) to `enum: ["a", "b"]`
/// with `nullable: true`; an `enum` of only `null` is dropped.
fn lift_null_enum_value(map: &mut Map<String, Value>) {
    let Some(Value::Array(values)) = map.get_mut("enum") else {
        return;
    };
    let before = values.len();
    values.retain(|v| !v.is_null());
    if values.len() == before {
        return;
    }
    if values.is_empty() {
        map.remove("enum");
    }
    map.insert("nullable".to_owned(), Value::Bool(true));
}

/// Gemini takes an `anyOf` only as the node's one key. Every sibling moves into each
/// branch: `description` is prefixed to the branch's own (`"<outer>\n<branch>"`),
/// `title` fills a branch without one, `nullable: true` goes on every branch,
/// `properties` and `required` are merged, any other constraint fills a branch without
/// it (the branch's own wins on a clash), and `default` and `example` are dropped, as one
/// value cannot describe every branch. A single branch then replaces the node. Whether
/// that happened (the node needs processing again).
fn distribute_any_of_siblings(map: &mut Map<String, Value>) -> bool {
    if !map.contains_key("anyOf") || map.len() == 1 {
        return false;
    }
    let Some(Value::Array(mut branches)) = map.remove("anyOf") else {
        return false;
    };
    let siblings = std::mem::take(map);
    for branch in &mut branches {
        if let Value::Bool(_) = branch {
            *branch = Value::Object(Map::new());
        }
        if let Value::Object(branch) = branch {
            merge_into_branch(branch, &siblings);
        }
    }
    if branches.len() == 1
        && let Some(Value::Object(only)) = branches.pop()
    {
        *map = only;
        return true;
    }
    if !branches.is_empty() {
        map.insert("anyOf".to_owned(), Value::Array(branches));
    }
    false
}

fn merge_into_branch(branch: &mut Map<String, Value>, siblings: &Map<String, Value>) {
    for (key, value) in siblings {
        match key.as_str() {
            "default" | "example" => {}
            "description" => {
                let merged = match (value.as_str(), branch.get("description")) {
                    (Some(outer), Some(Value::String(own))) if !own.is_empty() && own != outer => {
                        Value::String(format!("{outer}\n{own}"))
                    }
                    _ => value.clone(),
                };
                branch.insert(key.clone(), merged);
            }
            "nullable" => {
                if value == &Value::Bool(true) {
                    branch.insert(key.clone(), Value::Bool(true));
                }
            }
            "properties" => {
                if let (Value::Object(outer), Some(Value::Object(own))) =
                    (value, branch.get_mut("properties"))
                {
                    for (name, schema) in outer {
                        own.entry(name.clone()).or_insert_with(|| schema.clone());
                    }
                } else {
                    branch.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
            "required" => {
                if let (Value::Array(outer), Some(Value::Array(own))) =
                    (value, branch.get_mut("required"))
                {
                    let mut merged = outer.clone();
                    merged.extend(own.iter().filter(|n| !outer.contains(n)).cloned());
                    *own = merged;
                } else {
                    branch.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
            _ => {
                branch.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
    }
}
