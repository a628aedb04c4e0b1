//! Durable runs: the checkpoint saved at every transition boundary, the tool-effect
//! ledger around every tool execution (`ledger.rs`), the decisions that resume a paused
//! run (`pause.rs`), and [`resume_agent`](crate::resume_agent) (`resume.rs`); see
//! `docs/durable.md`.
//!
//! A checkpoint is the run's [`RunState`] and the boundary it was saved at (the
//! snapshot's texts are in `snapshot.rs`). Boundaries, in a run's order: `before_call`
//! (top of the loop: the previous transition is complete), `tools_pending` (a turn of
//! ordinary tool calls is in the transcript, none of its tools has started), then per
//! tool execution the ledger's `started` and `completed`, and `finished` (the result).
//! `tools_pending` is written with the turn's first `started` entry, and a `completed`
//! entry with the run's next write (see `ledger.rs`). Every write is awaited, bounded by
//! `store_timeout`; a failed write is counted and the run goes on.

mod batched;
mod io;
pub(crate) mod lease;
pub(crate) mod ledger;
pub(crate) mod pause;
pub(crate) mod snapshot;
pub(crate) mod unfinished;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::AgentError;
use crate::message::ToolCall;
use crate::message::canonical_json;
use crate::pause::Decisions;
use crate::result::AgentResult;
use crate::runner::emit::Observers;
use crate::runner::state::RunState;
use crate::store::{
    CheckpointRecord, CheckpointStore, LedgerEntry, SaveOutcome, StoreError, fnv1a64, now_ms,
};

pub(crate) use io::{bounded, report};
use ledger::Ledger;
pub(crate) use snapshot::{EncodedTranscript, FORMAT, Finished, Header, Phase, Snapshot};

/// The longest run id accepted (bytes).
const MAX_RUN_ID: usize = 256;

/// A run resumed from its checkpoint: what the run starts from.
pub(crate) struct Resumed {
    pub(crate) header: Header,
    pub(crate) snapshot: Snapshot,
    pub(crate) ledger: Vec<LedgerEntry>,
    /// The seq of the claim this process stored (the checkpoint it goes on from).
    pub(crate) seq: u64,
    /// This process's writer token (written with the claim).
    pub(crate) writer: String,
}

/// A new writer token: 32 hex digits, drawn once per process that runs a run.
pub(crate) fn new_writer() -> String {
    format!("{:032x}", fastrand::u128(..))
}

/// A run's checkpointing: its store, its header, where it got to, and the decisions a
/// resumed pause brought.
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
    /// The decisions a resumed paused run brought, by call id (taken as its turn runs).
    pub(crate) decisions: Decisions,
    /// The calls of the resumed turn whose child run paused, with that run's id (C64).
    pub(crate) inside: Vec<(String, String)>,
    /// How long a save (or a renewal) holds the run.
    lease: Duration,
    /// Moves the run's lease on while it is between writes (stopped when dropped).
    _renewal: lease::Renewal,
    /// Whether the run keeps `before_call` (it has a provider batch seat).
    keeps_before_call: bool,
    /// The seq and the bare text (see `batched.rs`) of the last `before_call`
    /// checkpoint, while the run keeps it.
    before_call: Option<(u64, String)>,
}

/// FNV-1a 64 of the canonical arguments, as 16 hex digits.
pub(crate) fn arguments_hash(arguments: &Value) -> String {
    format!("{:016x}", fnv1a64(canonical_json(arguments).as_bytes()))
}

