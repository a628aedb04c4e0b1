//! [`run_batch_queued`]: `run_batch` over the queue, with the same receipt.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use agent_core::store::RunRecord;
use agent_core::{eval::Receipt, store::FeedbackStore};
use async_nats::jetstream::consumer::{DeliverPolicy, pull::Ordered, pull::OrderedConfig};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::time::Instant as Clock;

use crate::error::QueueError;
use crate::job::{DeadLetter, Done, Job};
use crate::queue::Queue;
use crate::receipt::receipt_of;

/// How long a queued batch waits without progress before it gives up, by default
/// (10 minutes): see [`BatchOptions::stall_timeout`].
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(600);

/// How a queued batch runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BatchOptions {
    /// The batch id: run ids are `<batch id>-<index>` (default: a random id). Running
    /// a batch again with the same id returns the stored records at once and runs only
    /// the runs that have none.
    pub batch_id: Option<String>,
    /// Show a progress bar on stderr (default off).
    pub progress: bool,
    /// Stop waiting after this long in all (default: none); runs still pending are
    /// listed in [`QueuedBatch::missing`].
    pub timeout: Option<Duration>,
    /// Stop waiting once no run of the batch has finished (no result stored, no dead
    /// letter) for this long (default [`DEFAULT_STALL_TIMEOUT`], 10 minutes); runs
    /// still pending are listed in [`QueuedBatch::missing`] and
    /// [`QueuedBatch::stalled`] is set. Make it longer than the longest single run: a
    /// batch whose every remaining run is still running shows no progress.
    pub stall_timeout: Duration,
}

impl Default for BatchOptions {
    fn default() -> Self {
        Self {
            batch_id: None,
            progress: false,
            timeout: None,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
        }
    }
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

    /// Stop waiting after `timeout` without progress (at least 100 ms).
    #[must_use]
    pub fn stall_timeout(mut self, timeout: Duration) -> Self {
        self.stall_timeout = timeout.max(Duration::from_millis(100));
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
    /// Run ids neither stored nor dead-lettered when the wait stopped (timeout or
    /// stall), in input order.
    pub missing: Vec<String>,
    /// Whether the wait stopped because nothing progressed for
    /// [`BatchOptions::stall_timeout`].
    pub stalled: bool,
    /// Runs whose record was already stored when the batch started (a batch run
    /// again): not submitted again.
    pub already_stored: usize,
}

/// Runs `agent` on every input over the queue: submits one job per input, waits until
/// each is stored or dead-lettered (with a progress bar if asked), then reads the
/// stored records and computes the receipt from them, as [`agent_core::eval::run_batch`]
/// computes it from its results. See [`run_jobs_queued`] for how it waits.
///
/// # Errors
/// As [`run_jobs_queued`].
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

/// The first store check of a quiet batch, and the cap of its doubling (see
/// [`run_jobs_queued`]).
const PROBE_FIRST: Duration = Duration::from_secs(2);
const PROBE_MAX: Duration = Duration::from_secs(60);
/// How long the producer waits before it tries NATS again after a failure.
const NATS_RETRY: Duration = Duration::from_secs(1);

/// Runs these jobs over the queue (their run ids must be distinct) and waits until each
/// is stored or dead-lettered.
///
/// The store is the truth about what is done; the events stream only says it sooner:
///
/// 1. Runs already stored (a batch run again) are not submitted: their records are
///    returned as they are, at once when all are.
/// 2. The rest are submitted; a job JetStream drops as a duplicate (submitted before,
///    within its two-minute window) and not stored is looked up in the dead letters.
/// 3. While waiting, each `Done` or dead letter of the batch is progress. When none
///    came for 2 s, the store is asked for every pending run (then after 4, 8, ... up
///    to 60 s of quiet): a run whose result is stored is done even if its `Done` never
///    came (a broker `kill -9` can lose it).
/// 4. A broken subscription (a broker restart) is opened again from the last event
///    read, every second, and the unstored jobs are submitted again (same message ids,
///    so a job the server still has is not queued twice; one it lost is).
/// 5. The wait ends when every run is done, at [`BatchOptions::timeout`], or after
///    [`BatchOptions::stall_timeout`] without progress; runs not done are listed in
///    [`QueuedBatch::missing`].
///
/// # Errors
/// [`QueueError::Invalid`] when two jobs share a run id or a run id is empty or holds
/// NUL; [`QueueError::Nats`] when NATS cannot be reached at the start, or the jobs
/// cannot be submitted for [`BatchOptions::stall_timeout`]; [`QueueError::Store`] when
/// the store cannot be read at the start or at the end. NATS and store failures while
/// waiting are retried. A run's own failure is never an error.
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
    let deadline = options.timeout.map(|t| Clock::now() + t);
    let stall = options.stall_timeout;

