//! [`run_agent`]: the total run loop.
//!
//! Every model turn is classified into exactly one transition (see `docs/loop.md`, the
//! transition table); every run ends in an [`AgentResult`] holding a validated value or one
//! [`AgentError`].

mod content;
mod customer;
mod feedback;
mod guard;
mod replay;
mod sanitize;
mod stores;
mod tools;
mod trace;

pub use replay::replay;
pub(crate) use stores::flush_stores;

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;
use tracing::Instrument;

use crate::config::{AgentConfig, Compiled, OutputPlan};
use crate::error::{AgentError, Attempt, AttemptKind, Budget, Ending};
use crate::handover::{CallOutcome, CallRecord, Handover, Limits, RunState};
use crate::llm::{LlmError, LlmRequest, LlmResponse, StopReason, ToolChoice};
use crate::message::{Message, ToolCall, ToolResult};
use crate::observe::RunEvent;
use crate::output::{AgentOutput, ESCALATE_TO_HUMAN, Extracted, SUBMIT_OUTPUT, extract_json};
use crate::result::AgentResult;
use crate::run_options::RunOptions;
use crate::scores::Scores;
use crate::stream::{EventSender, PartialKind, StreamEvent, StreamSink, TurnSink};
use crate::tool::{StateMap, ToolDefinition};
use crate::usage::Usage;
use crate::validate::ValidationErrors;
use tokio_util::sync::CancellationToken;

use crate::error::panic_message;
use guard::Guard;
use trace::{Observers, trace_id_of};

/// Resolves when any of the tokens is cancelled; never, when there is none.
async fn any_cancelled(tokens: &[CancellationToken]) {
    match tokens {
        [] => std::future::pending().await,
        [one] => one.cancelled().await,
        many => {
            let waits = many.iter().map(|t| Box::pin(t.cancelled()));
            futures::future::select_all(waits).await;
        }
    }
}

/// Runs the agent on `input` until it answers or fails.
///
/// Never panics, never returns early, never waits forever on something the runner owns:
/// the provider call, the tools, the grader and the observer sit behind catch
/// boundaries, and every wait is bounded by a budget, a timeout or the deadline. Needs a
/// Tokio runtime with timers (`#[tokio::main]` has one); polled outside one, the run
/// ends at once with [`AgentError::Internal`] saying so, before any request. Dropping the returned future stops the run, including its
/// in-flight request and tool calls.
pub async fn run_agent<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: impl Into<String>,
) -> AgentResult<T> {
    run_agent_with(config, input, RunOptions::default()).await
}

/// Runs the agent on `input` with per-run inputs: request-scoped state, a cancellation
/// token, a deadline, an observer, metadata and earlier messages (see [`RunOptions`]).
///
/// Everything [`run_agent`] promises holds: never panics, never returns early, every
/// wait bounded. A type declared with the builder's `expects_state` that neither the
/// config nor `options` provides ends the run at once with
/// [`AgentError::InvalidRun`], before any request. With stores in the config (memory,
/// retriever, feedback and trace stores), their calls come before and after the run,
/// each bounded by `store_timeout`; see [`crate::store`].
pub async fn run_agent_with<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: impl Into<String>,
    options: RunOptions,
) -> AgentResult<T> {
    run(config, input.into(), options, None).await
}

/// The run behind [`crate::run_agent_stream`]: [`run_agent_with`], with the model calls
/// streamed and the run's events sent to `events`.
pub(crate) async fn run_streamed<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: String,
    options: RunOptions,
    events: EventSender<T>,
) -> AgentResult<T> {
    run(config, input, options, Some(events)).await
}

/// One run; `events` is set for a streamed run.
async fn run<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: String,
    mut options: RunOptions,
    events: Option<EventSender<T>>,
) -> AgentResult<T> {
    let cfg: &Compiled<T> = &config.inner;
    let started = Instant::now();
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {}", cfg.settings.name),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = %cfg.settings.name,
        gen_ai.provider.name = %cfg.client.provider(),
        gen_ai.request.model = %cfg.wire_model,
        trace_id = tracing::field::Empty,
        agent.metadata = tracing::field::Empty,
        agent.ending = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    // The OpenTelemetry trace id of this span when an OTel layer exports it, else random.
    let trace_id: Arc<str> = Arc::from(trace_id_of(&span));
    span.record("trace_id", &*trace_id);
    if !options.metadata.is_empty() {
        span.record("agent.metadata", tracing::field::debug(&options.metadata));
    }
    // Stores (memory, retrieval, recorders): nothing happens without them.
    let mut prepared = if cfg.settings.stores.any() {
        stores::before_run(cfg, &trace_id, &input, &mut options)
            .instrument(span.clone())
            .await
    } else {
        stores::Prepared::none()
    };
    let mut run = Run::new(cfg, Arc::clone(&trace_id), input, options, events);
    prepared.apply_context(&mut run.request.system);
    run.notify(&RunEvent::RunStarted {
        trace_id: &trace_id,
        agent: &cfg.settings.name,
    });
    let outcome = match prepared.take_refusal() {
        Some(refused) => Err(refused),
        None => run.drive_bounded().instrument(span.clone()).await,
    };
    let duration = started.elapsed();
    let run_observers = run.observers.clone();
    let mut result = run.finish(outcome, duration);
    let ending = result.ending();
    span.record("agent.ending", ending.as_str());
    if let Some(category) = result.category() {
        span.record("error.type", category);
        span.record("otel.status_code", "error");
    }
    run_observers.notify(&RunEvent::RunEnded {
        trace_id: &trace_id,
        ending,
        category: result.category(),
        usage: &result.usage,
        duration,
    });
    if prepared.is_active() {
        stores::after_run(cfg, prepared, &mut result)
            .instrument(span)
            .await;
    }
    result
}

