//! [`Job`]: one run on the queue, and the events workers publish about it.

use serde::{Deserialize, Serialize};

/// One run to do: which registered agent, on what input, under which run id.
///
/// The run id is the key of the run's stored result: a job delivered twice (a worker
/// died before it acked) is stored once. It must be non-empty, without NUL bytes; ids
/// made by this crate are `<batch>-<index>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Job {
    /// The name the agent is registered under on the workers.
    pub agent: String,
    /// The run's input (the user message).
    pub input: String,
    /// The run's id: the key of its stored result.
    pub run_id: String,
}

impl Job {
    /// A job for `agent` on `input`, stored under `run_id`.
    pub fn new(
        agent: impl Into<String>,
        input: impl Into<String>,
        run_id: impl Into<String>,
    ) -> Self {
        Self {
            agent: agent.into(),
            input: input.into(),
            run_id: run_id.into(),
        }
    }
}

/// What a worker publishes once a job's result is stored (on `<namespace>.results`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Done {
    /// The job's run id; its result is in the store under this key.
    pub run_id: String,
    /// How the run ended (`answered`, `failed`, ...).
    pub ending: agent_core::Ending,
}

/// A job that was not run: it crashed workers (or was refused) too many times, or its
/// payload does not decode. Published on `<namespace>.dead` and kept in the events
/// stream, so it is reported, not lost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The job, when its payload decoded.
    pub job: Option<Job>,
    /// The raw payload when it did not decode (lossy UTF-8).
    pub payload: Option<String>,
    /// How many times the job had been delivered, this delivery included.
    pub deliveries: u64,
    /// Why it was set aside.
    pub reason: String,
}

impl DeadLetter {
    /// The run id of the job, when it decoded.
    pub fn run_id(&self) -> Option<&str> {
        self.job.as_ref().map(|j| j.run_id.as_str())
    }
}
