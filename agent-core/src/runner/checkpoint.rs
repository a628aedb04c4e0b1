//! Durable runs: the checkpoint saved at every transition boundary, the tool-effect
//! ledger around every tool execution, and the state a resumed run starts from (see
//! `docs/durable.md`; the resume entry points are in `resume.rs`).
//!
//! Boundaries, in a run's order: `before_call` (top of the loop: the previous
//! transition is complete), `tools_pending` (a turn of ordinary tool calls is in the
//! transcript, none of its tools has started), then per tool execution the ledger's
//! `started` and `completed`, and `finished` (the result). `tools_pending` is written
//! with the turn's first `started` entry, and a `completed` entry with the run's next
//! write (see `ledger.rs`). Every write is awaited, bounded by `store_timeout`; a failed
//! write is counted and the run goes on.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;

use crate::config::Compiled;
use crate::error::{AgentError, panic_message};
use crate::message::{Message, ToolCall};
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::result::AgentResult;
use crate::stores::{
    CheckpointRecord, CheckpointStore, LedgerEntry, SaveOutcome, StoreError, StoreKind, fnv1a64,
    now_ms,
};

use super::Run;
use super::guard::canonical_json;
use super::ledger::Ledger;
use super::trace::Observers;

/// The longest run id accepted (bytes).
const MAX_RUN_ID: usize = 256;

pub(super) use super::snapshot::{EncodedTranscript, FORMAT, Finished, Header, Phase, Snapshot};

/// A run resumed from its checkpoint: what `run` starts it from.
pub(super) struct Resumed {
    pub(super) header: Header,
    pub(super) snapshot: Snapshot<'static>,
    pub(super) ledger: Vec<LedgerEntry>,
    /// The seq of the claim this process stored (the checkpoint it goes on from).
    pub(super) seq: u64,
    /// This process's writer token (written with the claim).
    pub(super) writer: String,
}

/// A new writer token: 32 hex digits, drawn once per process that runs a run.
pub(super) fn new_writer() -> String {
    format!("{:032x}", fastrand::u128(..))
}

/// A run's checkpointing: its store, its header, and where it got to.
pub(crate) struct Durable {
    store: Arc<dyn CheckpointStore>,
    run_id: Arc<str>,
    header: String,
    fingerprint: String,
    seq: u64,
    /// The seq this process took the run over from (0 for a fresh run): what a fenced
    /// save checks, with the writer token.
    taken_at: u64,
    /// Time spent toward the deadline before this process took the run over.
    elapsed_before: Duration,
    started: Instant,
    timeout: Duration,
    failures: u32,
    /// Failures counted before this process took the run over.
    failures_before: u32,
    ledger: Ledger,
    /// The tool calls a resumed run must answer first (it stopped at `tools_pending`),
    /// and the names of the tools that turn was offered.
    pending: Option<(Vec<ToolCall>, Vec<String>)>,
    /// The transcript's JSON as the last save wrote it.
    transcript: EncodedTranscript,
}

impl Durable {
    /// The ledger tool executions go through.
    pub(super) fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}

/// Runs one store call under the timeout and a catch boundary.
pub(super) async fn bounded<'f, T, F>(
    limit: Duration,
    call: impl FnOnce() -> F,
) -> Result<T, StoreError>
where
    F: Future<Output = Result<T, StoreError>> + Send + 'f,
{
    let call = AssertUnwindSafe(async move { tokio::time::timeout(limit, call()).await });
    match call.catch_unwind().await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_elapsed)) => Err(StoreError::Timeout { limit }),
        Err(payload) => Err(StoreError::Panicked {
            message: panic_message(payload.as_ref()),
        }),
    }
}

/// Reports one checkpoint-store failure: a warning and an observer event.
pub(super) fn report(
    observers: &Observers,
    trace_id: &str,
    operation: &'static str,
    error: &StoreError,
) {
    tracing::warn!(store = "checkpoint", operation, error = %error, "checkpoint store call failed; the run goes on");
    observers.notify(&RunEvent::StoreFailed {
        trace_id,
        store: StoreKind::Checkpoint,
        operation,
        error,
    });
}

/// FNV-1a 64 of the canonical arguments, as 16 hex digits.
pub(super) fn arguments_hash(arguments: &Value) -> String {
    format!("{:016x}", fnv1a64(canonical_json(arguments).as_bytes()))
}