    // 1. What is stored already is done.
    let ids: Vec<&str> = pending.keys().copied().collect();
    for id in stored_among(store, &ids).await? {
        pending.remove(id);
    }
    let already_stored = jobs.len() - pending.len();
    let mut dead = Vec::new();
    let mut stalled = false;
    if !pending.is_empty() {
        let bar = progress_bar(options.progress, jobs.len() as u64, already_stored as u64);
        // Events after this point are ours to read: nothing of these jobs is published
        // before they are submitted.
        let mut events = Follower::start(queue).await?;
        let to_submit: Vec<&Job> = jobs
            .iter()
            .filter(|j| pending.contains_key(j.run_id.as_str()))
            .collect();
        let duplicates = submit(queue, &to_submit, stall).await?;
        if !duplicates.is_empty() {
            for letter in dead_letters(queue, &duplicates).await {
                if let Some(id) = letter.run_id()
                    && pending.remove(id).is_some()
                {
                    bar.inc(1);
                    dead.push(letter);
                }
            }
        }
        let wait = Wait {
            queue,
            store,
            jobs,
            deadline,
            stall,
        };
        stalled = wait.run(&mut pending, &mut events, &mut dead, &bar).await;
        bar.finish_and_clear();
    }
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
        stalled,
        already_stored,
    })
}

fn progress_bar(on: bool, len: u64, done: u64) -> ProgressBar {
    if !on {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} runs {per_sec} eta {eta}")
    {
        bar.set_style(style);
    }
    bar.set_position(done);
    bar
}

/// The ids among `ids` whose record is stored.
///
/// # Errors
/// The store's error.
async fn stored_among<'a>(
    store: &dyn FeedbackStore,
    ids: &[&'a str],
) -> Result<Vec<&'a str>, QueueError> {
    // Futures made up front (see `run_jobs_queued`).
    let reads: Vec<_> = ids
        .iter()
        .map(|id| async move { store.run(id).await.map(|r| r.map(|_| *id)) })
        .collect();
    let found: Vec<Option<&str>> = futures::stream::iter(reads)
        .buffered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    Ok(found.into_iter().flatten().collect())
}

/// Submits `jobs`, trying again every second those that failed for NATS reasons, until
/// all are on the queue or none could be submitted for `stall`. Returns the run ids
/// JetStream dropped as duplicates.
///
/// # Errors
/// The first [`QueueError::Invalid`]; the last NATS error after `stall` without one
/// job submitted.
async fn submit<'a>(
    queue: &Queue,
    jobs: &[&'a Job],
    stall: Duration,
) -> Result<Vec<&'a str>, QueueError> {
    let mut left: Vec<&Job> = jobs.to_vec();
    let mut duplicates = Vec::new();
    let mut progress = Clock::now();
    loop {
        let outcomes = queue.publish_jobs(&left).await;
        let mut failed = Vec::new();
        let mut last_error = None;
        for (job, outcome) in left.iter().zip(outcomes) {
            match outcome {
                Ok(duplicate) => {
                    progress = Clock::now();
                    if duplicate {
                        duplicates.push(job.run_id.as_str());
                    }
                }
                Err(e @ QueueError::Invalid { .. }) => return Err(e),
                Err(e) => {
                    failed.push(*job);
                    last_error = Some(e);
                }
            }
        }
        let Some(error) = last_error else {
            return Ok(duplicates);
        };
        if progress.elapsed() >= stall {
            return Err(error);
        }
        tracing::warn!(error = %error, jobs = failed.len(), "cannot submit jobs; retrying in 1 s");
        tokio::time::sleep(NATS_RETRY).await;
        left = failed;
    }
}

