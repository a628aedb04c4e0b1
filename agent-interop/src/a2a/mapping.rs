//! How a run's ending becomes an A2A task's state, and how a message becomes a run's
//! input or the decisions that resume a paused run. The table is in the crate docs and
//! `docs/interop.md`.

use agent_core::durable::{Decisions, PendingCall};
use agent_core::store::RunRecord;
use agent_core::{AgentError, AgentResult, Ending};
use serde_json::{Map, Value, json};

use super::jsonrpc::{RpcCode, RpcError};
use super::types::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};
use crate::ids::now_rfc3339;

/// The metadata key under which a task carries what agent-core knows of its run.
pub const METADATA_KEY: &str = "agentCore";

/// The id of the artifact a completed task's value is in.
pub const OUTPUT_ARTIFACT: &str = "output";

/// A status of `state` at this instant, with the agent's `message` if any.
pub(crate) fn status(state: TaskState, message: Option<Message>) -> TaskStatus {
    TaskStatus {
        state,
        message,
        timestamp: Some(now_rfc3339()),
    }
}

/// The run's input: text parts as they are, data parts as their JSON text, joined by a
/// blank line.
pub(crate) fn input_of(message: &Message) -> Result<String, RpcError> {
    let mut pieces = Vec::with_capacity(message.parts.len());
    for part in &message.parts {
        match (&part.text, &part.data) {
            (Some(text), _) => pieces.push(text.clone()),
            (None, Some(data)) => pieces.push(data.to_string()),
            (None, None) => {
                return Err(RpcError::new(
                    RpcCode::InvalidParams,
                    "this agent takes text and data parts (text/plain, application/json), \
                     not files",
                ));
            }
        }
    }
    if pieces.is_empty() {
        return Err(RpcError::new(
            RpcCode::InvalidParams,
            "the message has no parts",
        ));
    }
    Ok(pieces.join("\n\n"))
}

/// The decisions a message for an input-required task carries: the `decisions` member
/// of its first data part that has one (a map from call id to decision, as
/// `agent_core::durable::Decisions` serializes).
pub(crate) fn decisions_of(message: &Message) -> Result<Decisions, RpcError> {
    let found = message
        .parts
        .iter()
        .filter_map(|p| p.data.as_ref())
        .find_map(|d| d.get("decisions"));
    let Some(decisions) = found else {
        return Err(RpcError::new(
            RpcCode::InvalidParams,
            "the task waits for decisions: send a data part {\"decisions\": {CALL_ID: \
             {\"decision\": \"approve\"}}} (approve, deny with reason, edit with arguments, \
             result with value)",
        ));
    };
    serde_json::from_value(decisions.clone()).map_err(|e| {
        RpcError::new(
            RpcCode::InvalidParams,
            format!("the decisions do not read: {e}"),
        )
    })
}

fn meta(entries: Value) -> Option<Map<String, Value>> {
    let mut map = Map::new();
    map.insert(METADATA_KEY.into(), entries);
    Some(map)
}

/// The agent's message for `parts`, in task `task`.
fn agent_message(task: &Task, parts: Vec<Part>) -> Message {
    let mut message = Message::new(Role::Agent, parts);
    message.task_id.clone_from(&task.id);
    message.context_id.clone_from(&task.context_id);
    message
}

/// `task` as its run ended: state, status message, artifacts and metadata.
///
/// | ending | state | what the task carries |
/// |---|---|---|
/// | answered | `TASK_STATE_COMPLETED` | artifact `output`: one data part, the value |
/// | paused | `TASK_STATE_INPUT_REQUIRED` | status message: a text part, and a data part `{"pending": [PendingCall..]}` |
/// | escalated | `TASK_STATE_FAILED` | status message naming the escalation; data `{"ending": "escalated", "reason", "summary"}` |
/// | failed, exhausted, stuck | `TASK_STATE_FAILED` (`TASK_STATE_CANCELED` for `cancelled`) | status message: `"CATEGORY: error"`, data `{"ending", "category"}` |
pub(crate) fn finish<T>(task: Task, result: &AgentResult<T>) -> Task {
    let ending = result.ending().as_str();
    let facts = json!({
        "ending": ending,
        "traceId": result.trace_id,
        "agent": result.agent,
    });
    let end = match &result.outcome {
        // The validated value as the run's stores keep it: the submitted JSON, or a
        // text answer as a JSON string.
        Ok(_) => End::Value(
            serde_json::from_str::<Value>(&result.output)
                .unwrap_or_else(|_| Value::String(result.output.clone())),
        ),
        Err(AgentError::Paused { pending, .. }) => End::Paused(pending.clone()),
        Err(error) => {
            let escalation = match error {
                AgentError::Escalated { reason, summary } => {
                    Some((reason.clone(), summary.clone()))
                }
                _ => None,
            };
            End::Failed {
                category: error.category().to_owned(),
                text: error.to_string(),
                escalation,
            }
        }
    };
    ended(task, ending, facts, end)
}

