//! [`Pipeline`]: steps that are agents, each one's output the next one's input, with a
//! verdict per step and a receipt per step; run in process or over the queue.

use std::sync::Arc;
use std::time::Instant;

use agent_core::store::RunRecord;
use agent_core::{Ending, eval::Receipt, store::FeedbackStore};
use futures::StreamExt;

use crate::batch::{BatchOptions, run_jobs_queued};
use crate::error::QueueError;
use crate::job::Job;
use crate::queue::Queue;
use crate::receipt::receipt_of;
use crate::registry::{Registry, output_text};

type InputPredicate = Arc<dyn Fn(&str) -> bool + Send + Sync>;
type RecordPredicate = Arc<dyn Fn(&RunRecord) -> bool + Send + Sync>;

/// One step: a registered agent, when to skip it, and when its answer is promoted to
/// the next step.
#[derive(Clone)]
pub struct Step {
    name: String,
    agent: String,
    skip_when: Option<InputPredicate>,
    promote_when: Option<RecordPredicate>,
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step")
            .field("name", &self.name)
            .field("agent", &self.agent)
            .field("skip_when", &self.skip_when.is_some())
            .field("promote_when", &self.promote_when.is_some())
            .finish()
    }
}

impl Step {
    /// A step running the agent registered as `agent` (also the step's name). Without
    /// [`promote_when`](Self::promote_when) every answered run is promoted.
    pub fn new(agent: impl Into<String>) -> Self {
        let agent = agent.into();
        Self {
            name: agent.clone(),
            agent,
            skip_when: None,
            promote_when: None,
        }
    }

    /// The step's name in the receipt (default: the agent's name).
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Skips the step for inputs where `predicate` holds: the input goes on to the next
    /// step unchanged, and the step counts it as skipped.
    #[must_use]
    pub fn skip_when(mut self, predicate: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.skip_when = Some(Arc::new(predicate));
        self
    }

    /// Promotes an answered run only when `predicate` holds for its record (its output,
    /// and the scores of the agent's grader); otherwise it is rejected and its item
    /// stops here.
    #[must_use]
    pub fn promote_when(
        mut self,
        predicate: impl Fn(&RunRecord) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.promote_when = Some(Arc::new(predicate));
        self
    }

    /// Promotes an answered run only when its agent's grader gave scores and every one
    /// is at least `min` (a grader that failed gives none: rejected).
    #[must_use]
    pub fn min_score(self, min: f64) -> Self {
        self.promote_when(move |r| {
            r.scores
                .as_ref()
                .is_some_and(|s| !s.is_empty() && s.values().all(|v| *v >= min))
        })
    }

    fn verdict(&self, record: Option<&RunRecord>) -> Verdict {
        match record {
            None => Verdict::Failed,
            Some(r) if r.ending != Ending::Answered => Verdict::Failed,
            Some(r) => match &self.promote_when {
                Some(p) if !p(r) => Verdict::Rejected,
                _ => Verdict::Promoted,
            },
        }
    }
}

/// What one step did with one item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Verdict {
    /// Answered and promoted: its output is the next step's input.
    Promoted,
    /// Answered, but the step's promotion rule said no: the item stops.
    Rejected,
    /// Did not answer (or, over the queue, was dead-lettered): the item stops.
    Failed,
    /// The step's `skip_when` held: the input went on unchanged.
    Skipped,
}

/// One step's counts and the receipt over its runs.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StepReceipt {
    /// The step's name.
    pub name: String,
    /// Items promoted.
    pub promoted: usize,
    /// Items rejected.
    pub rejected: usize,
    /// Items failed.
    pub failed: usize,
    /// Items skipped.
    pub skipped: usize,
    /// The receipt over the step's stored runs.
    pub receipt: Receipt,
}

/// A pipeline's receipt: per step, and the items that came through every step.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PipelineReceipt {
    /// Items put in.
    pub items: usize,
    /// Items promoted (or skipped) by every step.
    pub completed: usize,
    /// One entry per step, in order.
    pub steps: Vec<StepReceipt>,
}

impl std::fmt::Display for PipelineReceipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<20} {:>9} {:>9} {:>9} {:>9}",
            "step", "promoted", "rejected", "failed", "skipped"
        )?;
        for s in &self.steps {
            writeln!(
                f,
                "{:<20} {:>9} {:>9} {:>9} {:>9}",
                s.name, s.promoted, s.rejected, s.failed, s.skipped
            )?;
        }
        write!(f, "{} of {} items completed", self.completed, self.items)
    }
}

/// What a pipeline run gives: the receipt, each item's verdicts, and the final output
/// of each item that completed.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PipelineRun {
    /// The receipt.
    pub receipt: PipelineReceipt,
    /// Per item, the verdict of each step it reached, in step order.
    pub verdicts: Vec<Vec<Verdict>>,
    /// Per item, the output of its last step when it completed.
    pub outputs: Vec<Option<String>>,
}

/// Steps in order (`generate -> check -> promote`).
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    steps: Vec<Step>,
}

