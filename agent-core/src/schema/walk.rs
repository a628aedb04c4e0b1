//! Walking the subschemas of a JSON Schema (draft 2020-12 keywords).

use serde_json::{Map, Value};

/// Keywords whose value is one subschema.
const SINGLE: &[&str] = &[
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "additionalItems",
];

/// Keywords whose value is an object of named subschemas.
const MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Keywords whose value is an array of subschemas.
const ARRAYS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];

/// Calls `f` with the JSON pointer segment (`/properties/name`) and the value of every
/// direct subschema of `schema`.
pub(crate) fn children<'a>(schema: &'a Map<String, Value>, mut f: impl FnMut(String, &'a Value)) {
    for (key, value) in schema {
        let key_str = key.as_str();
        if SINGLE.contains(&key_str) {
            f(format!("/{}", escape(key)), value);
        } else if MAPS.contains(&key_str) {
            if let Value::Object(map) = value {
                for (name, sub) in map {
                    f(format!("/{}/{}", escape(key), escape(name)), sub);
                }
            }
        } else if ARRAYS.contains(&key_str)
            && let Value::Array(items) = value
        {
            for (i, sub) in items.iter().enumerate() {
                f(format!("/{}/{i}", escape(key)), sub);
            }
        }
    }
}

/// Calls `f` with every direct subschema of `schema`, mutably.
pub(crate) fn children_mut(schema: &mut Map<String, Value>, mut f: impl FnMut(&mut Value)) {
    for (key, value) in schema.iter_mut() {
        let key = key.as_str();
        if SINGLE.contains(&key) {
            f(value);
        } else if MAPS.contains(&key) {
            if let Value::Object(map) = value {
                map.values_mut().for_each(&mut f);
            }
        } else if ARRAYS.contains(&key)
            && let Value::Array(items) = value
        {
            items.iter_mut().for_each(&mut f);
        }
    }
}

/// Applies `f` to every object schema, the root first, then (after `f` ran) its
/// subschemas, recursively.
pub(crate) fn visit_mut(schema: &mut Value, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    if let Value::Object(map) = schema {
        f(map);
        children_mut(map, |child| visit_mut(child, f));
    }
}

/// Calls `f(pointer, schema)` for `schema` and every subschema below it, boolean schemas
/// included. The root's pointer is `""`.
pub(crate) fn visit(schema: &Value, pointer: &str, f: &mut dyn FnMut(&str, &Value)) {
    f(pointer, schema);
    if let Value::Object(map) = schema {
        children(map, |segment, child| {
            visit(child, &format!("{pointer}{segment}"), f);
        });
    }
}

/// Whether this schema describes an object (by `type` or by `properties`).
pub(crate) fn is_object_schema(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => schema.contains_key("properties"),
    }
}

/// A JSON pointer for display: the root is `/`.
pub(crate) fn display_pointer(pointer: &str) -> &str {
    if pointer.is_empty() { "/" } else { pointer }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}