/// `task` as a run a worker ran ended, from its stored record (and, for a paused run,
/// the calls it waits on, read from its checkpoint): the same table as [`finish`].
pub(crate) fn finish_record(task: Task, record: &RunRecord, pending: Vec<PendingCall>) -> Task {
    let ending = record.ending.as_str();
    let facts = json!({
        "ending": ending,
        "traceId": record.metadata.get("trace_id").cloned().unwrap_or_default(),
        "agent": record.agent,
    });
    let end = match record.ending {
        Ending::Answered => End::Value(record.output.clone()),
        Ending::Paused => End::Paused(pending),
        _ => {
            let text = record.error.clone().unwrap_or_default();
            let escalation = (record.ending == Ending::Escalated).then(|| {
                let get = |k: &str| {
                    record
                        .output
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                (get("reason"), get("summary"))
            });
            End::Failed {
                category: record.category.clone().unwrap_or_else(|| "none".into()),
                text,
                escalation,
            }
        }
    };
    ended(task, ending, facts, end)
}

/// The category of a task whose run was lost with the process that ran it.
pub const INTERRUPTED: &str = "interrupted";

/// `task`, left `working` by a process that stopped before its run ended, as failed
/// with category `interrupted` (see `A2aServer::sweep`).
pub(crate) fn interrupted(task: Task) -> Task {
    failed(
        task,
        INTERRUPTED,
        "the process running this task stopped before its run ended",
    )
}

/// `task` as failed (ending `failed`) with `category` and `text`, its run never ended
/// by agent-core (lost, dead-lettered, never queued).
pub(crate) fn failed(task: Task, category: &str, text: &str) -> Task {
    let facts = json!({"ending": "failed", "category": category});
    let end = End::Failed {
        category: category.to_owned(),
        text: text.to_owned(),
        escalation: None,
    };
    ended(task, "failed", facts, end)
}

/// How a run ended, as the task shows it.
enum End {
    Value(Value),
    Paused(Vec<PendingCall>),
    Failed {
        category: String,
        text: String,
        escalation: Option<(String, String)>,
    },
}

fn ended(mut task: Task, ending: &str, mut facts: Value, end: End) -> Task {
    match end {
        End::Value(value) => {
            task.artifacts = vec![Artifact {
                artifact_id: OUTPUT_ARTIFACT.into(),
                name: OUTPUT_ARTIFACT.into(),
                parts: vec![Part::data(value)],
                metadata: None,
            }];
            task.status = status(TaskState::Completed, None);
        }
        End::Paused(pending) => {
            let text = format!(
                "The run waits for decisions on {} call(s). Reply in this task with a data \
                 part {{\"decisions\": {{CALL_ID: {{\"decision\": \"approve\"}}}}}} (or deny \
                 with a reason, edit with arguments, result with a value).",
                pending.len()
            );
            let parts = vec![Part::text(text), Part::data(json!({ "pending": pending }))];
            let message = agent_message(&task, parts);
            task.history.push(message.clone());
            task.status = status(TaskState::InputRequired, Some(message));
        }
        End::Failed {
            category,
            text,
            escalation,
        } => {
            facts["category"] = json!(category);
            let mut data = json!({"ending": ending, "category": category});
            let text = match escalation {
                Some((reason, summary)) => {
                    let text =
                        format!("escalated: the agent handed the task to a person: {reason}");
                    data["reason"] = json!(reason);
                    data["summary"] = json!(summary);
                    text
                }
                None => format!("{category}: {text}"),
            };
            let state = if category == "cancelled" {
                TaskState::Canceled
            } else {
                TaskState::Failed
            };
            let message = agent_message(&task, vec![Part::text(text), Part::data(data)]);
            task.history.push(message.clone());
            task.status = status(state, Some(message));
        }
    }
    task.metadata = meta(facts);
    task
}

/// A copy of `task` with at most `length` messages of history (the newest).
pub(crate) fn with_history(task: &Task, length: Option<u32>) -> Task {
    let mut task = task.clone();
    if let Some(n) = length {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let cut = task.history.len().saturating_sub(n);
        task.history.drain(..cut);
    }
    task
}
