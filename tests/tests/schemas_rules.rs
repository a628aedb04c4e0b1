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

#[test]
fn c33_gemini_flags_an_any_of_with_sibling_keys_and_null_in_an_enum() {
    let schema = json!({
        "type": "object",
        "properties": {
            "next": {
                "description": "The next action.",
                "anyOf": [{"type": "string", "enum": ["stop"]}, {"type": "integer"}]
            },
            "fallback": {
                "nullable": true,
                "description": "A fallback.",
                "anyOf": [{"type": "string"}, {"type": "integer"}]
            },
            "status": {"type": "string", "enum": ["open", "closed", null], "nullable": true},
            "list": {
                "type": "array",
                "items": {"anyOf": [{"type": "string"}], "title": "Item"}
            }
        }
    });
    assert_eq!(
        gemini_violations(&schema),
        [
            "/properties/next: `anyOf` may not have sibling keys (`description`): move them into each branch",
            "/properties/fallback: `anyOf` may not have sibling keys (`nullable`, `description`): move them into each branch",
            "/properties/status: `enum` may not contain null (use `nullable: true`)",
            "/properties/list/items: `anyOf` may not have sibling keys (`title`): move them into each branch",
        ]
    );
    let fixed = for_gemini(&schema);
    assert_eq!(gemini_violations(&fixed), Vec::<String>::new());
    assert_eq!(
        fixed["properties"]["fallback"],
        json!({"anyOf": [
            {"type": "string", "nullable": true, "description": "A fallback."},
            {"type": "integer", "nullable": true, "description": "A fallback."}
        ]})
    );
    assert_eq!(
        fixed["properties"]["status"],
        json!({"type": "string", "enum": ["open", "closed"], "nullable": true})
    );
    // A single branch is lifted into its node.
    assert_eq!(
        fixed["properties"]["list"]["items"],
        json!({"type": "string", "title": "Item"})
    );
}

#[test]
fn c33_gemini_moves_every_kind_of_any_of_sibling_into_the_branches() {
    let schema = json!({
        "type": "object",
        "properties": {
            "shape": {
                "title": "Shape",
                "description": "A shape.",
                "default": {"kind": "dot"},
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "oneOf": [
                    {
                        "title": "Circle",
                        "description": "A circle.",
                        "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
                        "required": ["kind", "r"]
                    },
                    {"properties": {"kind": {"const": "dot"}}, "required": ["kind"]},
                    true
                ]
            },
            "nothing": {"anyOf": [{"const": null}, {"type": "null"}], "description": "Always null."}
        }
    });
    let fixed = for_gemini(&schema);
    assert_eq!(gemini_violations(&fixed), Vec::<String>::new());
    assert_eq!(
        fixed["properties"]["shape"],
        json!({"anyOf": [
            {
                "title": "Circle",
                "description": "A shape.\nA circle.",
                "type": "object",
                "properties": {"kind": {"enum": ["circle"]}, "r": {"type": "number"}, "id": {"type": "string"}},
                "required": ["id", "kind", "r"]
            },
            {
                "title": "Shape",
                "description": "A shape.",
                "type": "object",
                "properties": {"kind": {"enum": ["dot"]}, "id": {"type": "string"}},
                "required": ["id", "kind"]
            },
            {
                "title": "Shape",
                "description": "A shape.",
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"]
            }
        ]})
    );
    // `const: null` is an enum of only null: nullable, no enum left.
    assert_eq!(
        fixed["properties"]["nothing"],
        json!({"nullable": true, "description": "Always null."})
    );
}

#[test]
fn c33_gemini_keeps_an_object_root_whose_any_of_has_siblings_and_reports_it() {
    // A struct with a flattened enum: the root's `oneOf` cannot move without the root
    // ceasing to be an object, so it stays and the checker says so.
    let schema = json!({
        "type": "object",
        "description": "Root.",
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
        "oneOf": [
            {"properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": ["integer", "null"]}}}
        ]
    });
    let fixed = for_gemini(&schema);
    assert_eq!(fixed["type"], "object");
    assert_eq!(
        fixed["anyOf"][1],
        json!({"properties": {"b": {"type": "integer", "nullable": true}}})
    );
    assert_eq!(
        gemini_violations(&fixed),
        [
            "/: `anyOf` is not allowed at the root",
            "/: `anyOf` may not have sibling keys (`type`, `description`, `properties`, `required`): move them into each branch",
        ]
    );
}
