//! `#[agent_output]` and `#[tool]` derive `JsonSchema` on a copy of the struct (so that a
//! field type without a JSON form gives one error, not a cascade from schemars' derived
//! code). These tests pin that the copy changes nothing: each schema equals the one
//! schemars derives on the same struct directly, attributes, defaults and recursion
//! included, and the values still deserialize.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs,
    unreachable_pub,
    missing_debug_implementations
)]

use agent_core::__private::schemars::JsonSchema;
use agent_core::schema::parameters_for;
use agent_core::{AgentOutput, Tool, agent_type, tool};
use serde_json::json;

/// Defines the same struct twice: in `made` through `#[agent_output]`, in `derived` with
/// schemars' and serde's own derives.
macro_rules! made_and_derived {
    ($(#[$attr:meta])* struct $name:ident $body:tt $($extra:item)*) => {
        pub mod made {
            #![allow(dead_code, unused_imports)]
            use super::*;

            #[agent_core::agent_output]
            $(#[$attr])*
            pub struct $name $body

            $($extra)*
        }

        pub mod derived {
            #![allow(dead_code, unused_imports)]
            use super::*;

            #[derive(
                agent_core::__private::serde::Deserialize,
                agent_core::__private::schemars::JsonSchema
            )]
            #[serde(crate = "agent_core::__private::serde")]
            #[schemars(crate = "agent_core::__private::schemars")]
            $(#[$attr])*
            pub struct $name $body

            $($extra)*
        }
    };
}

/// A line of a plan.
#[agent_type]
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What to do.
    pub action: String,
    pub minutes: Option<u32>,
}

fn default_budget() -> u32 {
    25
}

mod plan {
    use super::*;

    made_and_derived! {
        /// A plan for one ticket.
        #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
        struct Plan {
            /// The steps, in order.
            #[schemars(length(min = 1, max = 5))]
            pub step_list: Vec<Step>,
            #[serde(rename = "owner")]
            pub owner_name: Option<String>,
            /// Budget in USD.
            #[serde(default = "default_budget")]
            #[schemars(range(max = 100))]
            pub budget_usd: u32,
            #[serde(skip)]
            pub internal: u8,
        }

        impl Default for Plan {
            fn default() -> Self {
                Self {
                    step_list: vec![Step { action: "triage".to_owned(), minutes: None }],
                    owner_name: Some("ops".to_owned()),
                    budget_usd: 10,
                    internal: 7,
                }
            }
        }
    }
}

mod outline {

    made_and_derived! {
        /// A nested outline: a struct that contains itself.
        #[serde(rename = "Section")]
        struct Outline {
            pub title: String,
            pub children: Vec<Outline>,
            pub parent: Option<Box<Self>>,
        }
    }
}

#[test]
fn attributes_defaults_and_nested_types_give_the_schema_schemars_derives() {
    let made = plan::made::Plan::output_tool().unwrap().parameters;
    let derived = parameters_for::<plan::derived::Plan>();
    assert_eq!(made, derived);
    // The attributes did reach the copy (so the equality is not between two bare schemas).
    assert_eq!(made["additionalProperties"], json!(false));
    assert_eq!(made["properties"]["stepList"]["maxItems"], json!(5));
    assert_eq!(made["properties"]["budgetUsd"]["default"], json!(25));
    assert_eq!(made["properties"]["owner"]["default"], json!("ops"));
    assert_eq!(
        made["properties"]["budgetUsd"]["description"],
        "Budget in USD."
    );
    assert!(made["properties"].get("internal").is_none(), "{made}");
    // The copy answers to the struct's name and id.
    assert_eq!(plan::made::Plan::schema_name(), "Plan");
    assert_eq!(
        plan::made::Plan::schema_id(),
        plan::derived::Plan::schema_id().replace("::derived::", "::made::")
    );
    assert_eq!(
        made["properties"]["stepList"]["items"]["properties"]["action"]["description"],
        "What to do."
    );
}

#[test]
fn an_output_struct_that_contains_itself_compiles_and_refers_to_itself() {
    let made = outline::made::Outline::output_tool().unwrap().parameters;
    let derived = parameters_for::<outline::derived::Outline>();
    assert_eq!(made, derived);
    // The root refers to itself.
    assert_eq!(made["properties"]["children"]["items"]["$ref"], "#");
    assert_eq!(made["required"], json!(["title", "children"]));

    let value = outline::made::Outline::from_arguments(&json!({
        "title": "root",
        "children": [{"title": "leaf", "children": [], "parent": null}],
        "parent": null,
    }))
    .unwrap();
    assert_eq!(value.children[0].title, "leaf");
    assert!(value.parent.is_none());
}

#[test]
fn output_values_deserialize_with_the_struct_own_attributes() {
    let plan = plan::made::Plan::from_arguments(&json!({
        "stepList": [{"action": "refund", "minutes": 5}],
    }))
    .unwrap();
    assert_eq!(plan.budget_usd, 25);
    assert_eq!(plan.owner_name.as_deref(), Some("ops"));
    assert_eq!(plan.internal, 7);
    assert_eq!(plan.step_list[0].minutes, Some(5));
}

/// Plans a ticket.
#[tool(params(steps = "The steps, in order."))]
async fn plan_ticket(
    #[schemars(length(min = 1))] steps: Vec<Step>,
    #[serde(default)] budget: u32,
    owner: Option<String>,
) -> String {
    format!("{} {budget} {owner:?}", steps.len())
}