/// The config's plain user tools as a checkpoint records them: name and parameters, in
/// the config's order. A `ToolSource`'s tools are left out: they may change during a
/// run and between a crash and its resume, so they are checked per call instead (a
/// pending call to a tool the source no longer has is answered as unknown).
pub(super) fn tool_signatures<T>(cfg: &Compiled<T>) -> Vec<(String, Value)> {
    cfg.settings
        .tools
        .entries()
        .iter()
        .filter(|e| e.source.is_none())
        .map(|e| (e.definition.name.clone(), e.definition.parameters.clone()))
        .collect()
}

/// The output schema of `T` (`None` in compat mode).
pub(super) fn output_schema<T: AgentOutput>() -> Option<Value> {
    T::output_tool().map(|d| d.parameters)
}

/// Whether `id` can name a run.
fn check_run_id(id: &str) -> Result<(), AgentError> {
    let problem = if id.is_empty() {
        "is empty"
    } else if id.len() > MAX_RUN_ID {
        "is longer than 256 bytes"
    } else if id.contains('\0') {
        "holds a NUL byte"
    } else {
        return Ok(());
    };
    Err(AgentError::InvalidRun {
        message: format!("the run id {problem} (RunOptions::run_id: 1 to 256 bytes, no NUL)"),
    })
}

impl<'c, T: AgentOutput> Run<'c, T> {
    /// Gives the run its id: the caller's (checked), else the trace id.
    ///
    /// # Errors
    /// [`AgentError::InvalidRun`] for an id that is empty, too long or holds a NUL.
    pub(super) fn attach_run_id(&mut self, run_id: Option<String>) -> Result<Arc<str>, AgentError> {
        if let Some(id) = &run_id {
            check_run_id(id)?;
        }
        let run_id: Arc<str> = run_id.map_or_else(|| Arc::clone(&self.trace_id), Arc::from);
        self.run_id = Arc::clone(&run_id);
        Ok(run_id)
    }

    /// Gives the run its id ([`attach_run_id`](Self::attach_run_id)) and, with a
    /// checkpoint store, its checkpointing: a fresh run checks that its id has no
    /// checkpoint yet; a resumed one takes its state back. Returns the error that ends
    /// the run before any request, if any (then nothing is checkpointed).
    pub(super) async fn attach_durable(
        &mut self,
        run_id: Option<String>,
        thread: Option<String>,
        resumed: Option<Box<Resumed>>,
    ) -> Option<AgentError> {
        let run_id = match self.attach_run_id(run_id) {
            Ok(run_id) => run_id,
            Err(error) => return Some(error),
        };
        let cfg = self.cfg;
        let store = cfg.settings.stores.checkpoints.clone()?;
        let timeout = cfg.settings.stores.timeout;
        let mut failures = 0;
        if resumed.is_none() {
            match bounded(timeout, || store.load(&run_id)).await {
                Ok(Some(_)) => {
                    return Some(AgentError::InvalidRun {
                        message: format!(
                            "run {run_id} already has a checkpoint: continue it with \
                             resume_agent, or give this run another id"
                        ),
                    });
                }
                Ok(None) => {}
                Err(error) => {
                    failures += 1;
                    report(&self.observers, &self.trace_id, "load", &error);
                }
            }
        }
        let history_len = self.request.messages.len().saturating_sub(1);
        let writer: Arc<str> = match &resumed {
            Some(resumed) => Arc::from(resumed.writer.as_str()),
            None => Arc::from(new_writer()),
        };
        let mut durable = Durable {
            ledger: Ledger {
                store: Arc::clone(&store),
                run_id: Arc::clone(&run_id),
                timeout,
                prior: HashMap::new(),
                failures: AtomicU32::new(0),
                writer,
                fenced: AtomicBool::new(false),
                fenced_at: std::sync::atomic::AtomicU64::new(0),
                held: tokio::sync::Mutex::new(None),
                done: std::sync::Mutex::new(Vec::new()),
                in_flight: std::sync::atomic::AtomicUsize::new(0),
            },
            store,
            run_id,
            header: String::new(),
            fingerprint: cfg.fingerprint.clone(),
            seq: 0,
            taken_at: 0,
            elapsed_before: Duration::ZERO,
            started: Instant::now(),
            timeout,
            failures,
            failures_before: 0,
            pending: None,
            transcript: EncodedTranscript::default(),
        };
        let header = match resumed {
            Some(resumed) => self.restore(&mut durable, *resumed),
            None => Header {
                format: FORMAT,
                run_id: durable.run_id.to_string(),
                trace_id: self.trace_id.to_string(),
                agent: cfg.settings.name.clone(),
                fingerprint: cfg.fingerprint.clone(),
                output_mode: cfg.output.mode(),
                output_schema: output_schema::<T>(),
                tools: tool_signatures(cfg),
                thread,
                input: self.input.clone(),
                system: self.request.system.clone(),
                history_len,
                deadline_ms: self.deadline.map(super::super::stores::ms),
            },
        };
        match serde_json::to_string(&header) {
            Ok(text) => durable.header = text,
            Err(error) => {
                // A header that cannot be encoded: no checkpoint can be written.
                tracing::warn!(error = %error, "the checkpoint header does not encode; the run is not checkpointed");
                return None;
            }
        }
        self.durable = Some(Box::new(durable));
        None
    }

