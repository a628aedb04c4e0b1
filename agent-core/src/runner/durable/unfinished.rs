//! The unfinished runs a checkpoint store holds, with whether anyone holds them: what a
//! sweeper reads to find the runs no process brings back (see `docs/durable.md`,
//! "Leases and the sweeper").

use crate::store::{CheckpointStore, StoreError};

use super::{Header, Phase, Snapshot};

/// A run in a checkpoint store that has not finished (see [`unfinished_runs`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct UnfinishedRun {
    /// The run id (what [`resume_agent`](crate::resume_agent) takes).
    pub run_id: String,
    /// The name of the agent that started it ([`AgentConfig::name`](crate::AgentConfig::name)).
    pub agent: String,
    /// The run's input.
    pub input: String,
    /// Whether it is paused: it waits for decisions ([`paused_runs`](super::pause::paused_runs)),
    /// not for a process.
    pub paused: bool,
    /// When its checkpoint was last saved (ms since the Unix epoch).
    pub updated_at_ms: u64,
    /// Until when the process running it holds it (ms since the Unix epoch;
    /// [`CheckpointRecord::lease_until_ms`](crate::store::CheckpointRecord::lease_until_ms)).
    /// For a checkpoint written before leases (0, not paused), its save's time plus
    /// [`LEASE`](super::lease::LEASE).
    pub lease_until_ms: u64,
}

impl UnfinishedRun {
    /// Whether no process holds it at `now_ms` (ms since the Unix epoch): running, and
    /// its lease lapsed (its process stopped, or was cut off from the store). A paused
    /// run is never orphaned: it waits for decisions.
    pub fn orphaned_at(&self, now_ms: u64) -> bool {
        !self.paused && self.lease_until_ms <= now_ms
    }
}

/// The unfinished runs in `store` (running, interrupted or paused), most recently saved
/// first, at most `limit`.
///
/// # Errors
/// A [`StoreError`] when the store cannot be read. Checkpoints that do not decode
/// (another version's) are skipped.
pub async fn unfinished_runs(
    store: &dyn CheckpointStore,
    limit: usize,
) -> Result<Vec<UnfinishedRun>, StoreError> {
    let records = store.unfinished(limit).await?;
    Ok(records
        .iter()
        .filter_map(|record| {
            let header: Header = serde_json::from_str(&record.header).ok()?;
            let snapshot = Snapshot::from_text(&record.state).ok()?;
            // A paused checkpoint a resume claimed (it holds a lease) is running.
            let paused =
                matches!(snapshot.phase, Phase::Paused { .. }) && record.lease_until_ms == 0;
            let lease_until_ms = match record.lease_until_ms {
                0 if !paused => record
                    .updated_at_ms
                    .saturating_add(crate::store::ms(super::lease::LEASE)),
                until => until,
            };
            Some(UnfinishedRun {
                run_id: record.run_id.clone(),
                agent: header.agent,
                input: header.input,
                paused,
                updated_at_ms: record.updated_at_ms,
                lease_until_ms,
            })
        })
        .collect())
}
