//! `#[agent_output]`: the derived `submit_output` tool, validation order (schema, serde,
//! `validate` fn), and a whole run through the loop.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs,
    unreachable_pub,
    missing_debug_implementations
)]

use agent_core::__private::schemars::JsonSchema;
use agent_core::__private::serde::Deserialize;
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentOutput, agent_output, llm::Message, output::SUBMIT_OUTPUT, run_agent,
};
use serde_json::json;

/// Triage decision for one support ticket.
#[agent_output]
#[derive(Debug, PartialEq)]
pub struct Triage {
    /// Severity from 1 (lowest) to 4 (critical).
    #[schemars(range(min = 1, max = 4))]
    pub severity: u8,
    /// One line for the agent who picks the ticket up.
    #[schemars(length(min = 3, max = 80))]
    pub summary: String,
    /// The order the ticket is about, like A-1234.
    #[schemars(regex(pattern = r"^A-\d{4}$"))]
    pub order_id: Option<String>,
    pub queue: Queue,
}

/// Where a ticket goes. (A nested type derives `Deserialize` and `JsonSchema` itself;
/// this test crate has no serde or schemars dependency, so it names agent-core's copies.)
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(crate = "agent_core::__private::serde", rename_all = "snake_case")]
#[schemars(crate = "agent_core::__private::schemars")]
pub enum Queue {
    Billing,
    Shipping,
}

fn valid_triage() -> serde_json::Value {
    json!({"severity": 2, "summary": "late parcel", "order_id": "A-1234", "queue": "shipping"})
}

#[test]
fn submit_output_is_described_by_the_doc_comment_and_typed_by_the_schema() {
    let def = Triage::output_tool().unwrap();
    assert_eq!(def.name, SUBMIT_OUTPUT);
    assert_eq!(def.description, "Triage decision for one support ticket.");
    let p = &def.parameters;
    assert_eq!(p["type"], "object");
    assert!(p.get("$schema").is_none(), "{p}");
    assert!(p.get("title").is_none(), "{p}");
    assert_eq!(p["required"], json!(["severity", "summary", "queue"]));
    assert_eq!(
        p["properties"]["severity"]["description"],
        "Severity from 1 (lowest) to 4 (critical)."
    );
    assert_eq!(p["properties"]["severity"]["maximum"], 4);
    assert_eq!(
        p["properties"]["queue"]["enum"],
        json!(["billing", "shipping"])
    );
    // Properties keep the struct's field order (models fill them in that order).
    let keys: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["severity", "summary", "order_id", "queue"]);
}

#[test]
fn valid_arguments_become_the_value() {
    let triage = Triage::from_arguments(&valid_triage()).unwrap();
    assert_eq!(
        triage,
        Triage {
            severity: 2,
            summary: "late parcel".into(),
            order_id: Some("A-1234".into()),
            queue: Queue::Shipping,
        }
    );
}

#[test]
fn c10_range_violation_names_the_path_and_the_bound() {
    let mut args = valid_triage();
    args["severity"] = json!(9);
    let err = Triage::from_arguments(&args).unwrap_err();
    assert_eq!(
        err.messages(),
        ["/severity: 9 is greater than the maximum of 4"]
    );
}

#[test]
fn length_pattern_and_enum_constraints_hold() {
    let args = json!({"severity": 0, "summary": "no", "order_id": "B-1", "queue": "sales"});
    let err = Triage::from_arguments(&args).unwrap_err();
    let mut messages = err.messages().to_vec();
    messages.sort();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert!(
        messages[0].starts_with("/order_id: \"B-1\" does not match"),
        "{messages:?}"
    );
    assert!(
        messages[1].starts_with("/queue: \"sales\" is not one of"),
        "{messages:?}"
    );
    assert_eq!(messages[2], "/severity: 0 is less than the minimum of 1");
    assert_eq!(messages[3], "/summary: \"no\" is shorter than 3 characters");
}

#[test]
fn c21_null_and_missing_option_fields_both_mean_none() {
    let mut with_null = valid_triage();
    with_null["order_id"] = json!(null);
    let mut missing = valid_triage();
    missing.as_object_mut().unwrap().remove("order_id");
    assert_eq!(Triage::from_arguments(&with_null).unwrap().order_id, None);
    assert_eq!(Triage::from_arguments(&missing).unwrap().order_id, None);
}

