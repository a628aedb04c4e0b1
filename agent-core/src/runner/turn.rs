//! The transitions of a model turn: every successful turn is classified into exactly
//! one (text, an answer, an ambiguous turn, tool calls), and malformed turns are
//! counted against `max_parse_retries`.

use std::sync::Arc;

use crate::config::OutputPlan;
use crate::error::{AgentError, AttemptKind};
use crate::llm::{LlmResponse, StopReason};
use crate::message::{Message, ToolCall, ToolResult};
use crate::output::{AgentOutput, ESCALATE_TO_HUMAN, Extracted, SUBMIT_OUTPUT, extract_json};
use crate::validate::ValidationErrors;

use super::run::{Next, Run};
use super::tools::{correction, sanitize};

impl<'c, T: AgentOutput> Run<'c, T> {
    /// Classifies a successful turn into exactly one transition.
    pub(super) async fn on_turn(&mut self, mut response: LlmResponse) -> Next<T> {
        let table = Arc::clone(&self.live.table);
        let searching = self.agent.tool_search.is_some();
        let is_known = |name: &str| {
            table.index.contains_key(name)
                || name == SUBMIT_OUTPUT
                || name == ESCALATE_TO_HUMAN
                || (searching && name == crate::config::SEARCH_TOOLS)
        };
        sanitize::sanitize_calls(
            &mut response.tool_calls,
            &mut self.live.seen_ids,
            &self.inputs.trace_id,
            self.state.usage.llm_calls,
            &is_known,
        );
        self.add_usage(&response);
        if let Some(found) = response.provider_searches.take() {
            self.on_provider_searches(&found);
        }
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
                self.state.last_text.clone_from(&text);
            }
            let content = provider_content.unwrap_or(serde_json::Value::Null);
            self.state.messages.push(Message::Paused { text, content });
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
            self.state.last_text.clone_from(&text);
        }
        // A lone submit_output or escalate_to_human call is judged on the call and the
        // turns before it (an output validator may read those), and none of it awaits, so the
        // assistant message goes in after it, at the place it would have had, with the
        // call moved in rather than copied.
        let provider_stop = matches!(
            stop_reason,
            StopReason::Refusal | StopReason::ContentFilter | StopReason::ContextWindowExceeded
        );
        if !provider_stop && tool_calls.len() == 1 && self.is_terminal(&tool_calls[0].name) {
            self.emit
                .calls_finished(self.state.usage.llm_calls, &tool_calls);
            let at = self.state.messages.len();
            let call = &tool_calls[0];
            let next = if call.name == SUBMIT_OUTPUT {
                self.on_submit(call)
            } else {
                self.on_escalate(call)
            };
            self.state.messages.insert(
                at,
                Message::assistant(text, tool_calls).with_reasoning(reasoning),
            );
            return next;
        }
        self.state.messages.push(
            Message::assistant(text.clone(), tool_calls.clone()).with_reasoning(reasoning.clone()),
        );
        self.emit
            .calls_finished(self.state.usage.llm_calls, &tool_calls);
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
                && matches!(self.agent.output, OutputPlan::Json(_));
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

    pub(super) fn is_terminal(&self, name: &str) -> bool {
        (matches!(self.agent.output, OutputPlan::Tool) && name == SUBMIT_OUTPUT)
            || (self.agent.escalation_validator.is_some() && name == ESCALATE_TO_HUMAN)
    }

    pub(super) fn on_text(&mut self, text: &str, stop_reason: &StopReason) -> Next<T> {
        match &self.agent.output {
            OutputPlan::Text => {
                if let Some(value) = T::from_text(text) {
                    self.state.output = text.to_owned();
                    return Next::Stop(Ok(value));
                }
            }
            OutputPlan::Json(spec) => {
                let prompted = spec.mode == crate::output::AnswerMode::Prompted;
                return self.on_answer_text(text, stop_reason, prompted);
            }
            OutputPlan::Tool => {}
        }
        let cut = (*stop_reason == StopReason::MaxTokens).then_some(self.request.max_tokens);
        let nudge = self
            .state
            .remember_correction(correction::plain_text_nudge(cut));
        self.state.messages.push(Message::user(nudge));
        self.state.force_answer = true;
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
                        self.state.output = text.to_owned();
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
        let rejected = self
            .state
            .remember_correction(correction::rejected_answer(&errors, cut));
        self.state.messages.push(Message::user(rejected));
        self.state.force_answer = true;
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
        self.state.last_correction = results
            .iter()
            .find(|r| r.name == terminal)
            .map(|r| r.content.clone());
        self.state.messages.push(Message::tool_results(results));
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        self.malformed(
            AttemptKind::AmbiguousTurn,
            format!(
                "{terminal} with other calls in one turn ({}); none executed",
                names.join(", ")
            ),
        )
    }

    /// Records a malformed turn; ends the run when the corrections are used up.
    pub(super) fn malformed(&mut self, kind: AttemptKind, message: String) -> Next<T> {
        let limit = self.agent.limits.max_parse_retries;
        match self.state.malformed(kind, message, limit) {
            Some(error) => Next::Stop(Err(error)),
            None => Next::Continue,
        }
    }
}
