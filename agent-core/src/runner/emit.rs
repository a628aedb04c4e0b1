//! Where a run's happenings go: one [`Emitter`] per run feeds every observer (the
//! config's, the run's, and the trace store's recorder, which is an observer too) and,
//! for a streamed run, the stream ([`StreamEvent`]). Each happening is emitted once, at
//! one place in the loop; the emitter decides who hears of it.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;

use crate::error::panic_message;
use crate::message::{Message, ToolCall};
use crate::observe::{Observer, RunEvent};
use crate::result::AgentResult;

/// One event of a streamed run (see [`run_agent_stream`](crate::run_agent_stream)). `llm_call` is the round
/// trip it belongs to (1-based, as in [`RunEvent`](crate::observe::RunEvent)).
#[derive(Debug)]
#[non_exhaustive]
pub enum StreamEvent<T> {
    /// An LLM call is about to be sent.
    TurnStarted {
        /// Which LLM call (1-based).
        llm_call: u32,
    },
    /// More of the model's text.
    TextDelta {
        /// Which LLM call.
        llm_call: u32,
        /// The new text.
        text: String,
    },
    /// More of the model's reasoning (Anthropic's thinking, OpenAI-compatible
    /// servers' `reasoning_content`, Responses summaries, Bedrock's reasoning
    /// content), where the provider streams it. Not the answer: the turn's whole
    /// reasoning is kept in the transcript
    /// ([`Message::reasoning`](crate::llm::Message::reasoning)).
    ReasoningDelta {
        /// Which LLM call.
        llm_call: u32,
        /// The new reasoning text.
        text: String,
    },
    /// The model began a tool call.
    ToolCallStarted {
        /// Which LLM call.
        llm_call: u32,
        /// The call's position in the turn (0-based).
        index: usize,
        /// The call id as the provider sent it (may be empty; the id the run uses is
        /// in [`ToolCallFinished`](Self::ToolCallFinished)).
        id: String,
        /// The tool name.
        name: String,
    },
    /// A tool call is complete (the turn has ended): its id and arguments as the run
    /// will use them (`{}` when they could not be parsed; the run answers such a call
    /// with an error).
    ToolCallFinished {
        /// Which LLM call.
        llm_call: u32,
        /// The call id (unique in the run).
        id: String,
        /// The tool name.
        name: String,
        /// The parsed arguments.
        arguments: Value,
    },
    /// The answer to a tool call: the tool's result, or the error the run sent back
    /// (an unknown tool, arguments that do not validate, a call that was not run).
    ToolResult {
        /// Which LLM call.
        llm_call: u32,
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
        /// The result text the model sees.
        content: String,
        /// Whether it is an error.
        is_error: bool,
    },
    /// The structured answer so far: the `submit_output` arguments in tool mode, or
    /// the JSON of the text in native and prompted modes, parsed leniently (see
    /// [`parse_partial`](crate::stream::parse_partial)). Not validated: the validated value is in
    /// [`Finished`](Self::Finished). Sent once per batch of pieces that arrived
    /// together (one network read, see [`StreamSink::flush`](crate::llm::StreamSink::flush)) when the value changed,
    /// not once per fragment: fragments read at once would only repeat each other.
    ///
    /// The value is parsed incrementally (the work per piece does not grow with the
    /// answer), and each event carries a copy of it, so on long answers it is sent
    /// less often: at every batch that changed it while the answer is under 4 KiB;
    /// above that, once the answer has grown by a sixteenth of its length since the
    /// last value sent (copying then costs a constant amount per byte received); and
    /// always at the end of the turn if it changed since the last one sent. A value is
    /// never sent twice in a row. Answers the incremental parser does not follow (text
    /// that is not JSON, or, in native and prompted modes, a reply that may hold
    /// reasoning such as a `<think>` block or a fence) are parsed whole at each batch
    /// and sent whenever the value changed, as before.
    PartialOutput {
        /// Which LLM call.
        llm_call: u32,
        /// The value so far (a JSON object).
        value: Value,
    },
    /// The LLM call failed (for example the stream was cut mid-way); what it
    /// streamed is void, and the same request goes again after `delay`.
    Retrying {
        /// The failed LLM call.
        llm_call: u32,
        /// The wait before the next attempt.
        delay: Duration,
        /// The failure, as text.
        error: String,
    },
    /// The model failed in a way another provider can serve, and the turn goes to the
    /// next fallback model (the builder's `fallback_models`) at once: what the failed
    /// LLM call streamed is void, as after [`Retrying`](Self::Retrying).
    ModelSwitched {
        /// The failed LLM call.
        llm_call: u32,
        /// The model left (as configured, with its routing prefix).
        from: String,
        /// The model the turn goes to.
        to: String,
        /// The failure that made the run leave `from`, as text.
        error: String,
    },
    /// The run ended: always the last event. Boxed: the result is large, and every
    /// other event is small.
    Finished(Box<AgentResult<T>>),
}

