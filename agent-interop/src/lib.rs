//! agent-core agents over the open agent protocols.
//!
//! - [`a2a`]: **A2A 1.0** (the Agent2Agent protocol,
//!   <https://a2a-protocol.org/v1.0.0/specification/>, JSON-RPC 2.0 binding). An
//!   [`A2aServer`](a2a::A2aServer) serves an `AgentConfig<T>`: the agent card at
//!   `/.well-known/agent-card.json`, and `SendMessage`, `SendStreamingMessage` (SSE),
//!   `GetTask`, `CancelTask` at `/`; tasks live in a [`TaskStore`](a2a::TaskStore)
//!   (in memory, or an `agent_store::Store` on SQLite or PostgreSQL, so a task outlives
//!   the process). An [`A2aAgent`](a2a::A2aAgent) is a remote A2A agent, and
//!   [`A2aAgent::as_tool`](a2a::A2aAgent::as_tool) makes it a tool of a local agent.
//! - [`ag_ui`]: an **AG-UI** event stream (SSE over axum) of a run, from
//!   `run_agent_stream`'s events.
//!
//! How a run's ending becomes a task's state:
//!
//! | ending | task state | the task carries |
//! |---|---|---|
//! | answered | `TASK_STATE_COMPLETED` | artifact `output`: one data part, the validated value |
//! | paused | `TASK_STATE_INPUT_REQUIRED` | status message: a text part, and a data part `{"pending": [..]}` (agent-core's `PendingCall`s); the client answers in the same task with a data part `{"decisions": {..}}` |
//! | escalated | `TASK_STATE_FAILED` | status message `escalated: ...`, data `{"ending": "escalated", "category": "escalated", "reason", "summary"}` |
//! | failed, exhausted, stuck | `TASK_STATE_FAILED` (`TASK_STATE_CANCELED` when the category is `cancelled`) | status message `CATEGORY: error`, data `{"ending", "category"}` |
//!
//! Every ended task's metadata has `agentCore`: `{"ending", "category", "traceId",
//! "agent"}`. See `docs/interop.md` for the whole mapping.

pub mod a2a;
pub mod ag_ui;
mod ids;
