//! The entry points ([`run_agent`], [`run_agent_with`], the streamed run) and one run's
//! life: made from the config and its options, given its stores and its checkpointing
//! (taken back from a checkpoint when resumed), driven, finished, and recorded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::config::{AgentConfig, Compiled};
use crate::content::Input;
use crate::error::{AgentError, Ending};
use crate::message::Message;
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::result::AgentResult;
use crate::run_options::RunOptions;

use super::agents::handoff::agent_at;
use super::durable::{self, Durable, FORMAT, Header, Resumed, Snapshot};
use super::emit::EventSender;
use super::run::Run;
use super::stores;
use super::trace::trace_id_of;

/// Runs the agent on `input` until it answers or fails.
///
/// Never panics, never returns early, never waits forever on something the runner owns:
/// the provider call, the tools, the grader and the observer sit behind catch
/// boundaries, and every wait is bounded by a budget, a timeout or the deadline. Needs a
/// Tokio runtime with timers (`#[tokio::main]` has one); polled outside one, the run
/// ends at once with [`AgentError::Internal`] saying so, before any request. Dropping the returned future stops the run, including its
/// in-flight request and tool calls.
///
/// `input` is text (`&str`, `String`), or text with parts ([`Input`]: images,
/// documents, audio; see [`crate::content`]): a part the model cannot take ends the run
/// with [`AgentError::UnsupportedContent`] before any request.
///
/// Use it as an `async fn` (`run_agent(&config, input).await`): nothing runs until the
/// returned future is polled, except that `input` is turned into an [`Input`] at the call.
/// It is written as a function returning the run's future so that the future, held by
/// every run for its whole life, keeps no second copy of its arguments.
pub fn run_agent<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: impl Into<Input>,
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
    input: impl Into<Input>,
    options: RunOptions,
) -> impl Future<Output = AgentResult<T>> {
    run(config, input.into(), options, None, None)
}

/// The run behind [`crate::run_agent_stream`]: [`run_agent_with`], with the model calls
/// streamed and the run's events sent to `events`.
pub(crate) fn run_streamed<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: Input,
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
pub(crate) fn run<T: AgentOutput>(
    config: &AgentConfig<T>,
    input: Input,
    mut options: RunOptions,
    events: Option<EventSender<T>>,
    resumed: Option<Box<Resumed>>,
) -> impl Future<Output = AgentResult<T>> {
    async move {
        let cfg: &Compiled<T> = &config.inner;
        let started = Instant::now();
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = %format_args!("invoke_agent {}", cfg.name),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %cfg.name,
            gen_ai.provider.name = %cfg.primary().client.provider(),
            gen_ai.request.model = %cfg.primary().wire_model,
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
            let mut prepared = if cfg.stores.any() {
                let prepared = Box::pin(stores::before_run(
                    cfg,
                    &trace_id,
                    input.as_text(),
                    &mut options,
                ))
                .instrument(span.clone())
                .await;
                Some(Box::new(prepared))
            } else {
                None
            };
            let run_id = options.run_id.take();
            let lease = options.lease.unwrap_or(super::durable::lease::LEASE);
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
                    let spent = run.state.count_summary(tokens, price.as_ref());
                    run.tree.settle(spent);
                }
                if prepared.summary_failed {
                    let usage = &mut run.state.usage;
                    usage.compaction_failures = usage.compaction_failures.saturating_add(1);
                } else if prepared.thread_summary_written() {
                    let usage = &mut run.state.usage;
                    usage.compactions = usage.compactions.saturating_add(1);
                }
            }
            let refused = if cfg.stores.checkpoints.is_some() {
                Box::pin(attach_durable(&mut run, run_id, thread, resumed, lease))
                    .instrument(span.clone())
                    .await
            } else {
                attach_run_id(&mut run, run_id).err()
            };
            run.emit.emit(&RunEvent::RunStarted {
                trace_id: &trace_id,
                agent: &cfg.name,
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
        run.tree.release();
        let durable = run.durable.take();
        // A run another process took over leaves the stores to that process.
        let fenced = durable.as_ref().is_some_and(|d| d.is_fenced());
        let run_observers = run.emit.observers.clone();
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
            durable::save_finished(durable, &mut result, &run_observers)
                .instrument(span)
                .await;
            result
        })
        .await
    }
}

