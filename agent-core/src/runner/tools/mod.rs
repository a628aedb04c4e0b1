//! Running the user-tool calls of one turn: validation, the budget, bounded concurrency,
//! and the catch boundary (errors, panics, timeouts become error results); and what
//! surrounds a call: what the run decided for it and how it was answered
//! (`executed.rs`), the guardrails (`guardrails.rs`), the clean-up of a turn's calls
//! (`sanitize.rs`), the texts the model is corrected with (`correction.rs`), and the
//! ledger around an execution (`ledgered.rs`).

pub(crate) mod correction;
mod executed;
pub(crate) mod guardrails;
mod ledgered;
pub(crate) mod sanitize;

pub(crate) use executed::{Executed, Gate};

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tracing::Instrument;

use crate::config::{Compiled, CompiledTool, ToolTable};
use crate::error::panic_message;
use crate::guardrail::ToolGuardrail;
use crate::handover::CallOutcome;
use crate::message::{ToolCall, ToolResult, json_text};
use crate::observe::RunEvent;
use crate::pause::{ChildResume, PauseReason};
use crate::runner::agents::tree::{CallLink, RunLink};
use crate::runner::durable::ledger::Ledger;
use crate::runner::emit::Observers;

use crate::tool::ToolDefinition;
use crate::tool::{StateMap, ToolContent, ToolContext};
use guardrails::Before;

