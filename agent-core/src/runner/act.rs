//! A turn of ordinary tool calls: the transfers of a handoff taken out, the calls that
//! wait for a person gated, the rest run (`tools/`), a pause when some wait, the
//! results recorded and guarded, and the transfer made.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use serde_json::Value;

use crate::config::{Compiled, OutputPlan, SEARCH_TOOLS};
use crate::error::{AgentError, StuckReason, panic_message};
use crate::handover::CallOutcome;
use crate::message::{Message, ToolCall, ToolResult};
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::pause::{ChildResume, Decision, Decisions, PendingCall};

use super::agents::handoff::{self, Transfers};
use super::durable::{Durable, Phase};
use super::model::strip_provider_parts;
use super::run::{Next, Run};
use super::tools::{self, Executed, Gate, correction, truncate};

impl<'c, T: AgentOutput> Run<'c, T> {
    /// The turn's tool calls: with tool search on, the other calls first, then the
    /// searches (see `search.rs`); the transfers taken out of the others: they run as
    /// usual, each transfer call is answered (the first transfers, any other is an
    /// error result), then the conversation goes to the first transfer's agent.
    pub(super) async fn on_tool_calls(&mut self, calls: &[ToolCall]) -> Next<T> {
        let searching = self.agent.tool_search.is_some() && !self.live.wrap_up_turn;
        if !searching || !calls.iter().any(|c| c.name == SEARCH_TOOLS) {
            return self.on_other_calls(calls).await;
        }
        let (searches, rest): (Vec<ToolCall>, Vec<ToolCall>) =
            calls.iter().cloned().partition(|c| c.name == SEARCH_TOOLS);
        // The other calls first: a turn that pauses answers its searches when it is
        // resumed, so that they are counted once.
        let next = if rest.is_empty() {
            Next::Continue
        } else {
            self.on_other_calls(&rest).await
        };
        let ran = matches!(next, Next::Continue);
        self.answer_searches(&searches, ran);
        next
    }

