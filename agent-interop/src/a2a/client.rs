//! A remote A2A agent ([`A2aAgent`]) and the tool that calls it ([`A2aTool`]).

use std::time::Duration;

use agent_core::durable::{ChildPause, Decision, Decisions, PauseReason, PendingCall};
use agent_core::tool::{ToolDefinition, ToolFuture};
use agent_core::{Tool, ToolContext, ToolError};
use serde_json::{Value, json};

use super::mapping::METADATA_KEY;
use super::sse::SseReader;
use super::types::{
    Message, Part, Role, SendMessageRequest, StreamResponse, Task, TaskIdParams, TaskState,
};
use crate::ids::fresh_id;

/// The share of the calling run's time left that a remote call may use (as for local
/// agents used as tools): it ends typed before the run's deadline would drop it.
const TIMEOUT_SHARE: f64 = 0.9;

/// The call id of the one pending call a remote agent that is not agent-core's asks
/// input with: its decision is a `result` whose value is sent back as the reply.
pub const REPLY_CALL: &str = "reply";

/// Why a call to a remote A2A agent failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum A2aError {
    /// The request did not go through (connection refused, reset, DNS).
    #[error("the request failed: {0}")]
    Http(String),
    /// The server answered with an HTTP status other than 200.
    #[error("the server answered HTTP {0}")]
    Status(u16),
    /// No end within the time the call had (ms).
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// A JSON-RPC error response.
    #[error("JSON-RPC error {code}: {message}")]
    Rpc {
        /// The code.
        code: i64,
        /// The message.
        message: String,
    },
    /// An answer that is not A2A 1.0 (not JSON-RPC, not a task, too large).
    #[error("not an A2A answer: {0}")]
    Malformed(String),
}

/// A remote agent reached over A2A 1.0's JSON-RPC binding at `url` (the endpoint the
/// agent card's interface names).
#[derive(Clone, Debug)]
pub struct A2aAgent {
    url: String,
    name: String,
    http: reqwest::Client,
    timeout: Duration,
    max_response_bytes: usize,
}

impl A2aAgent {
    /// The agent whose JSON-RPC endpoint is `url`, named by its URL until
    /// [`name`](Self::name), with a 54 s timeout (90 % of a run's default 60 s
    /// `tool_timeout`) and answers up to 16 MiB.
    pub fn new(url: impl Into<String>) -> Self {
        let url = url.into();
        Self {
            name: url.clone(),
            url,
            http: reqwest::Client::new(),
            timeout: Duration::from_secs(54),
            max_response_bytes: 16 << 20,
        }
    }

    /// The agent's name, as a pause's [`Via`](agent_core::durable::Via) names it.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The longest a call waits for the task's end (keep it under the calling run's
    /// `tool_timeout`); a run's deadline shortens it further.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The largest answer read, in bytes (default 16 MiB).
    #[must_use]
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// This agent as a tool: `name` and `description` are what the model sees; its
    /// parameters are `{"input": string}`.
    pub fn as_tool(&self, name: impl Into<String>, description: impl Into<String>) -> A2aTool {
        A2aTool {
            agent: self.clone(),
            name: name.into(),
            description: description.into(),
            escalates_parent: false,
        }
    }

