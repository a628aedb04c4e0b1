//! The driver: the loop of LLM calls and turns, under the run-wide bounds (the
//! deadline, cancellation, and a catch boundary for faults of the runner itself), and
//! what comes before each call (a checkpoint, the budget checks, compaction).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::Either;

use crate::error::AgentError;
use crate::llm::{LlmError, LlmResponse};
use crate::message::ToolCall;
use crate::observe::RunEvent;
use crate::output::AgentOutput;

use super::cancel::any_cancelled;
use super::compact::Context;
use super::durable::Phase;
use super::run::{Next, Run};
use super::tools::guardrails::{Trip, input_checks};

impl<'c, T: AgentOutput> Run<'c, T> {
    /// The loop under the run-wide bounds: the deadline, the caller's cancellation token,
    /// and a catch boundary for faults of the runner itself.
    pub(super) async fn drive_bounded(&mut self) -> Result<T, AgentError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(AgentError::Internal {
                message: "run_agent needs a Tokio runtime with timers (for example \
                          #[tokio::main]); none is running on this thread"
                    .to_owned(),
            });
        }
        // A runtime built without `enable_time` panics on the first timer; find out
        // before any request.
        if std::panic::catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO))).is_err() {
            return Err(AgentError::Internal {
                message: "run_agent needs a Tokio runtime with timers; this one was built \
                          without them (use enable_time or enable_all)"
                    .to_owned(),
            });
        }
        if let Some(error) = self.missing_state() {
            return Err(error);
        }
        if self.live.has_parts
            && let Some(error) = super::parts::check_handoffs(self.agent, &self.state.messages)
        {
            return Err(error);
        }
        let deadline = self.inputs.deadline;
        // What is left of it (all of it, unless the run was resumed after a crash). A
        // deadline too far to represent (`Duration::MAX`) is no deadline.
        let remaining = deadline.map(|limit| limit.saturating_sub(self.elapsed_before()));
        let deadline_at = remaining.and_then(|left| tokio::time::Instant::now().checked_add(left));
        self.inputs.deadline_at = deadline_at;
        if self.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        if deadline.is_some_and(|d| d.is_zero()) || remaining.is_some_and(|d| d.is_zero()) {
            return Err(AgentError::DeadlineExceeded {
                limit: deadline.unwrap_or_default(),
            });
        }
        let tokens = self.inputs.tokens.clone();
        let bounded = async {
            // The three futures are made in here, not outside: a future moved into this
            // block is kept twice in it (as what the block captured and in `select!`'s
            // own tuple), and the loop's is the run's largest (about 4 KiB per run).
            let drive = AssertUnwindSafe(self.drive()).catch_unwind();
            // The timer and the cancellation's wait are boxed when there is one: most
            // runs have neither, and this future is held for the whole run.
            let timer = async {
                match deadline_at {
                    Some(at) => Box::pin(tokio::time::sleep_until(at)).await,
                    None => std::future::pending().await,
                }
            };
            let cancelled = any_cancelled(&tokens);
            tokio::select! {
                biased;
                outcome = drive => match outcome {
                    Ok(outcome) => outcome,
                    Err(payload) => Err(AgentError::from_panic("the runner", payload.as_ref())),
                },
                () = cancelled => Err(AgentError::Cancelled),
                () = timer => Err(AgentError::DeadlineExceeded {
                    limit: deadline.unwrap_or_default(),
                }),
            }
        };
        // Building the timer can panic (a runtime without timers); keep that inside the
        // boundary too.
        let outcome = match AssertUnwindSafe(bounded).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(payload) => Err(AgentError::from_panic("the runner", payload.as_ref())),
        };
        // A call cut off mid-way held the messages.
        self.reclaim_messages();
        // An LLM call the deadline or the cancellation cut off still cost its tokens.
        if self.live.in_flight {
            self.add_failed_usage(None, true);
        }
        // The outcome is fixed: grading can only add scores, within its own timeout, the
        // deadline and the cancellation token.
        if let Ok(value) = &outcome {
            self.grade(value, deadline_at, &tokens).await;
        }
        outcome
    }

    pub(super) async fn drive(&mut self) -> Result<T, AgentError> {
        // The futures of the loop that do not wait on the model are boxed (when there is
        // something to do): this future is held by every run for its whole life, mostly
        // parked on the model, so it is only as large as the model call's (see
        // `bench_run_sizes`).
        // A resumed run that stopped with a turn of tool calls unanswered.
        if let Some(calls) = self.take_pending().await {
            let before = self.state.messages.len();
            let next = Box::pin(self.on_tool_calls(&calls)).await;
            if self.emit.is_streamed() {
                let added = self.state.messages.get(before..).unwrap_or_default();
                self.emit.results(self.state.usage.llm_calls, added);
            }
            if let Next::Stop(outcome) = next {
                return outcome;
            }
        }
        // In a block: a local of the function body would keep its room in this future
        // at every later await, the model call's included.
        let mut concurrent = {
            // A resumed run passed the input guardrails when it started.
            let guardrails = &self.agent.hooks.guardrails.input;
            let (before, concurrent) = if guardrails.is_empty() || self.state.usage.llm_calls > 0 {
                (None, None)
            } else {
                input_checks(guardrails, &self.inputs.input)
            };
            if let Some(check) = before
                && let Some(trip) = Box::pin(check).await
            {
                return Err(self.tripped(trip, "input"));
            }
            concurrent.map(Box::pin)
        };
        loop {
            if self.durable.is_some() {
                Box::pin(self.save_checkpoint()).await?;
            }
            self.check_before_call()?;
            if self.agent.compaction.is_some() {
                Box::pin(self.compact_if_needed()).await;
            }
            if let Some(room) = self.model().input_room {
                self.fit_to_window(room);
            }
            // In a block, for the same reason: the call's outcome keeps no room at the
            // turn's await.
            let response = {
                let called = match concurrent.take() {
                    None => self.call_model().await?,
                    // The first call with the concurrent input guardrails: boxed, as is
                    // the handling of a failed call below, so that neither keeps room.
                    Some(check) => Box::pin(self.call_model_guarded(check)).await?,
                };
                match called {
                    Ok(response) => response,
                    Err(error) => {
                        Box::pin(self.on_provider_failure(error)).await?;
                        continue;
                    }
                }
            };
            self.state.failures.clear();
            self.state.force_answer = false;
            let before = self.state.messages.len();
            let next = Box::pin(self.on_turn(response)).await;
            if self.emit.is_streamed() {
                let added = self.state.messages.get(before..).unwrap_or_default();
                self.emit.results(self.state.usage.llm_calls, added);
            }
            // An output guardrail that tripped on an answer of this turn.
            if let Some(tripped) = self.live.trip.take() {
                return Err(*tripped);
            }
            match next {
                Next::Continue => {}
                Next::Stop(outcome) => return outcome,
            }
        }
    }

    /// The checks made before every LLM call: cancellation and the deadline (checked
    /// here too, so a loop that never waits cannot outrun them), the call cap, then
    /// token and cost budgets, then those of the runs above (a child run's).
    fn check_before_call(&mut self) -> Result<(), AgentError> {
        if self.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        if let (Some(at), Some(limit)) = (self.inputs.deadline_at, self.inputs.deadline)
            && tokio::time::Instant::now() >= at
        {
            return Err(AgentError::DeadlineExceeded { limit });
        }
        self.state.check_caps(&self.agent.limits)?;
        self.tree
            .check(self.state.last_call_tokens, self.state.last_call_cost)
    }

    /// Saves the run's state before an LLM call (see `durable/`).
    ///
    /// # Errors
    /// [`AgentError::Fenced`] when another process took the run over.
    pub(super) async fn save_checkpoint(&mut self) -> Result<(), AgentError> {
        let Some(d) = self.durable.as_deref_mut() else {
            return Ok(());
        };
        let reporter = (&self.emit.observers, &*self.inputs.trace_id);
        d.save(&Phase::BeforeCall, &mut self.state, reporter).await
    }

    /// Compacts the conversation when it passes the config's trigger (see
    /// `compact.rs`); a summary call's tokens count in the run and its tree.
    pub(super) async fn compact_if_needed(&mut self) {
        let Some(plan) = self.agent.compaction.as_ref() else {
            return;
        };
        let cx = Context {
            plan,
            limits: &self.agent.limits,
            request: &self.request,
            model: self.model(),
            seen_ids: &self.live.seen_ids,
        };
        let outcome = self.compactor.compact_if_needed(cx, &mut self.state).await;
        if let Some((tokens, price)) = outcome.spent {
            let spent = self.state.count_summary(tokens, price.as_ref());
            self.tree.settle(spent);
        }
        if let Some((strategy, before, after, fallback_reason)) = outcome.done {
            self.emit.emit(&RunEvent::Compacted {
                trace_id: &self.inputs.trace_id,
                strategy,
                before_tokens: before,
                after_tokens: after,
                fallback_reason: fallback_reason.as_deref(),
            });
        }
    }

    /// Cuts the newest tool results so that the request fits the model's input room
    /// (`room` tokens), when they alone would pass it (see
    /// `Compactor::fit_tool_results`).
    fn fit_to_window(&mut self, room: u64) {
        let cut = self
            .compactor
            .fit_tool_results(&self.request, &mut self.state.messages, room);
        if let Some((before, after)) = cut {
            tracing::info!(
                before_tokens = before,
                after_tokens = after,
                room_tokens = room,
                "the newest tool results were cut to fit the model's context window"
            );
            self.emit.emit(&RunEvent::Compacted {
                trace_id: &self.inputs.trace_id,
                strategy: "cut_tool_results",
                before_tokens: before,
                after_tokens: after,
                fallback_reason: None,
            });
        }
    }

    /// The tool calls a resumed run answers before its next LLM call, if any, with the
    /// tools of the current table that their turn was offered set as the request's
    /// (a tool source's tool gone since is answered as unknown).
    pub(super) async fn take_pending(&mut self) -> Option<Vec<ToolCall>> {
        let (calls, names) = self.durable.as_mut().and_then(|d| d.take_pending())?;
        self.refresh_tools().await;
        let offered: Vec<_> = self
            .live
            .table
            .offered
            .iter()
            .filter(|d| names.contains(&d.name))
            .cloned()
            .collect();
        self.request.tools = Arc::from(offered);
        Some(calls)
    }

    /// The first LLM call together with the concurrent input guardrails: a trip drops
    /// the call (a call that returned still cost its tokens; nothing of its turn runs);
    /// a call that returns first waits for them.
    ///
    /// # Errors
    /// The trip as [`AgentError::GuardrailTripped`], or a fault of the call
    /// (`call_model`'s outer error); the provider's error is the inner one.
    async fn call_model_guarded(
        &mut self,
        check: std::pin::Pin<Box<impl Future<Output = Option<Trip>>>>,
    ) -> Result<Result<LlmResponse, LlmError>, AgentError> {
        let call = Box::pin(self.call_model());
        let (called, trip) = match futures::future::select(check, call).await {
            Either::Left((Some(trip), call)) => {
                drop(call);
                (None, Some(trip))
            }
            Either::Left((None, call)) => (Some(call.await), None),
            Either::Right((called, check)) => (Some(called), check.await),
        };
        // A call dropped mid-way held the messages.
        self.reclaim_messages();
        if let Some(trip) = trip {
            if let Some(Ok(Ok(response))) = &called {
                self.add_usage(response);
            }
            return Err(self.tripped(trip, "input"));
        }
        called.unwrap_or_else(|| {
            Err(AgentError::Internal {
                message: "no LLM call and no guardrail trip".to_owned(),
            })
        })
    }
}