/// The events sent and not yet taken: a queue shared by the run (which adds to it
/// only while [`RunStream`] polls it) and the stream (which takes from it), so never
/// contended.
pub(crate) type Queue<T> = Arc<Mutex<VecDeque<StreamEvent<T>>>>;

/// The sending side the runner holds for a streamed run.
pub(crate) struct EventSender<T>(pub(crate) Queue<T>);

impl<T> Clone for EventSender<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> EventSender<T> {
    /// Queues `event` for the stream.
    pub(crate) fn send(&self, event: StreamEvent<T>) {
        lock(&self.0).push_back(event);
    }
}

/// The queue, also after a panic elsewhere while it was held (a push or a pop cannot
/// leave it half-changed).
pub(crate) fn lock<T>(queue: &Queue<T>) -> MutexGuard<'_, VecDeque<StreamEvent<T>>> {
    queue.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many events the queue holds before it grows. The stream takes events out as the
/// run adds them, so a few are queued at a time (those of one turn's processing); a
/// buffer this small (under 1 KiB) also comes from the allocator's fast path.
pub(crate) const QUEUE_CAPACITY: usize = 6;

/// Calls the observer, if any; a panic in it is caught and traced.
pub(crate) fn notify(observer: Option<&dyn Observer>, event: &RunEvent<'_>) {
    if let Some(observer) = observer
        && let Err(payload) =
            std::panic::catch_unwind(AssertUnwindSafe(|| observer.on_event(event)))
    {
        tracing::warn!(panic = %panic_message(payload.as_ref()), "observer panicked; event dropped");
    }
}

/// The observers of one run: the config's, then the run's own.
#[derive(Clone, Default)]
pub(crate) struct Observers {
    pub(crate) config: Option<Arc<dyn Observer>>,
    pub(crate) run: Option<Arc<dyn Observer>>,
}

impl Observers {
    /// Calls each observer in turn, each behind its own catch boundary.
    pub(crate) fn notify(&self, event: &RunEvent<'_>) {
        notify(self.config.as_deref(), event);
        notify(self.run.as_deref(), event);
    }
}

/// Where one run's happenings go: its observers and, for a streamed run, its stream.
pub(crate) struct Emitter<T> {
    pub(crate) observers: Observers,
    /// The stream's queue; `None` for a run that is not streamed.
    pub(crate) stream: Option<EventSender<T>>,
}

impl<T> Emitter<T> {
    /// Emits one happening: every observer hears of it, and the stream gets its
    /// event where it has one (a turn started, a retry, a model switch).
    pub(crate) fn emit(&self, event: &RunEvent<'_>) {
        self.observers.notify(event);
        let Some(stream) = &self.stream else { return };
        match event {
            RunEvent::TurnStarted { llm_call, .. } => {
                stream.send(StreamEvent::TurnStarted {
                    llm_call: *llm_call,
                });
            }
            RunEvent::RetryScheduled {
                llm_call,
                delay,
                error,
                ..
            } => stream.send(StreamEvent::Retrying {
                llm_call: *llm_call,
                delay: *delay,
                error: error.to_string(),
            }),
            RunEvent::ModelSwitched {
                llm_call,
                from,
                to,
                error,
                ..
            } => stream.send(StreamEvent::ModelSwitched {
                llm_call: *llm_call,
                from: (*from).to_owned(),
                to: (*to).to_owned(),
                error: error.to_string(),
            }),
            _ => {}
        }
    }

    /// The calls of a turn, complete (streamed runs only: observers hear of each call
    /// when it has run).
    pub(crate) fn calls_finished(&self, llm_call: u32, calls: &[ToolCall]) {
        let Some(stream) = &self.stream else { return };
        for call in calls {
            stream.send(StreamEvent::ToolCallFinished {
                llm_call,
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
    }

    /// The tool results a turn added to the transcript (`added`), in call order
    /// (streamed runs only).
    pub(crate) fn results(&self, llm_call: u32, added: &[Message]) {
        let Some(stream) = &self.stream else { return };
        for message in added {
            if let Message::Tool { results } = message {
                for r in results {
                    stream.send(StreamEvent::ToolResult {
                        llm_call,
                        id: r.call_id.clone(),
                        name: r.name.clone(),
                        content: r.content.clone(),
                        is_error: r.is_error,
                    });
                }
            }
        }
    }

    /// Whether the run is streamed.
    pub(crate) fn is_streamed(&self) -> bool {
        self.stream.is_some()
    }
}