    /// Sends `message` with `SendStreamingMessage` and follows the task until it ends
    /// or needs input, within `limit`. If the wait is dropped or runs out once the task
    /// is known, a `CancelTask` for it is sent on a task of its own.
    ///
    /// # Errors
    /// Every [`A2aError`].
    pub async fn send(&self, message: Message, limit: Duration) -> Result<Task, A2aError> {
        let mut guard = CancelOnDrop {
            agent: self.clone(),
            task_id: None,
        };
        let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        let outcome = tokio::time::timeout(limit, self.follow(message, &mut guard)).await;
        match outcome {
            Ok(Ok(task)) => {
                guard.task_id = None;
                Ok(task)
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(A2aError::Timeout(limit_ms)),
        }
    }

    fn rpc_body(method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": fresh_id(), "method": method, "params": params})
    }

    async fn follow(&self, message: Message, guard: &mut CancelOnDrop) -> Result<Task, A2aError> {
        let params = serde_json::to_value(SendMessageRequest {
            message,
            configuration: None,
            metadata: None,
        })
        .map_err(|e| A2aError::Malformed(e.to_string()))?;
        let mut response = self
            .http
            .post(&self.url)
            .header("A2A-Version", super::types::PROTOCOL_VERSION)
            .header("Accept", "text/event-stream")
            .header("Content-Type", "application/json")
            .body(Self::rpc_body("SendStreamingMessage", params).to_string())
            .send()
            .await
            .map_err(|e| A2aError::Http(e.without_url().to_string()))?;
        let status = response.status().as_u16();
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if status != 200 {
            return Err(A2aError::Status(status));
        }
        let mut task: Option<Task> = None;
        if !is_sse {
            // An error (or a server that answers in one piece).
            let body = read_all(&mut response, self.max_response_bytes).await?;
            return whole(&body)
                .and_then(|r| apply(&mut task, r, guard))
                .and_then(|()| {
                    task.ok_or_else(|| A2aError::Malformed("no task in the answer".into()))
                });
        }
        let mut reader = SseReader::default();
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| A2aError::Http(e.without_url().to_string()))?;
            let Some(chunk) = chunk else { break };
            for data in reader.push(&chunk) {
                apply(&mut task, rpc_result(&data)?, guard)?;
                if let Some(t) = &task {
                    let state = t.status.state;
                    if state.is_terminal()
                        || matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
                    {
                        return Ok(t.clone());
                    }
                }
            }
            if reader.pending() > self.max_response_bytes {
                return Err(A2aError::Malformed(format!(
                    "an event larger than {} bytes",
                    self.max_response_bytes
                )));
            }
        }
        // The stream ended before the task did: ask for it once.
        match task {
            Some(t) => self.get_task(&t.id).await,
            None => Err(A2aError::Malformed(
                "the stream ended without a task".into(),
            )),
        }
    }

    /// `GetTask` for task `id`.
    ///
    /// # Errors
    /// Every [`A2aError`].
    pub async fn get_task(&self, id: &str) -> Result<Task, A2aError> {
        self.call_task("GetTask", id).await
    }

    /// `CancelTask` for task `id`.
    ///
    /// # Errors
    /// Every [`A2aError`].
    pub async fn cancel_task(&self, id: &str) -> Result<Task, A2aError> {
        self.call_task("CancelTask", id).await
    }

    async fn call_task(&self, method: &str, id: &str) -> Result<Task, A2aError> {
        let params = serde_json::to_value(TaskIdParams {
            id: id.to_owned(),
            history_length: None,
        })
        .map_err(|e| A2aError::Malformed(e.to_string()))?;
        let mut response = self
            .http
            .post(&self.url)
            .header("A2A-Version", super::types::PROTOCOL_VERSION)
            .header("Content-Type", "application/json")
            .body(Self::rpc_body(method, params).to_string())
            .send()
            .await
            .map_err(|e| A2aError::Http(e.without_url().to_string()))?;
        if response.status().as_u16() != 200 {
            return Err(A2aError::Status(response.status().as_u16()));
        }
        let body = read_all(&mut response, self.max_response_bytes).await?;
        let value = rpc_value(&body)?;
        serde_json::from_value(value).map_err(|e| A2aError::Malformed(format!("not a task: {e}")))
    }
}

async fn read_all(response: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, A2aError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| A2aError::Http(e.without_url().to_string()))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > max {
            return Err(A2aError::Malformed(format!(
                "an answer larger than {max} bytes"
            )));
        }
    }
    Ok(body)
}

/// The `result` of a JSON-RPC response, or its error.
fn rpc_value(body: &[u8]) -> Result<Value, A2aError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| A2aError::Malformed(format!("not JSON: {e}")))?;
    if let Some(error) = value.get("error") {
        return Err(A2aError::Rpc {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(500)
                .collect(),
        });
    }
    value
        .get("result")
        .cloned()
        .ok_or_else(|| A2aError::Malformed("a JSON-RPC response without a result".into()))
}

fn rpc_result(data: &str) -> Result<StreamResponse, A2aError> {
    let value = rpc_value(data.as_bytes())?;
    serde_json::from_value(value)
        .map_err(|e| A2aError::Malformed(format!("not a stream event: {e}")))
}

fn whole(body: &[u8]) -> Result<StreamResponse, A2aError> {
    let value = rpc_value(body)?;
    serde_json::from_value(value).map_err(|e| A2aError::Malformed(format!("not a task: {e}")))
}

