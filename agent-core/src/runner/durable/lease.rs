//! Leases: until when the process running a durable run holds it. Every running
//! checkpoint it saves carries `lease_until_ms` (the save's time plus [`LEASE`]), and a
//! renewal task moves it on every third of the lease while the run is between writes
//! (a long LLM call or tool), so a run's lease lapses only when its process stopped
//! (killed, stalled, cut off from the store). A paused or finished checkpoint holds no
//! lease (0). See `docs/durable.md`, "Leases and the sweeper".

use std::sync::Arc;
use std::time::Duration;

use crate::store::{CheckpointStore, ms, now_ms};

/// How long a durable run's process holds the run after its last write or renewal
/// (60 s). A sweeper (agent-worker's) takes over only runs whose lease lapsed; the
/// renewal task renews it every 20 s, so it lapses only when the process stops.
pub const LEASE: Duration = Duration::from_secs(60);

/// The lease end of a checkpoint saved now by a process that holds the run for
/// `lease`.
pub(crate) fn lease_from_now(lease: Duration) -> u64 {
    now_ms().saturating_add(ms(lease))
}

/// The renewal task of one run's lease; stopped when dropped (the run ended, paused or
/// its future was dropped). A renewal that finds the run not this writer's, or not
/// held, changes nothing (the run's next write is fenced, or it has no row yet).
pub(crate) struct Renewal {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Renewal {
    /// Renews the lease (`lease` long) of `run_id` by `writer` in `store` every third
    /// of it, each call bounded by `timeout`; none outside a tokio runtime.
    pub(crate) fn start(
        store: Arc<dyn CheckpointStore>,
        run_id: Arc<str>,
        writer: Arc<str>,
        timeout: Duration,
        lease: Duration,
    ) -> Self {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Self { task: None };
        };
        let task = runtime.spawn(async move {
            let every = lease / 3;
            loop {
                tokio::time::sleep(every).await;
                let until = lease_from_now(lease);
                let renewed =
                    super::bounded(timeout, || store.renew_lease(&run_id, &writer, until)).await;
                if let Err(error) = renewed {
                    tracing::warn!(run_id = %run_id, error = %error, "cannot renew the run's lease; trying again");
                }
            }
        });
        Self { task: Some(task) }
    }
}

impl Drop for Renewal {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
