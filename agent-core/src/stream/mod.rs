//! Streaming: [`run_agent_stream`] yields a run's [`StreamEvent`]s as they happen, and
//! [`LlmClient::complete_streaming`](crate::LlmClient::complete_streaming) hands a
//! turn's pieces ([`StreamDelta`]) to a [`StreamSink`] as they arrive.
//!
//! The run behind a stream is the run of [`run_agent_with`](crate::run_agent_with):
//! the same loop, budgets, retries, guards, output modes, stores and observers. Only
//! the model call differs: it streams, and what arrives is also sent to the caller.
//! The last event is always [`StreamEvent::Finished`] with the [`AgentResult`].

mod incremental;
mod partial;
mod sink;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use serde_json::Value;

use crate::config::AgentConfig;
use crate::output::AgentOutput;
use crate::result::AgentResult;
use crate::run_options::RunOptions;

pub use crate::llm::{StreamDelta, StreamSink};
pub use partial::parse_partial;
#[doc(hidden)]
pub use sink::bench_partial_output;
pub(crate) use sink::{Meter, PartialKind, TurnSink};

/// One event of a streamed run (see [`run_agent_stream`]). `llm_call` is the round
/// trip it belongs to (1-based, as in [`RunEvent`](crate::RunEvent)).
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
    /// ([`Message::reasoning`](crate::Message::reasoning)).
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
    /// [`parse_partial`]). Not validated: the validated value is in
    /// [`Finished`](Self::Finished). Sent once per batch of pieces that arrived
    /// together (one network read, see [`StreamSink::flush`]) when the value changed,
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
type Queue<T> = Arc<Mutex<VecDeque<StreamEvent<T>>>>;

/// The sending side the runner holds for a streamed run.
pub(crate) struct EventSender<T>(Queue<T>);

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
fn lock<T>(queue: &Queue<T>) -> MutexGuard<'_, VecDeque<StreamEvent<T>>> {
    queue.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many events the queue holds before it grows. The stream takes events out as the
/// run adds them, so a few are queued at a time (those of one turn's processing); a
/// buffer this small (under 1 KiB) also comes from the allocator's fast path.
const QUEUE_CAPACITY: usize = 6;

type RunFuture<'a, T> = Pin<Box<dyn Future<Output = AgentResult<T>> + Send + 'a>>;

/// The events of one run (see [`run_agent_stream`]). Ends after
/// [`StreamEvent::Finished`].
///
/// The run makes progress only while the stream is polled. Dropping the stream stops
/// the run as dropping [`run_agent`](crate::run_agent)'s future does, including its
/// in-flight request and tool calls.
#[must_use = "a stream does nothing unless polled"]
pub struct RunStream<'a, T> {
    run: Option<RunFuture<'a, T>>,
    events: Queue<T>,
    result: Option<AgentResult<T>>,
}

// Nothing in a `RunStream` is pinned in place: the run future is boxed.
impl<T> Unpin for RunStream<'_, T> {}

impl<T> RunStream<'_, T> {
    /// A future of the next event, or `None` after [`StreamEvent::Finished`]: exactly
    /// `futures::StreamExt::next` (the same `Unpin` future), without needing that trait
    /// in scope or `futures` as a dependency.
    // Async, so not `Iterator::next`: this is `Stream`'s, made callable without the trait.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> futures::stream::Next<'_, Self> {
        futures::StreamExt::next(self)
    }
}

impl<T> std::fmt::Debug for RunStream<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStream")
            .field("running", &self.run.is_some())
            .finish_non_exhaustive()
    }
}

impl<T> Stream for RunStream<'_, T> {
    type Item = StreamEvent<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // Only the run future sends, and only while it is polled here: what it sent
        // comes out first, the result last.
        loop {
            if let Some(event) = lock(&this.events).pop_front() {
                return Poll::Ready(Some(event));
            }
            if let Some(result) = this.result.take() {
                return Poll::Ready(Some(StreamEvent::Finished(Box::new(result))));
            }
            let Some(run) = this.run.as_mut() else {
                return Poll::Ready(None);
            };
            match run.as_mut().poll(cx) {
                Poll::Ready(result) => {
                    this.run = None;
                    this.result = Some(result);
                }
                Poll::Pending => {
                    return match lock(&this.events).pop_front() {
                        Some(event) => Poll::Ready(Some(event)),
                        None => Poll::Pending,
                    };
                }
            }
        }
    }
}

/// Runs the agent on `input`, streaming its events: text as the model writes it, tool
/// calls as they start and end, tool results, the structured answer as it arrives
/// (leniently parsed), and last the [`AgentResult`] ([`StreamEvent::Finished`]).
///
/// The same run as [`run_agent`](crate::run_agent) (same loop, budgets, retries and
/// contract: it ends typed, within budgets, every call id answered); only the model
/// calls stream, through
/// [`LlmClient::complete_streaming`](crate::LlmClient::complete_streaming). A client
/// that does not stream answers each turn in one piece. A stream cut mid-way is a
/// transient failure, retried under the usual rules
/// ([`StreamEvent::Retrying`] says the turn's deltas are void). The stream is `Send`
/// (it can be spawned), hence `T: Sync`.
///
/// ```
/// use agent_core::{AgentConfig, StreamEvent, run_agent_stream};
/// use agent_core::testing::ScriptedModel;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), agent_core::ConfigError> {
/// let config: AgentConfig<String> = AgentConfig::builder("capitals")
///     .llm(ScriptedModel::new().text("Paris"))
///     .build()?;
/// let mut events = run_agent_stream(&config, "Capital of France?");
/// let mut answer = None;
/// // `RunStream::next`; `futures::StreamExt` works as well.
/// while let Some(event) = events.next().await {
///     match event {
///         StreamEvent::TextDelta { text, .. } => print!("{text}"),
///         StreamEvent::Finished(result) => answer = result.outcome.ok(),
///         _ => {}
///     }
/// }
/// assert_eq!(answer.as_deref(), Some("Paris"));
/// # Ok(())
/// # }
/// ```
pub fn run_agent_stream<'a, T: AgentOutput + Sync>(
    config: &'a AgentConfig<T>,
    input: impl Into<String>,
) -> RunStream<'a, T> {
    run_agent_stream_with(config, input, RunOptions::default())
}

/// [`run_agent_stream`] with per-run inputs (see [`RunOptions`] and
/// [`run_agent_with`](crate::run_agent_with)).
pub fn run_agent_stream_with<'a, T: AgentOutput + Sync>(
    config: &'a AgentConfig<T>,
    input: impl Into<String>,
    options: RunOptions,
) -> RunStream<'a, T> {
    let events: Queue<T> = Arc::new(Mutex::new(VecDeque::with_capacity(QUEUE_CAPACITY)));
    let sender = EventSender(Arc::clone(&events));
    let input = input.into();
    RunStream {
        run: Some(Box::pin(crate::runner::run_streamed(
            config, input, options, sender,
        ))),
        events,
        result: None,
    }
}
