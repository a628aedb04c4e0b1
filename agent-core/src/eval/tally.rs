//! [`RunTally`]: what a receipt counts of one run, whether it comes from an
//! [`AgentResult`] in memory or from a stored record. [`Receipt`](crate::eval::Receipt) and
//! [`TurnStats`](crate::eval::TurnStats) are tallied from these alone, so a receipt built in
//! process (`run_batch`) and one built from a store (agent-worker's queued batches)
//! count the same way.

use std::time::Duration;

use crate::error::{Category, Ending};
use crate::result::AgentResult;
use crate::usage::Usage;

/// One run as a receipt counts it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunTally {
    /// How the run ended.
    pub ending: Ending,
    /// Its error's category, when it failed (`None` for an answer, and for a stored
    /// category this version does not know).
    pub category: Option<Category>,
    /// Whether the answer is partial (`AgentResult::is_partial`).
    pub partial: bool,
    /// What the run spent.
    pub usage: Usage,
    /// How long it took.
    pub duration: Duration,
    /// Store calls of the run that failed.
    pub store_failures: u64,
}

impl RunTally {
    /// A run with this ending, spend and duration; no category, not partial, no store
    /// failures (set them with the `with_` methods).
    pub fn new(ending: Ending, usage: Usage, duration: Duration) -> Self {
        Self {
            ending,
            category: None,
            partial: false,
            usage,
            duration,
            store_failures: 0,
        }
    }

    /// With the error's category.
    #[must_use]
    pub fn with_category(mut self, category: Option<Category>) -> Self {
        self.category = category;
        self
    }

    /// With whether the answer is partial.
    #[must_use]
    pub fn with_partial(mut self, partial: bool) -> Self {
        self.partial = partial;
        self
    }

    /// With the run's failed store calls.
    #[must_use]
    pub fn with_store_failures(mut self, failures: u64) -> Self {
        self.store_failures = failures;
        self
    }
}

impl<T> From<&AgentResult<T>> for RunTally {
    fn from(result: &AgentResult<T>) -> Self {
        RunTally::new(result.ending(), result.usage.clone(), result.duration)
            .with_category(result.outcome.as_ref().err().map(|e| e.kind()))
            .with_partial(result.is_partial())
            .with_store_failures(u64::from(result.store_failures))
    }
}
