//! One model call: the tools and tool choice of the turn, the call under its timeout
//! and catch boundary, its `chat` span, the tokens it cost, and the rule for a failed
//! call (retry after backoff, or switch to the next fallback model, or end the run).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tracing::Instrument;

use crate::config::OutputPlan;
use crate::error::{AgentError, ModelFailures};
use crate::llm::{LlmError, LlmErrorCause, LlmResponse, StopReason, TokenUsage, ToolChoice};
use crate::observe::RunEvent;
use crate::output::{AgentOutput, SUBMIT_OUTPUT};

use super::batched;
use super::model::sink::{PartialKind, TurnSink};
use super::model::{spans, strip_provider_parts};
use super::parts;
use super::run::Run;

impl<'c, T: AgentOutput> Run<'c, T> {
    /// One LLM call. The outer `Err` is a panic inside the client: not a provider's
    /// failure but a bug in the client's code, so the run ends with `internal_error`.
    pub(super) async fn call_model(&mut self) -> Result<Result<LlmResponse, LlmError>, AgentError> {
        self.refresh_tools().await;
        if self.live.has_parts {
            self.fit_parts()?;
        }
        let agent = self.agent;
        self.live.native_search = self.uses_native_search();
        let offered = match agent.tool_search {
            Some(_) => self.offered_tools(),
            None => Arc::clone(&self.live.table.offered),
        };
        let wrap_up = agent.wrap_up
            && !matches!(agent.output, OutputPlan::Text)
            && self.state.is_last_call(&agent.limits);
        self.live.wrap_up_turn = wrap_up;
        let escalation = agent.escalation_validator.is_some();
        // The forced answer: a submit_output call in tool mode; in native and prompted
        // modes, text (no tool may be called), which the provider constrains to the
        // schema in native mode. At the limit, a model with escalation on may hand over
        // instead (escalate_to_human with its summary).
        let (tools, choice) = match (&agent.output, wrap_up, self.state.force_answer) {
            (OutputPlan::Tool, true, _) => match &agent.wrap_up_offered {
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
        // The provider's search, when the offer has tools it can find (a wrap-up
        // turn's answer tools alone have none).
        self.request.native_tool_search = if self.live.native_search {
            self.native_request(&tools)
        } else {
            None
        };
        self.request.tools = tools;
        self.request.tool_choice = choice;
        self.native_schema_for_turn();
        self.state.count_call(self.usage_key());
        let llm_call = self.state.usage.llm_calls;
        self.emit.emit(&RunEvent::TurnStarted {
            trace_id: &self.inputs.trace_id,
            llm_call,
        });
        let model = self.model();
        let client = &model.client;
        // The request takes the messages for the call; they come back after it (or, for
        // a call cut off, when the loop ends: `reclaim_messages`).
        self.request.messages = std::mem::take(&mut self.state.messages);
        let span = spans::chat(
            client.provider(),
            &self.request,
            llm_call,
            wrap_up,
            agent.capture_content,
        );
        let mut sink = self.emit.stream.as_ref().map(|events| {
            let kind = match &agent.output {
                OutputPlan::Tool => PartialKind::Tool,
                OutputPlan::Json(_) => PartialKind::Text,
                OutputPlan::Text => PartialKind::None,
            };
            TurnSink::new(events.clone(), llm_call, kind, Arc::clone(&self.live.meter))
        });
        self.live.meter.reset();
        self.live.in_flight = true;
        let request = &self.request;
        let limit = agent.limits.llm_timeout;
        // In a batched `run_batch`, a call to the batched model (not streamed) waits at
        // the gate for its round's job, bounded by the batch's deadline, not llm_timeout.
        let seat = self.inputs.batch.as_deref().filter(|seat| {
            sink.is_none() && model.batch.as_ref().is_some_and(|wire| seat.serves(wire))
        });
        // A batched call records its job in the checkpoint once the job is accepted.
        let stored = self.state.batch_call.as_deref();
        let durable = self.durable.as_deref_mut();
        let reporter = (&self.emit.observers, &*self.inputs.trace_id);
        // The timer sits inside the catch boundary: outside a runtime its creation panics.
        let guarded = AssertUnwindSafe(async move {
            match (sink.as_mut(), seat) {
                (Some(sink), _) => {
                    let outcome =
                        tokio::time::timeout(limit, client.complete_streaming(request, sink)).await;
                    // The last batch of a client that does not flush, and the final
                    // partial value if the sink held it back.
                    if matches!(outcome, Ok(Ok(_))) {
                        sink.finish();
                    }
                    outcome.map_err(|_| None)
                }
                (None, Some(seat)) => {
                    let call =
                        batched::call(seat, request, client.as_ref(), stored, durable, reporter);
                    Box::pin(call).await.map_err(Some)
                }
                (None, None) => tokio::time::timeout(limit, client.complete(request))
                    .await
                    .map_err(|_| None),
            }
        })
        .catch_unwind();
        let guarded = guarded.instrument(span.clone()).await;
        self.state.messages = std::mem::take(&mut self.request.messages);
        // The call returned (or failed): a resume no longer waits on its job.
        self.state.batch_call = None;
        let outcome = match guarded {
            Ok(Ok(outcome)) => outcome,
            // The batch job passed its deadline and was cancelled.
            Ok(Err(Some(limit))) => {
                spans::record_error(&span, "deadline_exceeded");
                self.add_failed_usage(None, true);
                return Err(AgentError::DeadlineExceeded { limit });
            }
            Ok(Err(None)) => {
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
                self.live.in_flight = false;
                let sent = self.state.messages.len();
                self.compactor.reported(response.usage.input_tokens, sent);
            }
            Err(error) => {
                if self.live.in_flight {
                    self.add_failed_usage(Some(error), false);
                }
            }
        }
        spans::record_outcome(&span, &outcome, agent.capture_content);
        Ok(outcome)
    }

    /// Makes the conversation's parts fit the model the call goes to (see `parts.rs`): a
    /// part the user gave that this model cannot take sends the turn to the next
    /// fallback model that can (the switch says why), else ends the run before the
    /// request; the parts tools returned are moved or noted.
    ///
    /// # Errors
    /// [`AgentError::UnsupportedContent`] naming the part, its type and the model; after
    /// a switch, [`AgentError::ModelsFailed`] with every model's reason.
    fn fit_parts(&mut self) -> Result<(), AgentError> {
        loop {
            let model = self.model();
            let caps = model.client.content_capabilities(&model.wire_model);
            self.request.token_rule = caps.tokens;
            let Some(refused) = parts::check_given(&caps, &self.state.messages) else {
                parts::fit_results(&caps, &mut self.state.messages);
                return Ok(());
            };
            let error = AgentError::UnsupportedContent {
                model: model.name.clone(),
                index: refused.index,
                kind: refused.part.kind(),
                media_type: refused.media_type(),
                reason: refused.reason,
            };
            let failure = LlmError::permanent(error.to_string());
            if self.state.route + 1 < self.agent.models.len() {
                self.switch_model(vec![failure]);
                continue;
            }
            return Err(self.provider_failed(error, vec![failure]));
        }
    }

    /// Native mode on a server whose output grammar covers the whole reply
    /// (`OutputCapabilities::native_blocks_tools`): a turn that offers the model a
    /// tool to look things up goes without the output schema, every other turn (no
    /// tool, or the answer forced) with it.
    fn native_schema_for_turn(&mut self) {
        let OutputPlan::Json(spec) = &self.agent.output else {
            return;
        };
        if spec.mode != crate::output::AnswerMode::Native {
            return;
        }
        let caps = self.model().client.output_capabilities(&self.request.model);
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
        let has_next = self.state.route + 1 < self.agent.models.len();
        if !error.is_transient() {
            let mut failures = std::mem::take(&mut self.state.failures);
            if error.falls_back() && has_next {
                failures.push(error);
                self.switch_model(failures);
                return Ok(());
            }
            failures.push(error.clone());
            return Err(self.provider_failed(AgentError::LlmPermanent { error }, failures));
        }
        let limits = &self.agent.limits;
        let retry = u32::try_from(self.state.failures.len()).unwrap_or(u32::MAX);
        let delay = limits.backoff.delay(retry, error.retry_after);
        self.state.failures.push(error);
        if self.state.failures.len() >= limits.max_llm_retries as usize {
            let failures = std::mem::take(&mut self.state.failures);
            if has_next {
                self.switch_model(failures);
                return Ok(());
            }
            let alone = AgentError::MaxLlmRetries {
                failures: failures.clone(),
            };
            return Err(self.provider_failed(alone, failures));
        }
        if let Some(last) = self.state.failures.last() {
            self.emit.emit(&RunEvent::RetryScheduled {
                trace_id: &self.inputs.trace_id,
                llm_call: self.state.usage.llm_calls,
                delay,
                error: last,
            });
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }

    /// The error a provider failure ends the run with: `alone` as it is when the run
    /// never switched models, else [`AgentError::ModelsFailed`] with every model tried
    /// (the current one with `failures`).
    fn provider_failed(&mut self, alone: AgentError, failures: Vec<LlmError>) -> AgentError {
        if self.state.tried.is_empty() {
            return alone;
        }
        let model = self.model();
        let current = ModelFailures::new(&model.name, model.client.provider(), failures);
        let mut models = std::mem::take(&mut self.state.tried);
        models.push(current);
        AgentError::ModelsFailed { models }
    }

    /// Leaves the current model after `failures` (its failed calls in a row, the last
    /// the one that made it leave) for the next: the request takes that model's entry
    /// (name, system prompt, reasoning), the transcript loses what only the previous
    /// provider can read, and observers and the trace see the switch. The next LLM call
    /// goes out at once (a new provider is not under the old one's backoff).
    fn switch_model(&mut self, failures: Vec<LlmError>) {
        let from = self.model();
        self.state.tried.push(ModelFailures::new(
            &from.name,
            from.client.provider(),
            failures,
        ));
        self.state.route += 1;
        let next = self.model();
        self.apply_agent();
        strip_provider_parts(&mut self.state.messages);
        let llm_call = self.state.usage.llm_calls;
        let error = self
            .state
            .tried
            .last()
            .and_then(|m| m.failures.last())
            .cloned()
            .unwrap_or_else(|| LlmError::transient("no failure recorded"));
        tracing::warn!(
            llm_call,
            from = %from.name,
            to = %next.name,
            gen_ai.provider.name = %next.client.provider(),
            error = %error,
            "the model failed; the turn goes to the next fallback model"
        );
        self.emit.emit(&RunEvent::ModelSwitched {
            trace_id: &self.inputs.trace_id,
            llm_call,
            from: &from.name,
            to: &next.name,
            error: &error,
        });
    }

    /// Adds an LLM call's tokens and cost. A response without usage (no input and no
    /// output tokens: some compatible servers send none) is counted from an estimate
    /// of the request just sent and of the reply (bytes / 4; see
    /// [`LlmRequest::estimated_input_tokens`](crate::llm::LlmRequest::estimated_input_tokens)),
    /// so the token and cost caps still bind, and `Usage::estimated_llm_calls` says so.
    ///
    /// Called after the turn's calls were sanitized: the estimate serializes their
    /// arguments, which must not nest deeper than the sanitizer allows.
    pub(super) fn add_usage(&mut self, response: &LlmResponse) {
        let reported = response.usage;
        let usage = if reported.input_tokens == 0 && reported.output_tokens == 0 {
            self.state.count_estimated(self.usage_key());
            TokenUsage::new(
                self.request
                    .estimated_input_tokens_with(&self.state.messages),
                response.estimated_output_tokens(),
            )
        } else {
            reported
        };
        self.count_tokens(usage);
    }

    /// Adds the tokens of an LLM call that gave no turn (case C40). A call costs tokens
    /// when the provider accepted it: its failure came with a 2xx status (a stream cut
    /// mid-way or ending in an error event, a 200 whose body is an error), some of the
    /// turn arrived, or it was `abandoned` while under way (`llm_timeout`, the deadline,
    /// cancellation: the provider may still be generating). Its tokens are the ones the
    /// provider reported with the failure, else an estimate from the request and the
    /// bytes received (the rule of [`add_usage`](Self::add_usage)), counted in
    /// `Usage::estimated_llm_calls`. A failure with an error status (429, 500, ...) and
    /// nothing received costs nothing.
    pub(super) fn add_failed_usage(&mut self, error: Option<&LlmError>, abandoned: bool) {
        self.live.in_flight = false;
        let meter = &self.live.meter;
        let received = meter.received();
        let streamed = meter.reported();
        meter.reset();
        let some = |u: &TokenUsage| u.input_tokens > 0 || u.output_tokens > 0;
        if let Some(usage) = error.and_then(|e| e.usage).filter(some) {
            self.count_tokens(usage);
            return;
        }
        let accepted = error
            .and_then(|e| e.status)
            .is_some_and(|s| (200..300).contains(&s));
        if !(accepted || abandoned || received > 0 || some(&streamed)) {
            return;
        }
        // What the provider reported mid-stream (Anthropic's input tokens at the
        // start), the rest estimated; the output at least what arrived.
        let mut usage = streamed;
        let mut estimated = false;
        if usage.input_tokens == 0 {
            usage.input_tokens = self
                .request
                .estimated_input_tokens_with(&self.state.messages);
            estimated = true;
        }
        let arrived = received.div_ceil(4);
        if usage.output_tokens < arrived {
            usage.output_tokens = arrived;
            estimated = true;
        }
        if estimated {
            self.state.count_estimated(self.usage_key());
        }
        self.count_tokens(usage);
    }

    /// The tokens and cost of one LLM call, at the price of the model that made it, in
    /// the run's state and its tree's pools.
    fn count_tokens(&mut self, usage: TokenUsage) {
        let model = self.model();
        let key = self.usage_key();
        let spent = self.state.count_tokens(usage, model.price.as_ref(), key);
        self.tree.settle(spent);
    }
}
