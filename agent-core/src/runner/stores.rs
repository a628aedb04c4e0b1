//! The runner's store hooks: before a run (thread cap, memory, retrieval) and after it
//! (memory append, run record, trace). See [`crate::store`] for the contract: a store
//! never changes a run's outcome, except the thread cap.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::{Compiled, OutputPlan};
use crate::error::{AgentError, Budget, Ending};
use crate::llm::TokenUsage;
use crate::message::Message;
use crate::observe::{Observer, RunEvent};
use crate::result::AgentResult;
use crate::run_options::RunOptions;
use crate::store::{
    RunRecord, StoreError, StoreKind, ThreadEntry, ThreadSummary, TraceEvent, TraceRecord,
    context_section, ms, now_ms, with_context,
};

use super::emit::{Observers, notify};
use crate::error::panic_message;
use crate::output::{Extracted, extract_json};

/// What the before-run hook found, carried to the after-run hook.
pub(crate) struct Prepared {
    /// Whether the config has any store (else both hooks do nothing).
    active: bool,
    started_at_ms: u64,
    input: String,
    thread: Option<String>,
    metadata: BTreeMap<String, String>,
    /// The messages sent before the input (kept only for a trace store).
    history: Vec<Message>,
    history_len: usize,
    /// The context section for the system prompt (empty for none).
    context: String,
    /// The thread cap's error, when the thread is over it.
    refusal: Option<AgentError>,
    refused: bool,
    /// The run's claim on its thread ([`Memory::claim`]): released after the append,
    /// or, when the run is dropped before, by [`Claim`]'s `Drop`.
    claim: Option<Claim>,
    failures: u32,
    recorder: Option<Arc<EventRecorder>>,
    observers: Observers,
    /// The thread's new summary, stored with the run's entry.
    pub(super) thread_summary: Option<ThreadSummary>,
    /// The tokens of the thread summary's call, at the summarizer's price.
    pub(super) summary_tokens: Option<(TokenUsage, Option<crate::pricing::ModelPrice>)>,
    /// Whether the thread's summary failed.
    pub(super) summary_failed: bool,
}

impl Prepared {
    /// Whether the after-run hook has anything to do.
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }

    fn inactive() -> Self {
        Self {
            active: false,
            started_at_ms: 0,
            input: String::new(),
            thread: None,
            metadata: BTreeMap::new(),
            history: Vec::new(),
            history_len: 0,
            context: String::new(),
            refusal: None,
            refused: false,
            claim: None,
            failures: 0,
            recorder: None,
            observers: Observers::default(),
            thread_summary: None,
            summary_tokens: None,
            summary_failed: false,
        }
    }

    /// Sets how many messages came before the run's input (a resumed run: as its
    /// checkpoint says), so the memory append takes the run's own messages.
    pub(crate) fn set_history_len(&mut self, len: usize) {
        self.history_len = len;
    }

    /// Whether the run wrote a new summary of its thread (stored with its entry).
    pub(crate) fn thread_summary_written(&self) -> bool {
        self.thread_summary.is_some()
    }

    /// The thread cap's error, if the run must end before any request.
    pub(crate) fn take_refusal(&mut self) -> Option<AgentError> {
        self.refusal.take()
    }

    /// Appends the retrieved context to the system prompt.
    pub(crate) fn apply_context(&self, system: &mut Option<String>) {
        if !self.context.is_empty() {
            *system = with_context(system.take(), &self.context);
        }
    }

    /// Reports one store failure: a warning, an observer event, and the count.
    fn fail(
        &mut self,
        trace_id: &str,
        store: StoreKind,
        operation: &'static str,
        error: &StoreError,
    ) {
        self.failures = self.failures.saturating_add(1);
        tracing::warn!(store = store.as_str(), operation, error = %error, "store call failed; the run goes on");
        self.observers.notify(&RunEvent::StoreFailed {
            trace_id,
            store,
            operation,
            error,
        });
    }
}

