//! [`RunOptions`]: what belongs to one run rather than to the config.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::message::Message;
use crate::observe::Observer;
use crate::pause::Decisions;
use crate::tool::StateMap;

/// Per-run inputs for [`run_agent_with`](crate::run_agent_with): the request-scoped
/// state a server has (the user's session, a per-request DB transaction), the caller's
/// cancellation token and deadline, an extra observer, metadata, and earlier messages.
///
/// A config is built once and shared; `RunOptions` carry what changes per request, so
/// a server never needs a `with_` variant per request. Every field is optional;
/// `RunOptions::default()` runs exactly like [`run_agent`](crate::run_agent).
///
/// ```
/// use std::time::Duration;
/// use agent_core::{AgentConfig, RunOptions, run_agent_with};
/// use agent_core::testing::ScriptedModel;
///
/// struct Session { user: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), agent_core::ConfigError> {
/// let config: AgentConfig<String> = AgentConfig::builder("support")
///     .llm(ScriptedModel::new().text("Hello!"))
///     .expects_state::<Session>()          // provided per run, checked per run
///     .build()?;
/// let options = RunOptions::new()
///     .state(Session { user: "ada".into() })
///     .deadline(Duration::from_secs(30))
///     .metadata("request_id", "r-42");
/// let result = run_agent_with(&config, "Hi", options).await;
/// assert_eq!(result.outcome.as_deref(), Ok("Hello!"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct RunOptions {
    pub(crate) state: StateMap,
    pub(crate) cancellation: Option<CancellationToken>,
    pub(crate) deadline: Option<Duration>,
    pub(crate) observer: Option<Arc<dyn Observer>>,
    pub(crate) metadata: BTreeMap<String, String>,
    pub(crate) history: Vec<Message>,
    pub(crate) thread: Option<String>,
    pub(crate) run_id: Option<String>,
    pub(crate) decisions: Decisions,
    pub(crate) lease: Option<Duration>,
    /// The tool call of a parent run that starts this run (an agent used as a tool):
    /// the runner's link, opaque at this layer.
    pub(crate) parent: Option<crate::tool::Opaque>,
    /// The run's seat at a provider batch gate (a batched `run_batch` gives each run
    /// one): its calls to the batched model wait there for the round's job.
    pub(crate) batch: Option<Arc<crate::providers::batch::Seat>>,
}

impl RunOptions {
    /// No per-run inputs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Application state for this run's tools (one value per type). It is added to the
    /// config's state; a value of a type the config also holds replaces it for this run.
    /// Types declared with the builder's `expects_state` must be given here (or be in
    /// the config), else the run ends at once with `invalid_run`.
    #[must_use]
    pub fn state<S: Send + Sync + 'static>(mut self, value: S) -> Self {
        self.state.insert(value);
        self
    }

    /// Shared application state for this run's tools (see [`state`](Self::state)).
    #[must_use]
    pub fn state_arc<S: Send + Sync + 'static>(mut self, value: Arc<S>) -> Self {
        self.state.insert_arc(value);
        self
    }

    /// A token the caller holds: cancelling it ends this run with `cancelled`. The
    /// config's own token, if any, still applies: either one ends the run.
    #[must_use]
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }

    /// A wall-clock deadline for this run, from its start. When the config has one too,
    /// the shorter one applies. A zero deadline ends the run at once with
    /// `deadline_exceeded`, before any request.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// An observer of this run's events, called after the config's observer (if any).
    #[must_use]
    pub fn observer(mut self, observer: impl Observer + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// A key-value pair describing the run (a request id, a tenant). Recorded on the
    /// run's `invoke_agent` span (as `agent.metadata`) and passed to the stores.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Earlier messages of the conversation, oldest first; the run's input follows them
    /// as a new user message. Tool calls in them must be answered (see
    /// [`Message::Tool`]); an unanswered call is answered with an error result when sent.
    #[must_use]
    pub fn history(mut self, messages: Vec<Message>) -> Self {
        self.history = messages;
        self
    }

    /// The memory thread this run belongs to. With a config that has a
    /// [`Memory`](crate::store::Memory), the thread's earlier messages (trimmed by the config's
    /// memory window) are sent before any [`history`](Self::history) and the input, its
    /// round-trip cap (`max_thread_llm_calls`) is checked before any request, and the
    /// run's messages are appended to it afterwards. Without a memory it is only recorded.
    #[must_use]
    pub fn thread(mut self, id: impl Into<String>) -> Self {
        self.thread = Some(id.into());
        self
    }

    /// The run's id: the key of its checkpoint (with a config that has a
    /// [`CheckpointStore`](crate::store::CheckpointStore)) and the first half of every
    /// tool call's [`idempotency_key`](crate::ToolContext::idempotency_key). Choose it
    /// before the run (a queue job's id) so that after a crash
    /// [`resume_agent`](crate::resume_agent) can name it. Default: the run's trace id.
    /// 1 to 256 bytes, no NUL; another id ends the run at once with `invalid_run`. A
    /// config with a checkpoint store ends a run at once with `invalid_run` when its id
    /// already has a checkpoint (resume it instead): a run id names one run.
    #[must_use]
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }

    /// How long this process holds the run after its last write or lease renewal, when
    /// the config has a checkpoint store (default
    /// [`LEASE`](crate::durable::LEASE), 60 s; at least 100 ms). The run renews it every
    /// third of it while it runs; a sweeper takes over a run only once its lease
    /// lapsed. See `docs/durable.md`, "Leases and the sweeper".
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease.max(Duration::from_millis(100)));
        self
    }

    /// Decisions for the pending calls of a paused run (see
    /// [`resume_agent_with`](crate::durable::resume_agent_with)); ignored by a fresh run. Added
    /// to those set before (same call id: replaced).
    #[must_use]
    pub fn decisions(mut self, decisions: Decisions) -> Self {
        self.decisions.merge(decisions);
        self
    }

    /// The run's seat at a provider batch gate ([`BatchGate::seat`](crate::providers::BatchGate::seat)):
    /// its calls to the gate's model (not streamed) wait for the gate's next batch job
    /// instead of going live, billed at the batch price, bounded by the batch's
    /// `deadline` instead of `llm_timeout`. Calls to another model go live. Also taken
    /// by [`resume_agent_with`](crate::durable::resume_agent_with). See `docs/batch.md`.
    #[must_use]
    pub fn batch_seat(mut self, seat: crate::providers::BatchSeat) -> Self {
        self.batch = Some(seat.into_inner());
        self
    }

    /// The run id set with [`run_id`](Self::run_id).
    pub fn run_id_value(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// The memory thread set with [`thread`](Self::thread).
    pub fn thread_id(&self) -> Option<&str> {
        self.thread.as_deref()
    }

    /// The metadata set so far.
    pub fn metadata_map(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }
}

impl fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunOptions")
            .field("state", &self.state)
            .field("cancellation", &self.cancellation.is_some())
            .field("deadline", &self.deadline)
            .field("observer", &self.observer.is_some())
            .field("metadata", &self.metadata)
            .field("history", &self.history.len())
            .field("thread", &self.thread)
            .field("run_id", &self.run_id)
            .field("decisions", &self.decisions.len())
            .field("lease", &self.lease)
            .field("batch", &self.batch.is_some())
            .finish()
    }
}

/// Resuming with decisions alone: `resume_agent_with(&config, id, Decisions::new().approve(..))`.
impl From<Decisions> for RunOptions {
    fn from(decisions: Decisions) -> Self {
        Self::new().decisions(decisions)
    }
}
