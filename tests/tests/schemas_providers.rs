//! Snapshots of the generated schemas for representative types, and a check of each
//! provider's transform against that provider's rules (`docs/providers.md`, "Tool schemas
//! per provider"; cases C21, C22, C23, C33 of `docs/cases.md`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::{BTreeMap, HashMap};

use agent_core::__private::schemars::JsonSchema;
use agent_core::__private::serde::Deserialize;
use agent_core::schema::{
    anthropic_violations, for_anthropic, for_gemini, for_openai, for_openai_strict,
    gemini_violations, openai_strict_violations, openai_violations, parameters_for,
};
use agent_core::testing::example_for_schema;
use agent_core::{AgentOutput, agent_output, agent_type, schema::SchemaValidator};
use serde_json::{Value, json};

/// One axis of a chart.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(crate = "agent_core::__private::serde")]
#[schemars(crate = "agent_core::__private::schemars")]
pub struct Axis {
    /// The axis label.
    pub label: String,
    pub min: f64,
    pub max: f64,
}

/// C22: one nested type used twice.
#[agent_output]
#[derive(Debug)]
pub struct Chart {
    /// The horizontal axis.
    pub x_axis: Axis,
    pub y_axis: Axis,
}

/// A postal address.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(crate = "agent_core::__private::serde")]
#[schemars(crate = "agent_core::__private::schemars")]
pub struct Address {
    pub street: String,
    pub city: String,
}

/// C21: optional primitive and optional nested fields.
#[agent_output]
#[derive(Debug)]
pub struct Contact {
    pub name: String,
    /// What the customer likes to be called.
    pub nickname: Option<String>,
    /// Where to send the parcel, if known.
    pub address: Option<Address>,
}

/// How urgent a ticket is.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(crate = "agent_core::__private::serde", rename_all = "snake_case")]
#[schemars(crate = "agent_core::__private::schemars")]
pub enum Priority {
    /// Can wait for the next business day.
    Low,
    /// A customer is blocked right now.
    High,
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(crate = "agent_core::__private::serde")]
#[schemars(crate = "agent_core::__private::schemars")]
pub enum Status {
    Open,
    Closed,
}

/// C23: unit enums, documented and not, required and optional.
#[agent_output]
#[derive(Debug)]
pub struct Ticket {
    pub priority: Priority,
    pub status: Status,
    /// The priority the customer asked for, if any.
    pub requested: Option<Priority>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(crate = "agent_core::__private::serde")]
#[schemars(crate = "agent_core::__private::schemars")]
pub struct Item {
    pub sku: String,
    #[schemars(range(min = 1))]
    pub quantity: u32,
}

/// Vectors and maps.
#[agent_output]
#[derive(Debug)]
pub struct Basket {
    #[schemars(length(min = 1, max = 20))]
    pub items: Vec<Item>,
    pub tags: Vec<String>,
    pub counts: HashMap<String, u32>,
    pub prices: BTreeMap<String, f64>,
}

/// A truly recursive type.
#[agent_output]
#[derive(Debug)]
pub struct Folder {
    pub name: String,
    pub children: Vec<Folder>,
}

/// The canonical schema and its four provider forms, in one snapshot per type.
fn all_forms(canonical: &Value) -> Value {
    json!({
        "canonical": canonical,
        "anthropic": for_anthropic(canonical),
        "openai": for_openai(canonical),
        "openai_strict": for_openai_strict(canonical),
        "gemini": for_gemini(canonical),
    })
}

/// Every provider's rules hold for its transform; `strict` lists what strict mode
/// cannot express for this type (empty for most).
fn assert_provider_rules(canonical: &Value, strict: &[&str]) {
    assert_eq!(
        anthropic_violations(&for_anthropic(canonical)),
        Vec::<String>::new()
    );
    assert_eq!(
        openai_violations(&for_openai(canonical)),
        Vec::<String>::new()
    );
    assert_eq!(
        gemini_violations(&for_gemini(canonical)),
        Vec::<String>::new()
    );
    assert_eq!(
        openai_strict_violations(&for_openai_strict(canonical)),
        strict
    );
}

/// Transforms are sound: a value built from a provider's form validates against the
/// canonical schema (which the runner checks) and deserializes.
fn assert_round_trip<T: AgentOutput + std::fmt::Debug>(canonical: &Value) {
    let validator = SchemaValidator::new(canonical).unwrap();
    for (provider, form) in [
        ("anthropic", for_anthropic(canonical)),
        ("openai", for_openai(canonical)),
        ("openai_strict", for_openai_strict(canonical)),
        ("gemini", for_gemini(canonical)),
    ] {
        let value = example_for_schema(&form);
        validator
            .validate(&value)
            .unwrap_or_else(|e| panic!("{provider}: {value} breaks the canonical schema: {e}"));
        T::from_arguments(&value).unwrap_or_else(|e| panic!("{provider}: {value}: {e}"));
    }
}