/// What to do with one call.
enum Plan<'c> {
    /// Answer without running.
    Answer(ToolResult),
    /// Answer without running, from a decision (a denial, an outside result); whether
    /// the tool ran before the pause.
    Decided(ToolResult, CallOutcome, bool),
    /// Do not run it yet: it waits for approval, with these arguments (the model's, or
    /// those a tool guardrail, named, put in: what will run once approved).
    Hold(Option<(Value, String)>),
    /// Run this tool as a person approved it (its arguments are the approved ones; the
    /// tool guardrails judged them before the pause).
    Approved(&'c CompiledTool),
    /// Run this tool again, resuming the child run it started (C64): it ran before the
    /// pause, so the ledger's `deferred` entry does not answer it.
    Resume(&'c CompiledTool, ChildResume),
    /// Run this tool.
    Run(&'c CompiledTool),
    /// Run this tool with the arguments a tool guardrail (named) put in.
    RunWith(&'c CompiledTool, ToolCall, String),
    /// Answer without running: a tool guardrail (named) denied it (`trip`: tripped).
    Guarded(ToolResult, String, Option<String>),
}

/// Runs the calls (none of them terminal) and answers each one, in emission order.
/// `table` holds the user tools of this turn and `offered` the tool set it offered: a
/// call to any other tool is answered as unknown. `gates` (one per call, or none: run
/// every call) says which calls of known, offered tools with valid arguments run, wait
/// for approval, or are answered by a decision. `deadline` is the run's, passed to each
/// tool in its context. `executed` is increased by the number of tool executions. With
/// a `ledger` (a checkpointed run), each execution goes through it.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_tool_calls<T>(
    cfg: &Compiled<T>,
    (table, offered): (&ToolTable, &[ToolDefinition]),
    calls: &[ToolCall],
    mut gates: Vec<Gate>,
    (trace_id, run_id, deadline): (&Arc<str>, &Arc<str>, Option<tokio::time::Instant>),
    state: &Arc<StateMap>,
    observers: &Observers,
    executed: &mut u32,
    ledger: Option<&Ledger>,
    link: &Arc<RunLink>,
) -> Vec<Executed> {
    let limit = cfg.limits.max_tool_calls;
    gates.resize_with(calls.len(), || Gate::Run);
    let plans: Vec<Plan<'_>> = calls
        .iter()
        .zip(gates)
        .map(|(call, gate)| {
            let guardrails = &cfg.hooks.guardrails.tool;
            let plan = match (plan_call(table, call, offered), gate) {
                // The tool guardrails judge a call before it waits (C51): a denial or a
                // trip answers it at once; a replacement is what the person approves,
                // and what runs.
                (Plan::Run(tool), Gate::Hold) => match guard_call(guardrails, tool, call) {
                    Plan::Run(_) => Plan::Hold(None),
                    Plan::RunWith(_, replaced, name) => {
                        Plan::Hold(Some((replaced.arguments, name)))
                    }
                    guarded => guarded,
                },
                (Plan::Run(tool), Gate::Approved) => Plan::Approved(tool),
                (Plan::Run(tool), Gate::Resume(resume)) => Plan::Resume(tool, resume),
                (Plan::Run(_), Gate::Answer(result, outcome, ran)) => {
                    Plan::Decided(result, outcome, ran)
                }
                (plan, _) => plan,
            };
            match plan {
                Plan::Run(_) | Plan::Approved(_) | Plan::Resume(..) if *executed >= limit => {
                    Plan::Answer(ToolResult::error(
                        &call.id,
                        &call.name,
                        correction::tool_limit(limit, &cfg.output),
                    ))
                }
                // A resumed call ran before the pause: it counts once, here (the
                // checkpoint kept the count from before the turn).
                Plan::Approved(_) | Plan::Resume(..) => {
                    *executed += 1;
                    plan
                }
                Plan::Run(tool) => {
                    let plan = guard_call(&cfg.hooks.guardrails.tool, tool, call);
                    if matches!(plan, Plan::Run(_) | Plan::RunWith(..)) {
                        *executed += 1;
                    }
                    plan
                }
                // A deferred call ran before the pause: it counts once, as it would
                // have without the pause.
                Plan::Decided(result, outcome, true) => {
                    *executed = executed.saturating_add(1);
                    Plan::Decided(result, outcome, true)
                }
                answer => answer,
            }
        })
        .collect();
    let timeout = cfg.limits.tool_timeout;
    let max_bytes = cfg.limits.max_tool_result_bytes;
    let capture = cfg.capture_content;
    let guardrails = cfg.hooks.guardrails.tool.as_slice();
    let mut jobs = calls.iter().zip(plans).map(|(call, plan)| async move {
        let started = Instant::now();
        let executed = match plan {
            Plan::Answer(result) => {
                Executed::answered(result.clone(), CallOutcome::NotRun(result.content))
            }
            Plan::Decided(result, outcome, _) => Executed::answered(result, outcome),
            Plan::Hold(replaced) => {
                let mut done = Executed::waiting(call, PauseReason::Approval);
                if let Some((arguments, name)) = replaced {
                    done.held_arguments = Some(arguments);
                    done.interventions.push((name, "replace"));
                }
                done
            }
            Plan::Guarded(result, name, trip) => {
                let verdict = if trip.is_some() { "trip" } else { "deny" };
                let mut done =
                    Executed::answered(result.clone(), CallOutcome::NotRun(result.content));
                match trip {
                    Some(reason) => done.trip = Some((name, reason)),
                    None => done.interventions.push((name, verdict)),
                }
                done
            }
            Plan::Run(tool) | Plan::Approved(tool) => {
                let ids = (trace_id, run_id, deadline);
                let context = (state, link, guardrails, None);
                let run = execute(tool, call, ids, context, (timeout, max_bytes), capture);
                match ledger {
                    Some(ledger) => {
                        let observers = (&**trace_id, observers);
                        let how = (tool.irreversible, false);
                        ledgered::execute(ledger, call, how, observers, run).await
                    }
                    None => run.await,
                }
            }
            Plan::Resume(tool, resume) => {
                let ids = (trace_id, run_id, deadline);
                let context = (state, link, guardrails, Some(resume));
                let run = execute(tool, call, ids, context, (timeout, max_bytes), capture);
                match ledger {
                    Some(ledger) => {
                        let observers = (&**trace_id, observers);
                        let how = (tool.irreversible, true);
                        ledgered::execute(ledger, call, how, observers, run).await
                    }
                    None => run.await,
                }
            }
            Plan::RunWith(tool, replaced, name) => {
                let ids = (trace_id, run_id, deadline);
                let context = (state, link, guardrails, None);
                let run = execute(tool, &replaced, ids, context, (timeout, max_bytes), capture);
                let mut done = match ledger {
                    Some(ledger) => {
                        let observers = (&**trace_id, observers);
                        let how = (tool.irreversible, false);
                        ledgered::execute(ledger, &replaced, how, observers, run).await
                    }
                    None => run.await,
                };
                done.interventions.insert(0, (name, "replace"));
                done
            }
        };
        observers.notify(&RunEvent::ToolFinished {
            trace_id,
            tool: &call.name,
            call_id: &call.id,
            is_error: executed.result.is_error,
            duration: started.elapsed(),
        });
        executed
    });
    // The usual turn has one call: it is awaited alone, without the buffered stream's
    // queue and task. Boxed, so that the turn's future does not hold the call's
    // (about 4.7 KiB) inline, to be copied whenever the turn's future is.
    if calls.len() == 1 {
        let only = jobs.next().map(Box::pin);
        drop(jobs);
        return match only {
            Some(job) => vec![job.await],
            None => Vec::new(),
        };
    }
    // Collected before the await: the `Map` above (a closure returning an async block)
    // held across the await keeps rustc from proving the run's future `Send`
    // ("implementation of `FnOnce` is not general enough"), and then
    // `tokio::spawn(run_agent(..))` does not compile.
    let jobs: Vec<_> = jobs.collect();
    futures::stream::iter(jobs)
        .buffered(cfg.limits.tool_concurrency)
        .collect()
        .await
}

fn plan_call<'c>(table: &'c ToolTable, call: &ToolCall, offered: &[ToolDefinition]) -> Plan<'c> {
    let index = table
        .index
        .get(&call.name)
        .filter(|_| offered.iter().any(|d| d.name == call.name));
    let Some(&index) = index else {
        let available: Vec<&str> = offered.iter().map(|d| d.name.as_str()).collect();
        let mut text = correction::unknown_tool(&call.name, &available.join(", "));
        if available.contains(&crate::config::SEARCH_TOOLS) {
            text.push_str(&correction::search_first());
        }
        return Plan::Answer(ToolResult::error(&call.id, &call.name, text));
    };
    let Some(tool) = table.tools.get(index) else {
        return Plan::Answer(ToolResult::error(
            &call.id,
            &call.name,
            "tool table is inconsistent",
        ));
    };
    if let Some(error) = &call.arguments_error {
        return Plan::Answer(ToolResult::error(
            &call.id,
            &call.name,
            correction::unusable_arguments(&call.name, error),
        ));
    }
    if let Err(errors) = tool.validator.validate(&call.arguments) {
        return Plan::Answer(ToolResult::error(
            &call.id,
            &call.name,
            correction::invalid_tool_arguments(&call.name, &errors),
        ));
    }
    Plan::Run(tool)
}