#[derive(agent_core::__private::schemars::JsonSchema)]
#[schemars(crate = "agent_core::__private::schemars")]
#[allow(dead_code)]
struct PlanTicketArguments {
    #[schemars(length(min = 1))]
    #[schemars(description = "The steps, in order.")]
    steps: Vec<Step>,
    #[serde(default)]
    budget: u32,
    owner: Option<String>,
}

#[tokio::test]
async fn tool_arguments_give_the_schema_schemars_derives_and_still_deserialize() {
    let def = plan_ticket {}.definition();
    assert_eq!(def.parameters, parameters_for::<PlanTicketArguments>());
    assert_eq!(def.parameters["required"], json!(["steps"]));

    let context = agent_core::ToolContext::for_test("plan_ticket", Default::default());
    let out = plan_ticket {}
        .call(json!({"steps": [{"action": "call back"}]}), context)
        .await
        .unwrap();
    assert_eq!(out, "1 0 None");
}

/// Files an outline.
#[tool]
async fn file_outline(outline: outline::made::Outline) -> String {
    outline.title
}

#[derive(agent_core::__private::schemars::JsonSchema)]
#[schemars(crate = "agent_core::__private::schemars")]
#[allow(dead_code)]
struct FileOutlineArguments {
    outline: outline::derived::Outline,
}

#[test]
fn a_recursive_output_struct_inside_another_schema_keeps_its_name_and_references() {
    let made = file_outline {}.definition().parameters;
    assert_eq!(made, parameters_for::<FileOutlineArguments>());
    // Its own `rename` names the definition; the copy does not leak its name.
    let defs: Vec<&String> = made["$defs"].as_object().unwrap().keys().collect();
    assert_eq!(defs, ["Section"], "{made}");
    assert_eq!(
        made["$defs"]["Section"]["properties"]["children"]["items"]["$ref"],
        "#/$defs/Section"
    );
}

/// A chapter, which holds sections.
#[agent_core::agent_output]
pub struct Chapter {
    pub title: String,
    pub sections: Vec<Section>,
}

/// A section, which may hold a chapter.
#[agent_core::agent_output]
pub struct Section {
    pub heading: String,
    pub appendix: Option<Box<Chapter>>,
}

type Subtasks = Vec<Task>;

/// A task, with subtasks through a type alias.
#[agent_core::agent_output]
pub struct Task {
    pub name: String,
    pub subtasks: Subtasks,
}

#[test]
fn output_structs_that_contain_each_other_or_themselves_through_an_alias_compile() {
    // Impls conditional on the field types would make the compiler's proof recurse
    // here (E0275); the struct's own impls are unconditional.
    let chapter = Chapter::from_arguments(&json!({
        "title": "one",
        "sections": [{"heading": "a", "appendix": {"title": "two", "sections": []}}],
    }))
    .unwrap();
    assert_eq!(chapter.sections[0].appendix.as_ref().unwrap().title, "two");
    let schema = Chapter::output_tool().unwrap().parameters;
    assert_eq!(
        schema["properties"]["sections"]["items"]["properties"]["appendix"]["anyOf"][0]["$ref"],
        "#"
    );

    let task = Task::from_arguments(&json!({
        "name": "root",
        "subtasks": [{"name": "leaf", "subtasks": []}],
    }))
    .unwrap();
    assert_eq!(task.subtasks[0].name, "leaf");
    assert_eq!(
        Task::output_tool().unwrap().parameters["properties"]["subtasks"]["items"]["$ref"],
        "#"
    );
}

#[test]
fn serde_messages_name_the_struct_not_its_copy() {
    let Err(error) = serde_json::from_value::<Chapter>(json!(5)) else {
        panic!("5 is not a chapter");
    };
    assert_eq!(
        error.to_string(),
        "invalid type: integer `5`, expected struct Chapter"
    );
    let Err(error) = serde_json::from_value::<outline::made::Outline>(json!("x")) else {
        panic!("\"x\" is not an outline");
    };
    assert_eq!(
        error.to_string(),
        "invalid type: string \"x\", expected struct Outline"
    );
}

/// A struct whose attributes name `Self` keeps plain derives (in a copy, `Self` would
/// name the copy) and works as written.
#[agent_core::agent_output]
#[schemars(extend("examples" = [Self::EXAMPLE_CAP]))]
pub struct Budgeted {
    #[serde(default)]
    pub cap_usd: u32,
}

impl Budgeted {
    const EXAMPLE_CAP: u32 = 40;
}

#[test]
fn attributes_naming_self_keep_working() {
    let value = Budgeted::from_arguments(&json!({"cap_usd": 12})).unwrap();
    assert_eq!(value.cap_usd, 12);
    let schema = Budgeted::output_tool().unwrap().parameters;
    assert_eq!(schema["examples"], json!([40]), "{schema}");
}

/// A field that exists only under a `cfg`.
#[agent_core::agent_output]
pub struct Configured {
    pub kept: String,
    #[cfg(any())]
    pub dropped: NoSuchType,
}

#[test]
fn fields_under_a_cfg_are_left_out_everywhere() {
    let schema = Configured::output_tool().unwrap().parameters;
    assert_eq!(schema["required"], json!(["kept"]));
    assert_eq!(
        Configured::from_arguments(&json!({"kept": "x"}))
            .unwrap()
            .kept,
        "x"
    );
}