fn canonical<T: AgentOutput + JsonSchema>() -> Value {
    let schema = parameters_for::<T>();
    assert_eq!(T::output_tool().unwrap().parameters, schema);
    assert!(schema.get("$schema").is_none());
    assert_eq!(schema["type"], "object");
    schema
}

#[test]
fn c22_a_type_used_twice_is_inlined_not_referenced() {
    let schema = canonical::<Chart>();
    insta::assert_json_snapshot!("chart", all_forms(&schema));
    let text = schema.to_string();
    assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
    assert_eq!(
        schema["properties"]["x_axis"]["description"],
        "The horizontal axis."
    );
    assert_eq!(
        schema["properties"]["y_axis"]["description"],
        "One axis of a chart."
    );
    for axis in ["x_axis", "y_axis"] {
        assert_eq!(
            schema["properties"][axis]["required"],
            json!(["label", "min", "max"])
        );
    }
    assert_provider_rules(&schema, &[]);
    assert_round_trip::<Chart>(&schema);
}

#[test]
fn c21_option_fields_are_optional_and_nullable_for_every_provider() {
    let schema = canonical::<Contact>();
    insta::assert_json_snapshot!("contact", all_forms(&schema));
    assert_eq!(schema["required"], json!(["name"]));
    assert_eq!(
        schema["properties"]["nickname"]["type"],
        json!(["string", "null"])
    );
    let validator = SchemaValidator::new(&schema).unwrap();
    validator
        .validate(&json!({"name": "Ada", "address": null, "nickname": null}))
        .unwrap();
    // Strict mode: every key required, None spelled as null.
    let strict = for_openai_strict(&schema);
    assert_eq!(strict["required"], json!(["name", "nickname", "address"]));
    assert_eq!(
        strict["properties"]["address"]["additionalProperties"],
        false
    );
    // Gemini: no type arrays; nullable instead.
    let gemini = for_gemini(&schema);
    assert_eq!(
        gemini["properties"]["nickname"],
        json!({
            "description": "What the customer likes to be called.",
            "type": "string",
            "nullable": true
        })
    );
    assert_eq!(gemini["properties"]["address"]["nullable"], true);
    assert_eq!(gemini["properties"]["address"]["type"], "object");
    // null and a missing key both deserialize to None.
    let with_nulls =
        Contact::from_arguments(&json!({"name": "Ada", "nickname": null, "address": null}))
            .unwrap();
    let missing = Contact::from_arguments(&json!({"name": "Ada"})).unwrap();
    assert!(with_nulls.nickname.is_none() && with_nulls.address.is_none());
    assert!(missing.nickname.is_none() && missing.address.is_none());
    let full = Contact::from_arguments(&json!({
        "name": "Ada", "nickname": "A", "address": {"street": "1 Main St", "city": "Oslo"}
    }))
    .unwrap();
    assert_eq!(full.address.unwrap().city, "Oslo");
    assert_provider_rules(&schema, &[]);
    assert_round_trip::<Contact>(&schema);
}

#[test]
fn c23_documented_enum_variants_reach_the_model_and_suit_strict_mode() {
    let schema = canonical::<Ticket>();
    insta::assert_json_snapshot!("ticket", all_forms(&schema));
    let priority = &schema["properties"]["priority"];
    assert_eq!(priority["type"], "string");
    assert_eq!(priority["enum"], json!(["low", "high"]));
    assert_eq!(
        priority["description"],
        "How urgent a ticket is.\n- \"low\": Can wait for the next business day.\n- \"high\": A customer is blocked right now."
    );
    assert!(priority.get("oneOf").is_none());
    assert_eq!(
        schema["properties"]["status"]["enum"],
        json!(["Open", "Closed"])
    );
    let strict = for_openai_strict(&schema);
    assert!(!strict.to_string().contains("oneOf"));
    assert_eq!(
        strict["properties"]["priority"]["description"],
        priority["description"]
    );
    let ticket =
        Ticket::from_arguments(&json!({"priority": "high", "status": "Open", "requested": null}))
            .unwrap();
    assert_eq!(ticket.priority, Priority::High);
    assert_provider_rules(&schema, &[]);
    assert_round_trip::<Ticket>(&schema);
}

