//! Agents as tools: `config.as_tool(name, description)` makes an agent a tool of another
//! one; a call runs the child agent and returns its typed answer, and the child's usage
//! is counted in the parent's (`usage.children`).
//!
//! ```text
//! cargo run -p agent-examples --example agents_as_tools                # built-in test model
//! cargo run -p agent-examples --example agents_as_tools -- gpt-5-mini  # a real model
//! ```

use agent_core::prelude::*;
use agent_core::testing::TestModel;

/// The refunds team's answer.
#[agent_output]
#[derive(Debug)]
pub struct RefundAnswer {
    /// Whether the order can be refunded.
    pub refundable: bool,
    /// Why, in one sentence.
    pub reason: String,
}

/// The reply to the customer.
#[agent_output]
#[derive(Debug)]
pub struct Reply {
    /// The text sent to the customer.
    pub text: String,
}

/// The support agent on `model`, with the refunds agent as its tool `ask_refunds`.
pub async fn run(model: &str) -> Result<AgentResult<Reply>, ConfigError> {
    let refunds = AgentConfig::<RefundAnswer>::builder("refunds")
        .model(model)
        .system_prompt("Orders can be refunded within 30 days of delivery.")
        .build()?;
    let support = AgentConfig::<Reply>::builder("support");
    let support = match model {
        "test" => support.llm(TestModel::new().calling_tools_first()), // each tool once, then answers
        name => support.model(name),
    };
    let support = support
        .tool(refunds.as_tool("ask_refunds", "Asks the refunds team about an order."))
        .max_total_tokens(20_000) // binds the child's calls too
        .build()?;
    Ok(run_agent(
        &support,
        "Can I still get a refund for NW-10231, delivered May 2?",
    )
    .await)
}

#[tokio::main]
async fn main() -> Result<(), ConfigError> {
    let model = std::env::args().nth(1).unwrap_or_else(|| "test".to_owned());
    let result = run(&model).await?;
    println!("{} {:?}", result.ending(), result.outcome);
    for child in &result.usage.children {
        println!(
            "  {} ran agent {}: {}, {} tokens",
            child.tool,
            child.agent,
            child.ending,
            child.usage.total_tokens()
        );
    }
    Ok(())
}