/// Gives the run its id: the caller's (checked), else the trace id.
///
/// # Errors
/// [`AgentError::InvalidRun`] for an id that is empty, too long or holds a NUL.
fn attach_run_id<T: AgentOutput>(
    run: &mut Run<'_, T>,
    run_id: Option<String>,
) -> Result<Arc<str>, AgentError> {
    if let Some(id) = &run_id {
        durable::check_run_id(id)?;
    }
    let run_id: Arc<str> = run_id.map_or_else(|| Arc::clone(&run.inputs.trace_id), Arc::from);
    run.inputs.run_id = Arc::clone(&run_id);
    Ok(run_id)
}

/// Gives the run its id ([`attach_run_id`]) and its checkpointing: a fresh run checks
/// that its id has no checkpoint yet; a resumed one takes its state back. Returns the
/// error that ends the run before any request, if any (then nothing is checkpointed).
async fn attach_durable<T: AgentOutput>(
    run: &mut Run<'_, T>,
    run_id: Option<String>,
    thread: Option<String>,
    resumed: Option<Box<Resumed>>,
    lease: std::time::Duration,
) -> Option<AgentError> {
    let run_id = match attach_run_id(run, run_id) {
        Ok(run_id) => run_id,
        Err(error) => return Some(error),
    };
    let cfg = run.agent;
    let store = cfg.stores.checkpoints.clone()?;
    let timeout = cfg.stores.timeout;
    let mut failures = 0;
    if resumed.is_none() {
        match durable::bounded(timeout, || store.load(&run_id)).await {
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
                durable::report(&run.emit.observers, &run.inputs.trace_id, "load", &error);
            }
        }
    }
    let history_len = run.state.messages.len().saturating_sub(1);
    let writer: Arc<str> = match &resumed {
        Some(resumed) => Arc::from(resumed.writer.as_str()),
        None => Arc::from(durable::new_writer()),
    };
    let mut durable = Durable::new(
        store,
        Arc::clone(&run_id),
        cfg.fingerprint.clone(),
        timeout,
        writer,
        failures,
        lease,
    );
    if run.inputs.batch.is_some() {
        durable.keep_before_call();
    }
    let header = match resumed {
        Some(resumed) => restore(run, &mut durable, *resumed),
        None => Header {
            format: FORMAT,
            run_id: run_id.to_string(),
            trace_id: run.inputs.trace_id.to_string(),
            agent: cfg.name.clone(),
            fingerprint: cfg.fingerprint.clone(),
            output_mode: cfg.output.mode(),
            output_schema: T::output_tool().map(|d| d.parameters),
            tools: cfg.tool_signatures(),
            thread,
            input: run.inputs.input.clone(),
            system: run.request.system.clone(),
            history_len,
            deadline_ms: run.inputs.deadline.map(crate::store::ms),
        },
    };
    if let Err(error) = durable.set_header(&header) {
        // A header that cannot be encoded: no checkpoint can be written.
        tracing::warn!(error = %error, "the checkpoint header does not encode; the run is not checkpointed");
        return None;
    }
    run.durable = Some(Box::new(durable));
    None
}

/// Puts a resumed run's state back, whole, with what is derived from it: the agent it
/// was handed to and the model it had switched to (`resume_agent` checked the config
/// still has both), the request for them, the call ids seen, where its own messages
/// start, and the deadline left. Returns its header.
fn restore<T: AgentOutput>(
    run: &mut Run<'_, T>,
    durable: &mut Durable,
    resumed: Resumed,
) -> Header {
    let Resumed {
        header,
        snapshot: Snapshot { state, phase },
        ledger,
        seq,
        writer: _,
    } = resumed;
    durable.take_over(seq, &state, phase, ledger);
    if let Ok((agent, app)) = agent_at(run.agent, &state.handoffs, &run.inputs.app) {
        run.agent = agent;
        run.inputs.app = app;
    }
    run.state = state;
    run.live.has_parts = run
        .state
        .messages
        .iter()
        .any(|m| m.parts().next().is_some());
    run.apply_agent();
    // The system prompt as the run first sent it (retrieved context included), while
    // it is on the agent and the model it started with.
    if run.state.handoffs.is_empty() && run.state.route == 0 {
        run.request.system.clone_from(&header.system);
    }
    run.compactor.own_start = header.history_len.saturating_add(1);
    run.live.seen_ids = run
        .state
        .messages
        .iter()
        .skip(header.history_len)
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(|c| c.id.clone())
        .collect();
    let stored = header.deadline_ms.map(Duration::from_millis);
    run.inputs.deadline = match (run.inputs.deadline, stored) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    header
}

