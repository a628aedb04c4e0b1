//! The smallest typed run: one struct as the answer, one call of `run_agent`.
//!
//! ```text
//! cargo run -p agent-examples --example hello                        # built-in test model
//! cargo run -p agent-examples --example hello -- claude-sonnet-4-5   # a real model
//! ```

use agent_core::prelude::*;

/// The capital city of a country.
#[agent_output]
#[derive(Debug, PartialEq)]
pub struct Capital {
    /// The country asked about.
    pub country: String,
    /// Its capital city.
    pub city: String,
}

/// One run on `model`: a `Capital`, or the one typed reason there is none.
pub async fn run(model: &str) -> Result<AgentResult<Capital>, ConfigError> {
    let config = AgentConfig::<Capital>::builder("hello")
        .model(model) // "test": the built-in model, no key, no network
        .system_prompt("Answer with the country and its capital city.")
        .max_llm_calls(3)
        .build()?;
    Ok(run_agent(&config, "What is the capital of Portugal?").await)
}

#[tokio::main]
async fn main() -> Result<(), ConfigError> {
    let model = std::env::args().nth(1).unwrap_or_else(|| "test".to_owned());
    let result = run(&model).await?;
    match &result.outcome {
        Ok(capital) => println!("{capital:?}"),
        Err(e) => println!("no answer: {e} ({}, {})", e.category(), e.ending()),
    }
    Ok(())
}
