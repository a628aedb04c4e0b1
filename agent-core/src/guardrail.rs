//! Guardrails: checks around a run that can stop it (a tripwire) or steer it.
//!
//! - [`InputGuardrail`]: on the run's input, before the first LLM call (or at the same
//!   time as it, [`InputGuardrail::concurrent`]); tripped, the run ends `failed` with
//!   [`AgentError::GuardrailTripped`](crate::AgentError::GuardrailTripped) (category
//!   `guardrail_tripped`) and no tool runs.
//! - [`OutputGuardrail`]: on each validated answer; it passes it, rejects it with
//!   feedback (the model corrects, under `max_parse_retries`, like a schema error), or
//!   trips.
//! - [`ToolGuardrail`]: before a tool runs (allow, deny with a message the model reads,
//!   replace the arguments, which are validated again, or trip) and after it returns
//!   (redact the result before the model sees it).
//!
//! Every verdict other than a pass is a [`RunEvent::Guardrail`](crate::observe::RunEvent::Guardrail)
//! and a `guardrail` tracing event, and is counted in
//! [`Usage::guardrail_interventions`](crate::usage::Usage::guardrail_interventions). A
//! guardrail that panics trips (the run cannot know the check passed).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::message::ToolCall;

/// What a guardrail decided.
///
/// Guardrails are checks around a run that can stop it (a tripwire) or steer it:
/// [`InputGuardrail`] on the input, [`OutputGuardrail`] on each validated answer,
/// [`ToolGuardrail`] around tool calls. Every verdict other than a pass is a
/// [`RunEvent::Guardrail`](crate::observe::RunEvent::Guardrail) and a `guardrail` tracing
/// event, and is counted in
/// [`Usage::guardrail_interventions`](crate::usage::Usage::guardrail_interventions). A
/// guardrail that panics trips (the run cannot know the check passed).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Go on.
    Pass,
    /// An output guardrail's rejection: the model gets this feedback and corrects its
    /// answer (counts against `max_parse_retries`). For an input guardrail it trips.
    Reject(String),
    /// Stop the run: ending `failed`, category `guardrail_tripped`, with this reason.
    Trip(String),
}

/// The future an asynchronous input guardrail returns.
pub type VerdictFuture = Pin<Box<dyn Future<Output = Verdict> + Send>>;

type InputCheck = Arc<dyn Fn(&str) -> VerdictFuture + Send + Sync>;

/// A check on the run's input.
#[derive(Clone)]
pub struct InputGuardrail {
    pub(crate) name: String,
    pub(crate) check: InputCheck,
    pub(crate) concurrent: bool,
}

impl fmt::Debug for InputGuardrail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputGuardrail")
            .field("name", &self.name)
            .field("concurrent", &self.concurrent)
            .finish_non_exhaustive()
    }
}

impl InputGuardrail {
    /// A check of the input text (the user message of this run; earlier history is not
    /// passed).
    pub fn new(
        name: impl Into<String>,
        check: impl Fn(&str) -> Verdict + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            check: Arc::new(move |input: &str| {
                let verdict = check(input);
                Box::pin(async move { verdict })
            }),
            concurrent: false,
        }
    }

    /// An asynchronous check (a moderation model, a service): it gets the input text.
    /// Bounded by the run's deadline and cancellation.
    pub fn new_async<F, Fut>(name: impl Into<String>, check: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Verdict> + Send + 'static,
    {
        Self {
            name: name.into(),
            check: Arc::new(move |input: &str| Box::pin(check(input.to_owned()))),
            concurrent: false,
        }
    }

    /// Runs the check at the same time as the first LLM call instead of before it (less
    /// latency). If it trips first, the call in flight is dropped (its tokens are
    /// counted, as any cut call's); if the call returns first, its turn waits for the
    /// check, so no tool runs and no answer is accepted before it passes.
    #[must_use]
    pub fn concurrent(mut self) -> Self {
        self.concurrent = true;
        self
    }

    /// The guardrail's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A check on each validated answer of type `T`.
pub struct OutputGuardrail<T> {
    pub(crate) name: String,
    pub(crate) check: Arc<dyn Fn(&T) -> Verdict + Send + Sync>,
}

impl<T> Clone for OutputGuardrail<T> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            check: Arc::clone(&self.check),
        }
    }
}

impl<T> fmt::Debug for OutputGuardrail<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputGuardrail")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T> OutputGuardrail<T> {
    /// A check of the validated answer.
    pub fn new(
        name: impl Into<String>,
        check: impl Fn(&T) -> Verdict + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            check: Arc::new(check),
        }
    }

    /// The guardrail's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What a tool guardrail decided before a call runs.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ToolVerdict {
    /// Run the call as it is.
    Allow,
    /// Do not run it: the model gets this message as the call's error result.
    Deny(String),
    /// Run it with these arguments instead (validated against the tool's schema first;
    /// arguments that do not validate are a denial saying why).
    Replace(Value),
    /// Stop the run after this turn: ending `failed`, category `guardrail_tripped`.
    Trip(String),
}

type BeforeTool = Arc<dyn Fn(&ToolCall) -> ToolVerdict + Send + Sync>;
type AfterTool = Arc<dyn Fn(&ToolCall, &str) -> Option<String> + Send + Sync>;

/// A check around tool calls: `before` each call runs,
/// `after` each successful call returns. Applies to every user tool, or to the tools
/// named with [`only`](Self::only).
#[derive(Clone)]
pub struct ToolGuardrail {
    pub(crate) name: String,
    pub(crate) tools: Option<Vec<String>>,
    pub(crate) before: Option<BeforeTool>,
    pub(crate) after: Option<AfterTool>,
}

impl fmt::Debug for ToolGuardrail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolGuardrail")
            .field("name", &self.name)
            .field("tools", &self.tools)
            .field("before", &self.before.is_some())
            .field("after", &self.after.is_some())
            .finish()
    }
}

impl ToolGuardrail {
    /// A guardrail with no checks yet (add [`before`](Self::before) and/or
    /// [`after`](Self::after)).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            tools: None,
            before: None,
            after: None,
        }
    }

    /// Only for calls of these tools.
    #[must_use]
    pub fn only<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// The check before a call runs (its arguments are schema-valid by then).
    #[must_use]
    pub fn before(
        mut self,
        check: impl Fn(&ToolCall) -> ToolVerdict + Send + Sync + 'static,
    ) -> Self {
        self.before = Some(Arc::new(check));
        self
    }

    /// The check after a call returned successfully: `Some(text)` replaces the result
    /// the model sees (a redaction), `None` keeps it.
    #[must_use]
    pub fn after(
        mut self,
        check: impl Fn(&ToolCall, &str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.after = Some(Arc::new(check));
        self
    }

    /// The guardrail's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn applies_to(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == tool))
    }
}
