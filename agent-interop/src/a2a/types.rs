//! The A2A protocol's data types, as the JSON-RPC binding of A2A **1.0** puts them on
//! the wire (the specification's `a2a.proto`, package `lf.a2a.v1`, in ProtoJSON: field
//! names in lowerCamelCase, enums as their names, `google.protobuf.Value` as plain JSON).
//! Only the messages this crate sends or reads are here; unknown fields are ignored on
//! input, empty ones are left out on output.
//!
//! Source: the A2A specification 1.0 (<https://a2a-protocol.org/v1.0.0/specification/>)
//! and the official Python SDK `a2a-sdk` 1.3.0 (`a2a/types/a2a_pb2.pyi`), which the
//! tests of this crate talk to.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version this crate speaks (`protocolVersion` in the card, the
/// `A2A-Version` header).
pub const PROTOCOL_VERSION: &str = "1.0";

/// The path an agent card is served at (A2A 1.0, "Agent Discovery").
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

fn is_false(b: &bool) -> bool {
    !*b
}

/// The state of a task (`TaskState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum TaskState {
    /// `TASK_STATE_UNSPECIFIED` (never sent by this crate).
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    /// Received, not yet started.
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    /// The run is going on.
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    /// Ended with an answer (terminal).
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    /// Ended without one (terminal).
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    /// Cancelled by the client (terminal).
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    /// Waits for the client's next message (interrupted, not terminal).
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    /// The agent declined the task (terminal).
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    /// Waits for authentication (interrupted).
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    /// Whether nothing more happens to a task in this state (completed, failed,
    /// canceled, rejected).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// The wire name (`TASK_STATE_COMPLETED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }
}

/// Who sent a message (`Role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Role {
    /// `ROLE_UNSPECIFIED`.
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    /// The client.
    #[serde(rename = "ROLE_USER")]
    User,
    /// The agent.
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

/// One piece of a message or artifact (`Part`): exactly one of `text`, `raw` (base64
/// bytes), `url` or `data` (any JSON value), with an optional media type and file name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Bytes, base64 (standard alphabet) on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// A URL to the content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Structured data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// The part's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// A file name, for `raw` or `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The media type (`text/plain`, `application/json`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// A data part (`application/json`).
    pub fn data(data: Value) -> Self {
        Self {
            data: Some(data),
            media_type: Some("application/json".into()),
            ..Self::default()
        }
    }
}

/// A message (`Message`): one turn of the client or the agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Message {
    /// The message's id (the sender makes it).
    #[serde(default)]
    pub message_id: String,
    /// The conversation it belongs to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context_id: String,
    /// The task it continues, when it continues one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    /// Who sent it.
    pub role: Role,
    /// Its content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Its metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl Message {
    /// A message of `role` with these parts and a fresh id.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Self {
            message_id: crate::ids::fresh_id(),
            context_id: String::new(),
            task_id: String::new(),
            role,
            parts,
            metadata: None,
        }
    }
}

/// A task's status (`TaskStatus`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// The agent's message with the state (the pending calls of an input-required
    /// task, the failure of a failed one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// When the state was set (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// An output of a task (`Artifact`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Artifact {
    /// The artifact's id.
    pub artifact_id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Its metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A task (`Task`): one piece of work, its status, outputs and history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Task {
    /// The task's id.
    pub id: String,
    /// The conversation it belongs to.
    #[serde(default)]
    pub context_id: String,
    /// Its status.
    pub status: TaskStatus,
    /// Its outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// The messages exchanged, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// Its metadata (this crate: `agentCore`, see the crate docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A change of a task's status, in a stream (`TaskStatusUpdateEvent`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskStatusUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its conversation.
    #[serde(default)]
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// An artifact of a task, in a stream (`TaskArtifactUpdateEvent`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its conversation.
    #[serde(default)]
    pub context_id: String,
    /// The artifact.
    pub artifact: Artifact,
    /// Whether it appends to an artifact sent before.
    #[serde(default, skip_serializing_if = "is_false")]
    pub append: bool,
    /// Whether it is the artifact's last piece.
    #[serde(default, skip_serializing_if = "is_false")]
    pub last_chunk: bool,
}

/// What `SendMessage` answers, and each event of `SendStreamingMessage`
/// (`SendMessageResponse` / `StreamResponse`): exactly one member set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StreamResponse {
    /// A task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Task>,
    /// A message (an answer without a task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// A status change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_update: Option<TaskStatusUpdateEvent>,
    /// An artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_update: Option<TaskArtifactUpdateEvent>,
}

/// The configuration of a `SendMessage` (`SendMessageConfiguration`); this crate reads
/// `historyLength` only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SendMessageConfiguration {
    /// How many messages of history the answered task carries (none: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<u32>,
    /// The output media types the client takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
}

/// The params of `SendMessage` and `SendStreamingMessage` (`SendMessageRequest`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SendMessageRequest {
    /// The message.
    pub message: Message,
    /// Its configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// The params of `GetTask` and `CancelTask` (`GetTaskRequest`, `CancelTaskRequest`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskIdParams {
    /// The task's id.
    pub id: String,
    /// How many messages of history to return (`GetTask`; none: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<u32>,
}

/// One way to reach an agent (`AgentInterface`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AgentInterface {
    /// The endpoint's URL.
    pub url: String,
    /// `JSONRPC` (the one binding this crate serves).
    pub protocol_binding: String,
    /// The protocol version (`1.0`).
    pub protocol_version: String,
}

/// What an agent can do beyond the basics (`AgentCapabilities`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AgentCapabilities {
    /// Whether `SendStreamingMessage` is served.
    #[serde(default)]
    pub streaming: bool,
    /// Whether push notifications are (never, here).
    #[serde(default)]
    pub push_notifications: bool,
}

/// One thing an agent does (`AgentSkill`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AgentSkill {
    /// A stable id.
    pub id: String,
    /// A name for people.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Keywords.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Example requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Input media types, where they differ from the card's defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_modes: Vec<String>,
    /// Output media types, where they differ from the card's defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_modes: Vec<String>,
}

/// An agent's self-description (`AgentCard`), served at [`AGENT_CARD_PATH`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AgentCard {
    /// The agent's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Where and how to reach it.
    pub supported_interfaces: Vec<AgentInterface>,
    /// The agent's version.
    pub version: String,
    /// Its capabilities.
    pub capabilities: AgentCapabilities,
    /// The input media types it takes.
    pub default_input_modes: Vec<String>,
    /// The output media types it gives.
    pub default_output_modes: Vec<String>,
    /// Its skills.
    pub skills: Vec<AgentSkill>,
}
