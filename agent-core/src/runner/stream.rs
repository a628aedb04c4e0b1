//! Streaming a run: [`run_agent_stream`] yields its [`StreamEvent`]s as they happen.
//!
//! The run behind a stream is the run of [`run_agent_with`](crate::run_agent_with):
//! the same loop, budgets, retries, guards, output modes, stores and observers. Only
//! the model call differs: it streams (through
//! [`LlmClient::complete_streaming`](crate::llm::LlmClient::complete_streaming), which hands
//! a turn's pieces to a [`StreamSink`](crate::llm::StreamSink)), and what arrives is
//! also sent to the caller. The last event is always [`StreamEvent::Finished`] with the
//! [`AgentResult`].

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;

use crate::config::AgentConfig;
use crate::content::Input;
use crate::output::AgentOutput;
use crate::result::AgentResult;
use crate::run_options::RunOptions;

use super::emit::{EventSender, QUEUE_CAPACITY, Queue, StreamEvent, lock};
use super::resume::{GoingOn, TakenOver, take_over};
use crate::store::ResumeError;

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
/// [`LlmClient::complete_streaming`](crate::llm::LlmClient::complete_streaming). A client
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
    input: impl Into<Input>,
) -> RunStream<'a, T> {
    run_agent_stream_with(config, input, RunOptions::default())
}

/// [`run_agent_stream`] with per-run inputs (see [`RunOptions`] and
/// [`run_agent_with`](crate::run_agent_with)).
pub fn run_agent_stream_with<'a, T: AgentOutput + Sync>(
    config: &'a AgentConfig<T>,
    input: impl Into<Input>,
    options: RunOptions,
) -> RunStream<'a, T> {
    let events: Queue<T> = Arc::new(Mutex::new(VecDeque::with_capacity(QUEUE_CAPACITY)));
    let sender = EventSender(Arc::clone(&events));
    let input = input.into();
    RunStream {
        run: Some(Box::pin(super::entry::run_streamed(
            config, input, options, sender,
        ))),
        events,
        result: None,
    }
}

/// Continues the run `run_id` from its last checkpoint, as
/// [`resume_agent`](crate::resume_agent), streaming its events as
/// [`run_agent_stream`] does (see [`resume_agent_stream_with`]).
///
/// # Errors
/// As [`resume_agent_with`](crate::durable::resume_agent_with), before any event.
pub async fn resume_agent_stream<'a, T: AgentOutput + Sync>(
    config: &'a AgentConfig<T>,
    run_id: &str,
) -> Result<RunStream<'a, T>, ResumeError> {
    resume_agent_stream_with(config, run_id, RunOptions::default()).await
}

/// Continues the run `run_id` from its last checkpoint, as
/// [`resume_agent_with`](crate::durable::resume_agent_with) (decisions for a paused run
/// included), and streams the rest of the run: its model calls stream and its events
/// come as they happen, the last being [`StreamEvent::Finished`]. The run is checked and
/// claimed first, so a run that cannot be resumed is an error before any event. A run
/// that had finished yields its stored result alone.
///
/// # Errors
/// As [`resume_agent_with`](crate::durable::resume_agent_with).
pub async fn resume_agent_stream_with<'a, T: AgentOutput + Sync>(
    config: &'a AgentConfig<T>,
    run_id: &str,
    options: impl Into<RunOptions>,
) -> Result<RunStream<'a, T>, ResumeError> {
    let events: Queue<T> = Arc::new(Mutex::new(VecDeque::with_capacity(QUEUE_CAPACITY)));
    match take_over(config, run_id, options.into()).await? {
        TakenOver::Finished(result) => Ok(RunStream {
            run: None,
            events,
            result: Some(*result),
        }),
        TakenOver::Running(going) => {
            let GoingOn {
                input,
                options,
                resumed,
            } = *going;
            let sender = EventSender(Arc::clone(&events));
            Ok(RunStream {
                run: Some(Box::pin(super::entry::run(
                    config,
                    input,
                    options,
                    Some(sender),
                    Some(resumed),
                ))),
                events,
                result: None,
            })
        }
    }
}
