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
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::handover::CallOutcome;
use crate::message::{ToolCall, ToolResult};
use crate::pause::PauseReason;
use crate::stores::{CheckpointRecord, CheckpointStore, LedgerEntry, LedgerStatus, SaveOutcome};

use super::checkpoint::{arguments_hash, bounded, report};
use super::tools::Executed;
use super::trace::Observers;

/// The tool-effect ledger of one run.
pub(crate) struct Ledger {
    pub(super) store: Arc<dyn CheckpointStore>,
    pub(super) run_id: Arc<str>,
    pub(super) timeout: Duration,
    /// The entries found when the run was resumed, by call id.
    pub(super) prior: HashMap<String, LedgerEntry>,
    pub(super) failures: AtomicU32,
    /// This process's writer token.
    pub(super) writer: Arc<str>,
    /// Set when a fenced write was refused: another process took the run over.
    pub(super) fenced: AtomicBool,
    /// The seq of the checkpoint write that was refused, if that is what was fenced.
    pub(super) fenced_at: AtomicU64,
    /// The turn's `tools_pending` checkpoint (with its `taken_at`), until the first
    /// `started` entry carries it; held locked during that write, so that no other call
    /// of the turn starts before it is durable.
    pub(super) held: tokio::sync::Mutex<Option<(CheckpointRecord, u64)>>,
    /// Finished entries (completed, deferred) the next write carries.
    pub(super) done: Mutex<Vec<LedgerEntry>>,
    /// Tool executions between their `started` entry and their result.
    pub(super) in_flight: AtomicUsize,
}

impl Ledger {
    /// Runs one tool execution through the ledger. A call completed before a crash is
    /// not run again: its recorded result comes back. A call that started and never
    /// completed runs again, unless the tool is irreversible: then its outcome is
    /// unknown and the model is told so. Otherwise `started` is written, the tool runs,
    /// and `completed` is written; each write awaited (a failure is counted and the
    /// tool runs anyway).
    pub(crate) async fn execute(
        &self,
        call: &ToolCall,
        irreversible: bool,
        (trace_id, observers): (&str, &Observers),
        run: impl Future<Output = Executed>,
    ) -> Executed {
        let hash = arguments_hash(&call.arguments);
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
            }) if *arguments_hash == hash => return recorded(call, content, *is_error, *fatal),
            Some(LedgerEntry {
                arguments_hash,
                status: LedgerStatus::Deferred { note },
                ..
            }) if *arguments_hash == hash => {
                let reason = PauseReason::Deferred { note: note.clone() };
                return Executed::waiting(call, reason);
            }
            Some(_) if irreversible => return unknown(call),
            _ => {}
        }
        let entry = LedgerEntry {
            run_id: self.run_id.to_string(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments_hash: hash,
            status: LedgerStatus::Started,
        };
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let entry = match self.start(entry, (trace_id, observers)).await {
            Ok(entry) => entry,
            Err(()) => {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                return not_started(call);
            }
        };
        let done = run.await;
        let entry = LedgerEntry {
            status: match &done.pause {
                Some(PauseReason::Deferred { note }) => {
                    LedgerStatus::Deferred { note: note.clone() }
                }
                _ => LedgerStatus::Completed {
                    content: done.result.content.clone(),
                    is_error: done.result.is_error,
                    fatal: done.fatal,
                },
            },
            ..entry
        };
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            // No other tool of the run is running: what follows until the run's next
            // write (the next call's `started`, or the next checkpoint) does not wait,
            // so that write carries this one.
            lock(&self.done).push(entry);
        } else {
            self.write(&entry, (trace_id, observers), "tool_completed")
                .await;
        }
        done
    }

    /// Takes the finished entries the next write carries.
    pub(super) fn take_done(&self) -> Vec<LedgerEntry> {
        std::mem::take(&mut *lock(&self.done))
    }

    /// Whether the call deferred its result before the run was resumed.
    pub(super) fn deferred(&self, call_id: &str) -> bool {
        matches!(
            self.prior.get(call_id),
            Some(LedgerEntry {
                status: LedgerStatus::Deferred { .. },
                ..
            })
        )
    }

    /// Marks the run fenced: another process took it over.
    pub(super) fn fence(&self, seq: u64) {
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

/// A call answered from its `completed` entry.
fn recorded(call: &ToolCall, content: &str, is_error: bool, fatal: bool) -> Executed {
    let (result, outcome) = if is_error {
        (
            ToolResult::error(&call.id, &call.name, content),
            CallOutcome::Failed(content.to_owned()),
        )
    } else {
        (
            ToolResult::ok(&call.id, &call.name, content),
            CallOutcome::Succeeded(content.to_owned()),
        )
    };
    Executed {
        result,
        outcome,
        fatal,
        pause: None,
        escalation: None,
        children: Vec::new(),
        interventions: Vec::new(),
        trip: None,
    }
}

/// A call not started because another process took the run over (the run stops after
/// this turn's calls, with [`AgentError::Fenced`]).
fn not_started(call: &ToolCall) -> Executed {
    let text = format!(
        "{} was not run: another process took this run over",
        call.name
    );
    Executed {
        result: ToolResult::error(&call.id, &call.name, text.clone()),
        outcome: CallOutcome::NotRun(text),
        fatal: false,
        pause: None,
        escalation: None,
        children: Vec::new(),
        interventions: Vec::new(),
        trip: None,
    }
}

/// An irreversible call that started before a crash and never completed.
fn unknown(call: &ToolCall) -> Executed {
    let text = format!(
        "the outcome of this {} call is unknown: the run was interrupted after the tool \
         started and before its result was recorded, and {} is irreversible, so it was not \
         run again. Do not assume it took effect or not; check before calling it again, or \
         hand the case over.",
        call.name, call.name
    );
    Executed {
        result: ToolResult::error(&call.id, &call.name, text.clone()),
        outcome: CallOutcome::Unknown(text),
        fatal: false,
        pause: None,
        escalation: None,
        children: Vec::new(),
        interventions: Vec::new(),
        trip: None,
    }
}
