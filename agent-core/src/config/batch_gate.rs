//! [`AgentConfig::batch_gate`]: a provider batch gate for the runs of a config with
//! `.provider_batch(..)` (see `providers/batch/handle.rs` and `docs/batch.md`).

use crate::config::AgentConfig;
use crate::providers::BatchGate;

impl<T> AgentConfig<T> {
    /// A new [`BatchGate`] for this config's runs when it has `.provider_batch(..)`
    /// (the route's batch endpoints and the [`ProviderBatch`](crate::providers::ProviderBatch)
    /// options), else `None`. Its seats gate the calls to this config's primary model,
    /// and to the primary of any config derived from it with `with_` that keeps the
    /// model (same route). `run_batch` makes one per call; a queue worker, one per
    /// batched agent for its life. Each call makes a separate gate: share the handle
    /// (it is `Clone`) for runs meant to share jobs.
    pub fn batch_gate(&self) -> Option<BatchGate> {
        let options = self.inner.settings_provider_batch()?;
        let wire = self.inner.primary().batch.clone()?;
        Some(BatchGate::new(wire, options.clone()))
    }
}
