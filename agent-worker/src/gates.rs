//! [`Gates`]: a worker's provider batch gates, one per registered agent whose config has
//! `.provider_batch(..)`, made at the agent's first job, driven by a task the worker
//! owns, closed when the worker stops. Every run of such an agent on this worker holds a
//! seat at its agent's gate, so the runs' calls go out as batch jobs (see
//! `docs/batch.md`, "Over the queue"). A worker whose `run` future is dropped stops
//! the drivers too ([`StopOnDrop`]).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use agent_core::providers::{BatchGate, BatchReport, BatchSeat};
use tokio::task::JoinHandle;

use crate::registry::Registry;

/// One agent's gate and the task driving it.
struct Open {
    gate: BatchGate,
    driver: JoinHandle<()>,
}

/// The gates of one worker, by registered agent name.
#[derive(Default)]
pub(crate) struct Gates {
    open: Mutex<BTreeMap<String, Open>>,
    /// What the gates closed before did (a worker run again makes new ones).
    closed: Mutex<BTreeMap<String, BatchReport>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Gates {
    /// A seat at `agent`'s gate when its config has `.provider_batch(..)` (the gate is
    /// made, and its driver spawned, at the first call), else `None`. Call it inside a
    /// Tokio runtime.
    pub(crate) fn seat(&self, registry: &Registry, agent: &str) -> Option<BatchSeat> {
        let mut open = lock(&self.open);
        if let Some(entry) = open.get(agent) {
            return Some(entry.gate.seat());
        }
        let gate = registry.batch_gate(agent)?;
        let seat = gate.seat();
        let driver = tokio::spawn(gate.drive());
        tracing::info!(agent, "provider batch gate opened");
        open.insert(agent.to_owned(), Open { gate, driver });
        Some(seat)
    }

    /// Closes every gate and waits for its driver (call it once no run holds a seat:
    /// the driver returns when nothing waits).
    pub(crate) async fn stop(&self) {
        let open = std::mem::take(&mut *lock(&self.open));
        for (agent, entry) in open {
            entry.gate.close();
            if let Err(error) = entry.driver.await {
                tracing::warn!(agent, %error, "a provider batch gate's driver failed");
            }
            let report = entry.gate.report();
            tracing::info!(
                agent,
                batch.jobs = report.jobs,
                batch.requests = report.requests,
                batch.answered = report.answered,
                batch.sent_live = report.sent_live,
                batch.resumed_jobs = report.resumed_jobs,
                "provider batch gate closed"
            );
            lock(&self.closed).entry(agent).or_default().absorb(&report);
        }
    }

    /// Stops every gate's driver at once (the worker's `run` future was dropped: its
    /// runs were dropped with it, nothing waits for an answer).
    pub(crate) fn abort(&self) {
        let open = std::mem::take(&mut *lock(&self.open));
        for (agent, entry) in open {
            entry.driver.abort();
            lock(&self.closed)
                .entry(agent)
                .or_default()
                .absorb(&entry.gate.report());
        }
    }

    /// What each agent's gates did so far (closed and open ones), by registered name.
    pub(crate) fn reports(&self) -> BTreeMap<String, BatchReport> {
        let mut out = lock(&self.closed).clone();
        for (agent, entry) in lock(&self.open).iter() {
            out.entry(agent.clone())
                .or_default()
                .absorb(&entry.gate.report());
        }
        out
    }
}

/// Aborts the gates' drivers when dropped: held by `Worker::run`, so a worker stopped
/// by dropping its future (its task aborted) leaves no driver behind. After a graceful
/// stop no gate is open and it does nothing.
pub(crate) struct StopOnDrop<'a>(pub(crate) &'a Gates);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