/// The sizes (bytes) of a run's state and of the futures a parked run holds inline,
/// for `config`: `agent_core::__bench::run_sizes`, for the memory breakdown of the
/// parked benchmark (`bench/peers`). Nothing runs: the futures are made and dropped.
#[doc(hidden)]
pub fn bench_run_sizes<T: AgentOutput>(config: &AgentConfig<T>) -> Vec<(&'static str, usize)> {
    use crate::error::AgentError as E;
    use crate::llm::{LlmError, LlmRequest, LlmResponse};
    use std::mem::{size_of, size_of_val};
    let mut sizes = vec![
        ("run_agent future", size_of_val(&run_agent(config, "x"))),
        (
            "run future",
            size_of_val(&run(
                config,
                Input::text("x"),
                RunOptions::default(),
                None,
                None,
            )),
        ),
        ("Run", size_of::<Run<'_, T>>()),
        ("RunState", size_of::<super::state::RunState>()),
        ("LlmRequest", size_of::<LlmRequest>()),
        ("Usage", size_of::<crate::usage::Usage>()),
        ("Guard", size_of::<super::guard::Guard>()),
        ("Emitter", size_of::<super::emit::Emitter<T>>()),
        ("compact::Compactor", size_of::<super::compact::Compactor>()),
        ("agents::tree::Tree", size_of::<super::agents::tree::Tree>()),
        ("Option<E>", size_of::<Option<E>>()),
        ("stores::Prepared", size_of::<stores::Prepared>()),
        ("AgentResult<T>", size_of::<AgentResult<T>>()),
        ("RunOptions", size_of::<RunOptions>()),
        ("Option<Box<Resumed>>", size_of::<Option<Box<Resumed>>>()),
        ("Resumed", size_of::<Resumed>()),
        ("tracing::Span", size_of::<tracing::Span>()),
        ("LlmResponse", size_of::<LlmResponse>()),
        ("LlmError", size_of::<LlmError>()),
        (
            "call_model's outcome",
            size_of::<Result<Result<LlmResponse, LlmError>, E>>(),
        ),
    ];
    let mut run = Run::new(
        &config.inner,
        Arc::from("t"),
        Input::text("x"),
        RunOptions::default(),
        None,
    );
    sizes.push(("drive_bounded future", size_of_val(&run.drive_bounded())));
    sizes.push(("drive future", size_of_val(&run.drive())));
    sizes.push(("call_model future", size_of_val(&run.call_model())));
    sizes.push((
        "on_turn future",
        size_of_val(&run.on_turn(LlmResponse::tool_calls(Vec::new()))),
    ));
    sizes.push(("on_tool_calls future", size_of_val(&run.on_tool_calls(&[]))));
    sizes.push((
        "compact_if_needed future",
        size_of_val(&run.compact_if_needed()),
    ));
    sizes.push((
        "save_checkpoint future",
        size_of_val(&run.save_checkpoint()),
    ));
    sizes.push(("take_pending future", size_of_val(&run.take_pending())));
    sizes.push((
        "on_provider_failure future",
        size_of_val(&run.on_provider_failure(LlmError::transient("x"))),
    ));
    sizes.push((
        "attach_durable future",
        size_of_val(&attach_durable(
            &mut run,
            None,
            None,
            None,
            super::durable::lease::LEASE,
        )),
    ));
    let mut options = RunOptions::default();
    sizes.push((
        "stores::before_run future",
        size_of_val(&stores::before_run(&config.inner, "t", "x", &mut options)),
    ));
    sizes
}
