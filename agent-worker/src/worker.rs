//! [`Worker`]: pulls jobs, runs them, stores each result once, publishes, then acks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agent_core::durable::CheckpointStore;
use agent_core::providers::{BatchReport, BatchSeat};
use agent_core::store::RunRecord;
use agent_core::{CancellationToken, store::FeedbackStore};
use async_nats::jetstream::{AckKind, Message};
use futures::StreamExt;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::error::QueueError;
use crate::gates::Gates;
use crate::job::{DeadLetter, Done, Job};
use crate::queue::Queue;
use crate::registry::{META_DELIVERY, Registry};

/// How a worker runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// The most jobs this worker runs at once (default 16). It pulls only as many jobs
    /// as it has free slots, so a busy worker leaves the rest to other workers.
    pub max_in_flight: usize,
    /// How long one pull waits for jobs before it checks for shutdown again
    /// (default 500 ms).
    pub poll: Duration,
    /// Whether runs are checkpointed into the worker's own store when their agent's
    /// config has no checkpoint store (default `true`, C62): a job redelivered after
    /// its worker died continues its run from the checkpoint instead of running it
    /// again, so a tool that completed does not run twice. `false` (CLI
    /// `--no-checkpoints`) runs such agents as configured: a redelivered job starts
    /// its run again. Configs with their own checkpoint store always use it.
    pub checkpoints: bool,
    /// The lease of the runs this worker runs (default
    /// [`LEASE`](agent_core::durable::LEASE), 60 s): renewed every third of it while a
    /// run goes on; a run whose lease lapsed is the sweeper's.
    pub lease: Duration,
    /// How often the sweeper looks for unfinished runs whose lease lapsed (default
    /// 30 s; `None` turns it off): each is put back on the queue as a job, or, when no
    /// agent here has its name, reported (an error log and
    /// [`WorkerReport::orphans`]). So a run that no job brings back (a process that
    /// ran it in-process died, a job acked too early, a dead-lettered redelivery)
    /// continues at most `lease + sweep_every` (90 s by default) after its process
    /// stopped. Only with checkpoints.
    pub sweep_every: Option<Duration>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            max_in_flight: 16,
            poll: Duration::from_millis(500),
            checkpoints: true,
            lease: agent_core::durable::LEASE,
            sweep_every: Some(Duration::from_secs(30)),
        }
    }
}

impl WorkerOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The most jobs run at once (at least 1).
    #[must_use]
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }

    /// Whether to checkpoint runs into the worker's store when their config has no
    /// checkpoint store (see [`checkpoints`](Self#structfield.checkpoints)).
    #[must_use]
    pub fn checkpoints(mut self, on: bool) -> Self {
        self.checkpoints = on;
        self
    }

    /// The runs' lease (at least 100 ms; see [`lease`](Self#structfield.lease)).
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(100));
        self
    }

    /// How often the sweeper looks (at least 100 ms), or `None`: no sweeper (see
    /// [`sweep_every`](Self#structfield.sweep_every)).
    #[must_use]
    pub fn sweep_every(mut self, every: Option<Duration>) -> Self {
        self.sweep_every = every.map(|e| e.max(Duration::from_millis(100)));
        self
    }
}

/// What a worker did, returned when it stops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Jobs this worker ran and stored.
    pub runs: u64,
    /// Jobs whose result was already stored (a redelivery after another worker
    /// stored it but did not ack): not run again, only acked.
    pub duplicates: u64,
    /// Jobs this worker dead-lettered.
    pub dead_lettered: u64,
    /// Jobs handed back for a later delivery (the store or NATS failed, or no agent of
    /// that name here).
    pub retried: u64,
    /// Jobs let go because another process has their run (it took the run over from its
    /// checkpoint, [`QueueError::Fenced`]): neither stored nor acked here.
    pub fenced: u64,
    /// Jobs of paused runs delivered before every pending call had a decision
    /// ([`QueueError::Waiting`]): acked, nothing run, the `paused` record kept.
    pub waiting: u64,
    /// Unfinished runs whose lease had lapsed that the sweeper put back on the queue.
    pub swept: u64,
    /// Unfinished runs whose lease had lapsed that the sweeper could not put back: no
    /// agent of this worker has their agent's name (reported once per run and lease).
    pub orphans: u64,
    /// What the provider batch jobs of this worker did, per registered agent name: only
    /// the agents whose config has `.provider_batch(..)` and that ran a job here (each
    /// has one gate while the worker runs; see `docs/batch.md`, "Over the queue").
    pub provider_batch: BTreeMap<String, BatchReport>,
}

