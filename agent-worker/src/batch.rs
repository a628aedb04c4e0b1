//! [`run_batch_queued`]: `run_batch` over the queue, with the same receipt.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use agent_core::store::RunRecord;
use agent_core::{FeedbackStore, Receipt};
use async_nats::jetstream::consumer::{DeliverPolicy, pull::OrderedConfig};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};

use crate::error::QueueError;
use crate::job::{DeadLetter, Done, Job};
use crate::queue::Queue;
use crate::receipt::receipt_of;

/// How a queued batch runs.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct BatchOptions {
    /// The batch id: run ids are `<batch id>-<index>` (default: a random id). Running
    /// a batch again with the same id finds the stored results and runs nothing again.
    pub batch_id: Option<String>,
    /// Show a progress bar on stderr (default off).
    pub progress: bool,
    /// Stop waiting after this long (default: wait until every run is stored or
    /// dead-lettered); runs still pending are listed in [`QueuedBatch::missing`].
    pub timeout: Option<Duration>,
}

impl BatchOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The batch id.
    #[must_use]
    pub fn batch_id(mut self, id: impl Into<String>) -> Self {
        self.batch_id = Some(id.into());
        self
    }

    /// Show a progress bar.
    #[must_use]
    pub fn progress(mut self, on: bool) -> Self {
        self.progress = on;
        self
    }

    /// Stop waiting after `timeout`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// What a queued batch did: the stored record of every run, in input order, the
/// receipt over them, and the runs that have no stored result.
#[derive(Debug)]
#[non_exhaustive]
pub struct QueuedBatch {
    /// The run ids, in input order.
    pub run_ids: Vec<String>,
    /// The stored record of each run, in input order (`None`: dead-lettered or missing).
    pub records: Vec<Option<RunRecord>>,
    /// The receipt over the stored records (see [`receipt_of`]), with the batch's wall
    /// time.
    pub receipt: Receipt,
    /// Runs set aside by the workers (reported, not lost).
    pub dead: Vec<DeadLetter>,
    /// Run ids neither stored nor dead-lettered when the wait stopped (timeout).
    pub missing: Vec<String>,
}

/// Runs `agent` on every input over the queue: submits one job per input, waits until
/// each is stored or dead-lettered (with a progress bar if asked), then reads the
/// stored records and computes the receipt from them, as [`agent_core::run_batch`]
/// computes it from its results.
///
/// # Errors
/// [`QueueError`] when NATS or the store fail; a run's own failure is never an error.
pub async fn run_batch_queued<I, S>(
    queue: &Queue,
    store: &dyn FeedbackStore,
    agent: &str,
    inputs: I,
    options: &BatchOptions,
) -> Result<QueuedBatch, QueueError>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let batch_id = options
        .batch_id
        .clone()
        .unwrap_or_else(|| format!("b{:016x}", fastrand::u64(..)));
    let jobs: Vec<Job> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, input)| Job::new(agent, input, format!("{batch_id}-{i}")))
        .collect();
    run_jobs_queued(queue, store, &jobs, options).await
}

/// Runs these jobs over the queue (their run ids must be distinct) and waits as
/// [`run_batch_queued`] does.
///
/// # Errors
/// As [`run_batch_queued`].
pub async fn run_jobs_queued(
    queue: &Queue,
    store: &dyn FeedbackStore,
    jobs: &[Job],
    options: &BatchOptions,
) -> Result<QueuedBatch, QueueError> {
    let started = Instant::now();
    let mut pending: HashMap<&str, usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.run_id.as_str(), i))
        .collect();
    if pending.len() != jobs.len() {
        return Err(QueueError::invalid("two jobs share a run id"));
    }
    // Events after this point are ours to read: nothing of this batch is published
    // before its jobs are submitted.
    let mut events = queue
        .js
        .get_stream(queue.stream_name("EVENTS"))
        .await
        .map_err(QueueError::nats)?;
    let last = events
        .info()
        .await
        .map_err(QueueError::nats)?
        .state
        .last_sequence;
    let consumer = events
        .create_consumer(OrderedConfig {
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: last + 1,
            },
            ..Default::default()
        })
        .await
        .map_err(QueueError::nats)?;
    let mut stream = consumer.messages().await.map_err(QueueError::nats)?;
    queue.submit_many(jobs).await?;

    let bar = if options.progress {
        let bar = ProgressBar::new(jobs.len() as u64);
        if let Ok(style) =
            ProgressStyle::with_template("{bar:40} {pos}/{len} runs {per_sec} eta {eta}")
        {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let results = queue.subject("results");
    let dead_subject = queue.subject("dead");
    let mut dead = Vec::new();
    let deadline = options.timeout.map(|t| tokio::time::Instant::now() + t);
    while !pending.is_empty() {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, stream.next()).await {
                Ok(next) => next,
                Err(_) => break,
            },
            None => stream.next().await,
        };
        let Some(message) = next else { break };
        let message = message.map_err(QueueError::nats)?;
        let subject = message.subject.as_str();
        if subject == results {
            if let Ok(done) = serde_json::from_slice::<Done>(&message.payload)
                && pending.remove(done.run_id.as_str()).is_some()
            {
                bar.inc(1);
            }
        } else if subject == dead_subject
            && let Ok(letter) = serde_json::from_slice::<DeadLetter>(&message.payload)
            && let Some(id) = letter.run_id()
            && pending.remove(id).is_some()
        {
            bar.inc(1);
            dead.push(letter);
        }
    }
    bar.finish_and_clear();
    let mut missing: Vec<(usize, String)> = pending
        .iter()
        .map(|(id, i)| (*i, (*id).to_owned()))
        .collect();
    missing.sort_unstable();
    let missing: Vec<String> = missing.into_iter().map(|(_, id)| id).collect();

    // Futures made up front: a stream adapter holding a closure over borrowed items
    // keeps rustc from proving this future `Send`.
    let reads: Vec<_> = jobs.iter().map(|job| store.run(&job.run_id)).collect();
    let records: Vec<Option<RunRecord>> = futures::stream::iter(reads)
        .buffered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let stored: Vec<RunRecord> = records.iter().flatten().cloned().collect();
    let mut receipt = receipt_of(&stored);
    receipt.wall_time = started.elapsed();
    Ok(QueuedBatch {
        run_ids: jobs.iter().map(|j| j.run_id.clone()).collect(),
        records,
        receipt,
        dead,
        missing,
    })
}
