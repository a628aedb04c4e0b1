//! Fault-injecting checkpoint stores: a process that "dies" at a chosen write.
//!
//! Both wrap any [`CheckpointStore`] and count its writes (`save`, `save_fenced`,
//! `record_tool`, `record_tool_fenced`, 1-based, across every run): write number `at`
//! never completes (its future stays pending forever) and is not passed on, as if the
//! process had died at that boundary; every other write, and every read, goes to the
//! inner store. [`CrashAt`] signals the crash in process (a [`Notify`]), for a test that
//! drops the hung run and resumes it; [`HangAt`] prints `boundary N` on stdout, for a
//! parent process that kills this one (SIGKILL) when it reads the line.
//!
//! `save_boundary` and `renew_lease` are the trait's defaults: a boundary is the
//! separate, counted writes it is made of, and no lease is renewed (a store without
//! leases).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::store::{CheckpointRecord, CheckpointStore, LedgerEntry, SaveOutcome, StoreFuture};

/// The shared counter of the wrappers: whether this write is the one to stop at.
#[derive(Debug)]
struct Gate {
    at: u64,
    writes: AtomicU64,
}

impl Gate {
    fn new(at: u64) -> Self {
        Self {
            at,
            writes: AtomicU64::new(0),
        }
    }

    /// Counts one write; `Some(n)` when it is write number `at`.
    fn pass(&self) -> Option<u64> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        (n == self.at).then_some(n)
    }
}

/// A checkpoint store that passes writes to `inner` until write number `crash_at`
/// (1-based), which hangs forever after notifying [`reached`](Self::reached): the
/// process "dies" there. `u64::MAX` (or 0) never crashes. Clones share the counter.
///
/// ```
/// use agent_core::durable::InMemoryCheckpoints;
/// use agent_core::store::{CheckpointRecord, CheckpointStore};
/// use agent_core::conformance::CrashAt;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = CrashAt::new(InMemoryCheckpoints::new(), 2);
/// let mut record = CheckpointRecord::default();
/// record.run_id = "r1".into();
/// store.save(&record).await.unwrap(); // write 1: stored
/// let second = store.save(&record); // write 2: never completes
/// tokio::select! {
///     _ = second => unreachable!("write 2 hangs"),
///     () = store.reached().notified() => {}
/// }
/// assert_eq!(store.writes(), 2);
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct CrashAt<S> {
    inner: S,
    gate: Arc<Gate>,
    reached: Arc<Notify>,
}

impl<S: CheckpointStore> CrashAt<S> {
    /// Wraps `inner`, crashing at write number `crash_at` (1-based).
    pub fn new(inner: S, crash_at: u64) -> Self {
        Self {
            inner,
            gate: Arc::new(Gate::new(crash_at)),
            reached: Arc::new(Notify::new()),
        }
    }

    /// Notified (once, `notify_one`) when the crashing write is reached: await
    /// `reached().notified()` beside the run.
    pub fn reached(&self) -> &Notify {
        &self.reached
    }

    /// The writes counted so far, the crashing one included.
    pub fn writes(&self) -> u64 {
        self.gate.writes.load(Ordering::SeqCst)
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn crashes(&self) -> bool {
        let crash = self.gate.pass().is_some();
        if crash {
            self.reached.notify_one();
        }
        crash
    }
}

/// A checkpoint store that passes writes to `inner` except write number `at`
/// (1-based): it prints `boundary N` on stdout (flushed) and hangs there, for the
/// parent process to kill this one. 0 never hangs.
#[derive(Debug)]
pub struct HangAt<S> {
    inner: S,
    gate: Gate,
}

impl<S: CheckpointStore> HangAt<S> {
    /// Wraps `inner`, hanging at write number `at` (1-based).
    pub fn new(inner: S, at: u64) -> Self {
        Self {
            inner,
            gate: Gate::new(at),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn hangs(&self) -> bool {
        let Some(n) = self.gate.pass() else {
            return false;
        };
        // The line is the parent's signal; if stdout is gone there is no parent to
        // tell, and the write still hangs.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "boundary {n}");
        let _ = out.flush();
        true
    }
}

/// The checkpoint store methods of a wrapper whose `$stop` says whether this write is
/// the one that never completes.
macro_rules! gated_store {
    ($wrapper:ident, $stop:ident) => {
        impl<S: CheckpointStore> CheckpointStore for $wrapper<S> {
            fn save<'a>(&'a self, checkpoint: &'a CheckpointRecord) -> StoreFuture<'a, ()> {
                if self.$stop() {
                    return Box::pin(std::future::pending());
                }
                self.inner.save(checkpoint)
            }

            fn save_fenced<'a>(
                &'a self,
                checkpoint: &'a CheckpointRecord,
                taken_at: u64,
            ) -> StoreFuture<'a, SaveOutcome> {
                if self.$stop() {
                    return Box::pin(std::future::pending());
                }
                self.inner.save_fenced(checkpoint, taken_at)
            }

            fn record_tool_fenced<'a>(
                &'a self,
                entry: &'a LedgerEntry,
                writer: &'a str,
            ) -> StoreFuture<'a, SaveOutcome> {
                if self.$stop() {
                    return Box::pin(std::future::pending());
                }
                self.inner.record_tool_fenced(entry, writer)
            }

            fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<CheckpointRecord>> {
                self.inner.load(run_id)
            }

            fn record_tool<'a>(&'a self, entry: &'a LedgerEntry) -> StoreFuture<'a, ()> {
                if self.$stop() {
                    return Box::pin(std::future::pending());
                }
                self.inner.record_tool(entry)
            }

            fn unfinished<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<CheckpointRecord>> {
                self.inner.unfinished(limit)
            }

            fn ledger<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<LedgerEntry>> {
                self.inner.ledger(run_id)
            }
        }
    };
}

gated_store!(CrashAt, crashes);
gated_store!(HangAt, hangs);
