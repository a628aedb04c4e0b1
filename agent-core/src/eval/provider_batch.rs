//! [`run_batch`](super::run_batch) over a provider's batch API: every run gets a seat
//! at one [`BatchGate`], which sends each round of the runs' LLM calls as one batch job
//! (see `providers/batch/` and `docs/batch.md`).

use futures::StreamExt;

use crate::config::AgentConfig;
use crate::content::Input;
use crate::output::AgentOutput;
use crate::providers::{BatchGate, BatchReport, ProviderBatch};
use crate::result::AgentResult;
use crate::run_options::RunOptions;
use crate::runner::{resume_agent_with, run_agent_with};
use crate::store::ResumeError;

/// Runs `inputs` through `gate`, at most `concurrency` at a time; returns the results
/// in input order and what the jobs did.
pub(super) async fn run_gated<T: AgentOutput>(
    config: &AgentConfig<T>,
    inputs: Vec<Input>,
    concurrency: usize,
    batch: &ProviderBatch,
    gate: BatchGate,
) -> (Vec<AgentResult<T>>, BatchReport) {
    let prefix = batch.run_ids.as_deref();
    let runs = async {
        let gate = &gate;
        let mut indexed: Vec<(usize, AgentResult<T>)> = futures::stream::iter(inputs)
            .enumerate()
            .map(|(i, input)| async move { (i, one(config, gate, i, input, prefix).await) })
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
        gate.close();
        indexed.sort_unstable_by_key(|(i, _)| *i);
        indexed.into_iter().map(|(_, r)| r).collect::<Vec<_>>()
    };
    let (results, ()) = futures::join!(runs, gate.drive());
    (results, gate.report())
}

/// One run with its seat: resumed from its checkpoint when the batch names its runs
/// and one is stored, else started.
async fn one<T: AgentOutput>(
    config: &AgentConfig<T>,
    gate: &BatchGate,
    index: usize,
    input: Input,
    prefix: Option<&str>,
) -> AgentResult<T> {
    let options = RunOptions::new().batch_seat(gate.seat());
    let Some(prefix) = prefix else {
        return run_agent_with(config, input, options).await;
    };
    let id = format!("{prefix}-{index}");
    if config.has_checkpoints() {
        match resume_agent_with(config, &id, options.clone()).await {
            Ok(result) => return result,
            Err(ResumeError::UnknownRun { .. }) => {}
            // The run below ends at once, `invalid_run` (its id has a checkpoint).
            Err(error) => tracing::warn!(run_id = %id, %error, "the batch's run cannot resume"),
        }
    }
    run_agent_with(config, input, options.run_id(id)).await
}