/// Folds one stream event into the task followed.
fn apply(
    task: &mut Option<Task>,
    event: StreamResponse,
    guard: &mut CancelOnDrop,
) -> Result<(), A2aError> {
    if let Some(t) = event.task {
        guard.task_id = Some(t.id.clone());
        *task = Some(t);
    } else if let Some(message) = event.message {
        // An answer without a task: a completed task of that message.
        *task = Some(Task {
            id: message.task_id.clone(),
            context_id: message.context_id.clone(),
            status: super::mapping::status(TaskState::Completed, None),
            artifacts: vec![super::types::Artifact {
                artifact_id: "message".into(),
                name: String::new(),
                parts: message.parts,
                metadata: None,
            }],
            history: Vec::new(),
            metadata: message.metadata,
        });
    } else if let Some(update) = event.status_update {
        // A continued task's stream may start with updates (the SDK's does).
        let t = task.get_or_insert_with(|| skeleton(&update.task_id, &update.context_id));
        guard.task_id = Some(t.id.clone());
        t.status = update.status;
        if update.metadata.is_some() {
            t.metadata = update.metadata;
        }
    } else if let Some(update) = event.artifact_update {
        let t = task.get_or_insert_with(|| skeleton(&update.task_id, &update.context_id));
        guard.task_id = Some(t.id.clone());
        match t
            .artifacts
            .iter_mut()
            .find(|a| a.artifact_id == update.artifact.artifact_id)
        {
            Some(a) if update.append => a.parts.extend(update.artifact.parts),
            Some(a) => *a = update.artifact,
            None => t.artifacts.push(update.artifact),
        }
    } else {
        return Err(A2aError::Malformed("an empty stream event".into()));
    }
    Ok(())
}

/// A working task known by its id alone (its first event was an update).
fn skeleton(id: &str, context_id: &str) -> Task {
    Task {
        id: id.to_owned(),
        context_id: context_id.to_owned(),
        status: super::mapping::status(TaskState::Working, None),
        artifacts: Vec::new(),
        history: Vec::new(),
        metadata: None,
    }
}

/// Sends `CancelTask` for a task whose wait was dropped or ran out.
struct CancelOnDrop {
    agent: A2aAgent,
    task_id: Option<String>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.task_id.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let agent = self.agent.clone();
            runtime.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), agent.cancel_task(&id)).await;
            });
        }
    }
}

/// A remote A2A agent used as a tool (made by [`A2aAgent::as_tool`]).
///
/// A call sends the call's `input` as a text message and follows the task:
/// - completed: the result is the value of its data part (as JSON text), or its text;
/// - input-required: the calling run pauses (with a checkpoint store), listing the
///   remote task's pending calls as its own (ids `CALL_ID/REMOTE_CALL_ID`,
///   [`Via`](agent_core::durable::Via) naming the task id as the child's run id) when the
///   remote agent is agent-core's; for another agent, one deferred call
///   `CALL_ID/reply` whose `result` decision is sent back as the reply (a string as a
///   text part, other JSON as a data part). Resuming the run sends the decisions to the
///   task and follows it again;
/// - failed, canceled, rejected: a tool error the model sees, naming the state and the
///   remote category; an escalated remote run ends the calling run escalated with
///   [`escalates_parent`](Self::escalates_parent);
/// - no answer within the agent's timeout and 90 % of the calling run's time left, a
///   transport failure or an answer that is not A2A: a tool error, and a `CancelTask`
///   for the task when it is known (as when the calling run is cancelled and the call
///   dropped).
///
/// The remote agent's tokens and cost are its own (A2A does not report them): they do
/// not count against the calling run's caps.
#[derive(Clone, Debug)]
pub struct A2aTool {
    agent: A2aAgent,
    name: String,
    description: String,
    escalates_parent: bool,
}

impl A2aTool {
    /// Whether a remote run that escalated ends the calling run escalated too (default
    /// `false`: the model gets a tool error).
    #[must_use]
    pub fn escalates_parent(mut self, yes: bool) -> Self {
        self.escalates_parent = yes;
        self
    }