#[test]
fn vectors_and_maps_keep_their_constraints_and_maps_are_not_strict() {
    let schema = canonical::<Basket>();
    insta::assert_json_snapshot!("basket", all_forms(&schema));
    assert_eq!(schema["properties"]["items"]["maxItems"], 20);
    assert_eq!(
        schema["properties"]["items"]["items"]["properties"]["quantity"]["minimum"],
        1
    );
    // A map's value schema lives in `additionalProperties`, which strict mode forbids:
    // the adapter must send this tool with strict: false.
    assert_provider_rules(
        &schema,
        &[
            "/properties/counts: an object needs `additionalProperties: false`",
            "/properties/prices: an object needs `additionalProperties: false`",
        ],
    );
    assert_round_trip::<Basket>(&schema);
}

#[test]
fn a_recursive_type_keeps_its_reference_and_gemini_cuts_the_cycle() {
    let schema = canonical::<Folder>();
    insta::assert_json_snapshot!("folder", all_forms(&schema));
    assert_eq!(
        schema["properties"]["children"]["items"],
        json!({"$ref": "#"})
    );
    let gemini = for_gemini(&schema);
    assert!(!gemini.to_string().contains("$ref"), "{gemini}");
    assert_provider_rules(&schema, &[]);
    let folder = Folder::from_arguments(&json!({
        "name": "root", "children": [{"name": "a", "children": []}]
    }))
    .unwrap();
    assert_eq!(folder.children[0].name, "a");
}

/// What to do with a ticket.
#[agent_type]
#[derive(Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Reply to the customer.
    Reply { text: String },
    /// Close the ticket.
    Close,
}

/// A robot command.
#[agent_type]
#[derive(Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// Move by `x` steps.
    Move { x: i32 },
    /// Stop where you are.
    Stop,
}

/// C33: documented tagged enums (internally and externally), required and optional.
#[agent_output]
#[derive(Debug)]
pub struct Plan {
    /// The next action.
    pub next: Action,
    /// What to do if the next action fails.
    pub fallback: Option<Action>,
    /// The first command.
    pub command: Command,
    pub then: Option<Command>,
}

/// C33: `Option`s of unit enums, documented variants and not.
#[agent_output]
#[derive(Debug)]
pub struct Filter {
    /// Only tickets with this status.
    pub status: Option<Status>,
    /// Only tickets of this priority.
    pub priority: Option<Priority>,
}

/// A measurement, by content.
#[agent_type]
#[derive(Debug, PartialEq)]
#[serde(untagged)]
pub enum Reading {
    Number(i64),
    Text(String),
}

/// Something that happened.
#[agent_type]
#[derive(Debug, PartialEq)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Event {
    /// A note was added.
    Noted(String),
    /// The ticket moved.
    Moved { to: String },
}

/// C33, the same kind: untagged and adjacently tagged enums under `Option`.
#[agent_output]
#[derive(Debug)]
pub struct Log {
    /// The last reading, if any.
    pub reading: Option<Reading>,
    pub event: Option<Event>,
}

/// No `anyOf` node with sibling keys and no `null` in an `enum`, anywhere in the
/// Gemini form.
fn assert_no_gemini_sibling_shapes(gemini: &Value) {
    fn walk(node: &Value, at: &str) {
        match node {
            Value::Object(map) => {
                if map.contains_key("anyOf") {
                    assert_eq!(map.len(), 1, "{at}: `anyOf` with siblings: {node}");
                }
                if let Some(Value::Array(values)) = map.get("enum") {
                    assert!(!values.iter().any(Value::is_null), "{at}: null in enum");
                }
                for (k, v) in map {
                    walk(v, &format!("{at}/{k}"));
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{at}/{i}"));
                }
            }
            _ => {}
        }
    }
    walk(gemini, "");
}

#[test]
fn c33_a_documented_internally_tagged_enum_and_its_option_reach_gemini_without_any_of_siblings() {
    let schema = canonical::<Plan>();
    // What schemars gives: the field's doc beside the variants' `oneOf`, and for the
    // `Option` the same inside an `anyOf` with a null branch, beside the field's doc.
    assert_eq!(
        schema["properties"]["next"]["description"],
        "The next action."
    );
    assert!(schema["properties"]["next"]["oneOf"].is_array());
    assert!(schema["properties"]["fallback"]["anyOf"].is_array());
    let gemini = for_gemini(&schema);
    let reply = |description: &str| {
        json!({
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": ["reply"]},
                "text": {"type": "string"}
            },
            "required": ["kind", "text"],
            "description": description
        })
    };
    let close = |description: &str| {
        json!({
            "type": "object",
            "properties": {"kind": {"type": "string", "enum": ["close"]}},
            "required": ["kind"],
            "description": description
        })
    };
    assert_eq!(
        gemini["properties"]["next"],
        json!({"anyOf": [
            reply("The next action.\nReply to the customer."),
            close("The next action.\nClose the ticket.")
        ]})
    );
    let mut fallback_reply = reply("What to do if the next action fails.\nReply to the customer.");
    fallback_reply["nullable"] = json!(true);
    let mut fallback_close = close("What to do if the next action fails.\nClose the ticket.");
    fallback_close["nullable"] = json!(true);
    assert_eq!(
        gemini["properties"]["fallback"],
        json!({"anyOf": [fallback_reply, fallback_close]})
    );
    assert_no_gemini_sibling_shapes(&gemini);
    assert_provider_rules(&schema, &[]);
    assert_round_trip::<Plan>(&schema);
    let plan = Plan::from_arguments(&json!({
        "next": {"kind": "reply", "text": "On it."},
        "fallback": null,
        "command": "stop",
        "then": {"move": {"x": 2}}
    }))
    .unwrap();
    assert_eq!(
        plan.next,
        Action::Reply {
            text: "On it.".into()
        }
    );
    assert_eq!(plan.then, Some(Command::Move { x: 2 }));
}

