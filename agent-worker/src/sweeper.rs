//! The sweeper: finds the unfinished runs no process holds (their lease lapsed) and
//! puts each back on the queue as a job, or reports it when no agent here has its name
//! (see `docs/durable.md`, "Leases and the sweeper", and `docs/scale-out.md`).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use std::sync::atomic::AtomicU64;

use agent_core::CancellationToken;
use agent_core::durable::{CheckpointStore, unfinished_runs};

use crate::job::Job;
use crate::queue::Queue;
use crate::registry::{Registry, now_ms};

/// What the sweeper works with: a worker's checkpoint store, agents and queue, and the
/// worker's counters it adds to.
pub(crate) struct Sweep {
    pub(crate) store: Arc<dyn CheckpointStore>,
    pub(crate) registry: Registry,
    pub(crate) queue: Queue,
    pub(crate) swept: Arc<AtomicU64>,
    pub(crate) orphans: Arc<AtomicU64>,
}

/// The most unfinished runs one look reads.
const LOOK_LIMIT: usize = 1024;

/// Looks every `every` until `shutdown`.
pub(crate) async fn sweep(inner: Sweep, every: Duration, shutdown: CancellationToken) {
    let mut reported: HashSet<(String, u64)> = HashSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        look(&inner, &mut reported).await;
    }
}

/// One look: every unfinished, unpaused run whose lease lapsed goes back on the queue
/// (or is reported once per run and lease).
async fn look(inner: &Sweep, reported: &mut HashSet<(String, u64)>) {
    let store = &inner.store;
    let runs = match unfinished_runs(store.as_ref(), LOOK_LIMIT).await {
        Ok(runs) => runs,
        Err(error) => {
            tracing::warn!(error = %error, "the sweeper cannot read the unfinished runs; trying at its next look");
            return;
        }
    };
    let now = now_ms();
    for run in runs.iter().filter(|r| r.orphaned_at(now)) {
        let Some(name) = inner.registry.name_of(&run.agent) else {
            if reported.insert((run.run_id.clone(), run.lease_until_ms)) {
                tracing::error!(
                    run_id = %run.run_id,
                    agent = %run.agent,
                    lapsed_ms = now.saturating_sub(run.lease_until_ms),
                    "an unfinished run no process holds, of an agent this worker does not have: resume it where its agent runs"
                );
                inner.orphans.fetch_add(1, Ordering::Relaxed);
            }
            continue;
        };
        let job = Job::new(name, run.input.clone(), run.run_id.clone());
        match inner.queue.sweep(&job, run.lease_until_ms).await {
            Ok(()) => {
                tracing::info!(run_id = %run.run_id, "an unfinished run no process holds was put back on the queue");
                inner.swept.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(run_id = %run.run_id, error = %error, "the sweeper cannot queue an unfinished run; trying at its next look");
            }
        }
    }
}
