//! The tool-effect ledger of one run: every tool execution goes through it (`started`,
//! the tool, `completed`), and a resumed run answers calls from it (see
//! `docs/durable.md`, "The ledger"). `started` is a fenced write: a process that lost the
//! run to another starts no more tools.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::handover::CallOutcome;
use crate::message::{ToolCall, ToolResult};
use crate::pause::PauseReason;
use crate::stores::{CheckpointStore, LedgerEntry, LedgerStatus, SaveOutcome};

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
        let mut entry = LedgerEntry {
            run_id: self.run_id.to_string(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments_hash: hash,
            status: LedgerStatus::Started,
        };
        if self.start(&entry, (trace_id, observers)).await == SaveOutcome::Fenced {
            return not_started(call);
        }
        let done = run.await;
        entry.status = match &done.pause {
            Some(PauseReason::Deferred { note }) => LedgerStatus::Deferred { note: note.clone() },
            _ => LedgerStatus::Completed {
                content: done.result.content.clone(),
                is_error: done.result.is_error,
                fatal: done.fatal,
            },
        };
        self.write(&entry, (trace_id, observers), "tool_completed")
            .await;
        done
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

    /// Writes a call's `started` entry, fenced; a store failure is counted and the tool
    /// runs anyway ([`SaveOutcome::Saved`]). A run already fenced starts no tool.
    async fn start(
        &self,
        entry: &LedgerEntry,
        (trace_id, observers): (&str, &Observers),
    ) -> SaveOutcome {
        if self.fenced.load(Ordering::SeqCst) {
            return SaveOutcome::Fenced;
        }
        let store = &self.store;
        let writer = &*self.writer;
        match bounded(self.timeout, || store.record_tool_fenced(entry, writer)).await {
            Ok(SaveOutcome::Saved) => SaveOutcome::Saved,
            Ok(_fenced) => {
                self.fenced.store(true, Ordering::SeqCst);
                SaveOutcome::Fenced
            }
            Err(error) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                report(observers, trace_id, "tool_started", &error);
                SaveOutcome::Saved
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
