//! `#[tool]`: the derived definition, calling through `Tool::call`, application state
//! and the run context, `tools!`, and a whole run through the loop.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs,
    unreachable_pub,
    missing_debug_implementations
)]

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use agent_core::__private::serde::Serialize;
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, ConfigError, State, Tool, ToolContext, ToolError, agent_output,
    llm::Message,
    run_agent, tool,
    tool::{StateMap, StateRequirement, ToolDefinition, ToolFuture},
    tools,
};
use serde_json::{Value, json};

/// The application's order store: the state a tool reads, with no globals. It also logs
/// which call and trace each lookup served.
#[derive(Default)]
pub struct OrderDb {
    orders: HashMap<String, Order>,
    log: Mutex<Vec<(String, String)>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(crate = "agent_core::__private::serde")]
pub struct Order {
    pub id: String,
    pub status: String,
}

#[derive(Debug)]
pub struct LookupError(String);

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no order with id {}", self.0)
    }
}

/// Look up an order by its id.
#[tool(params(order_id = "The order id, like A-1234.", verbose = "Include the log."))]
pub async fn lookup_order(
    db: State<OrderDb>,
    ctx: ToolContext,
    order_id: String,
    verbose: Option<bool>,
) -> Result<Order, LookupError> {
    db.log
        .lock()
        .unwrap()
        .push((ctx.call_id().to_owned(), ctx.trace_id().to_owned()));
    let _ = verbose;
    db.orders
        .get(&order_id)
        .cloned()
        .ok_or(LookupError(order_id))
}

/// Add two integers.
#[tool(name = "add-numbers")]
async fn add(#[schemars(range(min = -1000, max = 1000))] a: i64, #[serde(default)] b: i64) -> i64 {
    a + b
}

/// Greets someone.
#[tool]
async fn greet(name: String) -> String {
    format!("Hello, {name}!")
}

/// Does nothing at all.
#[tool]
async fn noop() {}

fn db_with(id: &str, status: &str) -> OrderDb {
    let mut db = OrderDb::default();
    db.orders.insert(
        id.to_owned(),
        Order {
            id: id.to_owned(),
            status: status.to_owned(),
        },
    );
    db
}

#[test]
fn the_definition_has_name_description_and_parameter_schema() {
    let def = lookup_order {}.definition();
    assert_eq!(def.name, "lookup_order");
    assert_eq!(def.description, "Look up an order by its id.");
    assert_eq!(
        def.parameters,
        json!({
            "type": "object",
            "properties": {
                "order_id": {"description": "The order id, like A-1234.", "type": "string"},
                "verbose": {"description": "Include the log.", "type": ["boolean", "null"]}
            },
            "required": ["order_id"]
        })
    );
}

#[test]
fn parameter_attributes_and_the_name_key_apply() {
    let def = add {}.definition();
    assert_eq!(def.name, "add-numbers");
    assert_eq!(def.parameters["properties"]["a"]["minimum"], -1000);
    assert_eq!(def.parameters["properties"]["a"]["maximum"], 1000);
    assert_eq!(def.parameters["required"], json!(["a"]));
    let no_params = noop {}.definition();
    assert_eq!(
        no_params.parameters,
        json!({"type": "object", "properties": {}})
    );
}

#[tokio::test]
async fn the_fn_stays_callable_as_written() {
    let db = State(Arc::new(db_with("A-1", "shipped")));
    let ctx = ToolContext::for_test("lookup_order", StateMap::new());
    let order = lookup_order(db.clone(), ctx.clone(), "A-1".into(), None)
        .await
        .unwrap();
    assert_eq!(order.status, "shipped");
    let err = lookup_order(db, ctx, "B-2".into(), Some(true))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "no order with id B-2");
    assert_eq!(add(2, 3).await, 5);
}

fn context_with(state: StateMap) -> ToolContext {
    ToolContext::new(
        "call_7",
        "lookup_order",
        Arc::from("trace-abc"),
        Arc::new(state),
    )
}

#[tokio::test]
async fn call_reads_state_and_context_and_serializes_the_result() {
    let mut state = StateMap::new();
    state.insert(db_with("A-1", "shipped"));
    let ctx = context_with(state);
    let out = lookup_order {}
        .call(json!({"order_id": "A-1"}), ctx.clone())
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"id": "A-1", "status": "shipped"})
    );
    let db = ctx.state::<OrderDb>().unwrap();
    assert_eq!(
        *db.log.lock().unwrap(),
        [("call_7".to_owned(), "trace-abc".to_owned())]
    );
}

