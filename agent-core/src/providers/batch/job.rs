//! One provider job after its submission, as the gate and the resumed calls wait on it:
//! polled with backoff until it ends, fails or passes its deadline ([`wait`]), cancelled
//! past the deadline ([`cancel`]), and what a call waiting on it gets back ([`Reply`]).

use std::time::Duration;

use tokio::time::Instant;

use super::wire::{BatchWire, JobState};
use crate::backoff::Backoff;
use crate::llm::{LlmError, LlmResponse};

/// What a call waiting on a job gets back.
pub(crate) enum Reply {
    /// The job's answer (its usage marked batch-priced).
    Answer(LlmResponse),
    /// The job did not answer it: transient (expired, cancelled, missing, the job
    /// failed) or the request's own permanent error.
    Unanswered(LlmError),
    /// The job passed the batch's deadline (this limit) and was cancelled.
    Deadline(Duration),
}

/// How waiting on a job ended.
pub(crate) enum Waited {
    /// Processing ended: where its results are, and the provider's word on why requests
    /// went unanswered, when it says (see [`JobState::Ended`]).
    Ended {
        results: Vec<String>,
        note: Option<String>,
    },
    /// The job had not ended at its deadline.
    Deadline,
    /// A status read failed permanently (the job is unknown to the provider, ...).
    Failed(LlmError),
}

/// Polls `job` after `poll`'s delays (the first after its `initial`) until it ends or
/// a status read fails permanently; a transient failure is retried at the next poll.
/// [`Waited::Deadline`] at `due` when the next poll would come after it.
pub(crate) async fn wait(wire: &dyn BatchWire, poll: &Backoff, job: &str, due: Instant) -> Waited {
    let mut attempt = 0;
    loop {
        let delay = poll.delay(attempt, None);
        attempt = attempt.saturating_add(1);
        if Instant::now() + delay >= due {
            tokio::time::sleep_until(due).await;
            return Waited::Deadline;
        }
        tokio::time::sleep(delay).await;
        match wire.poll(job).await {
            Ok(JobState::Running) => {}
            Ok(JobState::Ended { results, note }) => return Waited::Ended { results, note },
            Err(error) if error.is_transient() => {
                tracing::debug!(batch.job = %job, error = %error.message, "batch poll failed");
            }
            Err(error) => return Waited::Failed(error),
        }
    }
}

/// Asks the provider to cancel `job`, which passed its deadline (best effort: a
/// failure is logged).
pub(crate) async fn cancel(wire: &dyn BatchWire, job: &str) {
    tracing::warn!(batch.job = %job, "provider batch job passed its deadline: cancelled");
    if let Err(error) = wire.cancel(job).await {
        tracing::warn!(batch.job = %job, error = %error.message, "cancelling the batch job failed");
    }
}

/// A job's failure as a whole, given to each of its requests: transient, since they may
/// succeed sent again.
pub(crate) fn as_transient(error: &LlmError) -> LlmError {
    let mut error = error.clone();
    error.kind = crate::llm::LlmErrorKind::Transient;
    error
}
