//! Agents as tools and an input guardrail: the triage agent asks a refunds agent about
//! refunds (`AgentConfig::as_tool`), and a ticket that holds a card number is stopped
//! before any model sees it (`InputGuardrail`).
//!
//! ```text
//! cargo run --release --example delegation                  # no key: the built-in test model
//! cargo run --release --example delegation -- --model gpt-5-mini --limit 10
//! AGENT_DISPATCH_URL=http://127.0.0.1:8080/v1 \
//!   cargo run --release --example delegation -- --model dispatch/qwen --concurrency 2
//! ```
//!
//! Every ticket of `examples/data/tickets/`, and one more that holds a (test) card
//! number. Each line shows the ticket's ending and, under it, the refunds agent's runs
//! it caused: their endings, calls and tokens, which the triage run's usage includes
//! (its token cap binds them). The card ticket ends `failed` with category
//! `guardrail_tripped` and no LLM call.

use std::process::ExitCode;

use agent_core::eval::run_batch;
use agent_examples::cli::{self, Args};
use agent_examples::delegation::{self, CARD_TICKET};
use agent_examples::model::ModelChoice;
use agent_examples::triage::{self, data_dir};

#[tokio::main]
async fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let mut tickets = triage::load_tickets(&args.tickets)?;
    if let Some(limit) = args.limit {
        tickets.truncate(limit);
    }
    tickets.push(triage::Ticket {
        name: "card-number".into(),
        text: CARD_TICKET.into(),
        attachments: Vec::new(),
    });
    let choice = ModelChoice::resolve(args.model.clone());
    eprintln!("{}", choice.banner());
    let config = delegation::delegating_config(&data_dir(), &choice)?
        .with_(|mut b| {
            if let Some(n) = args.max_tokens {
                b = b.max_tokens(n);
            }
            if let Some(mode) = args.output_mode {
                b = b.output_mode(mode);
            }
            b
        })
        .map_err(|e| format!("invalid config: {e}"))?;
    let caps = [config.content_capabilities()];
    let inputs = tickets.iter().map(|t| t.input(&caps));
    let batch = run_batch(&config, inputs, args.concurrency).await;
    println!("{}\n", cli::LEGEND);
    for (ticket, result) in tickets.iter().zip(&batch.results) {
        println!("{}", cli::human_line(&ticket.name, result));
        for line in delegation::child_lines(&result.usage) {
            println!("{line}");
        }
    }
    println!("\n{}", batch.receipt);
    Ok(())
}
