//! [`QueueError`]: what can go wrong around the queue (never inside a run: a run ends in
//! its own typed result).

use agent_core::store::StoreError;

/// A failure of the queue, the store or a job's encoding. A run's own failure is never
/// one of these: it is a stored result with its ending.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// NATS or JetStream refused or could not be reached.
    #[error("nats: {message}")]
    Nats {
        /// What the client said (no credentials: URLs are not included).
        message: String,
    },
    /// The result store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another process has the job's run (it took the run over from its checkpoint):
    /// this one stopped and must neither store nor acknowledge a result; the other
    /// stores it.
    #[error("run {run_id} is being run by another process (fenced)")]
    Fenced {
        /// The run id.
        run_id: String,
    },
    /// The job's run is paused and a pending call of it has no decision yet: the
    /// delivery came too early (see [`Queue::resume`](crate::Queue::resume)). Nothing
    /// ran and nothing was stored; the worker acks the job and keeps the stored
    /// `paused` record.
    #[error("run {run_id} is paused and waits for decisions on: {}", .waiting_on.join(", "))]
    Waiting {
        /// The run id.
        run_id: String,
        /// The call ids that have no decision.
        waiting_on: Vec<String>,
    },
    /// A job, a result or an option is malformed.
    #[error("invalid: {message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
}

impl QueueError {
    pub(crate) fn nats(e: impl std::fmt::Display) -> Self {
        Self::Nats {
            message: e.to_string(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid {
            message: message.into(),
        }
    }
}