    fn message_for(arguments: &Value, context: &ToolContext) -> Message {
        match context.resuming() {
            Some(resume) => {
                let decisions: &Decisions = &resume.decisions;
                let parts = match decisions.get(REPLY_CALL) {
                    Some(Decision::Result {
                        value: Value::String(text),
                    }) if decisions.len() == 1 => {
                        vec![Part::text(text.clone())]
                    }
                    Some(Decision::Result { value }) if decisions.len() == 1 => {
                        vec![Part::data(value.clone())]
                    }
                    _ => vec![Part::data(json!({ "decisions": decisions }))],
                };
                let mut message = Message::new(Role::User, parts);
                message.task_id.clone_from(&resume.run_id);
                message
            }
            None => {
                let input = match arguments.get("input") {
                    Some(Value::String(text)) => text.clone(),
                    _ => arguments.to_string(),
                };
                Message::new(Role::User, vec![Part::text(input)])
            }
        }
    }

    fn ended(&self, task: Task) -> Result<String, ToolError> {
        let facts = task.metadata.as_ref().and_then(|m| m.get(METADATA_KEY));
        let state = task.status.state;
        let text_of = |message: &Option<Message>| -> String {
            message
                .iter()
                .flat_map(|m| m.parts.iter())
                .filter_map(|p| p.text.clone())
                .collect::<Vec<_>>()
                .join("\n")
        };
        match state {
            TaskState::Completed => {
                let parts: Vec<&Part> =
                    task.artifacts.iter().flat_map(|a| a.parts.iter()).collect();
                if let [part] = parts.as_slice()
                    && let Some(data) = &part.data
                {
                    return Ok(data.to_string());
                }
                Ok(parts
                    .iter()
                    .map(|p| {
                        p.text
                            .clone()
                            .or_else(|| p.data.as_ref().map(Value::to_string))
                            .unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join("\n"))
            }
            TaskState::InputRequired => {
                let pending = task
                    .status
                    .message
                    .iter()
                    .flat_map(|m| m.parts.iter())
                    .filter_map(|p| p.data.as_ref()?.get("pending").cloned())
                    .find_map(|v| serde_json::from_value::<Vec<PendingCall>>(v).ok());
                let pending = match pending {
                    Some(pending) if !pending.is_empty() => pending,
                    _ => {
                        let note = text_of(&task.status.message);
                        let note = if note.is_empty() {
                            "the remote agent asks for input".to_owned()
                        } else {
                            note
                        };
                        vec![PendingCall::new(
                            REPLY_CALL,
                            self.name.clone(),
                            json!({ "question": note }),
                            PauseReason::Deferred { note },
                        )]
                    }
                };
                Err(ToolError::paused_inside(ChildPause::new(
                    task.id,
                    self.agent.name.clone(),
                    pending,
                )))
            }
            _ => {
                let ending = facts.and_then(|f| f.get("ending")).and_then(Value::as_str);
                if ending == Some("escalated") && self.escalates_parent {
                    let data = task
                        .status
                        .message
                        .iter()
                        .flat_map(|m| m.parts.iter())
                        .find_map(|p| p.data.clone())
                        .unwrap_or_default();
                    let get =
                        |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    return Err(ToolError::escalate(get("reason"), get("summary")));
                }
                let category = facts
                    .and_then(|f| f.get("category"))
                    .and_then(Value::as_str)
                    .unwrap_or("none");
                Err(ToolError::new(format!(
                    "the remote agent {} did not answer ({}, category {category}): {}",
                    self.agent.name,
                    state.as_str(),
                    text_of(&task.status.message)
                )))
            }
        }
    }
}

impl Tool for A2aTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name.clone(),
            self.description.clone(),
            agent_core::tool::agent_input_schema(),
        )
    }

    fn call<'a>(&'a self, arguments: Value, context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let mut limit = self.agent.timeout;
            if let Some(at) = context.deadline() {
                let left = at.saturating_duration_since(tokio::time::Instant::now());
                limit = limit.min(left.mul_f64(TIMEOUT_SHARE));
            }
            let message = Self::message_for(&arguments, &context);
            match self
                .agent
                .send(message, limit.max(Duration::from_millis(1)))
                .await
            {
                Ok(task) => self.ended(task),
                Err(error) => Err(ToolError::new(format!(
                    "the remote agent {} could not be reached: {error}",
                    self.agent.name
                ))),
            }
        })
    }
}
