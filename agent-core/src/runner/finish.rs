//! The end of a run: the [`AgentResult`], the hand-over brief, and the answers to the
//! last turn's calls.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use crate::error::{AgentError, Ending};
use crate::handover::{Handover, Limits};
use crate::message::{Message, ToolResult};
use crate::output::AgentOutput;
use crate::result::AgentResult;

use super::{Run, correction, customer};

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
        let agent = self.cfg.settings.name.clone();
        let mut result = AgentResult {
            agent,
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
    pub(super) fn handover(&self, error: &AgentError) -> Handover {
        let s = &self.cfg.settings;
        Handover {
            input: self.input.clone(),
            ending: error.ending(),
            category: error.category().to_owned(),
            reason: error.to_string(),
            calls: self.calls.clone(),
            last_feedback: self.last_correction.clone(),
            spent: self.usage.clone(),
            limits: Limits {
                max_llm_calls: s.budgets.max_llm_calls,
                max_tool_calls: s.budgets.max_tool_calls,
                max_parse_retries: s.budgets.max_parse_retries,
                max_total_tokens: s.budgets.max_total_tokens,
                max_cost_usd: s.budgets.max_cost_usd,
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
