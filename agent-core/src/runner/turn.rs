//! The transitions of a model turn: every successful turn is classified into exactly
//! one (text, an answer, an ambiguous turn, tool calls), and malformed turns are
//! counted against `max_parse_retries`.

use std::sync::Arc;

use crate::config::OutputPlan;
use crate::error::{AgentError, Attempt, AttemptKind, StuckReason};
use crate::handover::CallOutcome;
use crate::llm::{LlmResponse, StopReason};
use crate::message::{Message, ToolCall, ToolResult};
use crate::output::{AgentOutput, ESCALATE_TO_HUMAN, Extracted, SUBMIT_OUTPUT, extract_json};
use crate::stream::StreamEvent;
use crate::validate::ValidationErrors;

use super::{Next, Run, correction, sanitize, tools};

impl<'c, T: AgentOutput> Run<'c, T> {
    /// Classifies a successful turn into exactly one transition.
    pub(super) async fn on_turn(&mut self, mut response: LlmResponse) -> Next<T> {
        let table = Arc::clone(&self.table);
        let is_known = |name: &str| {
            table.index.contains_key(name) || name == SUBMIT_OUTPUT || name == ESCALATE_TO_HUMAN
        };
        sanitize::sanitize_calls(
            &mut response.tool_calls,
            &mut self.seen_ids,
            &self.trace_id,
            self.usage.llm_calls,
            &is_known,
        );
        self.add_usage(&response);
        let input_tokens = response.usage.input_tokens;
        let LlmResponse {
            text,
            mut tool_calls,
            stop_reason,
            reasoning,
            provider_content,
            refusal,
            ..
        } = response;
        if stop_reason == StopReason::PauseTurn {
            // Not an answer (C41): the paused content goes back unchanged and the model
            // continues its turn in the next LLM call, under the same budgets.
            if !text.is_empty() {
                self.last_text.clone_from(&text);
            }
            let content = provider_content.unwrap_or(serde_json::Value::Null);
            self.request
                .messages
                .push(Message::Paused { text, content });
            return Next::Continue;
        }
        if stop_reason == StopReason::MaxTokens
            && let Some(last) = tool_calls.last_mut()
        {
            // The output cap cut the turn: its last call was still being written. Even
            // arguments that parse (`{}` for a tool whose parameters are all optional)
            // are not what the model meant to send, so the call is never run.
            let signature = last.thought_signature.take();
            let data = last.provider_data.take();
            *last = ToolCall::with_invalid_arguments(
                std::mem::take(&mut last.id),
                std::mem::take(&mut last.name),
                correction::cut_call(self.request.max_tokens),
            );
            last.thought_signature = signature;
            last.provider_data = data;
        }
        if !text.is_empty() {
            self.last_text.clone_from(&text);
        }
        // A lone submit_output or escalate_to_human call is judged on the call alone:
        // nothing in its handling reads the transcript, and none of it awaits, so the
        // assistant message goes in after it, at the place it would have had, with the
        // call moved in rather than copied.
        let provider_stop = matches!(
            stop_reason,
            StopReason::Refusal | StopReason::ContentFilter | StopReason::ContextWindowExceeded
        );
        if !provider_stop && tool_calls.len() == 1 && self.is_terminal(&tool_calls[0].name) {
            self.send_calls_finished(&tool_calls);
            let at = self.request.messages.len();
            let call = &tool_calls[0];
            let next = if call.name == SUBMIT_OUTPUT {
                self.on_submit(call)
            } else {
                self.on_escalate(call)
            };
            self.request.messages.insert(
                at,
                Message::assistant(text, tool_calls).with_reasoning(reasoning),
            );
            return next;
        }
        self.request.messages.push(
            Message::assistant(text.clone(), tool_calls.clone()).with_reasoning(reasoning.clone()),
        );
        self.send_calls_finished(&tool_calls);
        match stop_reason {
            // Provider-declared stops that are not answers: the same input gets the
            // same answer, so no nudge and no retry.
            StopReason::Refusal | StopReason::ContentFilter => {
                return Next::Stop(Err(AgentError::refused(stop_reason, text, refusal)));
            }
            StopReason::ContextWindowExceeded => {
                return Next::Stop(Err(AgentError::ContextWindowExceeded { input_tokens }));
            }
            _ => {}
        }
        let terminal: Vec<&ToolCall> = tool_calls
            .iter()
            .filter(|c| self.is_terminal(&c.name))
            .collect();
        if tool_calls.is_empty() {
            // Some reasoning parsers leave the content empty and put the whole reply,
            // the JSON answer included, in the reasoning.
            // Not when the output cap cut the turn: reasoning cut off is a draft at best.
            let answer_in_reasoning = text.trim().is_empty()
                && !reasoning.trim().is_empty()
                && stop_reason != StopReason::MaxTokens
                && matches!(self.cfg.output, OutputPlan::Json(_));
            let text = if answer_in_reasoning {
                &reasoning
            } else {
                &text
            };
            return self.on_text(text, &stop_reason);
        }
        if !terminal.is_empty() && tool_calls.len() > 1 {
            return self.on_ambiguous(&tool_calls, terminal[0].name.clone());
        }
        self.on_tool_calls(&tool_calls).await
    }