    /// The turn's calls but tool searches (see `search.rs`).
    async fn on_other_calls(&mut self, calls: &[ToolCall]) -> Next<T> {
        let handoffs = &self.agent.handoffs;
        if self.live.wrap_up_turn || !handoff::any_transfer(handoffs, calls) {
            return self.on_user_tool_calls(calls).await;
        }
        let Transfers {
            answers,
            target,
            rest,
        } = handoff::split(handoffs, calls);
        if rest.is_empty() {
            self.state.messages.push(Message::tool_results(answers));
        } else {
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
        match self.state.messages.last_mut() {
            Some(Message::Tool { results }) => results.extend(answers),
            _ => self.state.messages.push(Message::tool_results(answers)),
        }
    }

    /// Hands the conversation to the current agent's handoff `index`: the run goes on
    /// with that agent's prompt, models, tools, output and limits (its state added to
    /// the run's), on its primary model, and its state names the agent so that a
    /// resumed run goes on with it.
    fn hand_off(&mut self, index: usize) -> Result<(), AgentError> {
        let Some(handoff) = self.agent.handoffs.get(index) else {
            return Ok(());
        };
        let limit = self.inputs.max_handoffs;
        let done = u32::try_from(self.state.handoffs.len()).unwrap_or(u32::MAX);
        if done >= limit {
            return Err(AgentError::Stuck {
                reason: StuckReason::Handoffs { limit },
            });
        }
        let target: &'c Compiled<T> = &handoff.config.inner;
        let from = self.agent.name.as_str();
        let to = target.name.as_str();
        tracing::info!(from, to, "handoff");
        self.emit.emit(&RunEvent::Handoff {
            trace_id: &self.inputs.trace_id,
            from,
            to,
        });
        let mut handoffs = std::mem::take(&mut self.state.handoffs).into_vec();
        handoffs.push(target.name.clone());
        self.state.handoffs = handoffs.into_boxed_slice();
        self.inputs.app = handoff::merged_state(&self.inputs.app, target);
        self.agent = target;
        self.state.route = 0;
        self.apply_agent();
        if let Some(filter) = &handoff.filter {
            let kept = filter(&self.state.messages);
            self.state.messages = kept;
        }
        // What only the previous provider can read goes.
        strip_provider_parts(&mut self.state.messages);
        Ok(())
    }

    /// The turn's calls of user tools (transfers are taken out before).
    pub(super) async fn on_user_tool_calls(&mut self, calls: &[ToolCall]) -> Next<T> {
        if self.live.wrap_up_turn {
            // Only submit_output (and escalate_to_human) was offered: nothing else runs
            // in the last LLM call.
            let results: Vec<ToolResult> = calls
                .iter()
                .map(|c| {
                    ToolResult::error(&c.id, &c.name, correction::wrap_up_only(&self.agent.output))
                })
                .collect();
            self.record_not_run(calls, &results);
            self.state.messages.push(Message::tool_results(results));
            return Next::Continue;
        }
        let offered = Arc::clone(&self.request.tools);
        let names: Vec<String> = offered.iter().map(|d| d.name.clone()).collect();
        // Written with the first call that starts (see `durable/ledger.rs`).
        if let Some(d) = self.durable.as_deref_mut() {
            let phase = Phase::ToolsPending {
                offered: names.clone(),
                decisions: d.decisions.clone(),
                inside: d.inside.clone(),
            };
            let reporter = (&self.emit.observers, &*self.inputs.trace_id);
            if let Err(fenced) = d.hold(&phase, &mut self.state, reporter) {
                return Next::Stop(Err(fenced));
            }
        }
        let gates = self.gates(calls);
        let tool_calls_before = self.state.usage.tool_calls;
        let table = Arc::clone(&self.live.table);
        let inputs = &self.inputs;
        let link = self.tree.link(
            &inputs.tokens,
            inputs.deadline_at,
            self.agent.limits.tool_timeout,
        );
        let mut executed = tools::run_tool_calls(
            self.agent,
            (&table, &offered),
            calls,
            gates,
            (&inputs.trace_id, &inputs.run_id, inputs.deadline_at),
            &inputs.app,
            &self.emit.observers,
            &mut self.state.usage.tool_calls,
            self.durable.as_deref().map(Durable::ledger),
            &link,
        )
        .await;
        // Another process took the run over while the turn's tools started.
        if let Some(fenced) = self.durable.as_deref().and_then(Durable::fenced) {
            return Next::Stop(Err(fenced));
        }
        // What the turn's child runs spent counts before anything else happens.
        for done in &mut executed {
            for child in std::mem::take(&mut done.children) {
                self.state.add_child(child);
            }
        }
        if let Some(paused) = self
            .pause_if_waiting(calls, &mut executed, &names, tool_calls_before)
            .await
        {
            return Next::Stop(Err(paused));
        }
        let mut results = Vec::with_capacity(executed.len());
        let mut escalation = None;
        for (call, mut done) in calls.iter().zip(executed) {
            for (name, verdict) in std::mem::take(&mut done.interventions) {
                self.guardrail_intervened(&name, stage_of(verdict), verdict, Some(&call.id));
            }
            if let Some(trip) = done.trip.take()
                && self.live.trip.is_none()
            {
                self.guardrail_intervened(&trip.0, "tool_before", "trip", Some(&call.id));
                self.live.trip = Some(Box::new(AgentError::GuardrailTripped {
                    guardrail: trip.0,
                    reason: trip.1,
                }));
            }
            if escalation.is_none() {
                escalation = done.escalation.take();
            }
            if done.fatal && self.state.fatal.is_none() {
                let message = match &done.outcome {
                    CallOutcome::Failed(text) => text.clone(),
                    _ => String::new(),
                };
                self.state.fatal = Some(Box::new((call.name.clone(), message)));
            }
            if self.is_user_tool(&call.name) {
                self.record_call(call, done.outcome);
            }
            results.push(done.result);
        }
        if !self.live.has_parts && results.iter().any(|r| !r.parts.is_empty()) {
            self.live.has_parts = true;
            self.set_token_rule();
        }
        let stuck = self
            .state
            .guard
            .record_turn(&self.agent.limits, calls, &results);
        self.state.messages.push(Message::tool_results(results));
        // A tool that cannot safely continue ends the run once the whole turn is
        // answered.
        if let Some((tool, message)) = self.state.fatal.as_deref().cloned() {
            return Next::Stop(Err(AgentError::ToolFatal { tool, message }));
        }
        // A tool guardrail that tripped, likewise.
        if let Some(tripped) = self.live.trip.take() {
            return Next::Stop(Err(*tripped));
        }
        // A tool that said a person must take over, likewise.
        if let Some((reason, summary)) = escalation {
            self.state.model_summary = Some(summary.clone());
            return Next::Stop(Err(AgentError::Escalated { reason, summary }));
        }
        match stuck {
            Some(StuckReason::RepeatedCall { tool, .. }) if self.answers_instead_of_stuck() => {
                // The lookup turns of a grammar server carry no schema, so a model that
                // has what it needs may not see how to answer and ask again: give it
                // the answering turn (the schema as a grammar, no tools) instead of
                // ending the run.
                let nudge = self
                    .state
                    .remember_correction(correction::repeated_lookup(&tool));
                self.state.messages.push(Message::user(nudge));
                self.state.force_answer = true;
                Next::Continue
            }
            Some(reason) => Next::Stop(Err(AgentError::Stuck { reason })),
            None => Next::Continue,
        }
    }

    /// Whether a repeated call gets the answering turn rather than ending the run
    /// `stuck`: native output on a server whose grammar is withheld from the turns that
    /// offer tools (`OutputCapabilities::native_blocks_tools`).
    fn answers_instead_of_stuck(&self) -> bool {
        let OutputPlan::Json(spec) = &self.agent.output else {
            return false;
        };
        spec.mode == crate::output::AnswerMode::Native
            && self
                .model()
                .client
                .output_capabilities(&self.request.model)
                .native_blocks_tools
    }

    /// One gate per call of the turn: the decision a resume brought for it, else
    /// whether it needs approval (the tool's flag or the config's policy).
    fn gates(&mut self, calls: &[ToolCall]) -> Vec<Gate> {
        let agent = self.agent;
        let max_bytes = agent.limits.max_tool_result_bytes;
        let view = crate::handover::RunState {
            turn: self.state.usage.llm_calls,
            tool_calls: self.state.usage.tool_calls,
            calls: &self.state.calls,
        };
        let (mut decisions, inside, ledger) = match self.durable.as_deref_mut() {
            Some(d) => {
                let (decisions, inside, ledger) = d.decisions_and_ledger();
                (Some(decisions), inside, Some(ledger))
            }
            None => (None, &[][..], None),
        };
        let table = &self.live.table;
        calls
            .iter()
            .map(|call| {
                // A call whose child run paused runs again, resuming it with the
                // decisions for the calls inside it (C64).
                if let Some((_, run_id)) = inside.iter().find(|(id, _)| *id == call.id)
                    && let Some(decisions) = decisions.as_mut()
                {
                    let child = decisions.take_inside(&call.id);
                    return Gate::Resume(ChildResume::new(run_id.clone(), child));
                }
                if let Some(decision) = decisions.as_mut().and_then(|d| d.take(&call.id)) {
                    let ran = ledger.is_some_and(|l| l.deferred(&call.id));
                    return gate_of(call, decision, max_bytes, ran);
                }
                let Some(tool) = table.get(&call.name) else {
                    return Gate::Run;
                };
                if call.arguments_error.is_some() {
                    return Gate::Run;
                }
                let asked = agent.hooks.approval.as_ref().is_some_and(|needs| {
                    std::panic::catch_unwind(AssertUnwindSafe(|| needs(call, &view)))
                        .unwrap_or_else(|payload| {
                            tracing::warn!(
                                tool = %call.name,
                                panic = %panic_message(payload.as_ref()),
                                "the approval policy panicked; the call waits for approval"
                            );
                            true
                        })
                });
                if tool.requires_approval || asked {
                    Gate::Hold
                } else {
                    Gate::Run
                }
            })
            .collect()
    }

    /// After the turn's calls ran: the calls that wait, if any. With a checkpoint store
    /// the run pauses: the checkpoint is saved as the turn stood before it ran (the
    /// calls that ran are in the ledger), and the error to end the run with comes back.
    /// Without one, a waiting call cannot wait: it gets an error result.
    async fn pause_if_waiting(
        &mut self,
        calls: &[ToolCall],
        executed: &mut [Executed],
        offered: &[String],
        tool_calls_before: u32,
    ) -> Option<AgentError> {
        let mut pending: Vec<PendingCall> = Vec::new();
        let mut decided = Decisions::new();
        for (call, done) in calls.iter().zip(executed.iter()) {
            let Some(reason) = done.pause.clone() else {
                continue;
            };
            // A child run that paused: its pending calls are this run's, by path (C64),
            // and the decisions it keeps with us are recorded with the pause.
            if let Some(child) = &done.inside {
                pending.extend(child.lifted(&call.id, &call.name));
                decided.merge(child.lifted_decided(&call.id));
                continue;
            }
            let arguments = done
                .held_arguments
                .clone()
                .unwrap_or_else(|| call.arguments.clone());
            pending.push(PendingCall::new(&call.id, &call.name, arguments, reason));
        }
        if pending.is_empty() {
            return None;
        }
        let Some(d) = self.durable.as_deref_mut() else {
            for (call, done) in calls.iter().zip(executed.iter_mut()) {
                if done.pause.take().is_some() {
                    let text = match done.inside.take() {
                        Some(child) => format!(
                            "{} could not finish: the {} agent's run {} waits for \
                             decisions, and this run cannot wait (no checkpoint store)",
                            call.name, child.agent, child.run_id
                        ),
                        None => format!(
                            "{} could not run: its result has to wait (for approval or \
                             from outside), and this run cannot wait (no checkpoint store)",
                            call.name
                        ),
                    };
                    done.outcome = CallOutcome::Failed(text.clone());
                    done.result = ToolResult::error(&call.id, &call.name, text);
                }
            }
            return None;
        };
        // A call held with the arguments a tool guardrail put in is that call: the turn
        // shows them, so that what a person approves is what runs (C51).
        if let Some(Message::Assistant { tool_calls, .. }) = self.state.messages.last_mut() {
            for (held, done) in calls.iter().zip(executed.iter()) {
                let Some(arguments) = done
                    .held_arguments
                    .as_ref()
                    .filter(|_| done.pause.is_some())
                else {
                    continue;
                };
                if let Some(call) = tool_calls.iter_mut().find(|c| c.id == held.id) {
                    call.arguments = arguments.clone();
                }
            }
        }
        // The turn is answered again when the run resumes (the calls that ran, from the
        // ledger), and its tool executions are counted then: the checkpoint keeps the
        // count from before the turn, the paused result the count so far.
        let so_far = std::mem::replace(&mut self.state.usage.tool_calls, tool_calls_before);
        let phase = Phase::Paused {
            offered: offered.to_vec(),
            pending: pending.clone(),
            decisions: decided,
        };
        let reporter = (&self.emit.observers, &*self.inputs.trace_id);
        let saved = Box::pin(d.save(&phase, &mut self.state, reporter)).await;
        self.state.usage.tool_calls = so_far;
        if let Err(fenced) = saved {
            return Some(fenced);
        }
        Some(AgentError::Paused {
            run_id: self.inputs.run_id.to_string(),
            pending,
        })
    }
}

/// The gate a decision sets. Edits were applied to the turn when the run resumed.
fn gate_of(call: &ToolCall, decision: Decision, max_bytes: usize, ran: bool) -> Gate {
    match decision {
        // Edits were applied to the turn; an approved call runs as it stands.
        Decision::Approve | Decision::Edit { .. } => Gate::Approved,
        Decision::Deny { reason } => {
            let text = format!(
                "{} was not run: a person denied the call. Their reason: {reason}",
                call.name
            );
            Gate::Answer(
                ToolResult::error(&call.id, &call.name, text),
                CallOutcome::Denied(reason),
                ran,
            )
        }
        Decision::Dismiss => {
            let text = format!(
                "{} was not run: a person dismissed the question without an answer",
                call.name
            );
            Gate::Answer(
                ToolResult::error(&call.id, &call.name, text),
                CallOutcome::Denied("dismissed".to_owned()),
                ran,
            )
        }
        Decision::Result { value } => {
            let text = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
            let text = truncate(text, max_bytes);
            Gate::Answer(
                ToolResult::ok(&call.id, &call.name, text.clone()),
                CallOutcome::External(text),
                ran,
            )
        }
    }
}

/// Where a tool guardrail's verdict came from.
fn stage_of(verdict: &str) -> &'static str {
    if verdict == "redact" {
        "tool_after"
    } else {
        "tool_before"
    }
}