/// Whether `id` can name a run.
///
/// # Errors
/// [`AgentError::InvalidRun`] for an id that is empty, too long or holds a NUL.
pub(crate) fn check_run_id(id: &str) -> Result<(), AgentError> {
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

/// Where a run reports its checkpoint-store failures.
pub(crate) type Reporter<'a> = (&'a Observers, &'a str);

impl Durable {
    /// The checkpointing of run `run_id` in `store`, writing as `writer`; `failures`
    /// counted already (a failed check that the id was free).
    pub(crate) fn new(
        store: Arc<dyn CheckpointStore>,
        run_id: Arc<str>,
        fingerprint: String,
        timeout: Duration,
        writer: Arc<str>,
        failures: u32,
        lease: Duration,
    ) -> Self {
        Self {
            lease,
            _renewal: lease::Renewal::start(
                Arc::clone(&store),
                Arc::clone(&run_id),
                Arc::clone(&writer),
                timeout,
                lease,
            ),
            ledger: Ledger {
                store: Arc::clone(&store),
                run_id: Arc::clone(&run_id),
                timeout,
                prior: HashMap::new(),
                failures: AtomicU32::new(0),
                writer,
                fenced: AtomicBool::new(false),
                fenced_at: AtomicU64::new(0),
                held: tokio::sync::Mutex::new(None),
                done: std::sync::Mutex::new(Vec::new()),
                in_flight: AtomicUsize::new(0),
            },
            store,
            run_id,
            header: String::new(),
            fingerprint,
            seq: 0,
            taken_at: 0,
            elapsed_before: Duration::ZERO,
            started: Instant::now(),
            timeout,
            failures,
            failures_before: 0,
            pending: None,
            transcript: EncodedTranscript::default(),
            decisions: Decisions::new(),
            inside: Vec::new(),
            keeps_before_call: false,
            before_call: None,
        }
    }

    /// Sets the header every save writes.
    ///
    /// # Errors
    /// When it does not encode (then no checkpoint can be written).
    pub(crate) fn set_header(&mut self, header: &Header) -> Result<(), serde_json::Error> {
        self.header = serde_json::to_string(header)?;
        Ok(())
    }

    /// Takes a resumed run over from the checkpoint at `seq` (the claim): the time it
    /// had spent and the failures it had counted, the ledger's entries, and, when it
    /// stopped with a turn of calls unanswered, those calls (the last message's) and the
    /// names of the tools that turn was offered.
    pub(crate) fn take_over(
        &mut self,
        seq: u64,
        state: &RunState,
        phase: Phase,
        ledger: Vec<LedgerEntry>,
    ) {
        self.seq = seq;
        self.taken_at = seq;
        self.elapsed_before = Duration::from_millis(state.elapsed_ms);
        self.failures_before = state.store_failures;
        self.ledger.prior = ledger.into_iter().map(|e| (e.call_id.clone(), e)).collect();
        let offered = match phase {
            Phase::BeforeCall => None,
            Phase::ToolsPending {
                offered,
                decisions,
                inside,
            } => {
                self.decisions = decisions;
                self.inside = inside;
                Some(offered)
            }
            Phase::Paused {
                offered, decisions, ..
            } => {
                self.decisions = decisions;
                Some(offered)
            }
        };
        if let Some(offered) = offered
            && let Some(crate::message::Message::Assistant { tool_calls, .. }) =
                state.messages.last()
        {
            self.pending = Some((tool_calls.clone(), offered));
        }
    }

    /// The ledger tool executions go through.
    pub(crate) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The decisions a resumed pause brought (taken as its turn runs), and the ledger.
    pub(crate) fn decisions_and_ledger(
        &mut self,
    ) -> (&mut Decisions, &[(String, String)], &Ledger) {
        (&mut self.decisions, &self.inside, &self.ledger)
    }

    /// The tool calls a resumed run answers before its next LLM call, and the names of
    /// the tools their turn was offered (taken: once).
    pub(crate) fn take_pending(&mut self) -> Option<(Vec<ToolCall>, Vec<String>)> {
        self.pending.take()
    }

    /// Time spent toward the deadline before this process took the run over.
    pub(crate) fn elapsed_before(&self) -> Duration {
        self.elapsed_before
    }

    /// The error that ends a run another process took over, once a fenced write of this
    /// one was refused.
    pub(crate) fn fenced(&self) -> Option<AgentError> {
        self.ledger
            .fenced
            .load(Ordering::SeqCst)
            .then(|| AgentError::Fenced {
                run_id: self.run_id.to_string(),
                seq: match self.ledger.fenced_at.load(Ordering::SeqCst) {
                    0 => self.seq,
                    at => at,
                },
            })
    }

    /// Saves `state` at a running boundary (`phase`), with the ledger's finished
    /// entries not yet written. Awaited; a failure is counted and the run goes on.
    ///
    /// # Errors
    /// [`AgentError::Fenced`] when the save was refused because another process took the
    /// run over: the run must stop at once.
    pub(crate) async fn save(
        &mut self,
        phase: &Phase,
        state: &mut RunState,
        (observers, trace_id): Reporter<'_>,
    ) -> Result<(), AgentError> {
        let held = !matches!(phase, Phase::Paused { .. });
        let outcome = match self.state_text(phase, state) {
            Ok(text) => self.write(false, held, text).await,
            Err(e) => Err(e),
        };
        // A refused save marked the run fenced (see `write`).
        if let Err(error) = outcome {
            self.failures = self.failures.saturating_add(1);
            report(observers, trace_id, "save", &error);
        }
        if self.keeps_before_call && matches!(phase, Phase::BeforeCall) {
            self.remember_before_call(state);
        }
        self.fenced().map_or(Ok(()), Err)
    }

    /// Holds `state` at `tools_pending` in the ledger, for the turn's first `started`
    /// entry to write with it (see `ledger.rs`); nothing is written now. The run's next
    /// save drops it if no call wrote it.
    ///
    /// # Errors
    /// [`AgentError::Fenced`] when another process took the run over before.
    pub(crate) fn hold(
        &mut self,
        phase: &Phase,
        state: &mut RunState,
        (observers, trace_id): Reporter<'_>,
    ) -> Result<(), AgentError> {
        if let Some(fenced) = self.fenced() {
            return Err(fenced);
        }
        match self.state_text(phase, state) {
            Ok(text) => {
                let record = self.next_record(false, true, text);
                *self.ledger.held.get_mut() = Some((record, self.taken_at));
            }
            Err(error) => {
                self.failures = self.failures.saturating_add(1);
                report(observers, trace_id, "save", &error);
            }
        }
        Ok(())
    }

    /// The text of `state` at `phase`, with the time spent and the failures counted so
    /// far (the messages from the cache of their JSON).
    fn state_text(&mut self, phase: &Phase, state: &mut RunState) -> Result<String, StoreError> {
        let elapsed = self.elapsed_before + self.started.elapsed();
        state.elapsed_ms = crate::store::ms(elapsed);
        state.store_failures = self.failures_before.saturating_add(self.failures);
        self.transcript
            .state_text(state, phase)
            .map_err(|e| StoreError::invalid(format!("the checkpoint does not encode: {e}")))
    }

    /// The next checkpoint record; a running one (`held`) carries this process's lease,
    /// a paused or finished one none.
    fn next_record(&mut self, finished: bool, held: bool, state: String) -> CheckpointRecord {
        self.seq += 1;
        CheckpointRecord {
            lease_until_ms: if held && !finished {
                lease::lease_from_now(self.lease)
            } else {
                0
            },
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

    /// Writes the next checkpoint with the ledger's finished entries not yet written,
    /// fenced: refused (and the run marked fenced) when another process took the run
    /// over.
    async fn write(
        &mut self,
        finished: bool,
        held: bool,
        state: String,
    ) -> Result<SaveOutcome, StoreError> {
        self.release_held();
        let record = self.next_record(finished, held, state);
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
    pub(crate) async fn flush_done(&mut self, observers: &Observers, trace_id: &str) {
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
    pub(crate) fn is_fenced(&self) -> bool {
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
pub(crate) async fn save_finished<T>(
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
        duration_ms: crate::store::ms(result.duration),
        transcript: Cow::Borrowed(&result.transcript),
        handover: result.handover.as_ref().map(Cow::Borrowed),
        partial: result.partial,
        customer_message: Cow::Borrowed(&result.customer_message),
        store_failures: result.store_failures,
    };
    let outcome = match serde_json::to_string(&finished) {
        Ok(state) => d.write(true, false, state).await,
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