async fn execute(
    tool: &CompiledTool,
    call: &ToolCall,
    (trace_id, run_id, deadline): (&Arc<str>, &Arc<str>, Option<tokio::time::Instant>),
    (state, link, guardrails, resume): (
        &Arc<StateMap>,
        &Arc<RunLink>,
        &[ToolGuardrail],
        Option<ChildResume>,
    ),
    (timeout, max_bytes): (Duration, usize),
    capture: bool,
) -> Executed {
    let max_bytes = tool
        .max_result_bytes
        .map_or(max_bytes, |cap| cap.min(max_bytes));
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        gen_ai.tool.call.arguments = tracing::field::Empty,
        gen_ai.tool.call.result = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if capture {
        span.record("gen_ai.tool.call.arguments", json_text(&call.arguments));
    }
    let mut context = ToolContext::new(
        &call.id,
        &call.name,
        Arc::clone(trace_id),
        Arc::clone(state),
    )
    .with_run_id(Arc::clone(run_id));
    let call_link = CallLink::new(Arc::clone(link));
    context = context.with_link(Arc::clone(&call_link) as _);
    if let Some(deadline) = deadline {
        context = context.with_deadline(deadline);
    }
    if let Some(resume) = resume {
        context = context.with_resuming(resume);
    }
    let arguments = call.arguments.clone();
    // The timer sits inside the catch boundary too: outside a Tokio runtime its creation
    // panics, and that must become this call's error result, not the run's.
    let guarded = AssertUnwindSafe(async move {
        tokio::time::timeout(timeout, tool.tool.call_content(arguments, context)).await
    })
    .catch_unwind();
    let outcome = guarded.instrument(span.clone()).await;
    let children = call_link.take();
    let mut fatal = false;
    let mut escalation = None;
    let (content, error_type) = match outcome {
        Ok(Ok(Ok(content))) => (Ok(content), None),
        Ok(Ok(Err(e))) if e.is_deferred() => {
            let note = truncate(e.message().to_owned(), max_bytes);
            let mut done = Executed::waiting(call, PauseReason::Deferred { note });
            done.inside = e.child_pause().cloned().map(Box::new);
            done.children = children;
            return done;
        }
        Ok(Ok(Err(e))) if e.escalation().is_some() => {
            let summary = e.escalation().unwrap_or_default().to_owned();
            escalation = Some((e.message().to_owned(), summary));
            (
                Err(format!("{} escalated: {e}", call.name)),
                Some("tool_escalated"),
            )
        }
        Ok(Ok(Err(e))) => {
            fatal = e.is_fatal();
            (
                Err(format!("{} failed: {e}", call.name)),
                Some(if fatal { "tool_fatal" } else { "tool_error" }),
            )
        }
        Ok(Err(_elapsed)) => (
            Err(format!(
                "{} failed: it timed out after {} ms",
                call.name,
                timeout.as_millis()
            )),
            Some("tool_timeout"),
        ),
        Err(payload) => (
            Err(format!(
                "{} failed: the tool panicked: {}",
                call.name,
                panic_message(payload.as_ref())
            )),
            Some("tool_panic"),
        ),
    };
    if let Some(kind) = error_type {
        span.record("error.type", kind);
        span.record("otel.status_code", "error");
    }
    let mut redacted = Vec::new();
    let executed = match content {
        Ok(ToolContent { text, parts, .. }) => {
            let text = if guardrails.is_empty() {
                text
            } else {
                let (text, by) = guardrails::after_tool(guardrails, call, text);
                redacted = by;
                text
            };
            let text = truncate(text, max_bytes);
            Executed {
                outcome: CallOutcome::Succeeded(text.clone()),
                result: ToolResult::ok(&call.id, &call.name, text).with_parts(parts),
                fatal,
                pause: None,
                escalation,
                children,
                interventions: Vec::new(),
                trip: None,
                held_arguments: None,
                inside: None,
            }
        }
        Err(text) => {
            let text = truncate(text, max_bytes);
            Executed {
                outcome: CallOutcome::Failed(text.clone()),
                result: ToolResult::error(&call.id, &call.name, text),
                fatal,
                pause: None,
                escalation,
                children,
                interventions: Vec::new(),
                trip: None,
                held_arguments: None,
                inside: None,
            }
        }
    };
    if capture {
        // What the model is shown, after truncation.
        span.record("gen_ai.tool.call.result", executed.result.content.as_str());
    }
    let mut executed = executed;
    executed
        .interventions
        .extend(redacted.into_iter().map(|name| (name, "redact")));
    executed
}

