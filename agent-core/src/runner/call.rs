//! One model call: the tools and tool choice of the turn, the call under its timeout
//! and catch boundary, its `chat` span, and the retry rule for a failed call.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tracing::Instrument;

use crate::config::OutputPlan;
use crate::error::AgentError;
use crate::llm::{LlmError, LlmErrorCause, LlmResponse, StopReason, ToolChoice};
use crate::observe::RunEvent;
use crate::output::{AgentOutput, SUBMIT_OUTPUT};
use crate::stream::{PartialKind, StreamEvent, TurnSink};

use super::{Run, spans};

impl<'c, T: AgentOutput> Run<'c, T> {
    /// One LLM call. The outer `Err` is a panic inside the client: not a provider's
    /// failure but a bug in the client's code, so the run ends with `internal_error`.
    pub(super) async fn call_model(&mut self) -> Result<Result<LlmResponse, LlmError>, AgentError> {
        self.refresh_tools().await;
        let cfg = self.cfg;
        let offered = Arc::clone(&self.table.offered);
        let wrap_up = cfg.settings.budgets.wrap_up
            && !matches!(cfg.output, OutputPlan::Text)
            && self.is_last_call();
        self.wrap_up_turn = wrap_up;
        let escalation = cfg.escalation_validator.is_some();
        // The forced answer: a submit_output call in tool mode; in native and prompted
        // modes, text (no tool may be called), which the provider constrains to the
        // schema in native mode. At the limit, a model with escalation on may hand over
        // instead (escalate_to_human with its summary).
        let (tools, choice) = match (&cfg.output, wrap_up, self.force_answer) {
            (OutputPlan::Tool, true, _) => match &cfg.wrap_up_offered {
                Some(tools) if escalation => (Arc::clone(tools), ToolChoice::Required),
                Some(tools) => (
                    Arc::clone(tools),
                    ToolChoice::Tool(SUBMIT_OUTPUT.to_owned()),
                ),
                None => (offered, ToolChoice::Required),
            },
            (OutputPlan::Json(_), true, _) if escalation => (offered, ToolChoice::Auto),
            (OutputPlan::Json(_), true, _) => (offered, ToolChoice::None),
            (OutputPlan::Tool, false, true) => (self.offered_tools(), ToolChoice::Required),
            (OutputPlan::Json(_), false, true) => (self.offered_tools(), ToolChoice::None),
            _ => (self.offered_tools(), ToolChoice::Auto),
        };
        self.request.tools = tools;
        self.request.tool_choice = choice;
        self.native_schema_for_turn();
        self.usage.llm_calls = self.usage.llm_calls.saturating_add(1);
        if let Some(model) = self.model_usage() {
            model.llm_calls = model.llm_calls.saturating_add(1);
        }
        let llm_call = self.usage.llm_calls;
        self.notify(&RunEvent::TurnStarted {
            trace_id: &self.trace_id,
            llm_call,
        });
        let client = Arc::clone(self.client());
        let span = spans::chat(
            client.provider(),
            &self.request,
            llm_call,
            wrap_up,
            cfg.settings.budgets.capture_content,
        );
        let mut sink = self.events.as_ref().map(|events| {
            events.send(StreamEvent::TurnStarted { llm_call });
            let kind = match &cfg.output {
                OutputPlan::Tool => PartialKind::Tool,
                OutputPlan::Json(_) => PartialKind::Text,
                OutputPlan::Text => PartialKind::None,
            };
            TurnSink::new(events.clone(), llm_call, kind, Arc::clone(&self.meter))
        });
        self.meter.reset();
        self.in_flight = true;
        let request = &self.request;
        let client = &client;
        let limit = cfg.settings.budgets.llm_timeout;
        // The timer sits inside the catch boundary: outside a runtime its creation panics.
        let guarded = AssertUnwindSafe(async move {
            match sink.as_mut() {
                Some(sink) => {
                    let outcome =
                        tokio::time::timeout(limit, client.complete_streaming(request, sink)).await;
                    // The last batch of a client that does not flush, and the final
                    // partial value if the sink held it back.
                    if matches!(outcome, Ok(Ok(_))) {
                        sink.finish();
                    }
                    outcome
                }
                None => tokio::time::timeout(limit, client.complete(request)).await,
            }
        })
        .catch_unwind();
        let outcome = match guarded.instrument(span.clone()).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_elapsed)) => {
                let error = LlmError::transient(format!(
                    "the model call timed out after {} ms (llm_timeout)",
                    limit.as_millis()
                ));
                self.add_failed_usage(Some(&error), true);
                Err(error)
            }
            Err(payload) => {
                spans::record_error(&span, "internal_error");
                self.add_failed_usage(None, true);
                return Err(AgentError::from_panic("the model client", payload.as_ref()));
            }
        };
        match &outcome {
            // A turn's tokens are added once it is sanitized (`on_turn`).
            Ok(response) => {
                self.in_flight = false;
                let sent = self.request.messages.len();
                self.compactor.reported(response.usage.input_tokens, sent);
            }
            Err(error) => {
                if self.in_flight {
                    self.add_failed_usage(Some(error), false);
                }
            }
        }
        spans::record_outcome(&span, &outcome, cfg.settings.budgets.capture_content);
        Ok(outcome)
    }

    /// Native mode on a server whose output grammar covers the whole reply
    /// (`OutputCapabilities::native_blocks_tools`): a turn that offers the model a
    /// tool to look things up goes without the output schema, every other turn (no
    /// tool, or the answer forced) with it.
    fn native_schema_for_turn(&mut self) {
        let OutputPlan::Json(spec) = &self.cfg.output else {
            return;
        };
        if spec.mode != crate::output::OutputMode::Native {
            return;
        }
        let caps = self.client().output_capabilities(&self.request.model);
        let lookup = caps.native_blocks_tools
            && matches!(self.request.tool_choice, ToolChoice::Auto)
            && self.request.tools.iter().any(|t| {
                t.name != crate::output::ESCALATE_TO_HUMAN && !t.name.starts_with("transfer_to_")
            });
        self.request.output = (!lookup).then(|| Arc::clone(spec));
    }

    /// A failed LLM call: a content filter ends the run `refused`; a permanent
    /// failure another provider can serve goes to the next fallback model at once,
    /// any other ends the run; a transient one is retried after backoff (the request
    /// unchanged) until `max_llm_retries` in a row, then the turn goes to the next
    /// fallback model, or the run ends.
    pub(super) async fn on_provider_failure(&mut self, error: LlmError) -> Result<(), AgentError> {
        if error.cause == Some(LlmErrorCause::ContentFilter) {
            return Err(AgentError::refused(
                StopReason::ContentFilter,
                error.message,
                error.refusal.map(|r| *r),
            ));
        }
        if !error.is_transient() {
            let mut failures = std::mem::take(&mut self.failures);
            if error.falls_back() && self.has_next_model() {
                failures.push(error);
                self.switch_model(failures);
                return Ok(());
            }
            failures.push(error.clone());
            return Err(self.provider_failed(AgentError::LlmPermanent { error }, failures));
        }
        let retry = u32::try_from(self.failures.len()).unwrap_or(u32::MAX);
        let delay = self
            .cfg
            .settings
            .budgets
            .backoff
            .delay(retry, error.retry_after);
        self.failures.push(error);
        if self.failures.len() >= self.cfg.settings.budgets.max_llm_retries as usize {
            let failures = std::mem::take(&mut self.failures);
            if self.has_next_model() {
                self.switch_model(failures);
                return Ok(());
            }
            let alone = AgentError::MaxLlmRetries {
                failures: failures.clone(),
            };
            return Err(self.provider_failed(alone, failures));
        }
        if let Some(last) = self.failures.last() {
            self.notify(&RunEvent::RetryScheduled {
                trace_id: &self.trace_id,
                llm_call: self.usage.llm_calls,
                delay,
                error: last,
            });
            if let Some(events) = &self.events {
                events.send(StreamEvent::Retrying {
                    llm_call: self.usage.llm_calls,
                    delay,
                    error: last.to_string(),
                });
            }
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }
}
