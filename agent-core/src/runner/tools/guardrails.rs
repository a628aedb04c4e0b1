//! The guardrails at their points in the loop: input guardrails before (or with) the
//! first LLM call, output guardrails on each validated answer, tool guardrails around
//! each call (`tools.rs` calls [`before_tool`] and [`after_tool`]).

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use serde_json::Value;

use crate::error::panic_message;
use crate::guardrail::{InputGuardrail, OutputGuardrail, ToolGuardrail, ToolVerdict, Verdict};
use crate::message::ToolCall;

/// A guardrail that tripped: its name and reason.
pub(crate) type Trip = (String, String);

/// Runs the input guardrails in order; the first that trips (or rejects, or panics).
pub(crate) async fn check_input(guardrails: Vec<InputGuardrail>, input: String) -> Option<Trip> {
    for g in guardrails {
        let verdict = AssertUnwindSafe(async { (g.check)(&input).await })
            .catch_unwind()
            .await;
        match verdict {
            Ok(Verdict::Pass) => {}
            Ok(Verdict::Reject(reason) | Verdict::Trip(reason)) => return Some((g.name, reason)),
            Err(payload) => {
                let reason = format!(
                    "the guardrail panicked: {}",
                    panic_message(payload.as_ref())
                );
                return Some((g.name, reason));
            }
        }
    }
    None
}

/// The input guardrails that run before the first LLM call, and the concurrent ones,
/// each as a future that owns what it needs (`None` without any).
pub(crate) fn input_checks(
    all: &[InputGuardrail],
    input: &str,
) -> (
    Option<impl Future<Output = Option<Trip>> + Send + 'static>,
    Option<impl Future<Output = Option<Trip>> + Send + 'static>,
) {
    let (concurrent, before): (Vec<_>, Vec<_>) = all.iter().cloned().partition(|g| g.concurrent);
    let future =
        |list: Vec<InputGuardrail>| (!list.is_empty()).then(|| check_input(list, input.to_owned()));
    (future(before), future(concurrent))
}

/// What the output guardrails said of a validated answer.
pub(crate) enum OutputCheck {
    /// Every guardrail passed it.
    Pass,
    /// A guardrail (named) rejected it: feedback for the model.
    Reject(String, String),
    /// A guardrail (named) tripped (or panicked): the reason; the run ends.
    Trip(String, String),
}

/// Runs the output guardrails on a validated answer, in order; the first that does not
/// pass it.
pub(crate) fn check_output<T>(guardrails: &[OutputGuardrail<T>], value: &T) -> OutputCheck {
    for g in guardrails {
        match std::panic::catch_unwind(AssertUnwindSafe(|| (g.check)(value))) {
            Ok(Verdict::Pass) => {}
            Ok(Verdict::Reject(feedback)) => return OutputCheck::Reject(g.name.clone(), feedback),
            Ok(Verdict::Trip(reason)) => return OutputCheck::Trip(g.name.clone(), reason),
            Err(payload) => {
                let reason = format!(
                    "the guardrail panicked: {}",
                    panic_message(payload.as_ref())
                );
                return OutputCheck::Trip(g.name.clone(), reason);
            }
        }
    }
    OutputCheck::Pass
}

/// What the tool guardrails decided for one call before it runs.
pub(crate) enum Before {
    /// Run it with its own arguments.
    Run,
    /// Run it with these arguments (each replacement validated by the caller).
    Replaced(Value, String),
    /// Answer it with this error, naming the guardrail.
    Deny(String, String),
    /// Trip: the guardrail and its reason.
    Trip(String, String),
}

/// Runs the tool guardrails that apply to `call`, in order, before it runs. A
/// replacement is passed on to the next guardrail.
pub(crate) fn before_tool(guardrails: &[ToolGuardrail], call: &ToolCall) -> Before {
    let mut replaced: Option<(Value, String)> = None;
    for g in guardrails.iter().filter(|g| g.applies_to(&call.name)) {
        let Some(check) = &g.before else { continue };
        let seen;
        let current = match &replaced {
            Some((arguments, _)) => {
                seen = ToolCall {
                    arguments: arguments.clone(),
                    ..call.clone()
                };
                &seen
            }
            None => call,
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| check(current))) {
            Ok(ToolVerdict::Allow) => {}
            Ok(ToolVerdict::Deny(message)) => return Before::Deny(g.name.clone(), message),
            Ok(ToolVerdict::Replace(arguments)) => replaced = Some((arguments, g.name.clone())),
            Ok(ToolVerdict::Trip(reason)) => return Before::Trip(g.name.clone(), reason),
            Err(payload) => {
                let reason = format!(
                    "the guardrail panicked: {}",
                    panic_message(payload.as_ref())
                );
                return Before::Trip(g.name.clone(), reason);
            }
        }
    }
    match replaced {
        Some((arguments, name)) => Before::Replaced(arguments, name),
        None => Before::Run,
    }
}

/// Runs the tool guardrails' `after` checks on a successful result; the new text and
/// the names of the guardrails that redacted it.
pub(crate) fn after_tool(
    guardrails: &[ToolGuardrail],
    call: &ToolCall,
    mut text: String,
) -> (String, Vec<String>) {
    let mut redacted = Vec::new();
    for g in guardrails.iter().filter(|g| g.applies_to(&call.name)) {
        let Some(check) = &g.after else { continue };
        match std::panic::catch_unwind(AssertUnwindSafe(|| check(call, &text))) {
            Ok(None) => {}
            Ok(Some(new)) => {
                text = new;
                redacted.push(g.name.clone());
            }
            // A redaction that panicked cannot be trusted to have removed anything.
            Err(_) => {
                text = format!("[result withheld: the guardrail {} failed]", g.name);
                redacted.push(g.name.clone());
            }
        }
    }
    (text, redacted)
}