#[derive(Default)]
struct Counters {
    runs: AtomicU64,
    duplicates: AtomicU64,
    dead_lettered: AtomicU64,
    retried: AtomicU64,
    fenced: AtomicU64,
    waiting: AtomicU64,
    swept: Arc<AtomicU64>,
    orphans: Arc<AtomicU64>,
}

struct Inner {
    queue: Queue,
    store: Arc<dyn FeedbackStore>,
    /// The worker's own store as a checkpoint store (unless checkpoints are off).
    checkpoints: Option<Arc<dyn CheckpointStore>>,
    registry: Registry,
    counters: Counters,
    lease: Duration,
    /// The provider batch gates of the agents with `.provider_batch(..)`.
    gates: Gates,
}

/// A stateless worker: the agents it can run, the queue it serves and the store its
/// results go to. Run as many as you like, in as many processes as you like.
///
/// Per job: decode it; past the queue's `max_deliveries` dead-letter it; if its run id
/// already has a stored result other than `paused`, publish that and ack (a
/// redelivery); else run it (an
/// in-progress ack every third of the ack wait keeps it ours), store the record (an
/// upsert keyed by run id), publish a [`Done`] on `<ns>.results`, then ack. A worker
/// killed at any point loses nothing: the unacked job is delivered again after the ack
/// wait, and the store keeps one result per run id. With a checkpoint store in the
/// agent's config, a redelivered job continues its run from its checkpoint instead of
/// running it again ([`Registry::run`]).
///
/// A run that pauses (a call waits for approval or an outside result) is stored with
/// ending `paused` and its job acked, so it holds no slot while it waits. After the
/// decisions are recorded (`agent_core::durable::record_decisions`), [`Queue::resume`] puts the
/// job back; the worker that gets it continues the run from its checkpoint. A job of a
/// paused run delivered before every pending call has a decision is acked without
/// running anything ([`WorkerReport::waiting`]).
///
/// The store must make `record` durable before it resolves (agent-store's `Store`
/// without write-behind does), else a crash between the ack and the commit would lose
/// the result.
pub struct Worker {
    inner: Arc<Inner>,
    options: WorkerOptions,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("registry", &self.inner.registry)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker for `queue`, storing results in `store` and, unless
    /// [`WorkerOptions::checkpoints`] is off, checkpointing into it the runs of agents
    /// whose config has no checkpoint store ([`Registry::with_default_checkpoints`]),
    /// with the sweeper on (`WorkerOptions::sweep_every`).
    pub fn new<S>(queue: Queue, store: Arc<S>, registry: Registry, options: WorkerOptions) -> Self
    where
        S: FeedbackStore + CheckpointStore + 'static,
    {
        let checkpoints: Arc<dyn CheckpointStore> = store.clone();
        let results: Arc<dyn FeedbackStore> = store;
        let checkpoints = options.checkpoints.then_some(checkpoints);
        Self::build(queue, results, checkpoints, registry, options)
    }

    /// A worker whose store keeps results only (not a checkpoint store): runs are
    /// durable only when their agent's config has a checkpoint store, and there is no
    /// sweeper. [`Worker::new`] with a store that is both is the durable default.
    pub fn results_only(
        queue: Queue,
        store: Arc<dyn FeedbackStore>,
        registry: Registry,
        options: WorkerOptions,
    ) -> Self {
        Self::build(queue, store, None, registry, options)
    }

    fn build(
        queue: Queue,
        store: Arc<dyn FeedbackStore>,
        checkpoints: Option<Arc<dyn CheckpointStore>>,
        registry: Registry,
        options: WorkerOptions,
    ) -> Self {
        let registry = match &checkpoints {
            Some(c) => registry.with_default_checkpoints(c),
            None => registry,
        };
        Self {
            inner: Arc::new(Inner {
                queue,
                store,
                checkpoints,
                registry,
                counters: Counters::default(),
                lease: options.lease,
                gates: Gates::default(),
            }),
            options,
        }
    }

