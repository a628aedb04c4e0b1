//! The producer side of the queue benchmark (bench/worker/run.sh): submits N runs of one
//! agent to a queue that worker processes serve, waits until every result is stored,
//! checks them, and prints one JSON line with the runs per second.
//!
//! ```text
//! queue_bench --store URL [--schema NAME] [--nats URL] [--namespace NS]
//!             [--agent NAME] [--runs N] [--delete-streams]
//! ```
//!
//! `--delete-streams` deletes the queue's streams afterwards.

use std::time::Instant;

use agent_core::Ending;
use agent_store::{Store, StoreOptions};
use agent_worker::{BatchOptions, Queue, QueueOptions, run_batch_queued};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_env();
    let (mut store_url, mut schema) = (None, None);
    let mut queue = QueueOptions::new();
    let mut agent = "triage".to_owned();
    let mut runs: usize = 2000;
    let mut delete = false;
    while let Some(arg) = parser.next()? {
        match arg {
            Long("store") => store_url = Some(parser.value()?.string()?),
            Long("schema") => schema = Some(parser.value()?.string()?),
            Long("nats") => queue = queue.url(parser.value()?.string()?),
            Long("namespace") => queue = queue.namespace(parser.value()?.string()?),
            Long("agent") => agent = parser.value()?.string()?,
            Long("runs") => runs = parser.value()?.parse()?,
            Long("delete-streams") => delete = true,
            _ => return Err(arg.unexpected().into()),
        }
    }
    let store_url = store_url.ok_or("--store URL is required")?;
    let mut options = StoreOptions::new();
    if let Some(schema) = schema {
        options = options.schema(schema);
    }
    // Opened (and the schema created) before the workers are started: see run.sh.
    let store = Store::open_with(&store_url, options).await?;
    let queue = Queue::connect(queue).await?;
    let inputs: Vec<String> = (0..runs)
        .map(|i| format!("Ticket #{i}: my order A-1001 has not arrived yet, where is it?"))
        .collect();
    let started = Instant::now();
    // Ten minutes at most: with no live worker the batch reports its runs as missing.
    let options = BatchOptions::new().timeout(std::time::Duration::from_secs(600));
    let batch = run_batch_queued(&queue, &store, &agent, inputs, &options).await?;
    let seconds = started.elapsed().as_secs_f64();
    let answered = batch.receipt.count(Ending::Answered);
    let expected = batch
        .records
        .iter()
        .flatten()
        .filter(|r| r.scores.as_ref().and_then(|s| s.get("expected")) == Some(&1.0))
        .count();
    println!(
        "{{\"runs\":{runs},\"answered\":{answered},\"expected_values\":{expected},\"dead\":{},\"missing\":{},\"seconds\":{seconds:.3},\"runs_per_s\":{:.1}}}",
        batch.dead.len(),
        batch.missing.len(),
        runs as f64 / seconds
    );
    eprintln!("{}", batch.receipt);
    if delete {
        queue.delete().await?;
    }
    if answered != runs || expected != runs {
        return Err(format!(
            "{answered} of {runs} runs answered, {expected} with the expected value"
        )
        .into());
    }
    Ok(())
}
