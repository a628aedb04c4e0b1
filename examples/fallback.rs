//! Fallback models: when the primary model fails in a way another provider can serve (an
//! outage after `max_llm_retries`, a 404 model, an exhausted quota), the turn goes to
//! the next model in `fallback_models`, and the run goes on there.
//!
//! ```text
//! cargo run -p agent-examples --example fallback                  # falls back to the test model
//! cargo run -p agent-examples --example fallback -- gpt-5-mini    # falls back to gpt-5-mini
//! ```

use agent_core::prelude::*;
use agent_core::providers::ProviderOptions;

/// A one-line answer.
#[agent_output]
#[derive(Debug)]
pub struct Reply {
    /// The answer.
    pub text: String,
}

/// A local OpenAI-compatible server (llama.cpp) that is down, then `fallback`.
pub async fn run(fallback: &str) -> Result<AgentResult<Reply>, ConfigError> {
    let config = AgentConfig::<Reply>::builder("fallback")
        .model("dispatch/qwen")
        // Nothing listens on port 9: every request fails to connect (a transient failure).
        .provider(ProviderOptions::default().with_base_url("http://127.0.0.1:9/v1"))
        .max_llm_retries(1) // one retry on the primary, then the next model
        .fallback_models([fallback])
        .build()?;
    Ok(run_agent(&config, "Say hello.").await)
}

#[tokio::main]
async fn main() -> Result<(), ConfigError> {
    let fallback = std::env::args().nth(1).unwrap_or_else(|| "test".to_owned());
    let result = run(&fallback).await?;
    println!("{} {:?}", result.ending(), result.outcome);
    for model in &result.usage.by_model {
        println!("{}: {} LLM calls", model.model, model.llm_calls);
    }
    Ok(())
}
