//! A task's run: started or resumed from a message, run on its own Tokio task (so that
//! a client that goes away loses nothing: the task's end is stored either way), its
//! end written to the task store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_core::durable::{Decisions, resume_agent_with};
use agent_core::stream::{StreamEvent, resume_agent_stream_with, run_agent_stream_with};
use agent_core::{AgentConfig, AgentOutput, AgentResult, CancellationToken, RunOptions};
use tokio::sync::mpsc;

use super::jsonrpc::{RpcCode, RpcError};
use super::mapping::{self, decisions_of, input_of, status};
use super::tasks::{Queued, TaskRecord, TaskStore};
use super::types::{
    AgentCard, Message, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState,
    TaskStatusUpdateEvent,
};
use crate::ids::fresh_id;

/// What every request shares.
pub(crate) struct Shared<T> {
    pub(crate) config: AgentConfig<T>,
    pub(crate) tasks: Arc<dyn TaskStore>,
    pub(crate) card: AgentCard,
    pub(crate) url_set: bool,
    pub(crate) max_body_bytes: usize,
    /// The cancellation tokens of the runs going on in this process, by task id.
    pub(crate) live: Mutex<HashMap<String, CancellationToken>>,
    /// Where runs go when queue workers run them (`A2aServer::queue`).
    pub(crate) queued: Option<Arc<Queued>>,
}

/// What a message starts: a new run, or a paused run resumed with decisions.
pub(crate) enum Started {
    New {
        record: TaskRecord,
        input: String,
    },
    Resume {
        record: TaskRecord,
        before: Box<TaskRecord>,
        decisions: Decisions,
    },
}

impl Started {
    pub(crate) fn record(&self) -> &TaskRecord {
        match self {
            Started::New { record, .. } | Started::Resume { record, .. } => record,
        }
    }
}

pub(crate) async fn load<T>(shared: &Shared<T>, id: &str) -> Result<TaskRecord, RpcError> {
    match shared.tasks.get(id).await {
        Ok(Some(record)) => Ok(record),
        Ok(None) => Err(RpcError::new(
            RpcCode::TaskNotFound,
            format!("no task {id}"),
        )),
        Err(error) => Err(RpcError::new(
            RpcCode::InternalError,
            format!("the task store failed: {error}"),
        )),
    }
}

pub(crate) async fn store<T>(shared: &Shared<T>, record: TaskRecord) -> Result<(), RpcError> {
    shared.tasks.put(record).await.map_err(|error| {
        RpcError::new(
            RpcCode::InternalError,
            format!("the task store failed: {error}"),
        )
    })
}

/// Reads the message: a new task, or the next message of an input-required one (its
/// decisions). The task is stored as working before anything runs.
pub(crate) async fn begin<T: AgentOutput + Sync>(
    shared: &Shared<T>,
    mut message: Message,
) -> Result<Started, RpcError> {
    if message.task_id.is_empty() {
        let input = input_of(&message)?;
        let id = fresh_id();
        if message.context_id.is_empty() {
            message.context_id = fresh_id();
        }
        message.task_id.clone_from(&id);
        let task = Task {
            id: id.clone(),
            context_id: message.context_id.clone(),
            status: status(TaskState::Working, None),
            artifacts: Vec::new(),
            history: vec![message],
            metadata: None,
        };
        let record = TaskRecord::new(task, shared.config.name(), id);
        store(shared, record.clone()).await?;
        return Ok(Started::New { record, input });
    }
    let before = load(shared, &message.task_id).await?;
    let state = before.task.status.state;
    if state != TaskState::InputRequired {
        return Err(RpcError::new(
            RpcCode::UnsupportedOperation,
            format!(
                "task {} is {}: only an input-required task takes another message",
                message.task_id,
                state.as_str()
            ),
        ));
    }
    let decisions = decisions_of(&message)?;
    let mut record = before.clone();
    message.context_id.clone_from(&record.task.context_id);
    record.task.history.push(message);
    record.task.status = status(TaskState::Working, None);
    store(shared, record.clone()).await?;
    Ok(Started::Resume {
        record,
        before: Box::new(before),
        decisions,
    })
}

/// Registers the run's cancellation token under its task id.
fn live<T>(shared: &Shared<T>, id: &str) -> CancellationToken {
    let token = CancellationToken::new();
    if let Ok(mut live) = shared.live.lock() {
        live.insert(id.to_owned(), token.clone());
    }
    token
}

async fn end<T>(shared: &Shared<T>, mut record: TaskRecord, result: &AgentResult<T>) -> Task {
    if let Ok(mut live) = shared.live.lock() {
        live.remove(&record.task.id);
    }
    record.task = mapping::finish(record.task, result);
    let task = record.task.clone();
    if let Err(error) = store(shared, record).await {
        tracing::warn!(task = %task.id, error = %error.message, "an A2A task's end was not stored");
    }
    task
}

