//! The [`Tool`] trait, tool definitions, and the context a tool runs with.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::pause::{ChildPause, ChildResume};

/// What the model sees of a tool: its name, description and parameter schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolDefinition {
    /// The name; must match `^[A-Za-z0-9_-]{1,64}$` (the strictest provider rule, OpenAI's).
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of the arguments; an object schema at the root.
    pub parameters: Value,
}

impl ToolDefinition {
    /// A definition from its parts.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

/// The future a [`Tool`] returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<String, ToolError>> + Send + 'a>>;

/// What [`Tool::call_content`] returns: the result's text and parts, or its error.
pub type ContentFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ToolContent, ToolError>> + Send + 'a>>;

/// A tool's result with parts: its text, and images, documents or audio after it (a
/// screenshot, a rendered invoice). The model sees the parts where its provider takes
/// them in a tool result, else in a user message right after the results, which names
/// the call; a part the model takes no kind of is replaced by a note.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct ToolContent {
    /// The text.
    pub text: String,
    /// The parts after the text, in order.
    pub parts: Vec<crate::content::Part>,
}

impl ToolContent {
    /// A result of text alone.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            parts: Vec::new(),
        }
    }

    /// This result with one more part.
    #[must_use]
    pub fn part(mut self, part: crate::content::Part) -> Self {
        self.parts.push(part);
        self
    }
}

impl From<String> for ToolContent {
    fn from(text: String) -> Self {
        ToolContent::text(text)
    }
}

impl From<&str> for ToolContent {
    fn from(text: &str) -> Self {
        ToolContent::text(text)
    }
}

/// A tool the model can call.
///
/// Write one by hand, or let `#[tool]` generate it from an async fn. The runner
/// validates the arguments against [`ToolDefinition::parameters`] before calling
/// [`call`](Self::call), so a tool never sees arguments that break its schema. A tool
/// that fails returns a [`ToolError`]; a panic or a timeout is caught by the runner.
/// Every failure goes back to the model as a tool result marked as an error; tool
/// failures never end a run.
///
/// A tool must not block its thread (a synchronous sleep, blocking I/O, a long
/// computation): the calls of a turn run concurrently on the run's own task, and a
/// timeout, the deadline or cancellation can only stop a tool at an `.await`. Move
/// blocking work to `tokio::task::spawn_blocking`.
pub trait Tool: Send + Sync + 'static {
    /// The tool's definition. Called once, when the registry is built.
    fn definition(&self) -> ToolDefinition;

    /// Runs the tool with schema-valid arguments. The returned string is the tool
    /// result's content.
    ///
    /// # Errors
    /// A [`ToolError`] whose message is shown to the model.
    fn call<'a>(&'a self, arguments: Value, context: ToolContext) -> ToolFuture<'a>;

    /// Runs the tool and returns its result with parts (images, documents, audio; see
    /// [`ToolContent`]). What the runner calls. The default is [`call`](Self::call)'s
    /// text alone; a tool that returns parts overrides this (a `#[tool]` fn does when it
    /// returns a `ToolContent`), and its `call` gives the text.
    ///
    /// # Errors
    /// A [`ToolError`] whose message is shown to the model.
    fn call_content<'a>(&'a self, arguments: Value, context: ToolContext) -> ContentFuture<'a> {
        let text = self.call(arguments, context);
        Box::pin(async move { text.await.map(ToolContent::text) })
    }

    /// The application state types this tool reads through [`ToolContext::state`]. The
    /// config's `build()` rejects a config that lacks one, with a `ConfigError`.
    fn required_state(&self) -> Vec<StateRequirement> {
        Vec::new()
    }

    /// Whether a successful call changes the world in a way that cannot be taken back
    /// (a refund, an email sent, an order cancelled). `false` by default;
    /// `#[tool(irreversible)]` sets it. Runs list such calls in their
    /// [`Handover`](crate::handover::Handover), and `tools_for` sees them in the
    /// [`RunState`](crate::handover::RunState).
    fn irreversible(&self) -> bool {
        false
    }

    /// Whether every call needs a person's approval before it runs. `false` by
    /// default; `#[tool(requires_approval)]` sets it (the config's `.approval(..)`
    /// policy can ask for approval of any tool at run time). A call that needs approval
    /// pauses the run (ending `paused`) until a decision comes with
    /// [`resume_agent_with`](crate::durable::resume_agent_with); the config needs a checkpoint
    /// store.
    fn requires_approval(&self) -> bool {
        false
    }

    /// The longest result of this tool the model is shown, in tokens (estimated as
    /// bytes / 4, the estimate the runner uses everywhere), when it is shorter than the
    /// config's [`max_tool_result_bytes`](crate::Limits::max_tool_result_bytes) (100,000
    /// bytes by default): a longer result is cut at a line break where one is near the
    /// cap, with a note that gives its full size and asks the model to narrow the call.
    /// `None` (the default): the config's cap alone. `#[tool(max_result_tokens = N)]`
    /// sets it (N from 1).
    fn max_result_tokens(&self) -> Option<u32> {
        None
    }
}