    /// Pulls and runs jobs until `shutdown` is cancelled, then drains: it pulls no more,
    /// finishes (stores, publishes and acks) every job it holds, and returns.
    ///
    /// # Errors
    /// [`QueueError::Nats`] when the workers' consumer cannot be found at start. Later
    /// NATS failures are retried every second until shutdown.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<WorkerReport, QueueError> {
        let mut consumer = self.inner.queue.consumer().await?;
        // The consumer's ack wait is the one that counts (set by whoever created it).
        let ack_wait = consumer
            .info()
            .await
            .map_or(self.inner.queue.options.ack_wait, |i| i.config.ack_wait);
        let _gates = crate::gates::StopOnDrop(&self.inner.gates);
        let slots = Arc::new(Semaphore::new(self.options.max_in_flight.max(1)));
        let mut tasks = JoinSet::new();
        let sweeper = match (&self.inner.checkpoints, self.options.sweep_every) {
            (Some(store), Some(every)) => {
                let sweep = crate::sweeper::Sweep {
                    store: Arc::clone(store),
                    registry: self.inner.registry.clone(),
                    queue: self.inner.queue.clone(),
                    swept: Arc::clone(&self.inner.counters.swept),
                    orphans: Arc::clone(&self.inner.counters.orphans),
                };
                Some(tokio::spawn(crate::sweeper::sweep(
                    sweep,
                    every,
                    shutdown.clone(),
                )))
            }
            _ => None,
        };
        loop {
            let first = tokio::select! {
                () = shutdown.cancelled() => break,
                permit = Arc::clone(&slots).acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let mut permits = vec![first];
            while let Ok(p) = Arc::clone(&slots).try_acquire_owned() {
                permits.push(p);
            }
            let batch = consumer
                .batch()
                .max_messages(permits.len())
                .expires(self.options.poll)
                .messages()
                .await;
            let mut batch = match batch {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot pull jobs; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            // The whole batch is read (at most `poll`), even after shutdown: every job
            // delivered to this worker is finished, none waits for its ack wait.
            while let Some(message) = batch.next().await {
                match message {
                    Ok(message) => {
                        // Taken as the job comes in: a round of the agent's batch gate
                        // waits for this run's call (up to its collect window).
                        let seat = seat_for(&self.inner, &message);
                        let Some(permit) = permits.pop() else {
                            // More than asked for: run it anyway, without a slot.
                            let inner = Arc::clone(&self.inner);
                            tasks.spawn(async move {
                                process(&inner, message, ack_wait, seat).await;
                            });
                            continue;
                        };
                        let inner = Arc::clone(&self.inner);
                        tasks.spawn(async move {
                            process(&inner, message, ack_wait, seat).await;
                            drop(permit);
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "a pull failed");
                        break;
                    }
                }
            }
            drop(permits);
            while tasks.try_join_next().is_some() {}
        }
        while tasks.join_next().await.is_some() {}
        // No run holds a seat any more: each gate's driver returns.
        self.inner.gates.stop().await;
        if let Some(sweeper) = sweeper {
            // It stops at the shutdown, between two looks.
            let _ = sweeper.await;
        }
        Ok(self.report())
    }

    /// What this worker did so far.
    pub fn report(&self) -> WorkerReport {
        let c = &self.inner.counters;
        WorkerReport {
            runs: c.runs.load(Ordering::Relaxed),
            duplicates: c.duplicates.load(Ordering::Relaxed),
            dead_lettered: c.dead_lettered.load(Ordering::Relaxed),
            retried: c.retried.load(Ordering::Relaxed),
            fenced: c.fenced.load(Ordering::Relaxed),
            waiting: c.waiting.load(Ordering::Relaxed),
            swept: c.swept.load(Ordering::Relaxed),
            orphans: c.orphans.load(Ordering::Relaxed),
            provider_batch: self.inner.gates.reports(),
        }
    }
}

/// The job's seat at its agent's provider batch gate, when the agent is registered here
/// and its config has `.provider_batch(..)`; only the agent's name is read (a job that
/// does not decode is dead-lettered by [`process`]).
fn seat_for(inner: &Inner, message: &Message) -> Option<BatchSeat> {
    #[derive(serde::Deserialize)]
    struct Named {
        agent: String,
    }
    let named: Named = serde_json::from_slice(&message.payload).ok()?;
    inner.gates.seat(&inner.registry, &named.agent)
}

async fn ack(message: &Message, kind: AckKind) {
    if let Err(e) = message.ack_with(kind).await {
        tracing::warn!(error = %e, "an ack failed; the job will be delivered again");
    }
}

/// Hands the job back for a later delivery.
async fn retry(inner: &Inner, message: &Message, why: &str) {
    tracing::warn!(reason = why, "job handed back");
    inner.counters.retried.fetch_add(1, Ordering::Relaxed);
    ack(message, AckKind::Nak(Some(Duration::from_secs(1)))).await;
}

async fn process(inner: &Inner, message: Message, ack_wait: Duration, seat: Option<BatchSeat>) {
    let deliveries = message.info().map_or(1, |i| i.delivered.max(1) as u64);
    let job: Job = match serde_json::from_slice(&message.payload) {
        Ok(job) => job,
        Err(e) => {
            let letter = DeadLetter {
                job: None,
                payload: Some(String::from_utf8_lossy(&message.payload).into_owned()),
                deliveries,
                reason: format!("the job does not decode: {e}"),
            };
            dead_letter(inner, &message, &letter).await;
            return;
        }
    };
    let max = inner.queue.options.max_deliveries;
    if deliveries > max {
        let letter = DeadLetter {
            job: Some(job),
            payload: None,
            deliveries,
            reason: format!(
                "delivered {deliveries} times; the {max} deliveries before were never acked \
                 (their workers crashed, stalled or could not run it)"
            ),
        };
        dead_letter(inner, &message, &letter).await;
        return;
    }
    match inner.store.run(&job.run_id).await {
        // A paused run's job is back (`Queue::resume`): continue it below.
        Ok(Some(stored)) if stored.ending == agent_core::Ending::Paused => {}
        Ok(Some(stored)) => {
            inner.counters.duplicates.fetch_add(1, Ordering::Relaxed);
            finish(inner, &message, &stored).await;
            return;
        }
        Ok(None) => {}
        Err(e) => return retry(inner, &message, &format!("store read failed: {e}")).await,
    }
    if !inner.registry.contains(&job.agent) {
        return retry(inner, &message, &format!("no agent {:?} here", job.agent)).await;
    }
    let record = {
        let run = inner.registry.run_seated(&job, Some(inner.lease), seat);
        tokio::pin!(run);
        let beat = (ack_wait / 3).max(Duration::from_millis(30));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
        loop {
            tokio::select! {
                record = &mut run => break record,
                _ = ticks.tick() => ack(&message, AckKind::Progress).await,
            }
        }
    };
    let mut record = match record {
        Ok(r) => r,
        // The checkpoint store could not be read: like any store read, try later.
        Err(QueueError::Store(e)) => {
            return retry(inner, &message, &format!("checkpoint read failed: {e}")).await;
        }
        // Another process has the run and stores its record; the job's current
        // delivery is its, so this stale one is neither acked nor handed back.
        // Paused and not yet decided: the job comes back with `Queue::resume`.
        Err(QueueError::Waiting { run_id, waiting_on }) => {
            tracing::info!(run_id, ?waiting_on, "paused run not decided yet; job acked");
            inner.counters.waiting.fetch_add(1, Ordering::Relaxed);
            ack(&message, AckKind::Ack).await;
            return;
        }
        Err(QueueError::Fenced { run_id }) => {
            tracing::warn!(run_id, "another process took the run over; job let go");
            inner.counters.fenced.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Err(e) => {
            let letter = DeadLetter {
                job: Some(job),
                payload: None,
                deliveries,
                reason: e.to_string(),
            };
            dead_letter(inner, &message, &letter).await;
            return;
        }
    };
    record
        .metadata
        .insert(META_DELIVERY.to_owned(), deliveries.to_string());
    if let Err(e) = inner.store.record(&record).await {
        return retry(inner, &message, &format!("store write failed: {e}")).await;
    }
    inner.counters.runs.fetch_add(1, Ordering::Relaxed);
    finish(inner, &message, &record).await;
}

/// Publishes the stored result's [`Done`] and acks; hands the job back when the
/// publish fails (the next delivery finds the stored result and publishes again).
async fn finish(inner: &Inner, message: &Message, record: &RunRecord) {
    let done = Done {
        run_id: record.trace_id.clone(),
        ending: record.ending,
    };
    match publish(inner, "results", &done).await {
        Ok(()) => ack(message, AckKind::Ack).await,
        Err(e) => retry(inner, message, &format!("publish failed: {e}")).await,
    }
}

async fn dead_letter(inner: &Inner, message: &Message, letter: &DeadLetter) {
    tracing::error!(
        run_id = letter.run_id().unwrap_or("?"),
        deliveries = letter.deliveries,
        reason = %letter.reason,
        "job dead-lettered"
    );
    match publish(inner, "dead", letter).await {
        Ok(()) => {
            inner.counters.dead_lettered.fetch_add(1, Ordering::Relaxed);
            ack(message, AckKind::Term).await;
        }
        Err(e) => retry(inner, message, &format!("dead-letter publish failed: {e}")).await,
    }
}

async fn publish<T: serde::Serialize>(
    inner: &Inner,
    leaf: &str,
    value: &T,
) -> Result<(), QueueError> {
    let payload = serde_json::to_vec(value)
        .map_err(|e| QueueError::invalid(format!("event does not encode: {e}")))?;
    let ack = inner
        .queue
        .js
        .publish(inner.queue.subject(leaf), payload.into())
        .await
        .map_err(QueueError::nats)?;
    ack.await.map_err(QueueError::nats).map(drop)
}