#[tokio::test]
async fn an_error_return_becomes_a_tool_error_with_its_display_text() {
    let mut state = StateMap::new();
    state.insert(OrderDb::default());
    let err = lookup_order {}
        .call(json!({"order_id": "Z-9"}), context_with(state))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::new("no order with id Z-9"));
}

#[tokio::test]
async fn strings_are_sent_as_they_are_and_unit_as_null() {
    let ctx = ToolContext::for_test("greet", StateMap::new());
    let out = greet {}
        .call(json!({"name": "Ada"}), ctx.clone())
        .await
        .unwrap();
    assert_eq!(out, "Hello, Ada!");
    assert_eq!(noop {}.call(json!({}), ctx.clone()).await.unwrap(), "null");
    let sum = add {}.call(json!({"a": 4}), ctx).await.unwrap();
    assert_eq!(sum, "4", "b defaults to 0 through #[serde(default)]");
}

#[tokio::test]
async fn missing_state_at_call_time_is_a_tool_error_not_a_panic() {
    let err = lookup_order {}
        .call(
            json!({"order_id": "A-1"}),
            ToolContext::for_test("lookup_order", StateMap::new()),
        )
        .await
        .unwrap_err();
    assert!(err.message().starts_with("state of type"), "{err}");
    assert!(err.message().contains("OrderDb"), "{err}");
}

#[test]
fn required_state_declares_state_parameters() {
    assert_eq!(
        lookup_order {}.required_state(),
        [StateRequirement::of::<OrderDb>()]
    );
    assert!(greet {}.required_state().is_empty());
}

#[test]
fn tools_builds_a_registry_in_order() {
    let registry = tools![lookup_order, add, greet];
    assert_eq!(
        registry.names().collect::<Vec<_>>(),
        ["lookup_order", "add-numbers", "greet"]
    );
}

/// A triage result, for the whole-run tests.
#[agent_output]
#[derive(Debug)]
pub struct Answer {
    /// The order's status.
    pub status: String,
}

#[test]
fn build_rejects_a_config_without_the_state_a_tool_needs() {
    let err = AgentConfig::<Answer>::builder("orders")
        .llm(ScriptedModel::new())
        .tools(tools![lookup_order])
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::MissingState { tool, type_name }
            if tool == "lookup_order" && type_name.ends_with("OrderDb")),
        "{err:?}"
    );
}

/// A hand-written tool whose name clashes with a #[tool] fn.
struct FakeGreet;

impl Tool for FakeGreet {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "greet",
            "Also greets.",
            json!({"type": "object", "properties": {}}),
        )
    }

    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Ok(String::from("hi")) })
    }
}

#[test]
fn a_duplicate_among_hand_written_tools_is_a_config_error_at_build() {
    let err = AgentConfig::<Answer>::builder("orders")
        .llm(ScriptedModel::new())
        .tools(tools![greet].with(FakeGreet))
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::DuplicateTool {
            name: "greet".into()
        }
    );
}

#[tokio::test]
async fn a_whole_run_calls_the_tool_with_state_and_context() {
    let db = Arc::new(db_with("A-1", "shipped"));
    let model = ScriptedModel::new()
        .tool_call("lookup_order", json!({"order_id": "A-1"}))
        .submit(json!({"status": "shipped"}));
    let config: AgentConfig<Answer> = AgentConfig::builder("orders")
        .llm(model.clone())
        .tools(tools![lookup_order, greet])
        .state_arc(Arc::clone(&db))
        .build()
        .unwrap();
    let result = run_agent(&config, "Where is order A-1?").await;
    assert_eq!(result.outcome.as_ref().unwrap().status, "shipped");
    assert_eq!(result.usage.tool_calls, 1);

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let offered: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, ["lookup_order", "greet", "submit_output"]);
    let Some(Message::Tool { results }) = requests[1].messages.last() else {
        panic!(
            "expected tool results, got {:?}",
            requests[1].messages.last()
        );
    };
    assert_eq!(results.len(), 1);
    assert!(!results[0].is_error, "{}", results[0].content);
    assert_eq!(results[0].call_id, "call_1");
    assert_eq!(
        serde_json::from_str::<Value>(&results[0].content).unwrap(),
        json!({"id": "A-1", "status": "shipped"})
    );
    // The tool read this call's id and this run's trace id from its context.
    assert_eq!(
        *db.log.lock().unwrap(),
        [("call_1".to_owned(), result.trace_id.to_string())]
    );
}