enum Executor<'a> {
    Local(&'a Registry, usize),
    Queued(&'a Queue, &'a dyn FeedbackStore, &'a BatchOptions),
}

impl Executor<'_> {
    async fn run(&self, jobs: &[Job]) -> Result<Vec<Option<RunRecord>>, QueueError> {
        match self {
            Executor::Local(registry, concurrency) => {
                // A step's jobs share one agent: with `.provider_batch(..)`, one gate
                // for the step, each run taking its seat as it starts.
                let gate = jobs.first().and_then(|job| registry.batch_gate(&job.agent));
                let runs = async {
                    let gate = gate.as_ref();
                    let records: Vec<Result<RunRecord, QueueError>> = futures::stream::iter(jobs)
                        .map(|job| async move {
                            let seat = gate.map(agent_core::providers::BatchGate::seat);
                            registry.run_seated(job, None, seat).await
                        })
                        .buffered((*concurrency).max(1))
                        .collect()
                        .await;
                    if let Some(gate) = gate {
                        gate.close();
                    }
                    records
                };
                let records = match &gate {
                    Some(gate) => futures::join!(runs, gate.drive()).0,
                    None => runs.await,
                };
                records.into_iter().map(|r| r.map(Some)).collect()
            }
            Executor::Queued(queue, store, options) => {
                let mut options = (*options).clone();
                options.batch_id = None;
                Ok(run_jobs_queued(queue, *store, jobs, &options)
                    .await?
                    .records)
            }
        }
    }
}

impl Pipeline {
    /// No steps.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a step.
    #[must_use]
    pub fn step(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    /// Runs the pipeline in this process on agents of `registry`, at most `concurrency`
    /// runs at a time within a step. Run ids are `<id>-<item>-<step>` with a random id.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] when a step's agent is not in the registry.
    pub async fn run_in_process<I, S>(
        &self,
        registry: &Registry,
        inputs: I,
        concurrency: usize,
    ) -> Result<PipelineRun, QueueError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let Some(step) = self.steps.iter().find(|s| !registry.contains(&s.agent)) {
            return Err(QueueError::invalid(format!(
                "step {}: no agent {:?} in the registry",
                step.name, step.agent
            )));
        }
        let id = format!("p{:016x}", fastrand::u64(..));
        self.run_with(&Executor::Local(registry, concurrency), &id, inputs)
            .await
    }

    /// Runs the pipeline over the queue: each step is a queued batch of the items that
    /// reached it (see [`run_jobs_queued`]). Run ids are `<batch id>-<item>-<step>`
    /// (`options.batch_id`, else a random id).
    ///
    /// # Errors
    /// [`QueueError`] when NATS or the store fail.
    pub async fn run_queued<I, S>(
        &self,
        queue: &Queue,
        store: &dyn FeedbackStore,
        inputs: I,
        options: &BatchOptions,
    ) -> Result<PipelineRun, QueueError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let id = options
            .batch_id
            .clone()
            .unwrap_or_else(|| format!("p{:016x}", fastrand::u64(..)));
        self.run_with(&Executor::Queued(queue, store, options), &id, inputs)
            .await
    }

    async fn run_with<I, S>(
        &self,
        executor: &Executor<'_>,
        id: &str,
        inputs: I,
    ) -> Result<PipelineRun, QueueError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let started = Instant::now();
        let inputs: Vec<String> = inputs.into_iter().map(Into::into).collect();
        let items = inputs.len();
        let mut verdicts: Vec<Vec<Verdict>> = vec![Vec::new(); items];
        // (item, input of the current step)
        let mut current: Vec<(usize, String)> = inputs.into_iter().enumerate().collect();
        let mut steps = Vec::with_capacity(self.steps.len());
        for (s, step) in self.steps.iter().enumerate() {
            let (skipped, to_run): (Vec<_>, Vec<_>) = current
                .into_iter()
                .partition(|(_, input)| step.skip_when.as_ref().is_some_and(|p| p(input)));
            let jobs: Vec<Job> = to_run
                .iter()
                .map(|(i, input)| Job::new(&step.agent, input.clone(), format!("{id}-{i}-{s}")))
                .collect();
            let records = executor.run(&jobs).await?;
            let mut counts = StepReceipt {
                name: step.name.clone(),
                promoted: 0,
                rejected: 0,
                failed: 0,
                skipped: skipped.len(),
                receipt: receipt_of(&records.iter().flatten().cloned().collect::<Vec<_>>()),
            };
            let mut next = Vec::with_capacity(to_run.len() + skipped.len());
            for (i, input) in skipped {
                verdicts[i].push(Verdict::Skipped);
                next.push((i, input));
            }
            for ((i, _), record) in to_run.iter().zip(&records) {
                let verdict = step.verdict(record.as_ref());
                verdicts[*i].push(verdict);
                match verdict {
                    Verdict::Promoted => {
                        counts.promoted += 1;
                        if let Some(r) = record {
                            next.push((*i, output_text(r)));
                        }
                    }
                    Verdict::Rejected => counts.rejected += 1,
                    Verdict::Failed | Verdict::Skipped => counts.failed += 1,
                }
            }
            next.sort_unstable_by_key(|(i, _)| *i);
            current = next;
            steps.push(counts);
        }
        let mut outputs = vec![None; items];
        let completed = current.len();
        for (i, output) in current {
            outputs[i] = Some(output);
        }
        tracing::debug!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "pipeline done"
        );
        Ok(PipelineRun {
            receipt: PipelineReceipt {
                items,
                completed,
                steps,
            },
            verdicts,
            outputs,
        })
    }
}