/// What the loop does after a turn.
enum Next<T> {
    /// Ask the model again.
    Continue,
    /// The run is over.
    Stop(Result<T, AgentError>),
}

/// The state of one run.
struct Run<'c, T> {
    cfg: &'c Compiled<T>,
    trace_id: Arc<str>,
    input: String,
    request: LlmRequest,
    state: Arc<StateMap>,
    observers: Observers,
    tokens: Vec<CancellationToken>,
    deadline: Option<Duration>,
    usage: Usage,
    cost_usd: f64,
    last_call_tokens: u64,
    last_call_cost: f64,
    attempts: Vec<Attempt>,
    failures: Vec<LlmError>,
    force_answer: bool,
    last_text: String,
    output: String,
    scores: Option<Scores>,
    guard: Guard,
    deadline_at: Option<tokio::time::Instant>,
    seen_ids: HashSet<String>,
    wrap_up_turn: bool,
    /// Every user-tool call the model made, with its outcome (for the handover and
    /// `tools_for`).
    calls: Vec<CallRecord>,
    /// The last correction written to the model.
    last_feedback: Option<String>,
    /// The model's own summary, when it handed over with one.
    model_summary: Option<String>,
    /// A tool that said it cannot safely continue, and its message.
    fatal: Option<(String, String)>,
    /// Where a streamed run's events go; `None` for [`run_agent_with`].
    events: Option<EventSender<T>>,
}