/// A failed tool execution; the message is shown to the model.
///
/// An ordinary error ([`ToolError::new`]) is fed back and the model may go on. A fatal
/// one ([`ToolError::fatal`]) says "I cannot safely continue": the other calls of that
/// turn are answered as usual, then the run ends with `AgentError::ToolFatal`
/// (category `tool_fatal`). A deferred one ([`ToolError::deferred`]) is no failure: the
/// result comes later, from outside, and the run pauses for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    message: String,
    fatal: bool,
    deferred: bool,
    /// The summary of an escalation (see [`ToolError::escalate`]).
    escalation: Option<String>,
    /// The child run that paused inside the call (see [`ToolError::paused_inside`]).
    inside: Option<Box<ChildPause>>,
}

impl ToolError {
    /// A tool error with this message; the model sees it and may go on.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            fatal: false,
            deferred: false,
            escalation: None,
            inside: None,
        }
    }

    /// Not a failure of the tool: a person must take over. The run ends escalated after
    /// this turn's other calls are answered, as if the model had called
    /// `escalate_to_human` with `reason` and `summary` (ending `escalated`,
    /// [`AgentError::Escalated`](crate::AgentError::Escalated)); the model sees
    /// `reason` as the call's error result. An agent used as a tool with
    /// `escalates_parent(true)` returns this when its run escalates.
    pub fn escalate(reason: impl Into<String>, summary: impl Into<String>) -> Self {
        Self {
            message: reason.into(),
            fatal: false,
            deferred: false,
            escalation: Some(summary.into()),
            inside: None,
        }
    }

    /// The summary, when the tool escalated (see [`ToolError::escalate`]).
    pub fn escalation(&self) -> Option<&str> {
        self.escalation.as_deref()
    }

    /// A tool error that ends the run after this turn: the tool cannot safely continue
    /// (a payment system in an unknown state, a safety check that failed). A `#[tool]`
    /// fn returns it as `Err(ToolError::fatal(..))` from a `Result<T, ToolError>`.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            fatal: true,
            deferred: false,
            escalation: None,
            inside: None,
        }
    }

    /// Not a failure: the call's result comes from outside the process (a client-side
    /// action, a long job this call started, a person). With a checkpoint store the run
    /// pauses once the turn's other calls are answered (ending `paused`, the call listed
    /// in [`AgentError::Paused`](crate::AgentError::Paused) with `note`), and
    /// [`Decisions::result`](crate::durable::Decisions::result) gives the result on resume. The
    /// call is not run again. Without a checkpoint store the run cannot wait: the model
    /// gets an error result saying so.
    pub fn deferred(note: impl Into<String>) -> Self {
        Self {
            message: note.into(),
            fatal: false,
            deferred: true,
            escalation: None,
            inside: None,
        }
    }

    /// Not a failure: the call started a run elsewhere (an agent used as a tool, a
    /// remote agent) that paused for decisions (`child`). With a checkpoint store the
    /// calling run pauses too once the turn's other calls are answered, listing the
    /// child's pending calls as its own (ids prefixed with this call's id and `/`, see
    /// [`PendingCall::via`](crate::durable::PendingCall::via)); on resume, this call
    /// runs again with the child's decisions in
    /// [`ToolContext::resuming`], and the tool resumes the child run with them.
    /// Without a checkpoint store the calling run cannot wait: the model gets an error
    /// result saying so (the child run stays paused in its own store).
    pub fn paused_inside(child: ChildPause) -> Self {
        let message = format!(
            "the {} agent's run {} waits for decisions on {} call(s)",
            child.agent,
            child.run_id,
            child.pending.len()
        );
        Self {
            message,
            fatal: false,
            deferred: true,
            escalation: None,
            inside: Some(Box::new(child)),
        }
    }

    /// The child run that paused inside the call (see [`ToolError::paused_inside`]).
    pub fn child_pause(&self) -> Option<&ChildPause> {
        self.inside.as_deref()
    }

    /// Whether the tool deferred its result (see [`ToolError::deferred`]).
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the error ends the run (see [`ToolError::fatal`]).
    pub fn is_fatal(&self) -> bool {
        self.fatal
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

/// One application state type a tool needs (see [`Tool::required_state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateRequirement {
    /// The type's id.
    pub type_id: TypeId,
    /// The type's name, for the error message.
    pub type_name: &'static str,
}

