//! Fallback models: the model a turn goes to (the primary, then each fallback in
//! order), the switch after a failure another provider can serve, the transcript made
//! valid for the next provider, and the usage counted per model.

use std::sync::Arc;

use serde_json::Value;

use crate::error::{AgentError, ModelFailures};
use crate::llm::{LlmClient, LlmError};
use crate::message::Message;
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::pricing::ModelPrice;
use crate::stream::StreamEvent;
use crate::usage::ModelUsage;

use super::Run;

impl<T: AgentOutput> Run<'_, T> {
    /// The client of the model the run is on.
    pub(super) fn client(&self) -> &Arc<dyn LlmClient> {
        match self.route.checked_sub(1) {
            Some(i) => self
                .cfg
                .fallbacks
                .get(i)
                .map_or(&self.cfg.client, |f| &f.client),
            None => &self.cfg.client,
        }
    }

    /// The name (as configured) of the model the run is on.
    pub(super) fn model_name(&self) -> &str {
        match self.route.checked_sub(1) {
            Some(i) => self
                .cfg
                .fallbacks
                .get(i)
                .map_or(&self.cfg.model_name, |f| &f.model),
            None => &self.cfg.model_name,
        }
    }

    /// The price of the model the run is on.
    pub(super) fn price(&self) -> Option<&ModelPrice> {
        match self.route.checked_sub(1) {
            Some(i) => self.cfg.fallbacks.get(i).and_then(|f| f.price.as_ref()),
            None => self.cfg.price.as_ref(),
        }
    }

    /// The usage entry of the model the run is on, created at its first call; `None`
    /// for a config without fallback models (the totals are the one model's).
    pub(super) fn model_usage(&mut self) -> Option<&mut ModelUsage> {
        if self.cfg.fallbacks.is_empty() {
            return None;
        }
        let name = self.model_name().to_owned();
        let by_model = &mut self.usage.by_model;
        let at = match by_model.iter().position(|m| m.model == name) {
            Some(at) => at,
            None => {
                by_model.push(ModelUsage::new(&name));
                by_model.len() - 1
            }
        };
        by_model.get_mut(at)
    }

    /// The error a provider failure ends the run with: `alone` as it is when the run
    /// never switched models, else [`AgentError::ModelsFailed`] with every model tried
    /// (the current one with `failures`).
    pub(super) fn provider_failed(
        &mut self,
        alone: AgentError,
        failures: Vec<LlmError>,
    ) -> AgentError {
        if self.tried.is_empty() {
            return alone;
        }
        let current = ModelFailures::new(self.model_name(), self.client().provider(), failures);
        let mut models = std::mem::take(&mut self.tried);
        models.push(current);
        AgentError::ModelsFailed { models }
    }

    /// Whether a fallback model is left after the current one.
    pub(super) fn has_next_model(&self) -> bool {
        self.route < self.cfg.fallbacks.len()
    }

    /// Leaves the current model after `failures` (its failed calls in a row, the last
    /// the one that made it leave) for the next: the request takes that model's name
    /// and system prompt, the transcript loses what only the previous provider can
    /// read, and observers and the trace see the switch. The next LLM call goes out at
    /// once (a new provider is not under the old one's backoff).
    pub(super) fn switch_model(&mut self, failures: Vec<LlmError>) {
        let from = self.model_name().to_owned();
        let provider = self.client().provider().to_owned();
        self.tried
            .push(ModelFailures::new(&from, &provider, failures));
        self.route += 1;
        let Some(next) = self
            .route
            .checked_sub(1)
            .and_then(|i| self.cfg.fallbacks.get(i))
        else {
            return;
        };
        self.request.model.clone_from(&next.wire_model);
        self.request.system.clone_from(&next.system_prompt);
        strip_provider_parts(&mut self.request.messages);
        let llm_call = self.usage.llm_calls;
        let to = next.model.as_str();
        let error = self
            .tried
            .last()
            .and_then(|m| m.failures.last())
            .cloned()
            .unwrap_or_else(|| LlmError::transient("no failure recorded"));
        tracing::warn!(
            llm_call,
            from = %from,
            to = %to,
            gen_ai.provider.name = %next.client.provider(),
            error = %error,
            "the model failed; the turn goes to the next fallback model"
        );
        self.notify(&RunEvent::ModelSwitched {
            trace_id: &self.trace_id,
            llm_call,
            from: &from,
            to,
            error: &error,
        });
        if let Some(events) = &self.events {
            events.send(StreamEvent::ModelSwitched {
                llm_call,
                from: from.clone(),
                to: to.to_owned(),
                error: error.to_string(),
            });
        }
    }
}

/// Drops from a transcript what only the provider (and model) that wrote it can read,
/// so the next provider gets a valid conversation: every tool call's thought signature
/// (Gemini's signatures are tied to the model that made them; the Gemini adapter sends
/// its documented placeholder for an unsigned call) and provider data (the OpenAI
/// Responses API's encrypted reasoning items and response id), and a paused turn's provider
/// content (Anthropic's content blocks): a paused turn with text becomes an assistant
/// turn of that text, one without is removed. Calls and their results stay, so every
/// call id is still answered.
pub(super) fn strip_provider_parts(messages: &mut Vec<Message>) {
    messages.retain_mut(|message| match message {
        Message::Assistant { tool_calls, .. } => {
            for call in tool_calls {
                call.thought_signature = None;
                call.provider_data = None;
            }
            true
        }
        Message::Paused { text, content } => {
            *content = Value::Null;
            if text.trim().is_empty() {
                false
            } else {
                *message = Message::assistant(std::mem::take(text), Vec::new());
                true
            }
        }
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::message::{ToolCall, ToolResult};
    use serde_json::json;

    #[test]
    fn a_switch_drops_signatures_and_paused_content_and_keeps_every_call() {
        let mut messages = vec![
            Message::user("go"),
            Message::Paused {
                text: String::new(),
                content: json!([{"type": "server_tool_use"}]),
            },
            Message::Paused {
                text: "searching".to_owned(),
                content: json!([{"type": "text", "text": "searching"}]),
            },
            Message::assistant(
                "",
                vec![
                    ToolCall::new("c1", "lookup", json!({"id": 1}))
                        .with_thought_signature("SIG")
                        .with_provider_data(json!({"reasoning": [{"type": "reasoning"}]})),
                ],
            ),
            Message::tool_results(vec![ToolResult::ok("c1", "lookup", "found")]),
        ];
        strip_provider_parts(&mut messages);
        assert_eq!(
            messages,
            vec![
                Message::user("go"),
                Message::assistant("searching", Vec::new()),
                Message::assistant("", vec![ToolCall::new("c1", "lookup", json!({"id": 1}))]),
                Message::tool_results(vec![ToolResult::ok("c1", "lookup", "found")]),
            ]
        );
    }
}
