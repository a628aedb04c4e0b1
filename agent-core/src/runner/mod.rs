//! [`run_agent`]: the total run loop.
//!
//! Every model turn is classified into exactly one transition (see `docs/loop.md`, the
//! transition table); every run ends in an [`AgentResult`] holding a validated value or one
//! [`AgentError`].

mod agent_tool;
mod budgets;
mod call;
mod checkpoint;
mod child;
mod compact;
mod content;
mod correction;
mod customer;
mod drive;
mod fallback;
mod finish;
mod guard;
mod guardrails;
mod handoff;
mod ledger;
mod pause;
mod replay;
mod resume;
mod run;
mod sanitize;
mod snapshot;
mod spans;
mod stores;
mod submit;
mod tools;
mod trace;
mod turn;

pub use agent_tool::{AgentTool, META_PARENT_CALL_ID, META_PARENT_TRACE_ID};
pub use pause::{PausedRun, paused_runs, record_decisions};
pub use replay::replay;
pub use resume::{resume_agent, resume_agent_with};
pub(crate) use stores::flush_stores;

use foldhash::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::config::{AgentConfig, Compiled};
use crate::error::{AgentError, Attempt, Ending};
use crate::handover::CallRecord;
use crate::llm::{LlmError, LlmRequest};
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::result::AgentResult;
use crate::run_options::RunOptions;
use crate::scores::Scores;
use crate::stream::EventSender;
use crate::tool::StateMap;
use crate::usage::Usage;
use tokio_util::sync::CancellationToken;

use guard::Guard;
use trace::{Observers, trace_id_of};

/// Resolves when any of the tokens is cancelled; never, when there is none. A token's
/// wait is boxed, so that the futures holding this one keep no room for it.
async fn any_cancelled(tokens: &[CancellationToken]) {
    match tokens {
        [] => std::future::pending().await,
        [one] => Box::pin(one.cancelled()).await,
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
///
/// Use it as an `async fn` (`run_agent(&config, input).await`): nothing runs until the
/// returned future is polled, except that `input` is turned into a `String` at the call.
/// It is written as a function returning the run's future so that the future, held by
/// every run for its whole life, keeps no second copy of its arguments.
pub fn run_agent<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: impl Into<String>,
) -> impl Future<Output = AgentResult<T>> {
    run(config, input.into(), RunOptions::default(), None, None)
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
///
/// Use it as an `async fn`, as [`run_agent`] (the same form, for the same reason).
pub fn run_agent_with<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: impl Into<String>,
    options: RunOptions,
) -> impl Future<Output = AgentResult<T>> {
    run(config, input.into(), options, None, None)
}

/// The run behind [`crate::run_agent_stream`]: [`run_agent_with`], with the model calls
/// streamed and the run's events sent to `events`.
pub(crate) fn run_streamed<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: String,
    options: RunOptions,
    events: EventSender<T>,
) -> impl Future<Output = AgentResult<T>> {
    run(config, input, options, Some(events), None)
}

