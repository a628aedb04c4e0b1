//! An answer's acceptance: schema validation, the output validator and the grader,
//! and the escalation tool.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use serde_json::Value;
use tracing::Instrument;

use crate::config::OutputContext;
use crate::error::{AgentError, AttemptKind};
use crate::message::{Message, ToolCall, ToolResult, json_text};
use crate::output::{AgentOutput, ESCALATE_TO_HUMAN};
use crate::validate::ValidationErrors;
use tokio_util::sync::CancellationToken;

use super::cancel::any_cancelled;
use super::run::{Next, Run};
use super::tools::correction;
use super::tools::guardrails::{OutputCheck, check_output};
use crate::error::panic_message;

impl<'c, T: AgentOutput> Run<'c, T> {
    /// [`accept`](Self::accept) after reading whole-number floats as integers (see
    /// [`crate::validate::whole_numbers_as_integers`]).
    pub(super) fn accept_lenient(&mut self, value: &mut Value) -> Result<T, ValidationErrors> {
        crate::validate::whole_numbers_as_integers(value);
        self.accept(value)
    }

    /// Turns an answer's JSON into a value: schema validation, deserialization and any
    /// `validate` fn (behind a catch boundary: it may panic), then the config's output
    /// validator.
    pub(super) fn accept(&mut self, value: &Value) -> Result<T, ValidationErrors> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| T::from_arguments(value))) {
            Ok(Ok(answer)) => self.check_output(&answer).map(|()| answer),
            Ok(Err(errors)) => Err(errors),
            Err(payload) => Err(ValidationErrors::one(format!(
                "/: the output's validation panicked: {}",
                panic_message(payload.as_ref())
            ))),
        }
    }

    pub(super) fn on_submit(&mut self, call: &ToolCall) -> Next<T> {
        let errors = match &call.arguments_error {
            Some(error) => ValidationErrors::one(format!("/: {error}")),
            None => match self.accept(&call.arguments) {
                Ok(value) => {
                    self.state.output = json_text(&call.arguments);
                    return Next::Stop(Ok(value));
                }
                Err(errors) => errors,
            },
        };
        let feedback = self
            .state
            .remember_correction(correction::rejected_submission(&errors));
        self.state
            .messages
            .push(Message::tool_results(vec![ToolResult::error(
                &call.id, &call.name, feedback,
            )]));
        self.malformed(AttemptKind::SchemaValidation, errors.to_string())
    }

    /// Runs the config's output validator, behind a catch boundary.
    /// Then the output guardrails.
    pub(super) fn check_output(&mut self, value: &T) -> Result<(), ValidationErrors> {
        let Some(check) = &self.agent.hooks.output_validator else {
            return self.check_output_guardrails(value);
        };
        let run = OutputContext::new(&self.state.messages);
        match std::panic::catch_unwind(AssertUnwindSafe(|| check(value, &run))) {
            Ok(Ok(())) => self.check_output_guardrails(value),
            Ok(Err(message)) => Err(ValidationErrors::one(format!("/: {message}"))),
            Err(payload) => Err(ValidationErrors::one(format!(
                "/: the output validator panicked: {}",
                panic_message(payload.as_ref())
            ))),
        }
    }

    /// Runs the output guardrails on a validated answer: a rejection is feedback for
    /// the model (a validation error); a trip is kept in `live.trip` and ends the run
    /// after the turn.
    fn check_output_guardrails(&mut self, value: &T) -> Result<(), ValidationErrors> {
        let guardrails = &self.agent.hooks.guardrails.output;
        if guardrails.is_empty() {
            return Ok(());
        }
        match check_output(guardrails, value) {
            OutputCheck::Pass => Ok(()),
            OutputCheck::Reject(name, feedback) => {
                self.guardrail_intervened(&name, "output", "reject", None);
                Err(ValidationErrors::one(format!("/: {feedback}")))
            }
            OutputCheck::Trip(name, reason) => {
                let tripped = self.tripped((name.clone(), reason), "output");
                self.live.trip = Some(Box::new(tripped));
                Err(ValidationErrors::one(format!(
                    "/: the guardrail {name} tripped"
                )))
            }
        }
    }

    pub(super) async fn grade(
        &mut self,
        value: &T,
        deadline_at: Option<tokio::time::Instant>,
        tokens: &[CancellationToken],
    ) {
        let Some(grader) = &self.agent.hooks.grader else {
            return;
        };
        let input = self.inputs.input.as_str();
        let mut limit = self.agent.limits.grader_timeout;
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
        self.live.scores = match graded {
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

    pub(super) fn on_escalate(&mut self, call: &ToolCall) -> Next<T> {
        let validated = match (&call.arguments_error, &self.agent.escalation_validator) {
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
                self.state.output = json_text(&call.arguments);
                self.state.model_summary = Some(field("summary"));
                Next::Stop(Err(AgentError::Escalated {
                    reason: field("reason"),
                    summary: field("summary"),
                }))
            }
            Err(errors) => {
                let feedback = format!("{ESCALATE_TO_HUMAN} was rejected: {errors}");
                self.state.last_correction = Some(feedback.clone());
                self.state
                    .messages
                    .push(Message::tool_results(vec![ToolResult::error(
                        &call.id, &call.name, feedback,
                    )]));
                self.malformed(AttemptKind::SchemaValidation, errors.to_string())
            }
        }
    }
}
