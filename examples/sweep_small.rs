//! A small sweep: the same agent in two variants (here two output modes) over labeled
//! samples, each run graded against its label; one table with intervals.
//! `examples/sweep.rs` is the full version over the triage tickets.
//!
//! ```text
//! cargo run -p agent-examples --example sweep_small                  # built-in test model
//! cargo run -p agent-examples --example sweep_small -- gpt-5-mini    # a real model
//! ```

use agent_core::eval::{Comparison, GroundTruth, Match, Sample, SweepOptions, Variant, sweep};
use agent_core::prelude::*;

/// How a review feels.
#[agent_type]
#[derive(Debug)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// Pleased, on the whole.
    Positive,
    /// Displeased, on the whole.
    Negative,
}

/// The sentiment of one product review.
#[agent_output]
#[derive(Debug)]
pub struct Sentiment {
    /// The review's overall sentiment.
    pub label: Label,
}

/// Two variants of one config on `model`, over four labeled reviews.
pub async fn run(model: &str) -> Result<Comparison, Box<dyn std::error::Error>> {
    let base = AgentConfig::<Sentiment>::builder("sentiment")
        .model(model)
        .system_prompt("Classify the review's sentiment.")
        .build()?;
    let variants = [
        Variant::new("auto", base.clone()),
        Variant::new(
            "prompted",
            base.with_(|b| b.output_mode(OutputMode::Prompted))?,
        ),
    ];
    let samples: Vec<Sample> = [
        ("r1", "Keeps my tea hot all day. Love it.", "positive"),
        ("r2", "Great colour, fits the cup holder.", "positive"),
        ("r3", "The lid leaked on day two.", "negative"),
        ("r4", "Sturdy and light, would buy again.", "positive"),
    ]
    .into_iter()
    .map(|(id, text, label)| Sample::new(id, text).expected(json!({ "label": label })))
    .collect();
    let grader = GroundTruth::new().field("label", Match::Exact);
    Ok(sweep(&variants, &samples, &SweepOptions::new().grader(grader)).await?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = std::env::args().nth(1).unwrap_or_else(|| "test".to_owned());
    println!("{}", run(&model).await?); // one column per variant
    Ok(())
}
