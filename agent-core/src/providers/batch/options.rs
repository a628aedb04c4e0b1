//! [`ProviderBatch`], [`BatchFallback`], [`BatchReport`]: the options of a batched
//! `run_batch` and what its jobs did.

use std::time::Duration;

use serde::Serialize;

use crate::backoff::Backoff;

/// What a batched LLM call does when the provider's job gives no answer for it: the job
/// expired (the provider's 24 h window) or failed, the request errored in it, or its
/// result is missing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BatchFallback {
    /// The request is sent again at once as an ordinary live call (billed at the live
    /// price), and the run goes on with its answer. The default.
    #[default]
    Live,
    /// The LLM call fails with a transient [`LlmError`](crate::llm::LlmError) (the job's or the line's
    /// error): the run's retry rules apply, so it is sent again in the next round's job
    /// while `max_llm_retries` allows, and the run ends
    /// [`MaxLlmRetries`](crate::AgentError::MaxLlmRetries) (category `provider`) after
    /// that.
    Fail,
}

/// Runs a [`run_batch`](crate::eval::run_batch) over the provider's batch API (set with
/// the builder's `.provider_batch(..)`): each round of LLM calls of the batch's runs
/// goes as one batch job, at the provider's batch price (half the live price at OpenAI
/// and Anthropic; see `docs/batch.md`).
///
/// - `collect_window`: how long the first request of a round waits for the other
///   active runs' requests before the job is submitted anyway (a run still busy with a
///   slow tool then joins the next round). A round is submitted at once when every
///   active run has a request waiting. Default 2 s.
/// - `deadline`: how long one job may take, from its submission, before it is cancelled
///   on the provider and its runs end [`DeadlineExceeded`](crate::AgentError::DeadlineExceeded)
///   with this limit. Default 24 h (the window both providers promise).
/// - `poll`: the delay between status checks of a job (its `initial`, doubling up to
///   its `max`, jittered). Default 10 s up to 5 min.
/// - `fallback`: see [`BatchFallback`]. Default [`BatchFallback::Live`].
/// - `run_ids`: a prefix that names the batch's runs (`{prefix}-{index}`, the index in
///   input order). With a checkpoint store, calling `run_batch` again with the same
///   prefix and inputs after a crash resumes each run from its checkpoint (a finished
///   run returns its stored result, a run never started starts): only the rounds not
///   yet answered are submitted, and a call whose job the provider had accepted waits
///   on that job (each run's checkpoint names it from its acceptance) instead of being
///   sent again. Default none (the runs are named by their trace ids).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ProviderBatch {
    /// How long a round waits for the active runs' requests (see the type's docs).
    pub collect_window: Duration,
    /// How long one job may take before it is cancelled.
    pub deadline: Duration,
    /// The delays between status checks of a job.
    pub poll: Backoff,
    /// What a call with no answer in its job does.
    pub fallback: BatchFallback,
    /// The prefix that names the batch's runs, `{prefix}-{index}`.
    pub run_ids: Option<String>,
}

impl Default for ProviderBatch {
    fn default() -> Self {
        Self {
            collect_window: Duration::from_secs(2),
            deadline: Duration::from_secs(24 * 60 * 60),
            poll: Backoff::exponential(Duration::from_secs(10), Duration::from_secs(300)),
            fallback: BatchFallback::Live,
            run_ids: None,
        }
    }
}

impl ProviderBatch {
    /// The defaults (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how long a round waits for the active runs' requests.
    #[must_use]
    pub fn collect_window(mut self, window: Duration) -> Self {
        self.collect_window = window;
        self
    }

    /// Sets how long one job may take before it is cancelled.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the delays between status checks of a job.
    #[must_use]
    pub fn poll(mut self, poll: Backoff) -> Self {
        self.poll = poll;
        self
    }

    /// Sets what a call with no answer in its job does.
    #[must_use]
    pub fn fallback(mut self, fallback: BatchFallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// Names the batch's runs `{prefix}-{index}` (see the type's docs).
    #[must_use]
    pub fn run_ids(mut self, prefix: impl Into<String>) -> Self {
        self.run_ids = Some(prefix.into());
        self
    }
}

/// What the batch jobs of one [`run_batch`](crate::eval::run_batch) did (in
/// [`Batch::provider_batch`](crate::eval::Batch::provider_batch)), or of one
/// [`BatchGate`](crate::providers::BatchGate) so far ([`BatchGate::report`](crate::providers::BatchGate::report)).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchReport {
    /// The jobs submitted (one per round).
    pub jobs: u32,
    /// The requests sent in them (lines).
    pub requests: u64,
    /// The requests answered by their job (billed at the batch price).
    pub answered: u64,
    /// The requests their job did not answer (expired, cancelled, errored, missing).
    pub unanswered: u64,
    /// Of those, the ones sent again live ([`BatchFallback::Live`]).
    pub sent_live: u64,
    /// Result lines whose `custom_id` named no request of their job: ignored, never
    /// applied to a run (each is logged as a warning).
    pub unknown_results: u64,
    /// Jobs cancelled because they passed the deadline; their runs ended
    /// `deadline_exceeded`.
    pub deadline_cancelled: u32,
    /// Jobs submitted before a crash (by the `run_batch` this one resumes) that this one
    /// polled for its resumed runs' calls instead of sending them again (see
    /// `docs/batch.md`, "Crash and resume"). Not in `jobs` or `requests`; their answers
    /// and unanswered calls are in `answered`, `unanswered` and `sent_live`.
    pub resumed_jobs: u32,
}

impl BatchReport {
    /// Adds `other`'s counts to these, every field (saturating): the report of several
    /// gates, or of a gate and the stored jobs it read.
    pub fn absorb(&mut self, other: &BatchReport) {
        self.jobs = self.jobs.saturating_add(other.jobs);
        self.requests = self.requests.saturating_add(other.requests);
        self.answered = self.answered.saturating_add(other.answered);
        self.unanswered = self.unanswered.saturating_add(other.unanswered);
        self.sent_live = self.sent_live.saturating_add(other.sent_live);
        self.unknown_results = self.unknown_results.saturating_add(other.unknown_results);
        self.deadline_cancelled = self
            .deadline_cancelled
            .saturating_add(other.deadline_cancelled);
        self.resumed_jobs = self.resumed_jobs.saturating_add(other.resumed_jobs);
    }
}