/// Runs one store call under the timeout and a catch boundary (the call is made inside
/// it, so a panic while building the future is caught too).
async fn guarded<'f, T, F>(limit: Duration, call: impl FnOnce() -> F) -> Result<T, StoreError>
where
    F: Future<Output = Result<T, StoreError>> + Send + 'f,
{
    let bounded = AssertUnwindSafe(async move { tokio::time::timeout(limit, call()).await });
    match bounded.catch_unwind().await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_elapsed)) => Err(StoreError::Timeout { limit }),
        Err(payload) => Err(StoreError::Panicked {
            message: panic_message(payload.as_ref()),
        }),
    }
}

/// A run's claim on its thread. Dropped unreleased (the run's future was dropped before
/// its end), it releases the thread on a task of its own, so the next run does not
/// wait for the lease to run out.
struct Claim {
    /// The memory, the thread and the run holding it; `None` once released.
    held: Option<(Arc<dyn crate::store::Memory>, String, String)>,
    limit: Duration,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let (Some((memory, thread, run)), Ok(runtime)) =
            (self.held.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let limit = self.limit;
        runtime.spawn(async move {
            let _ = guarded(limit, || memory.release(&thread, &run)).await;
        });
    }
}

/// How long a run without a deadline holds its thread at most ([`Memory::claim`]): a
/// run that outlives it (or a process that died holding it) no longer keeps the next
/// run waiting.
const THREAD_LEASE: Duration = Duration::from_secs(15 * 60);

/// The longest pause between two claims of a busy thread.
const MAX_CLAIM_PAUSE: Duration = Duration::from_millis(200);

/// Claims the run's thread (case C38): runs on one thread go one after the other. While
/// another run holds it, waits (claims again after a pause that doubles from 10 ms up
/// to [`MAX_CLAIM_PAUSE`]), bounded by the run's deadline and cancellation, and at most
/// by the holder's lease. The lease: the deadline plus four store timeouts (the stores
/// before and after the run), else [`THREAD_LEASE`].
///
/// # Errors
/// The outer `Err` ends the run before any request: [`AgentError::DeadlineExceeded`]
/// when the deadline passes while waiting, [`AgentError::Cancelled`]. The inner one is
/// a store failure: the run goes on without the claim.
async fn claim_thread(
    memory: &dyn crate::store::Memory,
    thread: &str,
    run: &str,
    limit: Duration,
    deadline: Option<Duration>,
    tokens: &[CancellationToken],
) -> Result<Result<(), StoreError>, AgentError> {
    let lease = deadline.map_or(THREAD_LEASE, |d| d.saturating_add(limit.saturating_mul(4)));
    let started = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        if tokens.iter().any(CancellationToken::is_cancelled) {
            return Err(AgentError::Cancelled);
        }
        match guarded(limit, || memory.claim(thread, run, lease)).await {
            Ok(true) => return Ok(Ok(())),
            Ok(false) => {}
            Err(error) => return Ok(Err(error)),
        }
        let mut wait = pause;
        pause = pause.saturating_mul(2).min(MAX_CLAIM_PAUSE);
        if let Some(limit) = deadline {
            let left = limit.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(AgentError::DeadlineExceeded { limit });
            }
            wait = wait.min(left);
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = super::cancel::any_cancelled(tokens) => return Err(AgentError::Cancelled),
        }
    }
}