/// One run; `events` is set for a streamed run, `resumed` for a run taken over from its
/// checkpoint.
///
/// A plain function returning an `async move` block, not an `async fn`: an `async fn`
/// keeps each argument twice in its future (the argument, and the local it is moved
/// into), and this future is held by every run for its whole life.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn would keep each argument twice in the run's future"
)]
fn run<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: String,
    mut options: RunOptions,
    events: Option<EventSender<T>>,
    resumed: Option<Box<checkpoint::Resumed>>,
) -> impl Future<Output = AgentResult<T>> {
    async move {
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
        let trace_id: Arc<str> = match &resumed {
            Some(resumed) => Arc::from(resumed.header.trace_id.as_str()),
            None => Arc::from(trace_id_of(&span)),
        };
        span.record("trace_id", &*trace_id);
        if !options.metadata.is_empty() {
            span.record("agent.metadata", tracing::field::debug(&options.metadata));
        }
        // This future is held by every run for its whole life, mostly parked on the
        // model, so it is kept only as large as the loop's (see `bench_run_sizes`): the
        // stores' futures (nothing happens without stores) and the finished checkpoint's
        // are boxed, and the set-up before the loop sits in a block, so what it holds
        // keeps no room while the loop runs. The stores' prepared state goes on (boxed)
        // only when they have work after the run; a refusal is boxed (rare).
        let (mut run, prepared, refusal) = {
            let mut prepared = if cfg.settings.stores.any() {
                let prepared = Box::pin(stores::before_run(cfg, &trace_id, &input, &mut options))
                    .instrument(span.clone())
                    .await;
                Some(Box::new(prepared))
            } else {
                None
            };
            let run_id = options.run_id.take();
            let thread = options.thread.clone();
            if let Some(resumed) = &resumed
                && let Some(prepared) = prepared.as_mut()
            {
                // The thread's messages before this run, as the run first saw them.
                prepared.set_history_len(resumed.header.history_len);
            }
            let is_resumed = resumed.is_some();
            let mut run = Run::new(cfg, Arc::clone(&trace_id), input, options, events);
            if let Some(prepared) = prepared.as_mut() {
                prepared.apply_context(&mut run.request.system);
                // The thread's summary, written before the run: its tokens are the run's.
                if let Some((tokens, price)) = prepared.summary_tokens.take() {
                    run.count_summary(tokens, price.as_ref());
                }
                if prepared.summary_failed {
                    run.usage.compaction_failures = run.usage.compaction_failures.saturating_add(1);
                } else if prepared.thread_summary_written() {
                    run.usage.compactions = run.usage.compactions.saturating_add(1);
                }
            }
            let refused = if cfg.settings.stores.checkpoints.is_some() {
                Box::pin(run.attach_durable(run_id, thread, resumed))
                    .instrument(span.clone())
                    .await
            } else {
                run.attach_run_id(run_id).err()
            };
            run.notify(&RunEvent::RunStarted {
                trace_id: &trace_id,
                agent: &cfg.settings.name,
            });
            // A resumed run passed the thread cap when it started.
            let thread_refusal = prepared
                .as_mut()
                .and_then(|p| p.take_refusal())
                .filter(|_| !is_resumed);
            let refusal = refused.or(thread_refusal).map(Box::new);
            let prepared = prepared.filter(|p| p.is_active());
            (run, prepared, refusal)
        };
        let outcome = match refusal {
            Some(refused) => Err(*refused),
            None => run.drive_bounded().instrument(span.clone()).await,
        };
        let duration = started.elapsed() + run.elapsed_before();
        run.release_reservation();
        let durable = run.durable.take();
        // A run another process took over leaves the stores to that process.
        let fenced = durable.as_ref().is_some_and(|d| d.is_fenced());
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
        let after = prepared.is_some() && !fenced;
        if !after && durable.is_none() {
            return result;
        }
        // The result goes into the boxed tail and back, so this future holds no room for
        // it while the run is under way.
        Box::pin(async move {
            let mut durable = durable;
            // A tool's `completed` entry waits for the run's next write; a run that
            // stopped after its tools writes it now, before the stores' work below.
            if let Some(d) = durable.as_deref_mut() {
                d.flush_done(&run_observers, &result.trace_id).await;
            }
            if let Some(prepared) = prepared.filter(|_| after) {
                stores::after_run(cfg, *prepared, &mut result)
                    .instrument(span.clone())
                    .await;
            }
            // A paused run's last checkpoint is its pause; it finishes when it resumes.
            let durable = durable.filter(|_| result.ending() != Ending::Paused);
            checkpoint::save_finished(durable, &mut result, &run_observers)
                .instrument(span)
                .await;
            result
        })
        .await
    }
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
    /// The user tools of the current turn: the config's frozen table, or one rebuilt
    /// when a tool source changed (refreshed before each LLM call).
    table: Arc<crate::config::ToolTable>,
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
    /// Which model the run is on: 0 the primary, `i` the config's fallback `i - 1`.
    route: usize,
    /// The models the run left, with their failures (empty until a switch).
    tried: Vec<crate::error::ModelFailures>,
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
    last_correction: Option<String>,
    /// The model's own summary, when it handed over with one.
    model_summary: Option<String>,
    /// A tool that said it cannot safely continue, and its message.
    fatal: Option<(String, String)>,
    /// Where a streamed run's events go; `None` for [`run_agent_with`].
    events: Option<EventSender<T>>,
    /// The run id (`RunOptions::run_id`, else the trace id).
    run_id: Arc<str>,
    /// Checkpoints and the tool ledger, with a checkpoint store.
    durable: Option<Box<checkpoint::Durable>>,
    /// The decisions a resumed paused run brought, by call id (taken as its turn runs).
    decisions: crate::pause::Decisions,
    /// Whether an LLM call is under way (set for the call, cleared when it returns):
    /// one that never returns (cancelled, cut by the deadline) is counted anyway.
    in_flight: bool,
    /// What a streamed call received so far (the bytes of its turn, the usage the
    /// provider reported mid-stream), kept by its sink: what a cut call is counted from.
    meter: Arc<crate::stream::Meter>,
    /// Tokens and cost of this run and its children, against its caps, linked to its
    /// parent's when it is an agent used as a tool (see `child.rs`).
    pool: Arc<child::Pool>,
    /// What this run's tool calls pass to child runs (made at the first tool turn).
    link: Option<Arc<child::RunLink>>,
    /// The estimate of the LLM call under way, reserved in the pools above this run.
    reserved: child::Reserved,
    /// A guardrail that tripped during the turn: the run ends with it after the turn
    /// (boxed: rare, and `Run` is held by every run).
    trip: Option<Box<AgentError>>,
    /// How many times the conversation was handed to another agent (see
    /// `handoff.rs`); the agent that has it now is `cfg`'s.
    handoffs: u32,
    /// The first agent's `max_handoffs`: the bound of the whole run.
    max_handoffs: u32,
    /// What compaction decisions need (see `compact.rs`).
    compactor: compact::Compactor,
}

