//! The main job: triage every ticket in `examples/data/tickets/`.
//!
//! ```text
//! cargo run --release --example triage                 # no key: the built-in test model
//! cargo run --release --example triage -- --model claude-sonnet-4-5 --concurrency 8
//! AGENT_DISPATCH_URL=http://127.0.0.1:8080/v1 \
//!   cargo run --release --example triage -- --model dispatch/gemma --json
//! cargo run --release --example triage -- --store runs.db   # record every run
//! cargo run --release --example triage -- --store runs.db --approve lookup_order
//! cargo run --example runs -- --store runs.db pending       # what waits for a person
//! ```
//!
//! Every ticket ends typed: answered with a validated `Triage`, or one named failure.
//! The batch receipt (endings, categories, tokens, cost, p50/p95) closes the run.

use std::process::ExitCode;

use agent_core::eval::run_batch;
use agent_examples::cli::{self, Args};
use agent_examples::labels::{self, Accuracy};
use agent_examples::lookups::Lookups;
use agent_examples::model::ModelChoice;
use agent_examples::triage::{self, data_dir};
use agent_store::Store;

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
    let labels = match &args.labels {
        Some(path) => Some(labels::load(path)?),
        None => None,
    };
    let choice = ModelChoice::resolve(args.model.clone());
    eprintln!("{}", choice.banner());
    let config = triage::triage_config(&data_dir(), &choice)?;
    let store = match &args.store {
        Some(target) => Some(
            Store::open(target)
                .await
                .map_err(|e| format!("cannot open the store {target:?}: {e}"))?,
        ),
        None => None,
    };
    let bar = cli::progress(tickets.len());
    let observed = config
        .with_(|mut b| {
            if let Some(store) = &store {
                b = b.feedback_store(store.clone()).trace_store(store.clone());
                if !args.approve.is_empty() {
                    b = triage::with_approvals(b, store, &args.approve);
                }
            }
            if let Some(n) = args.max_tokens {
                b = b.max_tokens(n);
            }
            if let Some(n) = args.max_llm_calls {
                b = b.max_llm_calls(n);
            }
            if let Some(mode) = args.output_mode {
                b = b.output_mode(mode);
            }
            b.observer(cli::progress_observer(bar.clone()))
        })
        .map_err(|e| format!("invalid config: {e}"))?;
    eprintln!("output mode: {}", observed.output_mode());
    // A ticket's attachments (a photo, a receipt) go with it when the model takes
    // them; otherwise a line of text names them.
    let caps = [observed.content_capabilities()];
    let inputs = tickets.iter().map(|t| t.input(&caps));
    let batch = run_batch(&observed, inputs, args.concurrency).await;
    bar.finish_and_clear();

    if !args.json {
        println!("{}\n", cli::LEGEND);
    }
    for (ticket, result) in tickets.iter().zip(&batch.results) {
        if args.json {
            println!("{}", cli::json_line(&ticket.name, result));
        } else {
            println!("{}", cli::human_line(&ticket.name, result));
        }
    }
    let accuracy = labels.map(|labels| {
        let runs: Vec<(&str, _)> = tickets
            .iter()
            .map(|t| t.name.as_str())
            .zip(&batch.results)
            .collect();
        Accuracy::measure(&labels, &runs)
    });
    let runs: Vec<(&triage::Ticket, _)> = tickets.iter().zip(&batch.results).collect();
    let mut report = format!("\n{}\n{}", batch.receipt, Lookups::measure(&runs));
    if choice.is_test() {
        report.push_str(" (the test model looks up a placeholder id, which no order has)");
    }
    if let Some(accuracy) = accuracy.filter(|a| a.labeled > 0) {
        report.push_str(&format!("\n\n{accuracy}"));
    }
    if args.json {
        eprintln!("{report}");
    } else {
        println!("{report}");
    }
    if let (Some(store), Some(target)) = (&store, &args.store) {
        store.close().await.map_err(|e| format!("the store: {e}"))?;
        eprintln!(
            "recorded {} runs in {target}; see them with: cargo run --example runs -- --store {target} list",
            batch.results.len()
                - batch
                    .results
                    .iter()
                    .filter(|r| r.store_failures > 0)
                    .count()
        );
    }
    Ok(())
}