/// Before the run: installs the event recorder (trace store), loads the thread and
/// checks its cap (memory), then retrieves context (retriever). Changes `options`: the
/// thread's messages go before its history, and the recorder wraps its observer.
pub(crate) async fn before_run<T>(
    cfg: &Compiled<T>,
    trace_id: &str,
    input: &str,
    options: &mut RunOptions,
) -> Prepared {
    let stores = &cfg.stores;
    if !stores.any() {
        return Prepared::inactive();
    }
    let mut p = Prepared::inactive();
    p.active = true;
    p.started_at_ms = now_ms();
    p.input = input.to_owned();
    p.thread.clone_from(&options.thread);
    p.metadata.clone_from(&options.metadata);
    if stores.trace.is_some() {
        let recorder = Arc::new(EventRecorder::new(options.observer.take()));
        options.observer = Some(Arc::clone(&recorder) as Arc<dyn Observer>);
        p.recorder = Some(recorder);
    }
    p.observers = Observers {
        config: cfg.hooks.observer.clone(),
        run: options.observer.clone(),
    };
    let limit = stores.timeout;
    if let (Some(memory), Some(thread)) = (&stores.memory, &p.thread) {
        let deadline = match (cfg.limits.deadline, options.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let tokens: Vec<CancellationToken> = cfg
            .cancellation
            .iter()
            .chain(&options.cancellation)
            .cloned()
            .collect();
        match claim_thread(memory.as_ref(), thread, trace_id, limit, deadline, &tokens).await {
            Ok(Ok(())) => {
                p.claim = Some(Claim {
                    held: Some((Arc::clone(memory), thread.clone(), trace_id.to_owned())),
                    limit,
                });
            }
            Ok(Err(error)) => p.fail(trace_id, StoreKind::Memory, "claim", &error),
            Err(ended) => {
                p.refusal = Some(ended);
                p.refused = true;
                p.history_len = options.history.len();
                return p;
            }
        }
    }
    if let (Some(memory), Some(thread)) = (&stores.memory, &p.thread) {
        let mut max = stores.window.max_messages;
        if super::thread::summarizes(cfg).is_some() {
            // What the window no longer holds is summarized, not dropped.
            max = max.saturating_mul(4).max(200);
        }
        match guarded(limit, || memory.load(thread, max)).await {
            Ok(state) => match stores.max_thread_llm_calls {
                Some(cap) if state.llm_calls >= cap => {
                    p.refusal = Some(AgentError::BudgetExhausted {
                        budget: Budget::ThreadLlmCalls {
                            limit: cap,
                            used: state.llm_calls,
                        },
                    });
                    p.refused = true;
                }
                _ => {
                    let start = super::thread::thread_history(cfg, state).await;
                    p.summary_tokens = start.tokens;
                    p.thread_summary = start.summary;
                    p.summary_failed = start.failed;
                    let mut history = start.history;
                    history.append(&mut options.history);
                    options.history = history;
                }
            },
            Err(error) => p.fail(trace_id, StoreKind::Memory, "load", &error),
        }
    }
    if let (Some(retriever), false) = (&stores.retriever, p.refused) {
        match guarded(limit, || retriever.retrieve(input, stores.top_k)).await {
            Ok(mut docs) => {
                docs.truncate(stores.top_k);
                p.context = context_section(&docs);
            }
            Err(error) => p.fail(trace_id, StoreKind::Retriever, "retrieve", &error),
        }
    }
    p.history_len = options.history.len();
    if stores.trace.is_some() {
        p.history.clone_from(&options.history);
    }
    p
}

/// The output as stored: the answer as a JSON value (the submitted arguments in tool
/// mode, the JSON read out of the reply in native and prompted modes), the escalation's
/// arguments, or else the text as a JSON string; `null` for none.
pub(crate) fn output_value<T>(cfg: &Compiled<T>, result: &AgentResult<T>) -> Value {
    if result.output.is_empty() {
        return Value::Null;
    }
    let escalated = matches!(result.outcome, Err(AgentError::Escalated { .. }));
    let answered = result.outcome.is_ok();
    let value = match &cfg.output {
        _ if escalated => serde_json::from_str::<Value>(&result.output).ok(),
        OutputPlan::Tool if answered => serde_json::from_str::<Value>(&result.output).ok(),
        OutputPlan::Json(_) if answered => match extract_json(&result.output) {
            Extracted::Value(value) => Some(value),
            _ => None,
        },
        _ => None,
    };
    value.unwrap_or_else(|| Value::String(result.output.clone()))
}

/// After the run: appends it to its thread, records it and its trace (concurrently),
/// and sets `result.store_failures`.
pub(crate) async fn after_run<T>(cfg: &Compiled<T>, mut p: Prepared, result: &mut AgentResult<T>) {
    if !p.active {
        return;
    }
    let stores = &cfg.stores;
    let limit = stores.timeout;
    let trace_id = result.trace_id.clone();
    let ending = result.ending();
    let category = result.category().map(str::to_owned);
    let error = result.outcome.as_ref().err().map(ToString::to_string);
    let output = output_value(cfg, result);
    let own: &[Message] = result.transcript.get(p.history_len..).unwrap_or_default();
    let model = cfg.primary().name.clone();

    let entry = match (&stores.memory, &p.thread, p.refused) {
        // A paused run adds its turns to the thread when it resumes and ends.
        _ if ending == Ending::Paused => None,
        (Some(_), Some(_), false) => {
            let keeps = matches!(ending, Ending::Answered | Ending::Escalated);
            Some(
                ThreadEntry::new(
                    trace_id.clone(),
                    if keeps { own.to_vec() } else { Vec::new() },
                    u64::from(result.usage.llm_calls),
                )
                .with_summary(p.thread_summary.take()),
            )
        }
        _ => None,
    };
    let record = stores.feedback.as_ref().map(|_| RunRecord {
        trace_id: trace_id.clone(),
        agent: cfg.name.clone(),
        variant: stores.variant.clone(),
        fingerprint: cfg.fingerprint.clone(),
        model: model.clone(),
        thread: p.thread.clone(),
        input: p.input.clone(),
        output: output.clone(),
        ending,
        category: category.clone(),
        error: error.clone(),
        usage: result.usage.clone(),
        scores: result.scores.clone(),
        duration_ms: ms(result.duration),
        started_at_ms: p.started_at_ms,
        metadata: p.metadata.clone(),
        feedback: None,
    });
    let trace = stores.trace.as_ref().map(|_| TraceRecord {
        trace_id: trace_id.clone(),
        agent: cfg.name.clone(),
        variant: stores.variant.clone(),
        fingerprint: cfg.fingerprint.clone(),
        model,
        started_at_ms: p.started_at_ms,
        input: std::mem::take(&mut p.input),
        history: std::mem::take(&mut p.history),
        thread: p.thread.clone(),
        metadata: std::mem::take(&mut p.metadata),
        transcript: own.to_vec(),
        events: p.recorder.as_ref().map(|r| r.take()).unwrap_or_default(),
        ending,
        category,
        error,
        output,
        usage: result.usage.clone(),
        duration_ms: ms(result.duration),
    });

    let append = async {
        match (&stores.memory, &p.thread, &entry) {
            (Some(memory), Some(thread), Some(entry)) => {
                Some(guarded(limit, || memory.append(thread, entry)).await)
            }
            _ => None,
        }
    };
    let recorded = async {
        match (&stores.feedback, &record) {
            (Some(store), Some(record)) => Some(guarded(limit, || store.record(record)).await),
            _ => None,
        }
    };
    let traced = async {
        match (&stores.trace, &trace) {
            (Some(store), Some(trace)) => Some(guarded(limit, || store.record_trace(trace)).await),
            _ => None,
        }
    };
    let (appended, recorded, traced) = futures::join!(append, recorded, traced);
    // The next run on the thread may start: it sees this one's turns.
    // Released here, not by the drop.
    if let Some((memory, thread, run)) = p.claim.take().and_then(|mut c| c.held.take())
        && let Err(error) = guarded(limit, || memory.release(&thread, &run)).await
    {
        p.fail(&trace_id, StoreKind::Memory, "release", &error);
    }
    for (outcome, store, operation) in [
        (appended, StoreKind::Memory, "append"),
        (recorded, StoreKind::Feedback, "record"),
        (traced, StoreKind::Trace, "record_trace"),
    ] {
        if let Some(Err(error)) = outcome {
            p.fail(&trace_id, store, operation, &error);
        }
    }
    result.store_failures = result.store_failures.saturating_add(p.failures);
}

/// Flushes the config's feedback and trace stores (for `run_batch`); returns the
/// writes the flushes report as failed (write-behind stores), plus one per flush that
/// failed itself. Each failure is a warning and a `StoreFailed` event (operation
/// `flush`, no trace id) for the config's observer.
pub(crate) async fn flush_stores<T>(cfg: &Compiled<T>) -> u64 {
    let stores = &cfg.stores;
    let limit = stores.timeout;
    let observers = Observers {
        config: cfg.hooks.observer.clone(),
        run: None,
    };
    let mut failures = 0u64;
    let mut count = |store: StoreKind, flushed: Result<u64, StoreError>| {
        let error = match flushed {
            Ok(0) => return,
            Ok(n) => {
                failures = failures.saturating_add(n);
                StoreError::backend(format!(
                    "{n} queued writes failed since the last flush (see the warnings)"
                ))
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                error
            }
        };
        tracing::warn!(store = store.as_str(), error = %error, "store flush reported failures");
        observers.notify(&RunEvent::StoreFailed {
            trace_id: "",
            store,
            operation: "flush",
            error: &error,
        });
    };
    if let Some(store) = &stores.feedback {
        count(StoreKind::Feedback, guarded(limit, || store.flush()).await);
    }
    if let Some(store) = &stores.trace {
        count(StoreKind::Trace, guarded(limit, || store.flush()).await);
    }
    failures
}

/// An observer that keeps the run's events for its trace, then passes them on to the
/// run's own observer.
pub(crate) struct EventRecorder {
    started: Instant,
    events: Mutex<Vec<TraceEvent>>,
    next: Option<Arc<dyn Observer>>,
}

impl EventRecorder {
    fn new(next: Option<Arc<dyn Observer>>) -> Self {
        Self {
            started: Instant::now(),
            events: Mutex::new(Vec::new()),
            next,
        }
    }

    fn take(&self) -> Vec<TraceEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn owned(&self, event: &RunEvent<'_>) -> Option<TraceEvent> {
        let at_ms = ms(self.started.elapsed());
        Some(match event {
            RunEvent::TurnStarted { llm_call, .. } => TraceEvent::TurnStarted {
                at_ms,
                llm_call: *llm_call,
            },
            RunEvent::ToolFinished {
                tool,
                call_id,
                is_error,
                duration,
                ..
            } => TraceEvent::ToolFinished {
                at_ms,
                tool: (*tool).to_owned(),
                call_id: (*call_id).to_owned(),
                is_error: *is_error,
                duration_ms: ms(*duration),
            },
            RunEvent::RetryScheduled {
                llm_call,
                delay,
                error,
                ..
            } => TraceEvent::RetryScheduled {
                at_ms,
                llm_call: *llm_call,
                delay_ms: ms(*delay),
                error: error.to_string(),
            },
            RunEvent::ToolsRevealed {
                llm_call, tools, ..
            } => TraceEvent::ToolsRevealed {
                at_ms,
                llm_call: *llm_call,
                tools: tools.to_vec(),
            },
            RunEvent::StoreFailed {
                store,
                operation,
                error,
                ..
            } => TraceEvent::StoreFailed {
                at_ms,
                store: store.as_str().to_owned(),
                operation: (*operation).to_owned(),
                error: error.to_string(),
            },
            RunEvent::RunEnded {
                ending, category, ..
            } => TraceEvent::RunEnded {
                at_ms,
                ending: *ending,
                category: category.map(str::to_owned),
            },
            _ => return None,
        })
    }
}

impl Observer for EventRecorder {
    fn on_event(&self, event: &RunEvent<'_>) {
        if let Some(owned) = self.owned(event) {
            self.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(owned);
        }
        notify(self.next.as_deref(), event);
    }
}
