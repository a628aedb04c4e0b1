//! A tool with state: `#[tool]` turns an async fn into a tool the model can call, and a
//! `State<T>` parameter hands it the value set with `.state(..)` (a pool, a client).
//!
//! ```text
//! cargo run -p agent-examples --example tools                  # built-in test model
//! cargo run -p agent-examples --example tools -- gpt-5-mini    # a real model
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use agent_core::prelude::*;
use agent_core::testing::TestModel;

/// Whether an item can ship today.
#[agent_output]
#[derive(Debug)]
pub struct Availability {
    /// The reply to the customer.
    pub reply: String,
    /// Whether the item is in stock.
    pub in_stock: bool,
}

/// The shop's stock, shared by every call of the tool.
#[derive(Debug, Default)]
pub struct Stock {
    /// Units on hand per item name.
    pub units: HashMap<String, u32>,
    /// How many lookups the tool made.
    pub lookups: AtomicU32,
}

/// Units on hand of one item.
#[tool(params(item = "The item's name, like \"water bottle\"."))]
async fn units_in_stock(stock: State<Stock>, item: String) -> Result<u32, String> {
    stock.lookups.fetch_add(1, Ordering::Relaxed);
    let units = stock.units.get(&item).copied();
    units.ok_or(format!("no item named {item:?}"))
}

/// One run on `model` with the tool; the stock is shared, so its counter can be read after.
pub async fn run(model: &str, stock: Arc<Stock>) -> Result<AgentResult<Availability>, ConfigError> {
    let builder = AgentConfig::<Availability>::builder("stock");
    let builder = match model {
        "test" => builder.llm(TestModel::new().calling_tools_first()), // each tool once, then answers
        name => builder.model(name),
    };
    let config = builder
        .tools(tools![units_in_stock])
        .state_arc(stock)
        .max_llm_calls(4)
        .build()?;
    Ok(run_agent(&config, "Do you have the water bottle in stock?").await)
}

#[tokio::main]
async fn main() -> Result<(), ConfigError> {
    let model = std::env::args().nth(1).unwrap_or_else(|| "test".to_owned());
    let stock = Arc::new(Stock {
        units: HashMap::from([("water bottle".into(), 3)]),
        ..Stock::default()
    });
    let result = run(&model, stock.clone()).await?;
    let lookups = stock.lookups.load(Ordering::Relaxed);
    println!("{:?} after {lookups} lookups", result.outcome);
    Ok(())
}