    /// Puts a resumed run's state back; returns its header.
    fn restore(&mut self, durable: &mut Durable, resumed: Resumed) -> Header {
        let Resumed {
            header,
            snapshot: s,
            ledger,
            seq,
            writer: _,
        } = resumed;
        self.request.system.clone_from(&header.system);
        self.request.messages = s.messages.into_owned();
        self.compactor.own_start = header.history_len.saturating_add(1);
        self.seen_ids = self
            .request
            .messages
            .iter()
            .skip(header.history_len)
            .flat_map(|m| match m {
                Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
                _ => &[],
            })
            .map(|c| c.id.clone())
            .collect();
        self.usage = s.usage;
        self.cost_usd = s.cost_usd;
        self.last_call_tokens = s.last_call_tokens;
        self.last_call_cost = s.last_call_cost;
        self.attempts = s.attempts.into_owned();
        self.failures = s.failures.into_owned();
        self.force_answer = s.force_answer;
        self.last_text = s.last_text.into_owned();
        self.output = s.output.into_owned();
        self.guard.restore(s.guard);
        self.calls = s.calls.into_owned();
        self.last_correction = s.last_correction.map(Cow::into_owned);
        self.model_summary = s.model_summary.map(Cow::into_owned);
        self.fatal = s.fatal;
        let stored = header.deadline_ms.map(Duration::from_millis);
        self.deadline = match (self.deadline, stored) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        durable.seq = seq;
        durable.taken_at = seq;
        durable.elapsed_before = Duration::from_millis(s.elapsed_ms);
        durable.failures_before = s.store_failures;
        durable.ledger.prior = ledger.into_iter().map(|e| (e.call_id.clone(), e)).collect();
        let offered = match s.phase {
            Phase::BeforeCall => None,
            Phase::ToolsPending { offered, decisions }
            | Phase::Paused {
                offered, decisions, ..
            } => {
                self.decisions = decisions;
                Some(offered)
            }
        };
        if let Some(offered) = offered {
            durable.pending = match self.request.messages.last() {
                Some(Message::Assistant { tool_calls, .. }) => Some((tool_calls.clone(), offered)),
                _ => None,
            };
        }
        header
    }

    /// The tool calls a resumed run answers before its next LLM call, if any, with the
    /// tools of the current table that their turn was offered set as the request's
    /// (a tool source's tool gone since is answered as unknown).
    pub(super) async fn take_pending(&mut self) -> Option<Vec<ToolCall>> {
        let (calls, names) = self.durable.as_mut().and_then(|d| d.pending.take())?;
        self.refresh_tools().await;
        let offered: Vec<_> = self
            .table
            .offered
            .iter()
            .filter(|d| names.contains(&d.name))
            .cloned()
            .collect();
        self.request.tools = offered.into();
        Some(calls)
    }

    /// Time spent toward the deadline before this process took the run over.
    pub(super) fn elapsed_before(&self) -> Duration {
        self.durable
            .as_ref()
            .map_or(Duration::ZERO, |d| d.elapsed_before)
    }

    /// What is left of the deadline: the limit minus the time a resumed run had spent.
    pub(super) fn remaining_deadline(&self) -> Option<Duration> {
        self.deadline
            .map(|limit| limit.saturating_sub(self.elapsed_before()))
    }