/// Why a resume did not start: the task goes back to input-required.
pub(crate) async fn refused<T>(
    shared: &Shared<T>,
    before: TaskRecord,
    error: impl std::fmt::Display,
) -> RpcError {
    if let Ok(mut live) = shared.live.lock() {
        live.remove(&before.task.id);
    }
    let id = before.task.id.clone();
    let _ = store(shared, before).await;
    RpcError::new(
        RpcCode::InvalidParams,
        format!("task {id} cannot go on with these decisions: {error}"),
    )
}

/// Runs the task to its end on a task of its own and returns it as stored.
pub(crate) async fn run_to_end<T: AgentOutput + Sync>(
    shared: &Arc<Shared<T>>,
    started: Started,
) -> Result<Task, RpcError> {
    let shared = Arc::clone(shared);
    let job = tokio::spawn(async move {
        let token = live(&shared, &started.record().task.id);
        match started {
            Started::New { record, input } => {
                let options = RunOptions::new()
                    .run_id(record.run_id.clone())
                    .cancellation(token);
                let result = agent_core::run_agent_with(&shared.config, input, options).await;
                Ok(end(&shared, record, &result).await)
            }
            Started::Resume {
                record,
                before,
                decisions,
            } => {
                let options = RunOptions::new().decisions(decisions).cancellation(token);
                match resume_agent_with(&shared.config, &record.run_id, options).await {
                    Ok(result) => Ok(end(&shared, record, &result).await),
                    Err(error) => Err(refused(&shared, *before, error).await),
                }
            }
        }
    });
    job.await.map_err(|_| {
        RpcError::new(
            RpcCode::InternalError,
            "the task's run stopped unexpectedly",
        )
    })?
}

/// Runs the task on a task of its own, sending its A2A stream: the task (working), an
/// artifact update with the value when it completes, and the final status update. The
/// run goes on, and its end is stored, when the receiver goes away.
pub(crate) fn run_streamed<T: AgentOutput + Sync>(
    shared: &Arc<Shared<T>>,
    started: Started,
) -> mpsc::Receiver<StreamResponse> {
    let (sender, receiver) = mpsc::channel(64);
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let first = StreamResponse {
            task: Some(started.record().task.clone()),
            ..StreamResponse::default()
        };
        let _ = sender.send(first).await;
        let token = live(&shared, &started.record().task.id);
        let config: &AgentConfig<T> = &shared.config;
        let (record, events) = match started {
            Started::New { record, input } => {
                let options = RunOptions::new()
                    .run_id(record.run_id.clone())
                    .cancellation(token);
                let events = run_agent_stream_with(config, input, options);
                (record, events)
            }
            Started::Resume {
                record,
                before,
                decisions,
            } => {
                let options = RunOptions::new().decisions(decisions).cancellation(token);
                match resume_agent_stream_with(config, &record.run_id, options).await {
                    Ok(events) => (record, events),
                    Err(error) => {
                        let error = refused(&shared, *before.clone(), error).await;
                        let mut task = before.task;
                        let message = Message::new(
                            super::types::Role::Agent,
                            vec![super::types::Part::text(error.message)],
                        );
                        task.status = status(TaskState::InputRequired, Some(message));
                        let _ = sender.send(status_update(&task)).await;
                        return;
                    }
                }
            }
        };
        let mut events = events;
        let mut result = None;
        while let Some(event) = events.next().await {
            if let StreamEvent::Finished(finished) = event {
                result = Some(finished);
            }
        }
        let Some(result) = result else {
            return;
        };
        let task = end(&shared, record, &result).await;
        send_end(&sender, &task).await;
    });
    receiver
}

/// The end of a task's stream: an artifact update per artifact, then the final status.
pub(crate) async fn send_end(sender: &mpsc::Sender<StreamResponse>, task: &Task) {
    {
        for artifact in &task.artifacts {
            let update = StreamResponse {
                artifact_update: Some(TaskArtifactUpdateEvent {
                    task_id: task.id.clone(),
                    context_id: task.context_id.clone(),
                    artifact: artifact.clone(),
                    append: false,
                    last_chunk: true,
                }),
                ..StreamResponse::default()
            };
            let _ = sender.send(update).await;
        }
        let _ = sender.send(status_update(task)).await;
    }
}

fn status_update(task: &Task) -> StreamResponse {
    StreamResponse {
        status_update: Some(TaskStatusUpdateEvent {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            status: task.status.clone(),
            metadata: task.metadata.clone(),
        }),
        ..StreamResponse::default()
    }
}