/// The plan of a call the tool guardrails may deny, change or trip on.
fn guard_call<'c>(
    guardrails: &[ToolGuardrail],
    tool: &'c CompiledTool,
    call: &ToolCall,
) -> Plan<'c> {
    if guardrails.is_empty() {
        return Plan::Run(tool);
    }
    match guardrails::before_tool(guardrails, call) {
        Before::Run => Plan::Run(tool),
        Before::Replaced(arguments, name) => match tool.validator.validate(&arguments) {
            Ok(()) => {
                let replaced = ToolCall {
                    arguments,
                    ..call.clone()
                };
                Plan::RunWith(tool, replaced, name)
            }
            Err(errors) => {
                let text = format!(
                    "{} was not run: the guardrail {name} replaced its arguments with ones \
                     that do not validate: {errors}",
                    call.name
                );
                Plan::Guarded(ToolResult::error(&call.id, &call.name, text), name, None)
            }
        },
        Before::Deny(name, message) => {
            let text = format!("{} was not run: {message}", call.name);
            Plan::Guarded(ToolResult::error(&call.id, &call.name, text), name, None)
        }
        Before::Trip(name, reason) => {
            let text = format!("{} was not run: the guardrail {name} tripped", call.name);
            Plan::Guarded(
                ToolResult::error(&call.id, &call.name, text),
                name,
                Some(reason),
            )
        }
    }
}

/// `text` cut to at most `max_bytes` bytes plus a note the model can act on: its full
/// size and a request to narrow the call. The cut is at the last line break in the
/// final fifth of the allowed bytes when there is one (a clean boundary: no half
/// record), else at a character boundary.
pub(crate) fn truncate(mut text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let total = text.len();
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let floor = max_bytes - max_bytes / 5;
    if let Some(line) = text[..cut].rfind('\n')
        && line >= floor
        && line > 0
    {
        cut = line;
    }
    text.truncate(cut);
    text.push_str(&format!(
        "\n[cut: the result had {total} bytes (about {} tokens); the first {cut} are shown. \
         If you need what is missing, call the tool again asking for less (a narrower \
         query, a page or a range) where it allows that.]",
        total.div_ceil(4)
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn long_results_are_cut_at_a_char_boundary_with_a_note() {
        assert_eq!(truncate("short".into(), 10), "short");
        let cut = truncate("ééééé".into(), 5);
        assert_eq!(
            cut,
            "éé\n[cut: the result had 10 bytes (about 3 tokens); the first 4 are shown. \
             If you need what is missing, call the tool again asking for less (a narrower \
             query, a page or a range) where it allows that.]"
        );
        // At a line break in the last fifth of the allowed bytes: no half line.
        let lines = "row 1\nrow 2\nrow 3\nrow 4\n".to_owned();
        let cut = truncate(lines.clone(), 13);
        assert!(
            cut.starts_with("row 1\nrow 2\n[cut: the result had 24 bytes"),
            "{cut}"
        );
        // No line break near the cap: cut at the cap.
        let cut = truncate("row 1\nxxxxxxxxxxxxxxxxxxxx".to_owned(), 20);
        assert!(cut.starts_with("row 1\nxxxxxxxxxxxxxx\n[cut:"), "{cut}");
    }
}