    /// The error that ends a run another process took over, once a fenced write of this
    /// one was refused.
    pub(super) fn fenced(&self) -> Option<AgentError> {
        let d = self.durable.as_deref()?;
        d.ledger
            .fenced
            .load(Ordering::SeqCst)
            .then(|| AgentError::Fenced {
                run_id: d.run_id.to_string(),
                seq: match d.ledger.fenced_at.load(Ordering::SeqCst) {
                    0 => d.seq,
                    at => at,
                },
            })
    }

    /// Saves the run's state at a running boundary (nothing without a checkpoint
    /// store), with the ledger's finished entries not yet written. Awaited; a failure is
    /// counted and the run goes on.
    ///
    /// # Errors
    /// [`AgentError::Fenced`] when the save was refused because another process took the
    /// run over: the run must stop at once.
    pub(super) async fn save_checkpoint(&mut self, phase: Phase) -> Result<(), AgentError> {
        let Some(state) = self.state_text(phase) else {
            return Ok(());
        };
        let Some(d) = self.durable.as_deref_mut() else {
            return Ok(());
        };
        let outcome = match state {
            Ok(state) => d.save(false, state).await,
            Err(e) => Err(e),
        };
        // A refused save marked the run fenced (see `Durable::save`).
        if let Err(error) = outcome {
            d.failures = d.failures.saturating_add(1);
            report(&self.observers, &self.trace_id, "save", &error);
        }
        self.fenced().map_or(Ok(()), Err)
    }

    /// Holds the run's state at `tools_pending` in the ledger, for the turn's first
    /// `started` entry to write with it (see `ledger.rs`); nothing is written now. The
    /// run's next save drops it if no call wrote it (`Durable::save`).
    ///
    /// # Errors
    /// [`AgentError::Fenced`] when another process took the run over before.
    pub(super) fn hold_checkpoint(&mut self, phase: Phase) -> Result<(), AgentError> {
        if let Some(fenced) = self.fenced() {
            return Err(fenced);
        }
        let Some(state) = self.state_text(phase) else {
            return Ok(());
        };
        let Some(d) = self.durable.as_deref_mut() else {
            return Ok(());
        };
        match state {
            Ok(state) => {
                let record = d.next_record(false, state);
                *d.ledger.held.get_mut() = Some((record, d.taken_at));
            }
            Err(error) => {
                d.failures = d.failures.saturating_add(1);
                report(&self.observers, &self.trace_id, "save", &error);
            }
        }
        Ok(())
    }

    /// The state text of a running checkpoint at `phase`; `None` without a checkpoint
    /// store.
    fn state_text(&mut self, phase: Phase) -> Option<Result<String, StoreError>> {
        let d = self.durable.as_deref_mut()?;
        let elapsed = d.elapsed_before + d.started.elapsed();
        // The messages come from the run's cache of their JSON.
        let snapshot = Snapshot {
            format: FORMAT,
            messages: Cow::Borrowed(&[]),
            phase,
            usage: self.usage.clone(),
            cost_usd: self.cost_usd,
            last_call_tokens: self.last_call_tokens,
            last_call_cost: self.last_call_cost,
            attempts: Cow::Borrowed(&self.attempts),
            failures: Cow::Borrowed(&self.failures),
            force_answer: self.force_answer,
            last_text: Cow::Borrowed(&self.last_text),
            output: Cow::Borrowed(&self.output),
            guard: self.guard.state(),
            calls: Cow::Borrowed(&self.calls),
            last_correction: self.last_correction.as_deref().map(Cow::Borrowed),
            model_summary: self.model_summary.as_deref().map(Cow::Borrowed),
            fatal: self.fatal.clone(),
            elapsed_ms: super::super::stores::ms(elapsed),
            store_failures: d.failures_before.saturating_add(d.failures),
        };
        Some(
            d.transcript
                .state_text(&snapshot, &self.request.messages)
                .map_err(|e| StoreError::invalid(format!("the checkpoint does not encode: {e}"))),
        )
    }
}

impl Durable {
    /// The next checkpoint record.
    fn next_record(&mut self, finished: bool, state: String) -> CheckpointRecord {
        self.seq += 1;
        CheckpointRecord {
            run_id: self.run_id.to_string(),
            seq: self.seq,
            finished,
            fingerprint: self.fingerprint.clone(),
            updated_at_ms: now_ms(),
            writer: self.ledger.writer.to_string(),
            header: self.header.clone(),
            state,
        }
    }

