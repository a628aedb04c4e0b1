//! A durable run with an approval: a `#[tool(requires_approval)]` call pauses the run
//! (ending `paused`, the pending calls listed); a person decides; `resume_agent_with`
//! continues it from its checkpoint, in this process or another one days later.
//!
//! ```text
//! cargo run -p agent-examples --example approval                  # built-in test model
//! cargo run -p agent-examples --example approval -- gpt-5-mini    # a real model
//! ```

use agent_core::durable::{Decisions, InMemoryCheckpoints, resume_agent_with};
use agent_core::prelude::*;
use agent_core::testing::TestModel;

/// What was done about a refund request.
#[agent_output]
#[derive(Debug)]
pub struct Outcome {
    /// The reply to the customer.
    pub reply: String,
}

/// Refund an order; runs only once a person approved the call.
#[tool(
    requires_approval,
    params(order_id = "Like NW-10231.", amount_usd = "In USD.")
)]
async fn refund(order_id: String, amount_usd: f64) -> Result<String, String> {
    Ok(format!("refunded {amount_usd:.2} USD on {order_id}"))
}

/// Runs until the pause, prints the pending calls, approves them all, and resumes.
/// Returns the paused result and the resumed one.
pub async fn run(
    model: &str,
) -> Result<(AgentResult<Outcome>, AgentResult<Outcome>), Box<dyn std::error::Error>> {
    let builder = AgentConfig::<Outcome>::builder("refunds");
    let builder = match model {
        "test" => builder.llm(TestModel::new().calling_tools_first()), // each tool once, then answers
        name => builder.model(name),
    };
    let config = builder
        .tools(tools![refund])
        .checkpoints(InMemoryCheckpoints::new()) // agent_store::Store for SQLite or PostgreSQL
        .build()?;
    let ticket = "Please refund order NW-10231: 39.90 USD.";
    let paused = run_agent_with(&config, ticket, RunOptions::new().run_id("ticket-7")).await;
    let mut decisions = Decisions::new();
    let pending = paused
        .outcome
        .as_ref()
        .map_or_else(AgentError::pending_calls, |_| &[]);
    for call in pending {
        println!("waiting: {} {} {}", call.call_id, call.tool, call.arguments);
        decisions = decisions.approve(&call.call_id); // or .deny(id, why), .edit(id, args)
    }
    let resumed = resume_agent_with(&config, "ticket-7", decisions).await?;
    Ok((paused, resumed))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = std::env::args().nth(1).unwrap_or_else(|| "test".to_owned());
    let (paused, resumed) = run(&model).await?;
    println!(
        "{} -> {} {:?}",
        paused.ending(),
        resumed.ending(),
        resumed.outcome
    );
    Ok(())
}