/// The sizes (bytes) of a run's state and of the futures a parked run holds inline,
/// for `config`: `agent_core::__bench::run_sizes`, for the memory breakdown of the
/// parked benchmark (`bench/peers`). Nothing runs: the futures are made and dropped.
#[doc(hidden)]
pub fn bench_run_sizes<T: AgentOutput>(config: &AgentConfig<T>) -> Vec<(&'static str, usize)> {
    use std::mem::{size_of, size_of_val};
    let mut sizes = vec![
        ("run_agent future", size_of_val(&run_agent(config, "x"))),
        (
            "run future",
            size_of_val(&run(
                config,
                "x".to_owned(),
                RunOptions::default(),
                None,
                None,
            )),
        ),
        ("Run", size_of::<Run<'_, T>>()),
        ("LlmRequest", size_of::<LlmRequest>()),
        ("Usage", size_of::<Usage>()),
        ("Guard", size_of::<Guard>()),
        ("Observers", size_of::<Observers>()),
        ("compact::Compactor", size_of::<compact::Compactor>()),
        ("pause::Decisions", size_of::<crate::pause::Decisions>()),
        ("child::Reserved", size_of::<child::Reserved>()),
        ("Option<AgentError>", size_of::<Option<AgentError>>()),
        ("Option<Scores>", size_of::<Option<Scores>>()),
        ("stores::Prepared", size_of::<stores::Prepared>()),
        ("AgentResult<T>", size_of::<AgentResult<T>>()),
        ("RunOptions", size_of::<RunOptions>()),
        (
            "Option<Box<Resumed>>",
            size_of::<Option<Box<checkpoint::Resumed>>>(),
        ),
        ("Resumed", size_of::<checkpoint::Resumed>()),
        ("tracing::Span", size_of::<tracing::Span>()),
        ("LlmResponse", size_of::<crate::llm::LlmResponse>()),
        ("LlmError", size_of::<LlmError>()),
        (
            "call_model's outcome",
            size_of::<Result<Result<crate::llm::LlmResponse, LlmError>, AgentError>>(),
        ),
    ];
    let mut run = Run::new(
        &config.inner,
        Arc::from("t"),
        "x".to_owned(),
        RunOptions::default(),
        None,
    );
    sizes.push(("drive_bounded future", size_of_val(&run.drive_bounded())));
    sizes.push(("drive future", size_of_val(&run.drive())));
    sizes.push(("call_model future", size_of_val(&run.call_model())));
    sizes.push((
        "on_turn future",
        size_of_val(&run.on_turn(crate::llm::LlmResponse::tool_calls(Vec::new()))),
    ));
    sizes.push(("on_tool_calls future", size_of_val(&run.on_tool_calls(&[]))));
    sizes.push((
        "compact_if_needed future",
        size_of_val(&run.compact_if_needed()),
    ));
    sizes.push((
        "save_checkpoint future",
        size_of_val(&run.save_checkpoint(checkpoint::Phase::BeforeCall)),
    ));
    sizes.push(("take_pending future", size_of_val(&run.take_pending())));
    sizes.push((
        "on_provider_failure future",
        size_of_val(&run.on_provider_failure(LlmError::transient("x"))),
    ));
    sizes.push((
        "attach_durable future",
        size_of_val(&run.attach_durable(None, None, None)),
    ));
    let mut options = RunOptions::default();
    sizes.push((
        "stores::before_run future",
        size_of_val(&stores::before_run(&config.inner, "t", "x", &mut options)),
    ));
    sizes
}
