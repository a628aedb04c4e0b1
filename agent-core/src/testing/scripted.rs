//! [`ScriptedModel`]: replays responses and provider errors in order.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use crate::llm::{LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse};
use crate::message::ToolCall;
use crate::output::SUBMIT_OUTPUT;

/// One step of a script.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ScriptStep {
    /// Return this turn.
    Respond(LlmResponse),
    /// Fail with this provider error.
    Fail(LlmError),
    /// Panic inside the client (to test the runner's catch boundary).
    Panic(String),
    /// Never answer (to test deadlines and cancellation).
    Hang,
    /// Wait, then perform the inner step.
    Delayed(Duration, Box<ScriptStep>),
}

struct Inner {
    steps: Mutex<VecDeque<ScriptStep>>,
    requests: Mutex<Vec<LlmRequest>>,
    record: bool,
    next_id: AtomicU64,
}

/// A model that replays a script of responses and provider errors, in order, and
/// records every request it receives.
///
/// Cheap to clone: clones share the script and the recording, so keep one handle to read
/// [`requests`](Self::requests) after handing another to the config. When the script is
/// used up, every further call fails with a permanent error saying so.
///
/// ```
/// use agent_core::testing::ScriptedModel;
/// use serde_json::json;
///
/// let model = ScriptedModel::new()
///     .tool_call("lookup_order", json!({"order_id": "A-1"}))
///     .submit(json!({"severity": 2, "summary": "late parcel"}));
/// assert_eq!(model.remaining(), 2);
/// ```
#[derive(Clone)]
pub struct ScriptedModel {
    inner: Arc<Inner>,
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ScriptedModel {
    /// An empty script that records requests.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                steps: Mutex::new(VecDeque::new()),
                requests: Mutex::new(Vec::new()),
                record: true,
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// A script from steps.
    pub fn from_steps(steps: impl IntoIterator<Item = ScriptStep>) -> Self {
        let model = Self::new();
        lock(&model.inner.steps).extend(steps);
        model
    }

    /// Stops recording requests (for benchmarks). Call before cloning the handle.
    #[must_use]
    pub fn without_recording(self) -> Self {
        let steps = std::mem::take(&mut *lock(&self.inner.steps));
        Self {
            inner: Arc::new(Inner {
                steps: Mutex::new(steps),
                requests: Mutex::new(Vec::new()),
                record: false,
                next_id: AtomicU64::new(self.inner.next_id.load(Ordering::Relaxed)),
            }),
        }
    }

    /// Appends a step.
    #[must_use]
    pub fn step(self, step: ScriptStep) -> Self {
        lock(&self.inner.steps).push_back(step);
        self
    }

    /// Appends a turn.
    #[must_use]
    pub fn respond(self, response: LlmResponse) -> Self {
        self.step(ScriptStep::Respond(response))
    }

    /// Appends a plain-text turn.
    #[must_use]
    pub fn text(self, text: impl Into<String>) -> Self {
        self.respond(LlmResponse::text(text))
    }

    /// Appends a turn with one tool call (id `call_N`, numbered in script order).
    #[must_use]
    pub fn tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        let call = self.call(name, arguments);
        self.respond(LlmResponse::tool_calls(vec![call]))
    }

    /// Appends a turn with these tool calls, in this order.
    #[must_use]
    pub fn tool_calls(self, calls: Vec<ToolCall>) -> Self {
        self.respond(LlmResponse::tool_calls(calls))
    }

    /// Appends a turn with one `submit_output` call.
    #[must_use]
    pub fn submit(self, arguments: Value) -> Self {
        self.tool_call(SUBMIT_OUTPUT, arguments)
    }

    /// Appends a provider failure.
    #[must_use]
    pub fn fail(self, error: LlmError) -> Self {
        self.step(ScriptStep::Fail(error))
    }

    /// A tool call with the next script id (`call_1`, `call_2`, ...).
    pub fn call(&self, name: impl Into<String>, arguments: Value) -> ToolCall {
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        ToolCall::new(format!("call_{n}"), name, arguments)
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<LlmRequest> {
        lock(&self.inner.requests).clone()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        lock(&self.inner.requests).len()
    }

    /// How many steps are left.
    pub fn remaining(&self) -> usize {
        lock(&self.inner.steps).len()
    }
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("remaining", &self.remaining())
            .finish_non_exhaustive()
    }
}

impl LlmClient for ScriptedModel {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        if self.inner.record {
            lock(&self.inner.requests).push(request.clone());
        }
        let step = lock(&self.inner.steps).pop_front();
        Box::pin(async move {
            let mut step = step;
            loop {
                match step {
                    None => {
                        return Err(LlmError::permanent("scripted model: the script is used up"));
                    }
                    Some(ScriptStep::Respond(response)) => return Ok(response),
                    Some(ScriptStep::Fail(error)) => return Err(error),
                    Some(ScriptStep::Panic(message)) => {
                        #[allow(clippy::panic)]
                        {
                            panic!("{message}")
                        }
                    }
                    Some(ScriptStep::Hang) => std::future::pending::<()>().await,
                    Some(ScriptStep::Delayed(delay, inner)) => {
                        tokio::time::sleep(delay).await;
                        step = Some(*inner);
                    }
                }
            }
        })
    }

    fn provider(&self) -> &str {
        "scripted"
    }

    /// Every part: a script answers whatever it is given.
    fn content_capabilities(&self, _model: &str) -> crate::llm::ContentCapabilities {
        crate::llm::ContentCapabilities::ANY
    }
}
