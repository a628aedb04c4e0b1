//! The guardrails at their points in the loop: input guardrails before (or with) the
//! first LLM call, output guardrails on each validated answer, tool guardrails around
//! each call (`tools.rs` calls [`before_tool`] and [`after_tool`]).

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use serde_json::Value;

use crate::error::{AgentError, panic_message};
use crate::guardrail::{InputGuardrail, OutputGuardrail, ToolGuardrail, ToolVerdict, Verdict};
use crate::message::ToolCall;
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::validate::ValidationErrors;

use super::Run;

/// A guardrail that tripped: its name and reason.
pub(super) type Trip = (String, String);

/// Runs the input guardrails in order; the first that trips (or rejects, or panics).
pub(super) async fn check_input(guardrails: Vec<InputGuardrail>, input: String) -> Option<Trip> {
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

impl<T: AgentOutput> Run<'_, T> {
    /// Counts and reports a verdict other than a pass.
    pub(super) fn guardrail_intervened(
        &mut self,
        guardrail: &str,
        stage: &str,
        verdict: &str,
        call_id: Option<&str>,
    ) {
        self.usage.guardrail_interventions = self.usage.guardrail_interventions.saturating_add(1);
        tracing::info!(guardrail, stage, verdict, call_id, "guardrail");
        self.notify(&RunEvent::Guardrail {
            trace_id: &self.trace_id,
            guardrail,
            stage,
            verdict,
            call_id,
        });
    }

    /// The error of a tripped guardrail, counted and reported.
    pub(super) fn tripped(&mut self, (guardrail, reason): Trip, stage: &str) -> AgentError {
        self.guardrail_intervened(&guardrail, stage, "trip", None);
        AgentError::GuardrailTripped { guardrail, reason }
    }

    /// The input guardrails that run before the first LLM call, and the concurrent ones
    /// as a future that owns what it needs (`None` without any). A resumed run passed
    /// them when it started.
    pub(super) fn input_guardrails(
        &self,
    ) -> (
        Option<impl Future<Output = Option<Trip>> + Send + 'static>,
        Option<impl Future<Output = Option<Trip>> + Send + 'static>,
    ) {
        let all = &self.cfg.settings.guardrails.input;
        if all.is_empty() || self.usage.llm_calls > 0 {
            return (None, None);
        }
        let (concurrent, before): (Vec<_>, Vec<_>) =
            all.iter().cloned().partition(|g| g.concurrent);
        let future = |list: Vec<InputGuardrail>| {
            (!list.is_empty()).then(|| check_input(list, self.input.clone()))
        };
        (future(before), future(concurrent))
    }

    /// Runs the output guardrails on a validated answer: a rejection is feedback for
    /// the model (a validation error); a trip is kept in `self.trip` and ends the run
    /// after the turn.
    pub(super) fn check_output_guardrails(&mut self, value: &T) -> Result<(), ValidationErrors> {
        let guardrails: Vec<OutputGuardrail<T>> = self.cfg.settings.guardrails.output.clone();
        for g in guardrails {
            let verdict = std::panic::catch_unwind(AssertUnwindSafe(|| (g.check)(value)));
            match verdict {
                Ok(Verdict::Pass) => {}
                Ok(Verdict::Reject(feedback)) => {
                    self.guardrail_intervened(&g.name, "output", "reject", None);
                    return Err(ValidationErrors::one(format!("/: {feedback}")));
                }
                Ok(Verdict::Trip(reason)) => {
                    self.trip = Some(Box::new(self.tripped((g.name.clone(), reason), "output")));
                    return Err(ValidationErrors::one(format!(
                        "/: the guardrail {} tripped",
                        g.name
                    )));
                }
                Err(payload) => {
                    let reason = format!(
                        "the guardrail panicked: {}",
                        panic_message(payload.as_ref())
                    );
                    self.trip = Some(Box::new(self.tripped((g.name.clone(), reason), "output")));
                    return Err(ValidationErrors::one(format!(
                        "/: the guardrail {} tripped",
                        g.name
                    )));
                }
            }
        }
        Ok(())
    }
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