/// Issue a refund: cannot be taken back.
#[tool(irreversible)]
async fn issue_refund(order_id: String) -> Result<String, agent_core::ToolError> {
    if order_id == "LOCKED" {
        return Err(agent_core::ToolError::fatal(
            "the payment system is locked; a person must check this order",
        ));
    }
    if order_id.is_empty() {
        return Err(agent_core::ToolError::new("no order id"));
    }
    Ok(format!("refunded {order_id}"))
}

#[test]
fn irreversible_is_declared_by_the_attribute_and_off_by_default() {
    assert!(issue_refund {}.irreversible());
    assert!(!greet {}.irreversible());
}

/// Cancel an order once a person agreed.
#[tool(requires_approval, irreversible)]
async fn cancel_order(order_id: String) -> Result<String, agent_core::ToolError> {
    if order_id.starts_with("JOB-") {
        return Err(agent_core::ToolError::deferred(format!(
            "the warehouse cancels {order_id} and reports back"
        )));
    }
    Ok(format!("cancelled {order_id}"))
}

/// List the orders of a customer.
#[tool(max_result_tokens = 2000, irreversible)]
async fn list_customer_orders(customer: String) -> String {
    customer
}

#[test]
fn max_result_tokens_sets_the_tools_own_result_cap() {
    assert_eq!(list_customer_orders {}.max_result_tokens(), Some(2000));
    assert!(list_customer_orders {}.irreversible());
    assert_eq!(issue_refund {}.max_result_tokens(), None);
}

#[tokio::test]
async fn requires_approval_is_a_flag_beside_irreversible_and_a_tool_fn_can_defer() {
    assert!(cancel_order {}.requires_approval());
    assert!(cancel_order {}.irreversible());
    assert!(!issue_refund {}.requires_approval());
    let deferred = cancel_order {}
        .call(
            serde_json::json!({"order_id": "JOB-7"}),
            context_with(StateMap::new()),
        )
        .await
        .unwrap_err();
    assert!(deferred.is_deferred());
    assert!(!deferred.is_fatal());
    assert_eq!(
        deferred.message(),
        "the warehouse cancels JOB-7 and reports back"
    );
}

#[tokio::test]
async fn a_tool_error_returned_by_a_tool_fn_keeps_whether_it_is_fatal() {
    let ctx = context_with(StateMap::new());
    let fatal = issue_refund {}
        .call(serde_json::json!({"order_id": "LOCKED"}), ctx.clone())
        .await
        .unwrap_err();
    assert!(fatal.is_fatal());
    assert_eq!(
        fatal.message(),
        "the payment system is locked; a person must check this order"
    );
    let plain = issue_refund {}
        .call(serde_json::json!({"order_id": ""}), ctx)
        .await
        .unwrap_err();
    assert!(!plain.is_fatal());
}

/// Renders an order's label.
#[agent_core::tool]
async fn render_label(order_id: String) -> Result<agent_core::tool::ToolContent, String> {
    let png = agent_core::content::Part::from_base64(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
        "image/png",
    )
    .map_err(|e| e.to_string())?;
    Ok(agent_core::tool::ToolContent::text(format!("label of {order_id}")).part(png))
}

// A #[tool] fn that returns a ToolContent gives the model its parts with the text;
// through `call` (text alone) the text is the same.
#[tokio::test]
async fn a_tool_fn_returning_content_gives_its_parts() {
    use agent_core::Tool;
    let tool = render_label {};
    let context = agent_core::ToolContext::new(
        "c1",
        "render_label",
        std::sync::Arc::from("t"),
        std::sync::Arc::new(agent_core::tool::StateMap::new()),
    );
    let content = tool
        .call_content(agent_core::json!({"order_id": "A-1"}), context.clone())
        .await
        .unwrap();
    assert_eq!(content.text, "label of A-1");
    assert_eq!(content.parts.len(), 1);
    assert_eq!(content.parts[0].kind(), agent_core::content::Kind::Image);
    let text = tool
        .call(agent_core::json!({"order_id": "A-1"}), context)
        .await
        .unwrap();
    assert_eq!(text, "label of A-1");
}
