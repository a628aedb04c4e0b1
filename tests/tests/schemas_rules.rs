//! The provider checkers flag what each provider rejects (`docs/providers.md`, "Tool
//! schemas per provider"), so an empty report in `schemas_providers` means something.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use agent_core::schema::{
    anthropic_violations, for_gemini, for_openai_strict, gemini_violations,
    openai_strict_violations, openai_violations,
};
use serde_json::json;

#[test]
fn anthropic_needs_an_object_root_without_a_top_level_union() {
    assert_eq!(
        anthropic_violations(&json!({"anyOf": [{"type": "string"}, {"type": "null"}]})),
        [
            "/: the root must have `type: object`",
            "/: `anyOf` is not allowed at the root"
        ]
    );
    assert_eq!(
        anthropic_violations(&json!({"type": "object", "properties": {"a": {"type": 7}}})),
        [
            "/: invalid JSON Schema: 7 is not valid under any of the schemas listed in the 'anyOf' keyword"
        ]
    );
}

#[test]
fn openai_needs_properties_on_the_root() {
    assert_eq!(
        openai_violations(&json!({"type": "object"})),
        ["/: an object schema needs `properties`"]
    );
}

#[test]
fn openai_strict_flags_every_rule() {
    let schema = json!({
        "type": "object",
        "properties": {
            "open": {"type": "object", "properties": {"x": {"type": "string"}}, "required": []},
            "pick": {"oneOf": [{"const": 1}, {"const": "a"}]},
            "any": true,
            "pair": {"type": "array", "prefixItems": [{"type": "string"}]},
            "node": {"$ref": "#/$defs/N", "description": "sibling"},
            "dflt": {"type": "integer", "default": 3}
        },
        "required": ["open", "pick", "any", "pair", "node", "dflt"],
        "additionalProperties": false,
        "$defs": {"N": {"type": "object", "properties": {}, "required": [], "additionalProperties": false}}
    });
    let report = openai_strict_violations(&schema);
    for expected in [
        "/properties/open: an object needs `additionalProperties: false`",
        "/properties/open: property `x` must be in `required` (use a nullable type for an optional one)",
        "/properties/pick: `oneOf` is not supported",
        "/properties/any: boolean schemas are not allowed",
        "/properties/pair: `prefixItems` is not supported",
        "/properties/node: `$ref` may not have sibling keys",
        "/properties/dflt: `default` is not supported",
    ] {
        assert!(
            report.iter().any(|r| r == expected),
            "{expected} not in {report:#?}"
        );
    }
    assert_eq!(report.len(), 7, "{report:#?}");
    // The transform fixes what it can; what is left is what strict mode cannot express.
    assert_eq!(
        openai_strict_violations(&for_openai_strict(&schema)),
        [
            "/properties/any: boolean schemas are not allowed",
            "/properties/pair: `prefixItems` is not supported",
        ]
    );
}

#[test]
fn openai_strict_counts_nesting_and_enum_values() {
    let mut deep =
        json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false});
    for _ in 0..10 {
        deep = json!({
            "type": "object",
            "properties": {"inner": deep},
            "required": ["inner"],
            "additionalProperties": false
        });
    }
    assert_eq!(
        openai_strict_violations(&deep),
        ["/: 11 levels of object nesting, more than 10"]
    );
    let values: Vec<String> = (0..1001).map(|i| format!("v{i}")).collect();
    let wide = json!({
        "type": "object",
        "properties": {"v": {"type": "string", "enum": values}},
        "required": ["v"],
        "additionalProperties": false
    });
    assert_eq!(
        openai_strict_violations(&wide),
        ["/: 1001 enum values, more than 1000"]
    );
}

#[test]
fn gemini_flags_keywords_outside_its_subset_and_type_arrays() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"const": "x"},
            "c": {"$ref": "#/$defs/C"}
        },
        "additionalProperties": false,
        "$defs": {"C": {"type": "string"}}
    });
    let report = gemini_violations(&schema);
    for expected in [
        "/: `$schema` is not supported",
        "/: `additionalProperties` is not supported",
        "/: `$defs` is not supported",
        "/properties/a: `type` must be one string (use `nullable` for null)",
        "/properties/b: `const` is not supported",
        "/properties/c: `$ref` is not supported",
    ] {
        assert!(
            report.iter().any(|r| r == expected),
            "{expected} not in {report:#?}"
        );
    }
    let fixed = for_gemini(&schema);
    assert_eq!(gemini_violations(&fixed), Vec::<String>::new());
    assert_eq!(
        fixed,
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "nullable": true},
                "b": {"enum": ["x"]},
                "c": {"type": "string"}
            }
        })
    );
}