/// The dead letters in the events stream for any of `ids` (jobs submitted before that
/// JetStream no longer queues: they may have been set aside by an earlier batch). Reads
/// the dead-letter subject up to its last message; empty when there is none or NATS
/// fails (the wait then finds what it can).
async fn dead_letters(queue: &Queue, ids: &[&str]) -> Vec<DeadLetter> {
    let wanted: HashSet<&str> = ids.iter().copied().collect();
    let subject = queue.subject("dead");
    let stream_name = queue.stream_name("EVENTS");
    let read = async {
        let events = queue.js.get_stream(&stream_name).await.ok()?;
        let last = events
            .get_last_raw_message_by_subject(&subject)
            .await
            .ok()?
            .sequence;
        let consumer = events
            .create_consumer(OrderedConfig {
                filter_subject: subject.clone(),
                deliver_policy: DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .ok()?;
        let mut messages = consumer.messages().await.ok()?;
        let mut found = Vec::new();
        while let Some(Ok(message)) = messages.next().await {
            if let Ok(letter) = serde_json::from_slice::<DeadLetter>(&message.payload)
                && letter.run_id().is_some_and(|id| wanted.contains(id))
            {
                found.push(letter);
            }
            if message.info().map_or(true, |i| i.stream_sequence >= last) {
                break;
            }
        }
        Some(found)
    };
    // Bounded: a broker that goes away meanwhile leaves the rest to the wait.
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Follows the events stream from a sequence on, opening its subscription again after
/// a failure (a broker restart deletes it) from the event after the last one read.
struct Follower<'q> {
    queue: &'q Queue,
    next: u64,
    messages: Option<Ordered>,
    retry_at: Option<Clock>,
}

impl<'q> Follower<'q> {
    /// From the events stream's next message on.
    ///
    /// # Errors
    /// [`QueueError::Nats`] when the stream cannot be read.
    async fn start(queue: &'q Queue) -> Result<Self, QueueError> {
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
        let mut follower = Self {
            queue,
            next: last + 1,
            messages: None,
            retry_at: None,
        };
        follower.open().await?;
        Ok(follower)
    }

    async fn open(&mut self) -> Result<(), QueueError> {
        let consumer = self
            .queue
            .js
            .create_consumer_on_stream(
                OrderedConfig {
                    deliver_policy: DeliverPolicy::ByStartSequence {
                        start_sequence: self.next,
                    },
                    ..Default::default()
                },
                self.queue.stream_name("EVENTS"),
            )
            .await
            .map_err(QueueError::nats)?;
        self.messages = Some(consumer.messages().await.map_err(QueueError::nats)?);
        Ok(())
    }

    /// The next event. After an error the subscription is opened again (a second
    /// after the failure) by the next call. Cancel-safe.
    ///
    /// # Errors
    /// What NATS said; the next call tries again.
    async fn next(&mut self) -> Result<async_nats::jetstream::Message, QueueError> {
        if self.messages.is_none() {
            if let Some(at) = self.retry_at {
                tokio::time::sleep_until(at).await;
            }
            if let Err(e) = self.open().await {
                self.retry_at = Some(Clock::now() + NATS_RETRY);
                return Err(e);
            }
            self.retry_at = None;
        }
        let Some(messages) = self.messages.as_mut() else {
            return Err(QueueError::nats("no subscription"));
        };
        let failure = match messages.next().await {
            Some(Ok(message)) => {
                if let Ok(info) = message.info() {
                    self.next = info.stream_sequence + 1;
                }
                return Ok(message);
            }
            Some(Err(e)) => QueueError::nats(e),
            None => QueueError::nats("the events subscription ended"),
        };
        self.messages = None;
        self.retry_at = Some(Clock::now() + NATS_RETRY);
        Err(failure)
    }
}

/// The wait of one batch (see [`run_jobs_queued`]).
struct Wait<'a> {
    queue: &'a Queue,
    store: &'a dyn FeedbackStore,
    jobs: &'a [Job],
    deadline: Option<Clock>,
    stall: Duration,
}

impl Wait<'_> {
    /// Waits until `pending` is empty, the deadline, or a stall; returns whether it
    /// stalled.
    async fn run(
        &self,
        pending: &mut HashMap<&str, usize>,
        events: &mut Follower<'_>,
        dead: &mut Vec<DeadLetter>,
        bar: &ProgressBar,
    ) -> bool {
        let results = self.queue.subject("results");
        let dead_subject = self.queue.subject("dead");
        let mut progress = Clock::now();
        let mut quiet = PROBE_FIRST;
        let mut probe_at = progress + quiet;
        let mut broken = false;
        while !pending.is_empty() {
            let now = Clock::now();
            if self.deadline.is_some_and(|d| now >= d) {
                return false;
            }
            if now >= progress + self.stall {
                return true;
            }
            if now >= probe_at {
                let (found, resubmitted) = self.probe(pending, broken).await;
                // Until the jobs are submitted again, ask again soon.
                broken &= !resubmitted;
                bar.inc(found as u64);
                if found > 0 {
                    progress = Clock::now();
                    quiet = PROBE_FIRST;
                } else {
                    quiet = (quiet * 2).min(PROBE_MAX);
                }
                probe_at = Clock::now() + if broken { PROBE_FIRST } else { quiet };
                continue;
            }
            let wake = [Some(probe_at), Some(progress + self.stall), self.deadline]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(probe_at);
            let message = tokio::select! {
                () = tokio::time::sleep_until(wake) => continue,
                message = events.next() => message,
            };
            let message = match message {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "the batch's events subscription failed; reopening it");
                    // After the broker is back: ask the store soon, and submit again
                    // what it may have lost.
                    broken = true;
                    probe_at = probe_at.min(Clock::now() + NATS_RETRY);
                    continue;
                }
            };
            let subject = message.subject.as_str();
            let done = if subject == results {
                serde_json::from_slice::<Done>(&message.payload)
                    .is_ok_and(|done| pending.remove(done.run_id.as_str()).is_some())
            } else if subject == dead_subject
                && let Ok(letter) = serde_json::from_slice::<DeadLetter>(&message.payload)
                && let Some(id) = letter.run_id()
                && pending.remove(id).is_some()
            {
                dead.push(letter);
                true
            } else {
                false
            };
            if done {
                bar.inc(1);
                progress = Clock::now();
                quiet = PROBE_FIRST;
                probe_at = progress + quiet;
            }
        }
        false
    }

    /// Removes the pending runs whose record is stored; with `resubmit`, submits the
    /// others again (once, without waiting for NATS). Returns how many were stored and
    /// whether every resubmission was taken. A store failure is logged and leaves
    /// everything pending.
    async fn probe(&self, pending: &mut HashMap<&str, usize>, resubmit: bool) -> (usize, bool) {
        let ids: Vec<&str> = pending.keys().copied().collect();
        let stored = match stored_among(self.store, &ids).await {
            Ok(stored) => stored,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the store; asking again later");
                return (0, false);
            }
        };
        for id in &stored {
            pending.remove(id);
        }
        if resubmit && !pending.is_empty() {
            let again: Vec<&Job> = self
                .jobs
                .iter()
                .filter(|j| pending.contains_key(j.run_id.as_str()))
                .collect();
            let failed = self
                .queue
                .publish_jobs(&again)
                .await
                .into_iter()
                .filter(Result::is_err)
                .count();
            tracing::info!(
                jobs = again.len(),
                failed,
                "after a broker failure: unstored jobs submitted again"
            );
            return (stored.len(), failed == 0);
        }
        (stored.len(), true)
    }
}
