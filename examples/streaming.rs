//! Streaming: `run_agent_stream` yields the run's events as they happen (text, tool
//! calls, the answer parsed as it arrives) and ends with the same `AgentResult` as
//! `run_agent`.
//!
//! ```text
//! cargo run -p agent-examples --example streaming                        # built-in test model
//! cargo run -p agent-examples --example streaming -- claude-sonnet-4-5   # a real model
//! ```

use agent_core::prelude::*;

/// A short product description.
#[agent_output]
#[derive(Debug)]
pub struct Blurb {
    /// One catchy line.
    pub headline: String,
    /// Two or three sentences.
    pub body: String,
}

/// Runs on `model`, calling `on_event` with a one-line description of each event; returns
/// the final result (the stream's last event).
pub async fn run(
    model: &str,
    mut on_event: impl FnMut(String),
) -> Result<Option<AgentResult<Blurb>>, ConfigError> {
    let config = AgentConfig::<Blurb>::builder("blurb")
        .model(model)
        .build()?;
    let mut events = run_agent_stream(&config, "Describe a steel water bottle.");
    while let Some(event) = events.next().await {
        match event {
            StreamEvent::TextDelta { text, .. } => on_event(format!("text: {text}")),
            StreamEvent::ToolCallStarted { name, .. } => on_event(format!("calling {name}")),
            StreamEvent::PartialOutput { value, .. } => on_event(format!("so far: {value}")),
            StreamEvent::Finished(result) => return Ok(Some(*result)),
            _ => {}
        }
    }
    Ok(None) // not reached: a stream always ends with `Finished`
}

#[tokio::main]
async fn main() -> Result<(), ConfigError> {
    let model = std::env::args().nth(1).unwrap_or_else(|| "test".to_owned());
    if let Some(result) = run(&model, |line| println!("{line}")).await? {
        println!("{} -> {:?}", result.ending(), result.outcome);
    }
    Ok(())
}
