//! The driver: the loop of LLM calls and turns, under the run-wide bounds (the
//! deadline, cancellation, and a catch boundary for faults of the runner itself).

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use futures::future::Either;

use crate::error::AgentError;
use crate::llm::{LlmError, LlmResponse};
use crate::output::AgentOutput;

use super::checkpoint::Phase;
use super::guardrails::Trip;
use super::{Next, Run, any_cancelled};

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
        let deadline = self.deadline;
        // What is left of it (all of it, unless the run was resumed after a crash). A
        // deadline too far to represent (`Duration::MAX`) is no deadline.
        let remaining = self.remaining_deadline();
        let deadline_at = remaining.and_then(|left| tokio::time::Instant::now().checked_add(left));
        self.deadline_at = deadline_at;
        if self.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        if deadline.is_some_and(|d| d.is_zero()) || remaining.is_some_and(|d| d.is_zero()) {
            return Err(AgentError::DeadlineExceeded {
                limit: deadline.unwrap_or_default(),
            });
        }
        let tokens = self.tokens.clone();
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
        // An LLM call the deadline or the cancellation cut off still cost its tokens.
        if self.in_flight {
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
        if let Some(calls) = self.take_pending().await
            && let Next::Stop(outcome) = Box::pin(self.on_tool_calls(&calls)).await
        {
            return outcome;
        }
        // In a block: a local of the function body would keep its room in this future
        // at every later await, the model call's included.
        let mut concurrent = {
            let (before, concurrent) = self.input_guardrails();
            if let Some(check) = before
                && let Some(trip) = Box::pin(check).await
            {
                return Err(self.tripped(trip, "input"));
            }
            concurrent.map(Box::pin)
        };
        loop {
            if self.durable.is_some() {
                Box::pin(self.save_checkpoint(Phase::BeforeCall)).await?;
            }
            self.check_before_call()?;
            self.compact_if_needed().await;
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
            self.failures.clear();
            self.force_answer = false;
            let before = self.request.messages.len();
            let next = Box::pin(self.on_turn(response)).await;
            if self.events.is_some() {
                self.send_results(before);
            }
            // An output guardrail that tripped on an answer of this turn.
            if let Some(tripped) = self.trip.take() {
                return Err(*tripped);
            }
            match next {
                Next::Continue => {}
                Next::Stop(outcome) => return outcome,
            }
        }
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