impl<'c, T: AgentOutput> Run<'c, T> {
    fn new(
        cfg: &'c Compiled<T>,
        trace_id: Arc<str>,
        input: String,
        options: RunOptions,
        events: Option<EventSender<T>>,
    ) -> Self {
        let s = &cfg.settings;
        let RunOptions {
            state: run_state,
            cancellation,
            deadline,
            observer,
            metadata: _,
            history,
            thread: _,
        } = options;
        let mut request = LlmRequest::new(cfg.wire_model.clone());
        request.system = cfg.system_prompt.clone();
        request.prompt_cache = cfg.prompt_cache;
        if let OutputPlan::Json(spec) = &cfg.output {
            request.output = Some(Arc::clone(spec));
        }
        request.messages = history;
        request.messages.push(Message::user(input.clone()));
        request.tools = Arc::clone(&cfg.offered);
        request.max_tokens = s.max_tokens;
        request.temperature = s.temperature;
        let state = if run_state.is_empty() {
            Arc::clone(&cfg.state)
        } else {
            let mut merged = (*cfg.state).clone();
            merged.extend(run_state);
            Arc::new(merged)
        };
        let tokens = s.cancellation.iter().cloned().chain(cancellation).collect();
        let deadline = match (s.deadline, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Self {
            cfg,
            trace_id,
            input,
            request,
            state,
            observers: Observers {
                config: s.observer.clone(),
                run: observer,
            },
            tokens,
            deadline,
            usage: Usage::default(),
            cost_usd: 0.0,
            last_call_tokens: 0,
            last_call_cost: 0.0,
            attempts: Vec::new(),
            failures: Vec::new(),
            force_answer: false,
            last_text: String::new(),
            output: String::new(),
            scores: None,
            guard: Guard::new(s.repeated_call_limit, s.no_progress_turns),
            deadline_at: None,
            seen_ids: HashSet::new(),
            wrap_up_turn: false,
            calls: Vec::new(),
            last_feedback: None,
            model_summary: None,
            fatal: None,
            events,
        }
    }

    /// The tools offered in an ordinary turn: every tool, or, with `tools_for`, the
    /// user tools it keeps for the run's state (each distinct set is one `Arc`, cached
    /// in the config so it is encoded once), then `submit_output` and
    /// `escalate_to_human`.
    fn offered_tools(&self) -> Arc<[ToolDefinition]> {
        let cfg = self.cfg;
        let Some(keep) = &cfg.settings.tools_for else {
            return Arc::clone(&cfg.offered);
        };
        let state = RunState {
            turn: self.usage.llm_calls.saturating_add(1),
            tool_calls: self.usage.tool_calls,
            calls: &self.calls,
        };
        let kept: Vec<bool> = cfg
            .tools
            .iter()
            .map(|t| {
                match std::panic::catch_unwind(AssertUnwindSafe(|| keep(&state, &t.definition))) {
                    Ok(keep) => keep,
                    Err(payload) => {
                        tracing::warn!(
                            tool = %t.definition.name,
                            panic = %panic_message(payload.as_ref()),
                            "tools_for panicked; the tool is not offered this turn"
                        );
                        false
                    }
                }
            })
            .collect();
        let build = || -> Arc<[ToolDefinition]> {
            let user = cfg
                .tools
                .iter()
                .zip(&kept)
                .filter(|(_, k)| **k)
                .map(|(t, _)| t.definition.clone());
            let rest = cfg.offered[cfg.tools.len()..].iter().cloned();
            user.chain(rest).collect::<Vec<_>>().into()
        };
        if kept.len() > 64 {
            return build();
        }
        let mask = kept
            .iter()
            .enumerate()
            .fold(0u64, |m, (i, k)| if *k { m | (1 << i) } else { m });
        let mut subsets = cfg
            .subsets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(subsets.entry(mask).or_insert_with(build))
    }

    /// Records the calls of a turn that ran none of them, with why.
    fn record_not_run(&mut self, calls: &[ToolCall], results: &[ToolResult]) {
        for (call, result) in calls.iter().zip(results) {
            if self.cfg.tool_index.contains_key(&call.name) {
                self.record_call(call, CallOutcome::NotRun(result.content.clone()));
            }
        }
    }

    fn record_call(&mut self, call: &ToolCall, outcome: CallOutcome) {
        let irreversible = self
            .cfg
            .tool_index
            .get(&call.name)
            .and_then(|&i| self.cfg.tools.get(i))
            .is_some_and(|t| t.irreversible);
        self.calls.push(CallRecord {
            llm_call: self.usage.llm_calls,
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            outcome,
            irreversible,
        });
    }

    /// Sends the tool results the turn added to the transcript (from message `from`
    /// on) as stream events.
    fn send_results(&self, from: usize) {
        let Some(events) = &self.events else { return };
        let llm_call = self.usage.llm_calls;
        for message in self.request.messages.iter().skip(from) {
            if let Message::Tool { results } = message {
                for r in results {
                    events.send(StreamEvent::ToolResult {
                        llm_call,
                        id: r.call_id.clone(),
                        name: r.name.clone(),
                        content: r.content.clone(),
                        is_error: r.is_error,
                    });
                }
            }
        }
    }

    fn notify(&self, event: &RunEvent<'_>) {
        self.observers.notify(event);
    }

    fn is_cancelled(&self) -> bool {
        self.tokens.iter().any(CancellationToken::is_cancelled)
    }

    /// The state types the config expects per run that this run lacks.
    fn missing_state(&self) -> Option<AgentError> {
        let missing: Vec<&str> = self
            .cfg
            .settings
            .run_state
            .iter()
            .filter(|need| !self.state.contains(need.type_id))
            .map(|need| need.type_name)
            .collect();
        (!missing.is_empty()).then(|| AgentError::InvalidRun {
            message: format!(
                "the config expects state of type {} per run (expects_state); pass it with \
                 RunOptions::state",
                missing.join(", ")
            ),
        })
    }

    /// The loop under the run-wide bounds: the deadline, the caller's cancellation token,
    /// and a catch boundary for faults of the runner itself.
    async fn drive_bounded(&mut self) -> Result<T, AgentError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(AgentError::Internal {
                message: "run_agent needs a Tokio runtime with timers (for example \
                          #[tokio::main]); none is running on this thread"
                    .to_owned(),
            });
        }
        // A runtime built without `enable_time` panics on the first timer; find out
        // before any request.
        if std::panic::catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO))).is_err() {
            return Err(AgentError::Internal {
                message: "run_agent needs a Tokio runtime with timers; this one was built \
                          without them (use enable_time or enable_all)"
                    .to_owned(),
            });
        }
        if let Some(error) = self.missing_state() {
            return Err(error);
        }
        let deadline = self.deadline;
        // A deadline too far to represent (`Duration::MAX`) is no deadline.
        let deadline_at = deadline.and_then(|limit| tokio::time::Instant::now().checked_add(limit));
        self.deadline_at = deadline_at;
        if self.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        if deadline.is_some_and(|d| d.is_zero()) {
            return Err(AgentError::DeadlineExceeded {
                limit: Duration::ZERO,
            });
        }
        let tokens = self.tokens.clone();
        let drive = AssertUnwindSafe(self.drive()).catch_unwind();
        let timer = async {
            match deadline_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = any_cancelled(&tokens);
        let bounded = async {
            tokio::select! {
                biased;
                outcome = drive => match outcome {
                    Ok(outcome) => outcome,
                    Err(payload) => Err(AgentError::Internal {
                        message: format!("the runner panicked: {}", panic_message(payload.as_ref())),
                    }),
                },
                () = cancelled => Err(AgentError::Cancelled),
                () = timer => Err(AgentError::DeadlineExceeded {
                    limit: deadline.unwrap_or_default(),
                }),
            }
        };
        // Building the timer can panic (a runtime without timers); keep that inside the
        // boundary too.
        let outcome = match AssertUnwindSafe(bounded).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(payload) => Err(AgentError::Internal {
                message: format!("the runner panicked: {}", panic_message(payload.as_ref())),
            }),
        };
        // The outcome is fixed: grading can only add scores, within its own timeout, the
        // deadline and the cancellation token.
        if let Ok(value) = &outcome {
            self.grade(value, deadline_at, &tokens).await;
        }
        outcome
    }

    async fn drive(&mut self) -> Result<T, AgentError> {
        loop {
            self.check_before_call()?;
            let response = match self.call_model().await {
                Ok(Ok(response)) => response,
                Ok(Err(error)) => {
                    self.on_provider_failure(error).await?;
                    continue;
                }
                Err(panicked) => return Err(panicked),
            };
            self.failures.clear();
            self.force_answer = false;
            let before = self.request.messages.len();
            let next = self.on_turn(response).await;
            if self.events.is_some() {
                self.send_results(before);
            }
            match next {
                Next::Continue => {}
                Next::Stop(outcome) => return outcome,
            }
        }
    }

    /// The checks made before every round trip: cancellation and the deadline (checked
    /// here too, so a loop that never waits cannot outrun them), the call cap, then
    /// token and cost budgets.
    fn check_before_call(&mut self) -> Result<(), AgentError> {
        if self.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        let s = &self.cfg.settings;
        if let (Some(at), Some(limit)) = (self.deadline_at, self.deadline)
            && tokio::time::Instant::now() >= at
        {
            return Err(AgentError::DeadlineExceeded { limit });
        }
        if self.usage.llm_calls >= s.max_llm_calls {
            return Err(AgentError::MaxLlmCalls {
                limit: s.max_llm_calls,
                attempts: std::mem::take(&mut self.attempts),
            });
        }
        if let Some(limit) = s.max_total_tokens {
            let used = self.usage.total_tokens();
            if used >= limit || used.saturating_add(self.last_call_tokens) > limit {
                return Err(AgentError::BudgetExhausted {
                    budget: Budget::TotalTokens { limit, used },
                });
            }
        }
        if let Some(limit) = s.max_cost_usd {
            let spent = self.cost_usd;
            if spent >= limit || spent + self.last_call_cost > limit {
                return Err(AgentError::BudgetExhausted {
                    budget: Budget::CostUsd { limit, spent },
                });
            }
        }
        Ok(())
    }

    /// Whether this round trip is the last one the budgets allow.
    fn is_last_call(&self) -> bool {
        let s = &self.cfg.settings;
        if self.usage.llm_calls.saturating_add(1) >= s.max_llm_calls {
            return true;
        }
        let tokens_tight = s.max_total_tokens.is_some_and(|limit| {
            self.last_call_tokens > 0
                && self
                    .usage
                    .total_tokens()
                    .saturating_add(self.last_call_tokens.saturating_mul(2))
                    > limit
        });
        let cost_tight = s.max_cost_usd.is_some_and(|limit| {
            self.last_call_cost > 0.0 && self.cost_usd + 2.0 * self.last_call_cost > limit
        });
        tokens_tight || cost_tight
    }

    /// One round trip. The outer `Err` is a panic inside the client: not a provider's
    /// failure but a bug in the client's code, so the run ends with `internal_error`.
    async fn call_model(&mut self) -> Result<Result<LlmResponse, LlmError>, AgentError> {
        let cfg = self.cfg;
        let wrap_up =
            cfg.settings.wrap_up && !matches!(cfg.output, OutputPlan::Text) && self.is_last_call();
        self.wrap_up_turn = wrap_up;
        let escalation = cfg.escalation_validator.is_some();
        // The forced answer: a submit_output call in tool mode; in native and prompted
        // modes, text (no tool may be called), which the provider constrains to the
        // schema in native mode. At the limit, a model with escalation on may hand over
        // instead (escalate_to_human with its summary).
        let (tools, choice) = match (&cfg.output, wrap_up, self.force_answer) {
            (OutputPlan::Tool, true, _) => match &cfg.wrap_up_offered {
                Some(tools) if escalation => (Arc::clone(tools), ToolChoice::Required),
                Some(tools) => (
                    Arc::clone(tools),
                    ToolChoice::Tool(SUBMIT_OUTPUT.to_owned()),
                ),
                None => (Arc::clone(&cfg.offered), ToolChoice::Required),
            },
            (OutputPlan::Json(_), true, _) if escalation => {
                (Arc::clone(&cfg.offered), ToolChoice::Auto)
            }
            (OutputPlan::Json(_), true, _) => (Arc::clone(&cfg.offered), ToolChoice::None),
            (OutputPlan::Tool, false, true) => (self.offered_tools(), ToolChoice::Required),
            (OutputPlan::Json(_), false, true) => (self.offered_tools(), ToolChoice::None),
            _ => (self.offered_tools(), ToolChoice::Auto),
        };
        self.request.tools = tools;
        self.request.tool_choice = choice;
        self.usage.llm_calls = self.usage.llm_calls.saturating_add(1);
        let llm_call = self.usage.llm_calls;
        self.notify(&RunEvent::TurnStarted {
            trace_id: &self.trace_id,
            llm_call,
        });
        let span = tracing::info_span!(
            "chat",
            otel.name = %format_args!("chat {}", self.request.model),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = %cfg.client.provider(),
            gen_ai.request.model = %self.request.model,
            // Integers as i64: the OpenTelemetry bridge exports a u64 field as a string.
            gen_ai.request.max_tokens = i64::from(self.request.max_tokens),
            gen_ai.response.id = tracing::field::Empty,
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.system_instructions = tracing::field::Empty,
            gen_ai.input.messages = tracing::field::Empty,
            gen_ai.output.messages = tracing::field::Empty,
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            llm_call = i64::from(llm_call),
            wrap_up,
        );
        let capture = cfg.settings.capture_content;
        if capture {
            if let Some(system) = &self.request.system {
                span.record(
                    "gen_ai.system_instructions",
                    content::system_instructions(system),
                );
            }
            span.record(
                "gen_ai.input.messages",
                content::input_messages(&self.request.messages),
            );
        }
        let mut sink = self.events.as_ref().map(|events| {
            events.send(StreamEvent::TurnStarted { llm_call });
            let kind = match &cfg.output {
                OutputPlan::Tool => PartialKind::Tool,
                OutputPlan::Json(_) => PartialKind::Text,
                OutputPlan::Text => PartialKind::None,
            };
            TurnSink::new(events.clone(), llm_call, kind)
        });
        let request = &self.request;
        let client = &cfg.client;
        let limit = cfg.settings.llm_timeout;
        // The timer sits inside the catch boundary: outside a runtime its creation panics.
        let guarded = AssertUnwindSafe(async move {
            match sink.as_mut() {
                Some(sink) => {
                    let outcome =
                        tokio::time::timeout(limit, client.complete_streaming(request, sink)).await;
                    // The last batch of a client that does not flush.
                    if matches!(outcome, Ok(Ok(_))) {
                        sink.flush();
                    }
                    outcome
                }
                None => tokio::time::timeout(limit, client.complete(request)).await,
            }
        })
        .catch_unwind();
        let outcome = match guarded.instrument(span.clone()).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_elapsed)) => Err(LlmError::transient(format!(
                "the model call timed out after {} ms (llm_timeout)",
                limit.as_millis()
            ))),
            Err(payload) => {
                span.record("error.type", "internal_error");
                span.record("otel.status_code", "error");
                return Err(AgentError::Internal {
                    message: format!(
                        "the model client panicked: {}",
                        panic_message(payload.as_ref())
                    ),
                });
            }
        };
        match &outcome {
            Ok(response) => {
                if let Some(id) = &response.request_id {
                    span.record("gen_ai.response.id", id.as_str());
                }
                if let Some(model) = &response.model {
                    span.record("gen_ai.response.model", model.as_str());
                }
                trace::record_finish_reasons(&span, response.stop_reason.as_str());
                let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                span.record(
                    "gen_ai.usage.input_tokens",
                    tokens(response.usage.input_tokens),
                );
                span.record(
                    "gen_ai.usage.output_tokens",
                    tokens(response.usage.output_tokens),
                );
                if capture {
                    span.record("gen_ai.output.messages", content::output_messages(response));
                }
            }
            Err(error) => {
                let kind = if error.is_transient() {
                    "llm_transient_error"
                } else {
                    "llm_permanent_error"
                };
                span.record("error.type", kind);
                span.record("otel.status_code", "error");
                tracing::warn!(parent: &span, error = %error, "model call failed");
            }
        }
        Ok(outcome)
    }

    /// A failed round trip: retry a transient failure after backoff (the request is
    /// unchanged), or end the run.
    async fn on_provider_failure(&mut self, error: LlmError) -> Result<(), AgentError> {
        if !error.is_transient() {
            return Err(AgentError::LlmPermanent { error });
        }
        let retry = u32::try_from(self.failures.len()).unwrap_or(u32::MAX);
        let delay = self.cfg.settings.backoff.delay(retry, error.retry_after);
        self.failures.push(error);
        if self.failures.len() >= self.cfg.settings.max_llm_retries as usize {
            return Err(AgentError::MaxLlmRetries {
                failures: std::mem::take(&mut self.failures),
            });
        }
        if let Some(last) = self.failures.last() {
            self.notify(&RunEvent::RetryScheduled {
                trace_id: &self.trace_id,
                llm_call: self.usage.llm_calls,
                delay,
                error: last,
            });
            if let Some(events) = &self.events {
                events.send(StreamEvent::Retrying {
                    llm_call: self.usage.llm_calls,
                    delay,
                    error: last.to_string(),
                });
            }
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }

    /// Adds a round trip's tokens and cost. A response without usage (no input and no
    /// output tokens: some compatible servers send none) is counted from an estimate
    /// of the request just sent and of the reply (bytes / 4; see
    /// [`LlmRequest::estimated_input_tokens`]), so the token and cost caps still bind,
    /// and `Usage::estimated_llm_calls` says so.
    ///
    /// Called after the turn's calls were sanitized: the estimate serializes their
    /// arguments, which must not nest deeper than the sanitizer allows.
    fn add_usage(&mut self, response: &LlmResponse) {
        let reported = response.usage;
        let usage = if reported.input_tokens == 0 && reported.output_tokens == 0 {
            self.usage.estimated_llm_calls = self.usage.estimated_llm_calls.saturating_add(1);
            crate::llm::TokenUsage::new(
                self.request.estimated_input_tokens(),
                response.estimated_output_tokens(),
            )
        } else {
            reported
        };
        self.usage.add_tokens(&usage);
        self.last_call_tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        if let Some(price) = &self.cfg.price {
            let cost = price.cost(&usage);
            self.cost_usd += cost;
            self.last_call_cost = cost;
            self.usage.cost_usd = Some(self.cost_usd);
        }
    }

    /// Classifies a successful turn into exactly one transition.
    async fn on_turn(&mut self, mut response: LlmResponse) -> Next<T> {
        let cfg = self.cfg;
        let is_known = |name: &str| {
            cfg.tool_index.contains_key(name) || name == SUBMIT_OUTPUT || name == ESCALATE_TO_HUMAN
        };
        sanitize::sanitize_calls(
            &mut response.tool_calls,
            &mut self.seen_ids,
            &self.trace_id,
            self.usage.llm_calls,
            &is_known,
        );
        self.add_usage(&response);
        let input_tokens = response.usage.input_tokens;
        let LlmResponse {
            text,
            mut tool_calls,
            stop_reason,
            reasoning,
            ..
        } = response;
        if stop_reason == StopReason::MaxTokens
            && let Some(last) = tool_calls.last_mut()
        {
            // The output cap cut the turn: its last call was still being written. Even
            // arguments that parse (`{}` for a tool whose parameters are all optional)
            // are not what the model meant to send, so the call is never run.
            let signature = last.thought_signature.take();
            *last = ToolCall::with_invalid_arguments(
                std::mem::take(&mut last.id),
                std::mem::take(&mut last.name),
                feedback::cut_call(self.request.max_tokens),
            );
            last.thought_signature = signature;
        }
        if !text.is_empty() {
            self.last_text.clone_from(&text);
        }
        self.request
            .messages
            .push(Message::assistant(text.clone(), tool_calls.clone()));
        if let Some(events) = &self.events {
            for call in &tool_calls {
                events.send(StreamEvent::ToolCallFinished {
                    llm_call: self.usage.llm_calls,
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                });
            }
        }
        match stop_reason {
            // Provider-declared stops that are not answers: the same input gets the
            // same answer, so no nudge and no retry.
            StopReason::Refusal | StopReason::ContentFilter => {
                let message = if text.trim().is_empty() {
                    "the provider gave no text".to_owned()
                } else {
                    text
                };
                return Next::Stop(Err(AgentError::Refused {
                    stop_reason,
                    message,
                }));
            }
            StopReason::ContextWindowExceeded => {
                return Next::Stop(Err(AgentError::ContextWindowExceeded { input_tokens }));
            }
            _ => {}
        }
        let terminal: Vec<&ToolCall> = tool_calls
            .iter()
            .filter(|c| self.is_terminal(&c.name))
            .collect();
        if tool_calls.is_empty() {
            // Some reasoning parsers leave the content empty and put the whole reply,
            // the JSON answer included, in the reasoning.
            let answer_in_reasoning = text.trim().is_empty()
                && !reasoning.trim().is_empty()
                && matches!(self.cfg.output, OutputPlan::Json(_));
            let text = if answer_in_reasoning {
                &reasoning
            } else {
                &text
            };
            return self.on_text(text, &stop_reason);
        }
        if !terminal.is_empty() && tool_calls.len() > 1 {
            return self.on_ambiguous(&tool_calls, terminal[0].name.clone());
        }
        if let Some(call) = terminal.first() {
            return if call.name == SUBMIT_OUTPUT {
                self.on_submit(call).await
            } else {
                self.on_escalate(call)
            };
        }
        self.on_tool_calls(&tool_calls).await
    }

    fn is_terminal(&self, name: &str) -> bool {
        (matches!(self.cfg.output, OutputPlan::Tool) && name == SUBMIT_OUTPUT)
            || (self.cfg.escalation_validator.is_some() && name == ESCALATE_TO_HUMAN)
    }

    fn on_text(&mut self, text: &str, stop_reason: &StopReason) -> Next<T> {
        match &self.cfg.output {
            OutputPlan::Text => {
                if let Some(value) = T::from_text(text) {
                    self.output = text.to_owned();
                    return Next::Stop(Ok(value));
                }
            }
            OutputPlan::Json(spec) => {
                let prompted = spec.mode == crate::output::OutputMode::Prompted;
                return self.on_answer_text(text, stop_reason, prompted);
            }
            OutputPlan::Tool => {}
        }
        let cut = (*stop_reason == StopReason::MaxTokens).then_some(self.request.max_tokens);
        let nudge = self.feedback(feedback::plain_text_nudge(cut));
        self.request.messages.push(Message::user(nudge));
        self.force_answer = true;
        let mut summary = if text.trim().is_empty() {
            "an empty turn: no text and no tool call".to_owned()
        } else {
            format!("plain text instead of a {SUBMIT_OUTPUT} call")
        };
        if let Some(cap) = cut {
            summary.push_str(&format!(" (the output hit max_tokens, {cap} tokens)"));
        }
        self.malformed(AttemptKind::SchemaNotCalled, summary)
    }

    /// A text reply in native or prompted mode: the answer, or a malformed turn fed back
    /// as a user message (there is no call id to answer).
    fn on_answer_text(&mut self, text: &str, stop_reason: &StopReason, prompted: bool) -> Next<T> {
        let cut = (*stop_reason == StopReason::MaxTokens).then_some(self.request.max_tokens);
        let (kind, errors) = if text.trim().is_empty() {
            (
                AttemptKind::SchemaNotCalled,
                ValidationErrors::one("/: an empty reply: no text and no tool call"),
            )
        } else {
            match extract_json(text) {
                Extracted::Value(mut value) => match self.accept_lenient(&mut value) {
                    Ok(answer) => {
                        self.output = text.to_owned();
                        return Next::Stop(Ok(answer));
                    }
                    Err(errors) => (AttemptKind::SchemaValidation, errors),
                },
                Extracted::Truncated => (
                    AttemptKind::SchemaValidation,
                    ValidationErrors::one("/: the JSON object was cut off before its end"),
                ),
                // Prompted mode asks for JSON in text: prose alone is the model not
                // answering yet. Native mode constrains the reply to JSON: anything else
                // is a broken answer.
                Extracted::NotJson if prompted => (
                    AttemptKind::SchemaNotCalled,
                    ValidationErrors::one("/: plain text without a JSON answer"),
                ),
                Extracted::NotJson => (
                    AttemptKind::SchemaValidation,
                    ValidationErrors::one("/: the reply is not a JSON object"),
                ),
            }
        };
        let rejected = self.feedback(feedback::rejected_answer(&errors, cut));
        self.request.messages.push(Message::user(rejected));
        self.force_answer = true;
        let mut summary = errors.to_string();
        if let Some(cap) = cut {
            summary.push_str(&format!(" (the reply hit max_tokens, {cap} tokens)"));
        }
        self.malformed(kind, summary)
    }

    /// [`accept`](Self::accept) after reading whole-number floats as integers (see
    /// [`crate::validate::whole_numbers_as_integers`]).
    fn accept_lenient(&self, value: &mut Value) -> Result<T, ValidationErrors> {
        crate::validate::whole_numbers_as_integers(value);
        self.accept(value)
    }

    /// Turns an answer's JSON into a value: schema validation, deserialization and any
    /// `validate` fn (behind a catch boundary: it may panic), then the config's output
    /// validator.
    fn accept(&self, value: &Value) -> Result<T, ValidationErrors> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| T::from_arguments(value))) {
            Ok(Ok(answer)) => self.check_output(&answer).map(|()| answer),
            Ok(Err(errors)) => Err(errors),
            Err(payload) => Err(ValidationErrors::one(format!(
                "/: the output's validation panicked: {}",
                panic_message(payload.as_ref())
            ))),
        }
    }

    fn on_ambiguous(&mut self, calls: &[ToolCall], terminal: String) -> Next<T> {
        let results: Vec<ToolResult> = calls
            .iter()
            .map(|c| ToolResult::error(&c.id, &c.name, feedback::ambiguous(c, calls, &terminal)))
            .collect();
        self.record_not_run(calls, &results);
        self.last_feedback = results
            .iter()
            .find(|r| r.name == terminal)
            .map(|r| r.content.clone());
        self.request.messages.push(Message::tool_results(results));
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        self.malformed(
            AttemptKind::AmbiguousTurn,
            format!(
                "{terminal} with other calls in one turn ({}); none executed",
                names.join(", ")
            ),
        )
    }

    async fn on_submit(&mut self, call: &ToolCall) -> Next<T> {
        let errors = match &call.arguments_error {
            Some(error) => ValidationErrors::one(format!("/: {error}")),
            None => match self.accept(&call.arguments) {
                Ok(value) => {
                    self.output = call.arguments.to_string();
                    return Next::Stop(Ok(value));
                }
                Err(errors) => errors,
            },
        };
        let feedback = self.feedback(feedback::rejected_submission(&errors));
        self.request
            .messages
            .push(Message::tool_results(vec![ToolResult::error(
                &call.id, &call.name, feedback,
            )]));
        self.malformed(AttemptKind::SchemaValidation, errors.to_string())
    }

    /// Runs the config's output validator, behind a catch boundary.
    fn check_output(&self, value: &T) -> Result<(), ValidationErrors> {
        let Some(check) = &self.cfg.settings.output_validator else {
            return Ok(());
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| check(value))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(ValidationErrors::one(format!("/: {message}"))),
            Err(payload) => Err(ValidationErrors::one(format!(
                "/: the output validator panicked: {}",
                panic_message(payload.as_ref())
            ))),
        }
    }

    async fn grade(
        &mut self,
        value: &T,
        deadline_at: Option<tokio::time::Instant>,
        tokens: &[CancellationToken],
    ) {
        let Some(grader) = &self.cfg.settings.grader else {
            return;
        };
        let input = self.input.as_str();
        let mut limit = self.cfg.settings.grader_timeout;
        if let Some(at) = deadline_at {
            limit = limit.min(at.saturating_duration_since(tokio::time::Instant::now()));
        }
        let graded = AssertUnwindSafe(async move {
            let cancelled = any_cancelled(tokens);
            tokio::select! {
                biased;
                graded = tokio::time::timeout(limit, grader.grade(value, input)) => graded,
                () = cancelled => Ok(Err("the run was cancelled while grading".to_owned())),
            }
        })
        .catch_unwind()
        .instrument(tracing::info_span!("grade"))
        .await;
        self.scores = match graded {
            Ok(Err(_elapsed)) => {
                tracing::warn!(
                    timeout_ms = limit.as_millis() as u64,
                    "grader timed out; scores dropped"
                );
                None
            }
            Ok(Ok(Ok(scores))) => match scores
                .iter()
                .find(|(_, v)| !(v.is_finite() && (0.0..=1.0).contains(*v)))
            {
                None => Some(scores),
                Some((name, v)) => {
                    tracing::warn!(score = %name, value = %v, "grader returned a score outside 0..=1; scores dropped");
                    None
                }
            },
            Ok(Ok(Err(message))) => {
                tracing::warn!(error = %message, "grader failed; scores dropped");
                None
            }
            Err(payload) => {
                tracing::warn!(panic = %panic_message(payload.as_ref()), "grader panicked; scores dropped");
                None
            }
        };
    }

    fn on_escalate(&mut self, call: &ToolCall) -> Next<T> {
        let validated = match (&call.arguments_error, &self.cfg.escalation_validator) {
            (Some(error), _) => Err(ValidationErrors::one(format!("/: {error}"))),
            (None, Some(validator)) => validator.validate(&call.arguments),
            (None, None) => Ok(()),
        };
        match validated {
            Ok(()) => {
                let field = |key: &str| {
                    call.arguments
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                self.output = call.arguments.to_string();
                self.model_summary = Some(field("summary"));
                Next::Stop(Err(AgentError::Escalated {
                    reason: field("reason"),
                    summary: field("summary"),
                }))
            }
            Err(errors) => {
                let feedback = format!("{ESCALATE_TO_HUMAN} was rejected: {errors}");
                self.last_feedback = Some(feedback.clone());
                self.request
                    .messages
                    .push(Message::tool_results(vec![ToolResult::error(
                        &call.id, &call.name, feedback,
                    )]));
                self.malformed(AttemptKind::SchemaValidation, errors.to_string())
            }
        }
    }

    async fn on_tool_calls(&mut self, calls: &[ToolCall]) -> Next<T> {
        if self.wrap_up_turn {
            // Only submit_output (and escalate_to_human) was offered: nothing else runs
            // in the last round trip.
            let results: Vec<ToolResult> = calls
                .iter()
                .map(|c| {
                    ToolResult::error(&c.id, &c.name, feedback::wrap_up_only(&self.cfg.output))
                })
                .collect();
            self.record_not_run(calls, &results);
            self.request.messages.push(Message::tool_results(results));
            return Next::Continue;
        }
        let offered = Arc::clone(&self.request.tools);
        let executed = tools::run_tool_calls(
            self.cfg,
            calls,
            &offered,
            &self.trace_id,
            &self.state,
            &self.observers,
            &mut self.usage.tool_calls,
        )
        .await;
        let mut results = Vec::with_capacity(executed.len());
        for (call, done) in calls.iter().zip(executed) {
            if done.fatal && self.fatal.is_none() {
                let message = match &done.outcome {
                    CallOutcome::Failed(text) => text.clone(),
                    _ => String::new(),
                };
                self.fatal = Some((call.name.clone(), message));
            }
            if self.cfg.tool_index.contains_key(&call.name) {
                self.record_call(call, done.outcome);
            }
            results.push(done.result);
        }
        let stuck = self.guard.record_turn(calls, &results);
        self.request.messages.push(Message::tool_results(results));
        // A tool that cannot safely continue ends the run once the whole turn is
        // answered.
        if let Some((tool, message)) = self.fatal.clone() {
            return Next::Stop(Err(AgentError::ToolFatal { tool, message }));
        }
        match stuck {
            Some(reason) => Next::Stop(Err(AgentError::Stuck { reason })),
            None => Next::Continue,
        }
    }

    /// Records a malformed turn; ends the run when the corrections are used up.
    fn malformed(&mut self, kind: AttemptKind, message: String) -> Next<T> {
        self.attempts
            .push(Attempt::new(kind, self.usage.llm_calls, message));
        if self.attempts.len() > self.cfg.settings.max_parse_retries as usize {
            let attempts = std::mem::take(&mut self.attempts);
            return Next::Stop(Err(AgentError::from_attempts(kind, attempts)));
        }
        Next::Continue
    }

    /// Remembers a correction for the handover, and returns it.
    fn feedback(&mut self, text: String) -> String {
        self.last_feedback = Some(text.clone());
        text
    }

    fn finish(self, outcome: Result<T, AgentError>, duration: Duration) -> AgentResult<T> {
        let handover = match &outcome {
            Ok(_) => None,
            Err(error) => Some(self.handover(error)),
        };
        let partial = outcome.as_ref().is_ok_and(|value| {
            std::panic::catch_unwind(AssertUnwindSafe(|| value.is_partial())).unwrap_or(false)
        });
        let output = if outcome.is_ok() || !self.output.is_empty() {
            self.output
        } else {
            self.last_text
        };
        let ending = match &outcome {
            Ok(_) => Ending::Answered,
            Err(e) => e.ending(),
        };
        tracing::debug!(
            ending = ending.as_str(),
            llm_calls = self.usage.llm_calls,
            "run ended"
        );
        let mut transcript = self.request.messages;
        answer_last_turn(&mut transcript, &outcome);
        let mut result = AgentResult {
            outcome,
            output,
            trace_id: self.trace_id.to_string(),
            usage: self.usage,
            scores: self.scores,
            duration,
            transcript,
            handover,
            partial,
            customer_message: String::new(),
            store_failures: 0,
        };
        result.customer_message = customer::message(&self.cfg.settings, &result);
        result
    }

    /// What the human who takes over needs, from the run itself.
    fn handover(&self, error: &AgentError) -> Handover {
        let s = &self.cfg.settings;
        Handover {
            input: self.input.clone(),
            ending: error.ending(),
            category: error.category().to_owned(),
            reason: error.to_string(),
            calls: self.calls.clone(),
            last_feedback: self.last_feedback.clone(),
            spent: self.usage,
            limits: Limits {
                max_llm_calls: s.max_llm_calls,
                max_tool_calls: s.max_tool_calls,
                max_parse_retries: s.max_parse_retries,
                max_total_tokens: s.max_total_tokens,
                max_cost_usd: s.max_cost_usd,
                deadline: self.deadline,
            },
            model_summary: self.model_summary.clone(),
        }
    }
}

/// Answers the calls of a final assistant turn that the run ended on (an accepted
/// submission, an escalation, or calls cut off by the deadline or cancellation), so the
/// transcript answers every call id and can be re-sent to any provider.
fn answer_last_turn<T>(transcript: &mut Vec<Message>, outcome: &Result<T, AgentError>) {
    let Some(Message::Assistant { tool_calls, .. }) = transcript.last() else {
        return;
    };
    if tool_calls.is_empty() {
        return;
    }
    let results = tool_calls
        .iter()
        .map(|call| match outcome {
            Ok(_) => ToolResult::ok(
                &call.id,
                &call.name,
                "Accepted: the run ended with this answer.",
            ),
            Err(AgentError::Escalated { .. }) => {
                ToolResult::ok(&call.id, &call.name, "Escalated: a human takes over.")
            }
            Err(e) => ToolResult::error(&call.id, &call.name, feedback::stopped(e.category())),
        })
        .collect();
    transcript.push(Message::tool_results(results));
}
