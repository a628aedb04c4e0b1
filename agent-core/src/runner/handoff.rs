//! Handoffs: a turn that calls `transfer_to_{name}` hands the conversation to that
//! agent, which goes on in the same run (its system prompt, model, tools, output mode
//! and budgets; the run's usage, counters, deadline and transcript so far).

use std::sync::Arc;

use crate::config::{Compiled, OutputPlan};
use crate::error::{AgentError, StuckReason};
use crate::message::{Message, ToolCall, ToolResult};
use crate::observe::RunEvent;
use crate::output::AgentOutput;

use super::fallback::strip_provider_parts;
use super::{Next, Run};

impl<'c, T: AgentOutput> Run<'c, T> {
    /// The turn's tool calls, with the transfers taken out: the other calls run as
    /// usual, each transfer call is answered (the first transfers, any other is an
    /// error result), then the conversation goes to the first transfer's agent.
    pub(super) async fn on_tool_calls(&mut self, calls: &[ToolCall]) -> Next<T> {
        let handoffs = &self.cfg.settings.handoffs;
        if self.wrap_up_turn
            || handoffs.is_empty()
            || !calls
                .iter()
                .any(|c| handoffs.iter().any(|h| h.tool_name == c.name))
        {
            return self.on_user_tool_calls(calls).await;
        }
        let cfg: &'c Compiled<T> = self.cfg;
        let index = |name: &str| {
            cfg.settings
                .handoffs
                .iter()
                .position(|h| h.tool_name == name)
        };
        let (transfers, rest): (Vec<&ToolCall>, Vec<&ToolCall>) =
            calls.iter().partition(|c| index(&c.name).is_some());
        let mut answers = Vec::with_capacity(transfers.len());
        let mut target = None;
        for call in &transfers {
            match (target, index(&call.name)) {
                (None, Some(i)) => {
                    target = Some(i);
                    let to = cfg.settings.handoffs[i].config.name();
                    answers.push(ToolResult::ok(
                        &call.id,
                        &call.name,
                        format!("Transferred to the {to} agent."),
                    ));
                }
                _ => answers.push(ToolResult::error(
                    &call.id,
                    &call.name,
                    "not done: one transfer per turn, and this turn transferred already",
                )),
            }
        }
        if rest.is_empty() {
            self.request.messages.push(Message::tool_results(answers));
        } else {
            let rest: Vec<ToolCall> = rest.into_iter().cloned().collect();
            if let Next::Stop(outcome) = self.on_user_tool_calls(&rest).await {
                // The run ends in this turn: the transfers are answered too, so that
                // every call id is.
                self.answer_with_last(answers);
                return Next::Stop(outcome);
            }
            self.answer_with_last(answers);
        }
        match target {
            Some(i) => match self.hand_off(i) {
                Ok(()) => Next::Continue,
                Err(error) => Next::Stop(Err(error)),
            },
            None => Next::Continue,
        }
    }

    /// Adds `answers` to the turn's tool-results message (one message per turn).
    fn answer_with_last(&mut self, answers: Vec<ToolResult>) {
        match self.request.messages.last_mut() {
            Some(Message::Tool { results }) => results.extend(answers),
            _ => self.request.messages.push(Message::tool_results(answers)),
        }
    }

    /// Hands the conversation to the current agent's handoff `index`.
    fn hand_off(&mut self, index: usize) -> Result<(), AgentError> {
        let cfg: &'c Compiled<T> = self.cfg;
        let Some(handoff) = cfg.settings.handoffs.get(index) else {
            return Ok(());
        };
        let limit = self.max_handoffs;
        if self.handoffs >= limit {
            return Err(AgentError::Stuck {
                reason: StuckReason::Handoffs { limit },
            });
        }
        let target: &'c Compiled<T> = &handoff.config.inner;
        let from = cfg.settings.name.as_str();
        let to = target.settings.name.as_str();
        tracing::info!(from, to, "handoff");
        self.notify(&RunEvent::Handoff {
            trace_id: &self.trace_id,
            from,
            to,
        });
        self.handoffs += 1;
        self.cfg = target;
        self.table = Arc::clone(&target.table);
        self.route = 0;
        self.request.model.clone_from(&target.wire_model);
        self.request.system.clone_from(&target.system_prompt);
        self.request.prompt_cache = target.prompt_cache;
        self.request.output = match &target.output {
            OutputPlan::Json(spec) => Some(Arc::clone(spec)),
            _ => None,
        };
        self.request.max_tokens = target.settings.budgets.max_tokens;
        self.request.temperature = target.settings.budgets.temperature;
        self.request.tools = Arc::clone(&target.table.offered);
        if let Some(filter) = &handoff.filter {
            let kept = filter(&self.request.messages);
            self.request.messages = kept;
        }
        // What only the previous provider can read goes.
        strip_provider_parts(&mut self.request.messages);
        // The agent taken over to brings its own state; the run's stays.
        if !target.state.is_empty() {
            let mut merged = (*self.state).clone();
            merged.extend((*target.state).clone());
            self.state = Arc::new(merged);
        }
        Ok(())
    }
}
