//! The end of a run: the [`AgentResult`], the hand-over brief, and the answers to the
//! last turn's calls.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use crate::error::{AgentError, Ending};
use crate::handover::Handover;
use crate::message::{Message, ToolResult};
use crate::output::AgentOutput;
use crate::result::AgentResult;

use super::customer;
use super::run::Run;
use super::tools::correction;

impl<'c, T: AgentOutput> Run<'c, T> {
    pub(super) fn finish(
        self,
        outcome: Result<T, AgentError>,
        duration: Duration,
    ) -> AgentResult<T> {
        let handover = match &outcome {
            Ok(_) | Err(AgentError::Paused { .. }) => None,
            Err(error) => Some(self.handover(error)),
        };
        let partial = outcome.as_ref().is_ok_and(|value| {
            std::panic::catch_unwind(AssertUnwindSafe(|| value.is_partial())).unwrap_or(false)
        });
        let state = self.state;
        let output = if outcome.is_ok() || !state.output.is_empty() {
            state.output
        } else {
            state.last_text
        };
        let ending = match &outcome {
            Ok(_) => Ending::Answered,
            Err(e) => e.ending(),
        };
        tracing::debug!(
            ending = ending.as_str(),
            llm_calls = state.usage.llm_calls,
            "run ended"
        );
        let mut transcript = state.messages;
        answer_last_turn(&mut transcript, &outcome);
        let agent = self.agent.name.clone();
        let mut result = AgentResult {
            agent,
            outcome,
            output,
            trace_id: self.inputs.trace_id.to_string(),
            usage: state.usage,
            scores: self.live.scores,
            duration,
            transcript,
            handover,
            partial,
            customer_message: String::new(),
            store_failures: 0,
        };
        result.customer_message = customer::message(&self.agent.hooks, &result);
        result
    }

    /// What the human who takes over needs, from the run itself.
    pub(super) fn handover(&self, error: &AgentError) -> Handover {
        Handover {
            input: self.inputs.input.clone(),
            ending: error.ending(),
            category: error.category().to_owned(),
            reason: error.to_string(),
            calls: self.state.calls.clone(),
            last_feedback: self.state.last_correction.clone(),
            spent: self.state.usage.clone(),
            limits: self.agent.limits.with_deadline(self.inputs.deadline),
            model_summary: self.state.model_summary.clone(),
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
    // A paused run's last turn is answered when it resumes.
    if tool_calls.is_empty() || matches!(outcome, Err(AgentError::Paused { .. })) {
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
            Err(e) => ToolResult::error(&call.id, &call.name, correction::stopped(e.category())),
        })
        .collect();
    transcript.push(Message::tool_results(results));
}