    /// Sends [`StreamEvent::ToolCallFinished`] for each of the turn's calls (streamed
    /// runs only).
    fn send_calls_finished(&self, tool_calls: &[ToolCall]) {
        if let Some(events) = &self.events {
            for call in tool_calls {
                events.send(StreamEvent::ToolCallFinished {
                    llm_call: self.usage.llm_calls,
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                });
            }
        }
    }

    pub(super) fn is_terminal(&self, name: &str) -> bool {
        (matches!(self.cfg.output, OutputPlan::Tool) && name == SUBMIT_OUTPUT)
            || (self.cfg.escalation_validator.is_some() && name == ESCALATE_TO_HUMAN)
    }

    pub(super) fn on_text(&mut self, text: &str, stop_reason: &StopReason) -> Next<T> {
        match &self.cfg.output {
            OutputPlan::Text => {
                if let Some(value) = T::from_text(text) {
                    self.output = text.to_owned();
                    return Next::Stop(Ok(value));
                }
            }
            OutputPlan::Json(spec) => {
                let prompted = spec.mode == crate::output::OutputMode::Prompted;
                return self.on_answer_text(text, stop_reason, prompted);
            }
            OutputPlan::Tool => {}
        }
        let cut = (*stop_reason == StopReason::MaxTokens).then_some(self.request.max_tokens);
        let nudge = self.remember_correction(correction::plain_text_nudge(cut));
        self.request.messages.push(Message::user(nudge));
        self.force_answer = true;
        let mut summary = if text.trim().is_empty() {
            "an empty turn: no text and no tool call".to_owned()
        } else {
            format!("plain text instead of a {SUBMIT_OUTPUT} call")
        };
        if let Some(cap) = cut {
            summary.push_str(&format!(" (the output hit max_tokens, {cap} tokens)"));
        }
        self.malformed(AttemptKind::SchemaNotCalled, summary)
    }

    /// A text reply in native or prompted mode: the answer, or a malformed turn fed back
    /// as a user message (there is no call id to answer).
    pub(super) fn on_answer_text(
        &mut self,
        text: &str,
        stop_reason: &StopReason,
        prompted: bool,
    ) -> Next<T> {
        let cut = (*stop_reason == StopReason::MaxTokens).then_some(self.request.max_tokens);
        let (kind, errors) = if text.trim().is_empty() {
            (
                AttemptKind::SchemaNotCalled,
                ValidationErrors::one("/: an empty reply: no text and no tool call"),
            )
        } else {
            match extract_json(text) {
                Extracted::Value(mut value) => match self.accept_lenient(&mut value) {
                    Ok(answer) => {
                        self.output = text.to_owned();
                        return Next::Stop(Ok(answer));
                    }
                    Err(errors) => (AttemptKind::SchemaValidation, errors),
                },
                Extracted::Truncated => (
                    AttemptKind::SchemaValidation,
                    ValidationErrors::one("/: the JSON object was cut off before its end"),
                ),
                // Prompted mode asks for JSON in text: prose alone is the model not
                // answering yet. Native mode constrains the reply to JSON: anything else
                // is a broken answer.
                Extracted::NotJson if prompted => (
                    AttemptKind::SchemaNotCalled,
                    ValidationErrors::one("/: plain text without a JSON answer"),
                ),
                Extracted::NotJson => (
                    AttemptKind::SchemaValidation,
                    ValidationErrors::one("/: the reply is not a JSON object"),
                ),
                // Two candidate answers: picking one would be a guess.
                Extracted::Ambiguous(n) => (
                    AttemptKind::AmbiguousTurn,
                    ValidationErrors::one(format!(
                        "/: the reply holds {n} different JSON objects; reply with exactly \
                         one, the answer, and keep drafts out of the reply"
                    )),
                ),
            }
        };
        let rejected = self.remember_correction(correction::rejected_answer(&errors, cut));
        self.request.messages.push(Message::user(rejected));
        self.force_answer = true;
        let mut summary = errors.to_string();
        if let Some(cap) = cut {
            summary.push_str(&format!(" (the reply hit max_tokens, {cap} tokens)"));
        }
        self.malformed(kind, summary)
    }

    pub(super) fn on_ambiguous(&mut self, calls: &[ToolCall], terminal: String) -> Next<T> {
        let results: Vec<ToolResult> = calls
            .iter()
            .map(|c| ToolResult::error(&c.id, &c.name, correction::ambiguous(c, calls, &terminal)))
            .collect();
        self.record_not_run(calls, &results);
        self.last_correction = results
            .iter()
            .find(|r| r.name == terminal)
            .map(|r| r.content.clone());
        self.request.messages.push(Message::tool_results(results));
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        self.malformed(
            AttemptKind::AmbiguousTurn,
            format!(
                "{terminal} with other calls in one turn ({}); none executed",
                names.join(", ")
            ),
        )
    }

