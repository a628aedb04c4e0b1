//! An image in the input: an `Input` is text plus parts (images, documents, audio), each
//! checked against what the model takes before any request is sent.
//!
//! ```text
//! cargo run -p agent-examples --example images                        # built-in test model
//! cargo run -p agent-examples --example images -- claude-sonnet-4-5   # a model that sees it
//! ```

use agent_core::content::{Input, Part};
use agent_core::prelude::*;

/// What a photo of a delivered item shows.
#[agent_output]
#[derive(Debug)]
pub struct Damage {
    /// What the photo shows, in one sentence.
    pub description: String,
    /// Whether the item looks damaged.
    pub damaged: bool,
}

/// The photo of ticket 002 of the example data: a dented bottle (PNG, 160x120).
pub const PHOTO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/tickets/002-dented-bottle.png"
);

/// One run on `model` with the photo attached.
pub async fn run(model: &str) -> Result<AgentResult<Damage>, Box<dyn std::error::Error>> {
    let config = AgentConfig::<Damage>::builder("damage")
        .model(model)
        .system_prompt("You assess photos of delivered items.")
        .build()?;
    let photo = Part::from_path(PHOTO)?; // the media type is read from the bytes
    let input = Input::text("The bottle arrived like this. Is it damaged?").part(photo);
    Ok(run_agent(&config, input).await)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = std::env::args().nth(1).unwrap_or_else(|| "test".to_owned());
    let result = run(&model).await?;
    match &result.outcome {
        Ok(damage) => println!("{damage:?}"),
        Err(e) => println!("no answer: {e} ({}, {})", e.category(), e.ending()),
    }
    Ok(())
}