impl StateRequirement {
    /// The requirement for state of type `S`.
    pub fn of<S: Send + Sync + 'static>() -> Self {
        Self {
            type_id: TypeId::of::<S>(),
            type_name: type_name::<S>(),
        }
    }
}

/// Application state shared with tools: one value per type (a DB pool, an HTTP client).
///
/// Set with the config builder's `state(value)`; read in a tool with
/// [`ToolContext::state`] (or a `State<T>` parameter of a `#[tool]` fn).
#[derive(Clone, Default)]
pub struct StateMap {
    values: HashMap<TypeId, (Arc<dyn Any + Send + Sync>, &'static str)>,
}

impl StateMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts a value, replacing any earlier value of the same type.
    pub fn insert<S: Send + Sync + 'static>(&mut self, value: S) {
        self.insert_arc(Arc::new(value));
    }

    /// Inserts a shared value, replacing any earlier value of the same type.
    pub fn insert_arc<S: Send + Sync + 'static>(&mut self, value: Arc<S>) {
        self.values
            .insert(TypeId::of::<S>(), (value, type_name::<S>()));
    }

    /// The value of type `S`, if present.
    pub fn get<S: Send + Sync + 'static>(&self) -> Option<Arc<S>> {
        let (value, _) = self.values.get(&TypeId::of::<S>())?;
        Arc::clone(value).downcast::<S>().ok()
    }

    /// Whether a value of this type id is present.
    pub fn contains(&self, type_id: TypeId) -> bool {
        self.values.contains_key(&type_id)
    }

    /// Whether the map holds no value.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Inserts every value of `other`, replacing values of the same types.
    pub fn extend(&mut self, other: StateMap) {
        self.values.extend(other.values);
    }
}

impl fmt::Debug for StateMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only type names: state may hold secrets (clients with keys).
        f.debug_set()
            .entries(self.values.values().map(|(_, name)| name))
            .finish()
    }
}

/// Application state of type `S`, as a `#[tool]` fn parameter: `db: State<Db>`.
///
/// The macro reads it from the config's state (set with the builder's `state(value)`)
/// and declares it in [`Tool::required_state`], so a config that lacks it is rejected
/// at `build()`.
#[derive(Debug)]
pub struct State<S>(pub Arc<S>);

impl<S> Clone for State<S> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<S> std::ops::Deref for State<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.0
    }
}

/// What a tool knows about the call it serves: the call id, the run's trace id and run
/// id, the idempotency key, the run's deadline, and the application state.
#[derive(Clone, Debug)]
pub struct ToolContext {
    call_id: String,
    tool_name: String,
    trace_id: Arc<str>,
    run_id: Option<Arc<str>>,
    deadline: Option<tokio::time::Instant>,
    state: Arc<StateMap>,
    link: Option<Opaque>,
    resuming: Option<Arc<ChildResume>>,
}

/// A value of a layer above this one, carried through without being looked at: the
/// runner's link from a tool call to the run that made it (so that an agent used as a
/// tool shares its parent's budgets).
#[derive(Clone)]
pub(crate) struct Opaque(pub(crate) Arc<dyn Any + Send + Sync>);

impl fmt::Debug for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Opaque")
    }
}

