//! [`BatchGate`] and [`BatchSeat`]: the public handle of a gate (`gate.rs`) that any
//! number of runs share, for as long as its owner likes: one `run_batch`, or a queue
//! worker's life. `AgentConfig::batch_gate` makes one from a config with
//! `.provider_batch(..)`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::gate::{Gate, Seat};
use super::options::{BatchReport, ProviderBatch};
use super::wire::BatchWire;

/// A provider batch gate (OpenAI Batch API, Anthropic Message Batches) that runs share:
/// each run given a [`BatchSeat`] of it (with
/// [`RunOptions::batch_seat`](crate::RunOptions::batch_seat)) sends its calls to the
/// config's primary model through it, and the gate sends each **round** of waiting calls
/// as one batch job, billed at the batch price. Made by
/// [`AgentConfig::batch_gate`](crate::AgentConfig::batch_gate); `run_batch` makes one
/// per call, an `agent-worker` `Worker` one per batched agent for its whole life.
///
/// A round is submitted when every run holding a seat has a call waiting, or when the
/// first waiting call has waited the config's `collect_window` (counted from the end of
/// the job in flight, for calls that came while one was). One job is in flight at a
/// time: calls that come meanwhile (a run that just took its seat, a retry) go in the
/// next. With no seat taken, or none waiting, the gate sends nothing and costs nothing.
///
/// The owner runs [`drive`](Self::drive) (spawned, or joined with the runs): nothing is
/// submitted without it. [`close`](Self::close) lets the driver return once no call is
/// waiting; a call made after the driver returned fails at once with a transient
/// [`LlmError`](crate::llm::LlmError) (the run's retry rules apply). Cloning gives
/// another handle to the same gate. The rules are in `docs/batch.md`.
#[derive(Clone)]
pub struct BatchGate {
    gate: Arc<Gate>,
}

impl BatchGate {
    /// A gate over `wire` with `options`.
    pub(crate) fn new(wire: Arc<dyn BatchWire>, options: ProviderBatch) -> Self {
        Self {
            gate: Gate::new(wire, options),
        }
    }

    /// A seat for a run that starts now: the gate counts it as active (a round waits
    /// for its call, up to `collect_window`) until the seat, and the run holding it,
    /// are dropped. Give it to the run with
    /// [`RunOptions::batch_seat`](crate::RunOptions::batch_seat). Take it when the run
    /// starts, not ahead of time: a seat whose run does not run holds each round back
    /// for the whole `collect_window`.
    pub fn seat(&self) -> BatchSeat {
        BatchSeat {
            seat: Arc::new(self.gate.seat()),
        }
    }

    /// The gate's driver: submits each round as a job, polls it, hands out the answers.
    /// Resolves once [`close`](Self::close) was called and no call waits; spawn it
    /// (`tokio::spawn(gate.drive())`) or join it with the runs.
    pub fn drive(&self) -> impl Future<Output = ()> + Send + 'static {
        let gate = Arc::clone(&self.gate);
        async move { gate.drive().await }
    }

    /// Lets [`drive`](Self::drive) return once no call waits (calls already waiting
    /// are still sent). Call it when no run will take a seat any more.
    pub fn close(&self) {
        self.gate.close();
    }

    /// What the gate's jobs did so far: jobs, requests (lines), answered, unanswered,
    /// sent live, unknown result lines, jobs cancelled at the deadline.
    pub fn report(&self) -> BatchReport {
        self.gate.report()
    }
}

impl fmt::Debug for BatchGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchGate")
            .field("report", &self.report())
            .finish_non_exhaustive()
    }
}

/// One run's place at a [`BatchGate`] ([`BatchGate::seat`]), given to the run with
/// [`RunOptions::batch_seat`](crate::RunOptions::batch_seat). Its calls to the model
/// the gate was made for wait at the gate for their round's job; a call to any other
/// model (a fallback, a handoff's agent, a config on another route) goes live. The
/// gate counts the run as active until the seat is dropped (when the run ends).
pub struct BatchSeat {
    seat: Arc<Seat>,
}

impl BatchSeat {
    /// The seat as the run holds it.
    pub(crate) fn into_inner(self) -> Arc<Seat> {
        self.seat
    }
}

impl fmt::Debug for BatchSeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchSeat").finish_non_exhaustive()
    }
}
