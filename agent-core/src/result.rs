//! [`AgentResult`]: what a run returns, always.

use std::time::Duration;

use crate::error::{AgentError, Ending};
use crate::handover::Handover;
use crate::message::Message;
use crate::scores::Scores;
use crate::usage::Usage;

/// The result of one run: exactly one of a validated value or an [`AgentError`], plus
/// what the run spent and said.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AgentResult<T> {
    /// The agent that had the conversation at the end (the one that answered, on
    /// success): the config's name, or the last agent handed off to (the builder's
    /// `handoff`).
    pub agent: String,
    /// The validated value, or the one error the run ended with.
    pub outcome: Result<T, AgentError>,
    /// The raw final text: the submitted arguments as JSON on success, the last
    /// assistant text otherwise (empty if there was none).
    pub output: String,
    /// The run's trace id (32 lowercase hex digits), also on its tracing spans
    /// (`trace_id` on `invoke_agent`). With the `otel` feature and a tracing-opentelemetry
    /// layer installed, it is the OpenTelemetry trace id of the run's `invoke_agent` span
    /// (the trace of an enclosing OTel span, when there is one); otherwise a random id.
    pub trace_id: String,
    /// What the run spent.
    pub usage: Usage,
    /// The grader's scores on success, when a grader is set and succeeded.
    pub scores: Option<Scores>,
    /// Wall-clock time of the run.
    pub duration: Duration,
    /// Every message of the run (the input first), for partial results and audits.
    pub transcript: Vec<Message>,
    /// For every run that did not answer: what the human who takes over needs (what
    /// was asked, every tool call with its outcome, irreversible actions, budgets, the
    /// model's summary when it gave one). `None` when the run answered.
    pub handover: Option<Handover>,
    pub(crate) partial: bool,
    pub(crate) customer_message: String,
    /// Store calls of the run that failed, timed out or panicked (memory, retriever,
    /// feedback and trace stores; see [`crate::store`]). They never change the outcome.
    pub store_failures: u32,
}

impl<T> AgentResult<T> {
    /// How the run ended: `Answered` on success, else the error's ending.
    pub fn ending(&self) -> Ending {
        match &self.outcome {
            Ok(_) => Ending::Answered,
            Err(e) => e.ending(),
        }
    }

    /// The error category, or `None` on success.
    pub fn category(&self) -> Option<&'static str> {
        self.outcome.as_ref().err().map(AgentError::category)
    }

    /// Whether the run produced a value.
    pub fn is_ok(&self) -> bool {
        self.outcome.is_ok()
    }

    /// Whether the run answered with a partial value (see
    /// [`AgentOutput::is_partial`](crate::AgentOutput::is_partial)); `false` for a full
    /// answer and for every failure.
    pub fn is_partial(&self) -> bool {
        self.partial
    }

    /// Something true to tell the customer about this run, per its ending: the
    /// config's template or fn for that ending (`customer_message`,
    /// `customer_message_fn` on the builder), else a default that never claims a
    /// success that did not happen (see
    /// [`AgentConfigBuilder::customer_message`](crate::AgentConfigBuilder::customer_message)).
    pub fn customer_message(&self) -> &str {
        &self.customer_message
    }
}