#[test]
fn c33_a_documented_externally_tagged_enum_and_its_option_reach_gemini_without_any_of_siblings() {
    let schema = canonical::<Plan>();
    let gemini = for_gemini(&schema);
    let moves = json!({
        "type": "object",
        "properties": {
            "move": {
                "type": "object",
                "properties": {"x": {"type": "integer", "format": "int32"}},
                "required": ["x"]
            }
        },
        "required": ["move"]
    });
    let with = |mut branch: Value, description: &str, nullable: bool| {
        branch["description"] = json!(description);
        if nullable {
            branch["nullable"] = json!(true);
        }
        branch
    };
    let stop = json!({"type": "string", "enum": ["stop"]});
    assert_eq!(
        gemini["properties"]["command"],
        json!({"anyOf": [
            with(moves.clone(), "The first command.\nMove by `x` steps.", false),
            with(stop.clone(), "The first command.\nStop where you are.", false)
        ]})
    );
    // No field doc: the type's doc leads each variant's.
    assert_eq!(
        gemini["properties"]["then"],
        json!({"anyOf": [
            with(moves, "A robot command.\nMove by `x` steps.", true),
            with(stop, "A robot command.\nStop where you are.", true)
        ]})
    );
    assert_no_gemini_sibling_shapes(&gemini);
}

#[test]
fn c33_an_option_of_a_unit_enum_is_nullable_without_null_in_the_enum() {
    let schema = canonical::<Filter>();
    // schemars puts the null into the enum for a plain unit enum.
    assert_eq!(
        schema["properties"]["status"]["enum"],
        json!(["Open", "Closed", null])
    );
    let gemini = for_gemini(&schema);
    assert_eq!(
        gemini["properties"]["status"],
        json!({
            "description": "Only tickets with this status.",
            "type": "string",
            "enum": ["Open", "Closed"],
            "nullable": true
        })
    );
    assert_eq!(
        gemini["properties"]["priority"],
        json!({
            "description": "Only tickets of this priority.",
            "type": "string",
            "enum": ["low", "high"],
            "nullable": true
        })
    );
    assert_no_gemini_sibling_shapes(&gemini);
    assert_provider_rules(&schema, &[]);
    assert_round_trip::<Filter>(&schema);
    let filter = Filter::from_arguments(&json!({"status": null, "priority": "low"})).unwrap();
    assert!(filter.status.is_none());
    assert_eq!(filter.priority, Some(Priority::Low));
}

#[test]
fn c33_untagged_and_adjacently_tagged_options_reach_gemini_without_any_of_siblings() {
    let schema = canonical::<Log>();
    let gemini = for_gemini(&schema);
    assert_eq!(
        gemini["properties"]["reading"],
        json!({"anyOf": [
            {
                "type": "integer",
                "format": "int64",
                "nullable": true,
                "description": "The last reading, if any."
            },
            {"type": "string", "nullable": true, "description": "The last reading, if any."}
        ]})
    );
    assert_eq!(
        gemini["properties"]["event"],
        json!({"anyOf": [
            {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["noted"]},
                    "data": {"type": "string"}
                },
                "required": ["type", "data"],
                "description": "Something that happened.\nA note was added.",
                "nullable": true
            },
            {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["moved"]},
                    "data": {
                        "type": "object",
                        "properties": {"to": {"type": "string"}},
                        "required": ["to"]
                    }
                },
                "required": ["type", "data"],
                "description": "Something that happened.\nThe ticket moved.",
                "nullable": true
            }
        ]})
    );
    assert_no_gemini_sibling_shapes(&gemini);
    assert_provider_rules(&schema, &[]);
    assert_round_trip::<Log>(&schema);
}
