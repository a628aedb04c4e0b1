//! One config, two variants made with `with_` (a cheaper model, a tighter budget), run
//! on the same tickets; the receipts side by side.
//!
//! ```text
//! cargo run --release --example variants
//! cargo run --release --example variants -- --model claude-sonnet-4-5 --cheaper claude-haiku-4-5
//! ```
//!
//! With no model configured, the base uses the built-in test model that calls each tool
//! first, and the "cheaper" variant the plain test model (`test`), which submits at once.

use std::process::ExitCode;

use agent_core::{
    AgentConfig,
    eval::{Receipt, run_batch},
};
use agent_examples::model::ModelChoice;
use agent_examples::triage::{self, Triage, data_dir};

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn flag(name: &str) -> Option<String> {
    let mut args = std::env::args().skip_while(|a| a != name);
    args.next().and(args.next())
}

async fn run() -> Result<(), String> {
    let choice = ModelChoice::resolve(flag("--model"));
    eprintln!("{}", choice.banner());
    let base: AgentConfig<Triage> = triage::triage_config(&data_dir(), &choice)?;
    let cheaper_model = flag("--cheaper").unwrap_or_else(|| match &choice {
        ModelChoice::Named { model, .. } if model.starts_with("claude-") => {
            "claude-haiku-4-5".into()
        }
        ModelChoice::Named { model, .. } if model.starts_with("gpt-") => "gpt-5-nano".into(),
        ModelChoice::Named { model, .. } => model.clone(),
        ModelChoice::Fallback => "test".into(),
    });
    let cheaper = base
        .with_(|b| {
            let b = b.model(cheaper_model.clone());
            // The fallback's scripted client overrides routing; drop it for a real route.
            if matches!(choice, ModelChoice::Fallback) {
                b.llm(agent_core::testing::TestModel::new())
            } else {
                b
            }
        })
        .map_err(|e| e.to_string())?;
    let tight = base
        .with_(|b| b.max_llm_calls(2).max_tool_calls(1))
        .map_err(|e| e.to_string())?;

    let tickets = triage::load_tickets(&data_dir().join("tickets"))?;
    let inputs: Vec<String> = tickets.iter().map(|t| t.text.clone()).collect();
    let mut receipts: Vec<(String, Receipt)> = Vec::new();
    for (label, config) in [
        (format!("base ({})", base.model()), &base),
        (format!("cheaper ({})", cheaper.model()), &cheaper),
        ("tight budget (2 calls, 1 tool)".to_owned(), &tight),
    ] {
        let batch = run_batch(config, inputs.clone(), 4).await;
        receipts.push((label, batch.receipt));
    }
    print_side_by_side(&receipts);
    Ok(())
}

fn print_side_by_side(receipts: &[(String, Receipt)]) {
    let columns: Vec<Vec<String>> = receipts
        .iter()
        .map(|(label, r)| {
            let mut lines = vec![label.clone(), "=".repeat(label.len())];
            lines.extend(r.to_string().lines().map(str::to_owned));
            lines
        })
        .collect();
    let width = 50;
    let rows = columns.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..rows {
        let line: Vec<String> = columns
            .iter()
            .map(|c| format!("{:<width$}", c.get(i).map_or("", String::as_str)))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}