    /// The turn's calls of user tools (transfers are taken out before, in
    /// `handoff.rs`).
    pub(super) async fn on_user_tool_calls(&mut self, calls: &[ToolCall]) -> Next<T> {
        if self.wrap_up_turn {
            // Only submit_output (and escalate_to_human) was offered: nothing else runs
            // in the last LLM call.
            let results: Vec<ToolResult> = calls
                .iter()
                .map(|c| {
                    ToolResult::error(&c.id, &c.name, correction::wrap_up_only(&self.cfg.output))
                })
                .collect();
            self.record_not_run(calls, &results);
            self.request.messages.push(Message::tool_results(results));
            return Next::Continue;
        }
        let offered = Arc::clone(&self.request.tools);
        let names: Vec<String> = offered.iter().map(|d| d.name.clone()).collect();
        // Written with the first call that starts (see `ledger.rs`).
        if let Err(fenced) = self.hold_checkpoint(super::checkpoint::Phase::ToolsPending {
            offered: names.clone(),
            decisions: self.decisions.clone(),
        }) {
            return Next::Stop(Err(fenced));
        }
        let gates = self.gates(calls);
        let tool_calls_before = self.usage.tool_calls;
        let table = Arc::clone(&self.table);
        let link = self.run_link();
        let mut executed = tools::run_tool_calls(
            self.cfg,
            (&table, &offered),
            calls,
            gates,
            (&self.trace_id, &self.run_id, self.deadline_at),
            &self.state,
            &self.observers,
            &mut self.usage.tool_calls,
            self.durable
                .as_deref()
                .map(super::checkpoint::Durable::ledger),
            &link,
        )
        .await;
        // Another process took the run over while the turn's tools started.
        if let Some(fenced) = self.fenced() {
            return Next::Stop(Err(fenced));
        }
        // What the turn's child runs spent counts before anything else happens.
        for done in &mut executed {
            for child in std::mem::take(&mut done.children) {
                self.add_child(child);
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
                && self.trip.is_none()
            {
                self.guardrail_intervened(&trip.0, "tool_before", "trip", Some(&call.id));
                self.trip = Some(Box::new(AgentError::GuardrailTripped {
                    guardrail: trip.0,
                    reason: trip.1,
                }));
            }
            if escalation.is_none() {
                escalation = done.escalation.take();
            }
            if done.fatal && self.fatal.is_none() {
                let message = match &done.outcome {
                    CallOutcome::Failed(text) => text.clone(),
                    _ => String::new(),
                };
                self.fatal = Some((call.name.clone(), message));
            }
            if self.table.index.contains_key(&call.name) {
                self.record_call(call, done.outcome);
            }
            results.push(done.result);
        }
        let stuck = self.guard.record_turn(calls, &results);
        self.request.messages.push(Message::tool_results(results));
        // A tool that cannot safely continue ends the run once the whole turn is
        // answered.
        if let Some((tool, message)) = self.fatal.clone() {
            return Next::Stop(Err(AgentError::ToolFatal { tool, message }));
        }
        // A tool guardrail that tripped, likewise.
        if let Some(tripped) = self.trip.take() {
            return Next::Stop(Err(*tripped));
        }
        // A tool that said a person must take over, likewise.
        if let Some((reason, summary)) = escalation {
            self.model_summary = Some(summary.clone());
            return Next::Stop(Err(AgentError::Escalated { reason, summary }));
        }
        match stuck {
            Some(StuckReason::RepeatedCall { tool, .. }) if self.answers_instead_of_stuck() => {
                // The lookup turns of a grammar server carry no schema, so a model that
                // has what it needs may not see how to answer and ask again: give it
                // the answering turn (the schema as a grammar, no tools) instead of
                // ending the run.
                let nudge = self.remember_correction(correction::repeated_lookup(&tool));
                self.request.messages.push(Message::user(nudge));
                self.force_answer = true;
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
        let OutputPlan::Json(spec) = &self.cfg.output else {
            return false;
        };
        spec.mode == crate::output::OutputMode::Native
            && self
                .client()
                .output_capabilities(&self.request.model)
                .native_blocks_tools
    }

    /// Records a malformed turn; ends the run when the corrections are used up.
    pub(super) fn malformed(&mut self, kind: AttemptKind, message: String) -> Next<T> {
        self.attempts
            .push(Attempt::new(kind, self.usage.llm_calls, message));
        if self.attempts.len() > self.cfg.settings.budgets.max_parse_retries as usize {
            let attempts = std::mem::take(&mut self.attempts);
            return Next::Stop(Err(AgentError::from_attempts(kind, attempts)));
        }
        Next::Continue
    }

    /// Remembers a correction for the handover, and returns it.
    pub(super) fn remember_correction(&mut self, text: String) -> String {
        self.last_correction = Some(text.clone());
        text
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
