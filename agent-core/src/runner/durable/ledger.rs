//! The tool-effect ledger of one run: every tool execution goes through it (`started`,
//! the tool, `completed`), and a resumed run answers calls from it (see
//! `docs/durable.md`, "The ledger"). `started` is a fenced write: a process that lost the
//! run to another starts no more tools.
//!
//! Writes per turn: the turn's `tools_pending` checkpoint is held here and goes with the
//! first `started` entry (one write: no tool starts before both are durable), and a
//! `completed` entry written when no other tool of the run is running is carried by the
//! run's next write (the next `started` entry or checkpoint, which follows at once).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::message::ToolCall;
use crate::runner::emit::Observers;
use crate::store::{CheckpointRecord, CheckpointStore, LedgerEntry, LedgerStatus, SaveOutcome};

use super::io::{bounded, report};

/// The tool-effect ledger of one run.
pub(crate) struct Ledger {
    pub(crate) store: Arc<dyn CheckpointStore>,
    pub(crate) run_id: Arc<str>,
    pub(crate) timeout: Duration,
    /// The entries found when the run was resumed, by call id.
    pub(crate) prior: HashMap<String, LedgerEntry>,
    pub(crate) failures: AtomicU32,
    /// This process's writer token.
    pub(crate) writer: Arc<str>,
    /// Set when a fenced write was refused: another process took the run over.
    pub(crate) fenced: AtomicBool,
    /// The seq of the checkpoint write that was refused, if that is what was fenced.
    pub(crate) fenced_at: AtomicU64,
    /// The turn's `tools_pending` checkpoint (with its `taken_at`), until the first
    /// `started` entry carries it; held locked during that write, so that no other call
    /// of the turn starts before it is durable.
    pub(crate) held: tokio::sync::Mutex<Option<(CheckpointRecord, u64)>>,
    /// Finished entries (completed, deferred) the next write carries.
    pub(crate) done: Mutex<Vec<LedgerEntry>>,
    /// Tool executions between their `started` entry and their result.
    pub(crate) in_flight: AtomicUsize,
}

/// What the ledger knew of a call when the run was resumed.
pub(crate) enum Prior<'a> {
    /// It completed, with these arguments: its recorded result.
    Completed {
        content: &'a str,
        is_error: bool,
        fatal: bool,
    },
    /// It ran and deferred its result, with these arguments.
    Deferred { note: &'a str },
    /// It started and never completed (or ran with other arguments).
    Interrupted,
    /// Nothing: it never started.
    Unknown,
}

