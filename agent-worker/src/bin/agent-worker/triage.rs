//! The benchmark agent `triage`: the peer benchmarks' scenario (bench/peers) over HTTP
//! against their mock server: a typed decision and one tool, two round trips per run.

use agent_core::providers::ProviderOptions;
use agent_core::{
    AgentConfig, ConfigError, OutputMode, agent_output, agent_type,
    eval::{FnGrader, Scores},
    tool, tools,
};
use agent_core::{Value, json};

/// The queue that handles the ticket.
#[agent_type]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Queue {
    /// Payments and invoices.
    Billing,
    /// Deliveries.
    Shipping,
    /// Product faults.
    Technical,
    /// Anything else.
    Other,
}

/// Triage decision for one support ticket.
#[agent_output]
#[derive(Debug)]
pub(crate) struct Triage {
    /// Severity from 1 (lowest) to 4 (critical).
    #[schemars(range(min = 1, max = 4))]
    pub severity: u8,
    /// The queue that handles the ticket.
    pub queue: Queue,
    /// A one-sentence summary of the ticket.
    pub summary: String,
}

/// Look up an order by its id.
#[tool(params(order_id = "The order id, for example `A-1001`."))]
async fn lookup_order(order_id: String) -> Value {
    json!({
        "order_id": order_id, "status": "in_transit", "carrier": "DHL",
        "eta_days": 2, "total_cents": 4599,
    })
}

/// The `triage` agent against the mock server at `url` (an OpenAI-compatible base URL).
pub(crate) fn config(url: &str) -> Result<AgentConfig<Triage>, ConfigError> {
    AgentConfig::builder("triage")
        .model("dispatch/mock")
        // The scenario is the output tool; `dispatch/` would pick native output.
        .output_mode(OutputMode::Tool)
        .provider(ProviderOptions::default().with_base_url(url))
        .system_prompt("You triage support tickets. Look the order up, then submit your decision.")
        .tools(tools![lookup_order])
        // `expected` = 1 for the value the mock server submits, so a benchmark can
        // check every run's value from the stored records.
        .grader(FnGrader(|t: &Triage, _input: &str| {
            let expected = t.severity == 2 && t.queue == Queue::Shipping && !t.summary.is_empty();
            Ok(Scores::from([(
                "expected".to_owned(),
                if expected { 1.0 } else { 0.0 },
            )]))
        }))
        .build()
}