    /// Drops a held `tools_pending` checkpoint that no call wrote (none of the turn's
    /// calls started); its seq is the next one's.
    fn release_held(&mut self) {
        if self.ledger.held.get_mut().take().is_some() {
            self.seq -= 1;
        }
    }

    /// Saves the next checkpoint with the ledger's finished entries not yet written,
    /// fenced: refused (and the run marked fenced) when another process took the run
    /// over.
    async fn save(&mut self, finished: bool, state: String) -> Result<SaveOutcome, StoreError> {
        self.release_held();
        let record = self.next_record(finished, state);
        let done = self.ledger.take_done();
        let store = &self.store;
        let taken_at = self.taken_at;
        let writer = &*self.ledger.writer;
        let outcome = bounded(self.timeout, || {
            store.save_boundary(Some((&record, taken_at)), &done, writer)
        })
        .await;
        if let Ok(SaveOutcome::Fenced) = outcome {
            self.ledger.fence(self.seq);
        }
        outcome
    }

    /// Writes the ledger's finished entries no write has carried yet (the run stopped
    /// right after its tools); a failure is counted.
    pub(super) async fn flush_done(&mut self, observers: &Observers, trace_id: &str) {
        let done = self.ledger.take_done();
        if done.is_empty() {
            return;
        }
        let store = &self.store;
        let writer = &*self.ledger.writer;
        let outcome = bounded(self.timeout, || store.save_boundary(None, &done, writer)).await;
        if let Err(error) = outcome {
            self.failures = self.failures.saturating_add(1);
            report(observers, trace_id, "tool_completed", &error);
        }
    }

    /// Whether another process took the run over (a fenced write was refused).
    pub(super) fn is_fenced(&self) -> bool {
        self.ledger.fenced.load(Ordering::SeqCst)
    }

    /// Every failure this run counted, before and after a resume.
    fn all_failures(&self) -> u32 {
        self.failures_before
            .saturating_add(self.failures)
            .saturating_add(self.ledger.failures.load(Ordering::Relaxed))
    }
}

/// Saves a finished run's result as its last checkpoint and sets
/// `result.store_failures` to every failure the run counted. A refused (fenced) save
/// makes the outcome [`AgentError::Fenced`]: another process took the run over at the
/// end, and its result is the run's.
pub(super) async fn save_finished<T>(
    durable: Option<Box<Durable>>,
    result: &mut AgentResult<T>,
    observers: &Observers,
) {
    let Some(mut d) = durable else { return };
    // A run another process took over is not this one's to finish.
    if d.is_fenced() {
        return;
    }
    let failures = d.all_failures();
    result.store_failures = result.store_failures.saturating_add(failures);
    let finished = Finished {
        format: FORMAT,
        ok: result.outcome.is_ok(),
        error: result.outcome.as_ref().err().map(Cow::Borrowed),
        output: Cow::Borrowed(&result.output),
        trace_id: Cow::Borrowed(&result.trace_id),
        usage: result.usage.clone(),
        scores: result.scores.as_ref().map(Cow::Borrowed),
        duration_ms: super::super::stores::ms(result.duration),
        transcript: Cow::Borrowed(&result.transcript),
        handover: result.handover.as_ref().map(Cow::Borrowed),
        partial: result.partial,
        customer_message: Cow::Borrowed(&result.customer_message),
        store_failures: result.store_failures,
    };
    let outcome = match serde_json::to_string(&finished) {
        Ok(state) => d.save(true, state).await,
        Err(e) => Err(StoreError::invalid(format!(
            "the result does not encode: {e}"
        ))),
    };
    if let Ok(SaveOutcome::Fenced) = outcome {
        // Taken over between the last boundary and the end: the other process's result
        // is the run's, so this one is not (whatever it holds).
        tracing::warn!(run_id = %d.run_id, "the finished checkpoint was fenced: another process took the run over");
        result.outcome = Err(AgentError::Fenced {
            run_id: d.run_id.to_string(),
            seq: d.seq,
        });
    } else if let Err(error) = outcome {
        result.store_failures = result.store_failures.saturating_add(1);
        report(observers, &result.trace_id, "save", &error);
    }
}