impl Ledger {
    /// What the ledger knew of `call` (whose canonical arguments hash to `hash`, see
    /// [`arguments_hash`](super::arguments_hash)) when the run was resumed.
    pub(crate) fn prior(&self, call: &ToolCall, hash: &str) -> Prior<'_> {
        match self.prior.get(&call.id) {
            Some(LedgerEntry {
                arguments_hash,
                status:
                    LedgerStatus::Completed {
                        content,
                        is_error,
                        fatal,
                    },
                ..
            }) if arguments_hash == hash => Prior::Completed {
                content,
                is_error: *is_error,
                fatal: *fatal,
            },
            Some(LedgerEntry {
                arguments_hash,
                status: LedgerStatus::Deferred { note },
                ..
            }) if arguments_hash == hash => Prior::Deferred { note },
            Some(_) => Prior::Interrupted,
            None => Prior::Unknown,
        }
    }

    /// Writes `call`'s `started` entry before its tool runs (see [`start`](Self::start)):
    /// the entry to finish with [`end`](Self::end), or `Err` when the run was fenced
    /// (another process took it over: the tool must not start).
    pub(crate) async fn begin(
        &self,
        call: &ToolCall,
        hash: String,
        observers: (&str, &Observers),
    ) -> Result<LedgerEntry, ()> {
        let entry = LedgerEntry {
            run_id: self.run_id.to_string(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments_hash: hash,
            status: LedgerStatus::Started,
        };
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let started = self.start(entry, observers).await;
        if started.is_err() {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        started
    }

    /// Finishes a call [`begin`](Self::begin) started, with its `status` (completed or
    /// deferred). When no other tool of the run is running, what follows until the run's
    /// next write (the next call's `started`, or the next checkpoint) does not wait, so
    /// that write carries this entry; otherwise it is written now.
    pub(crate) async fn end(
        &self,
        entry: LedgerEntry,
        status: LedgerStatus,
        observers: (&str, &Observers),
    ) {
        let entry = LedgerEntry { status, ..entry };
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            lock(&self.done).push(entry);
        } else {
            self.write(&entry, observers, "tool_completed").await;
        }
    }

    /// Takes the finished entries the next write carries.
    pub(crate) fn take_done(&self) -> Vec<LedgerEntry> {
        std::mem::take(&mut *lock(&self.done))
    }

    /// Whether the call deferred its result before the run was resumed.
    pub(crate) fn deferred(&self, call_id: &str) -> bool {
        matches!(
            self.prior.get(call_id),
            Some(LedgerEntry {
                status: LedgerStatus::Deferred { .. },
                ..
            })
        )
    }

    /// Marks the run fenced: another process took it over.
    pub(crate) fn fence(&self, seq: u64) {
        self.fenced_at.store(seq, Ordering::SeqCst);
        self.fenced.store(true, Ordering::SeqCst);
    }

    /// Writes a call's `started` entry, fenced, with the turn's held checkpoint and the
    /// finished entries not yet written; gives the entry back, or `Err` when the run was
    /// fenced (another process took it over: the tool does not start). A store failure
    /// is counted and the tool runs anyway; when the failed write carried more than the
    /// entry, the entry is written again alone first. A run already fenced starts no
    /// tool.
    async fn start(
        &self,
        entry: LedgerEntry,
        (trace_id, observers): (&str, &Observers),
    ) -> Result<LedgerEntry, ()> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(());
        }
        // Waits while another call's write carries the turn's checkpoint (a refused one
        // fences the run: then this call does not start either).
        let mut held = self.held.lock().await;
        if self.fenced.load(Ordering::SeqCst) {
            return Err(());
        }
        let checkpoint = held.take();
        if checkpoint.is_none() {
            drop(held);
        }
        let mut entries = self.take_done();
        entries.push(entry);
        let store = &self.store;
        let writer = &*self.writer;
        let outcome = bounded(self.timeout, || {
            let checkpoint = checkpoint.as_ref().map(|(record, at)| (record, *at));
            store.save_boundary(checkpoint, &entries, writer)
        })
        .await;
        let entry = entries.pop().ok_or(())?;
        match outcome {
            Ok(SaveOutcome::Saved) => Ok(entry),
            Ok(_fenced) => {
                match &checkpoint {
                    Some((record, _)) => self.fence(record.seq),
                    None => self.fenced.store(true, Ordering::SeqCst),
                }
                Err(())
            }
            Err(error) if checkpoint.is_none() && entries.is_empty() => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                report(observers, trace_id, "tool_started", &error);
                Ok(entry)
            }
            Err(error) => {
                // What the write carried is lost (a checkpoint: a crash resumes from an
                // older one; finished entries: those calls count as interrupted), but
                // the started entry gets a write of its own, as it had before it shared
                // one: this call's at-most-once does not hang on the other rows.
                self.failures.fetch_add(1, Ordering::Relaxed);
                let operation = match checkpoint {
                    Some(_) => "save",
                    None => "tool_completed",
                };
                report(observers, trace_id, operation, &error);
                match bounded(self.timeout, || store.record_tool_fenced(&entry, writer)).await {
                    Ok(SaveOutcome::Saved) => Ok(entry),
                    Ok(_fenced) => {
                        self.fenced.store(true, Ordering::SeqCst);
                        Err(())
                    }
                    Err(error) => {
                        self.failures.fetch_add(1, Ordering::Relaxed);
                        report(observers, trace_id, "tool_started", &error);
                        Ok(entry)
                    }
                }
            }
        }
    }

    async fn write(
        &self,
        entry: &LedgerEntry,
        (trace_id, observers): (&str, &Observers),
        operation: &'static str,
    ) {
        let store = &self.store;
        if let Err(error) = bounded(self.timeout, || store.record_tool(entry)).await {
            self.failures.fetch_add(1, Ordering::Relaxed);
            report(observers, trace_id, operation, &error);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