impl ToolContext {
    /// A context (the runner builds these; tests of a tool may too).
    pub fn new(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        trace_id: Arc<str>,
        state: Arc<StateMap>,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            tool_name: tool_name.into(),
            trace_id,
            run_id: None,
            deadline: None,
            state,
            link: None,
            resuming: None,
        }
    }

    /// For a call whose child run paused (see [`ToolError::paused_inside`]) and whose
    /// calling run was resumed: the child run's id and the decisions for its pending
    /// calls (under the child's own call ids). The tool resumes that run with them
    /// rather than starting another. `None` for an ordinary call.
    pub fn resuming(&self) -> Option<&ChildResume> {
        self.resuming.as_deref()
    }

    /// This context, resuming child run `resume` (the runner sets it; tests of a tool
    /// may too).
    #[must_use]
    pub fn with_resuming(mut self, resume: ChildResume) -> Self {
        self.resuming = Some(Arc::new(resume));
        self
    }

    /// The same context linked to the run that made the call (set by the runner).
    #[must_use]
    pub(crate) fn with_link(mut self, link: Arc<dyn Any + Send + Sync>) -> Self {
        self.link = Some(Opaque(link));
        self
    }

    /// The runner's link to the run that made the call, if any.
    pub(crate) fn link(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        self.link.as_ref().map(|o| &o.0)
    }

    /// The same context for a call of a run that must end by `deadline` (the runner sets
    /// it on every call of a run with a deadline: the config's `deadline` or
    /// [`RunOptions::deadline`](crate::RunOptions::deadline), whichever is sooner).
    #[must_use]
    pub fn with_deadline(mut self, deadline: tokio::time::Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// When the run this call belongs to must end, if it has a deadline. The runner
    /// drops a call still running then; a tool that waits on its own terms (a timeout
    /// that something else may extend, like an MCP call's progress) bounds that wait by
    /// this instant. `None` for a run without a deadline.
    pub fn deadline(&self) -> Option<tokio::time::Instant> {
        self.deadline
    }

    /// The same context for a call of the run `run_id` (the runner sets it on every
    /// call; see [`RunOptions::run_id`](crate::RunOptions::run_id)).
    #[must_use]
    pub fn with_run_id(mut self, run_id: Arc<str>) -> Self {
        self.run_id = Some(run_id);
        self
    }

    /// The id of the run the call belongs to: the caller's
    /// [`RunOptions::run_id`](crate::RunOptions::run_id), else the trace id. The same
    /// before and after a crash and [`resume_agent`](crate::resume_agent).
    pub fn run_id(&self) -> &str {
        self.run_id.as_deref().unwrap_or(&self.trace_id)
    }

    /// A key that names this tool call for good: `"{run_id}:{call_id}"`. A call run
    /// again after a crash (see `docs/durable.md`) gets the same key, so a tool that
    /// passes it to the system it calls (an `Idempotency-Key` header, a unique column)
    /// has its effect happen once.
    pub fn idempotency_key(&self) -> String {
        format!("{}:{}", self.run_id(), self.call_id)
    }

    /// A context for calling a tool directly in a unit test: call id `test-call`,
    /// trace id `test-trace`, the given state.
    pub fn for_test(tool_name: impl Into<String>, state: StateMap) -> Self {
        Self::new(
            "test-call",
            tool_name,
            Arc::from("test-trace"),
            Arc::new(state),
        )
    }

    /// The id of the tool call being served.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The name of the tool being called.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The run's trace id (32 lowercase hex digits).
    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// The application state of type `S`, if the config holds one.
    pub fn state<S: Send + Sync + 'static>(&self) -> Option<Arc<S>> {
        self.state.get::<S>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_map_returns_values_by_type() {
        let mut map = StateMap::new();
        map.insert(41_u32);
        map.insert(String::from("db"));
        map.insert(42_u32);
        assert_eq!(map.get::<u32>().as_deref(), Some(&42));
        assert_eq!(
            map.get::<String>().as_deref().map(String::as_str),
            Some("db")
        );
        assert!(map.get::<i64>().is_none());
        assert!(map.contains(TypeId::of::<u32>()));
        assert_eq!(format!("{map:?}").matches("u32").count(), 1);
    }

    #[test]
    fn context_exposes_ids_and_state() {
        let mut map = StateMap::new();
        map.insert(7_u8);
        let ctx = ToolContext::for_test("lookup", map);
        assert_eq!(ctx.call_id(), "test-call");
        assert_eq!(ctx.trace_id(), "test-trace");
        assert_eq!(ctx.tool_name(), "lookup");
        assert_eq!(ctx.state::<u8>().as_deref(), Some(&7));
    }
}