#[test]
fn a_missing_required_field_is_reported_at_the_root() {
    let err = Triage::from_arguments(&json!({"severity": 1, "queue": "billing"})).unwrap_err();
    assert_eq!(err.messages(), ["/: \"summary\" is a required property"]);
}

/// A refund decision.
#[agent_output(description = "Submit the refund decision.", validate = check_refund)]
#[derive(Debug)]
pub struct Refund {
    /// Amount in USD.
    pub amount_usd: f64,
    pub approved: bool,
}

fn check_refund(refund: &Refund) -> Result<(), String> {
    if refund.approved && refund.amount_usd <= 0.0 {
        return Err("an approved refund needs a positive amount_usd".to_owned());
    }
    if refund.amount_usd > 500.0 {
        return Err("/amount_usd: refunds above 500 USD need a human".to_owned());
    }
    Ok(())
}

#[test]
fn the_description_key_wins_over_the_doc_comment() {
    assert_eq!(
        Refund::output_tool().unwrap().description,
        "Submit the refund decision."
    );
}

#[test]
fn the_validate_fn_runs_after_the_schema_and_serde() {
    let err = Refund::from_arguments(&json!({"amount_usd": 0.0, "approved": true})).unwrap_err();
    assert_eq!(
        err.messages(),
        ["/: an approved refund needs a positive amount_usd"]
    );
    let err = Refund::from_arguments(&json!({"amount_usd": 900.0, "approved": true})).unwrap_err();
    assert_eq!(
        err.messages(),
        ["/amount_usd: refunds above 500 USD need a human"]
    );
    // Schema errors come first: the validate fn never sees an ill-typed value.
    let err = Refund::from_arguments(&json!({"amount_usd": "lots", "approved": true})).unwrap_err();
    assert_eq!(
        err.messages(),
        ["/amount_usd: \"lots\" is not of type \"number\""]
    );
    assert!(Refund::from_arguments(&json!({"amount_usd": 20.5, "approved": true})).is_ok());
}

#[agent_output]
pub struct Undocumented {
    pub answer: String,
}

#[test]
fn an_undocumented_output_gets_a_default_description() {
    let def = Undocumented::output_tool().unwrap();
    assert!(
        def.description.starts_with("Submit the final answer"),
        "{}",
        def.description
    );
}

#[tokio::test]
async fn c10_a_validate_error_is_fed_back_and_the_corrected_submission_wins() {
    let model = ScriptedModel::new()
        .submit(json!({"amount_usd": 0.0, "approved": true}))
        .submit(json!({"amount_usd": 12.0, "approved": true}));
    let config: AgentConfig<Refund> = AgentConfig::builder("refunds")
        .llm(model.clone())
        .build()
        .unwrap();
    let result = run_agent(&config, "refund order A-1").await;
    let refund = result.outcome.as_ref().unwrap();
    assert_eq!(refund.amount_usd, 12.0);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let Some(Message::Tool { results }) = requests[1].messages.last() else {
        panic!(
            "expected tool results, got {:?}",
            requests[1].messages.last()
        );
    };
    assert_eq!(results.len(), 1);
    assert!(results[0].is_error);
    assert!(
        results[0]
            .content
            .contains("an approved refund needs a positive amount_usd"),
        "{}",
        results[0].content
    );
    // The model was offered submit_output with the derived schema.
    let offered = requests[0]
        .tools
        .iter()
        .find(|t| t.name == SUBMIT_OUTPUT)
        .unwrap();
    assert_eq!(offered.description, "Submit the refund decision.");
    assert_eq!(
        offered.parameters["required"],
        json!(["amount_usd", "approved"])
    );
}

#[tokio::test]
async fn c10_a_schema_error_is_fed_back_with_path_and_bound() {
    let mut bad = valid_triage();
    bad["severity"] = json!(20);
    let model = ScriptedModel::new().submit(bad).submit(valid_triage());
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(model.clone())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome.unwrap().severity, 2);
    let requests = model.requests();
    let Some(Message::Tool { results }) = requests[1].messages.last() else {
        panic!("expected tool results");
    };
    assert!(
        results[0]
            .content
            .contains("/severity: 20 is greater than the maximum of 4"),
        "{}",
        results[0].content
    );
}
