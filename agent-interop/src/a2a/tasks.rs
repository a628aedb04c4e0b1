//! Where an A2A server keeps its tasks: [`TaskStore`], in memory ([`InMemoryTasks`]) or
//! in an `agent_store::Store` (SQLite or PostgreSQL; migration 9's `protocol_tasks`
//! table), so that a task outlives the process that took it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use agent_core::store::StoreError;

use super::types::{Task, TaskState};

/// Where a queued server's runs go and where their ends are read
/// (`A2aServer::queue`).
pub(crate) struct Queued {
    pub(crate) queue: agent_worker::Queue,
    pub(crate) results: Arc<dyn agent_core::store::FeedbackStore>,
    pub(crate) checkpoints: Arc<dyn agent_core::durable::CheckpointStore>,
}

/// The future a [`TaskStore`] returns.
pub type TaskFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A stored task: the protocol's task, the agent that serves it, and the run it
/// started (the checkpoint's run id, which resumes it).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct TaskRecord {
    /// The task as served.
    pub task: Task,
    /// The agent's name.
    pub agent: String,
    /// The run's id (equal to the task id for runs this crate starts).
    pub run_id: String,
}

impl TaskRecord {
    /// A record from its parts.
    pub fn new(task: Task, agent: impl Into<String>, run_id: impl Into<String>) -> Self {
        Self {
            task,
            agent: agent.into(),
            run_id: run_id.into(),
        }
    }
}

/// Keeps A2A tasks by id.
pub trait TaskStore: Send + Sync + 'static {
    /// Writes `record` (replacing the task of the same id).
    ///
    /// # Errors
    /// The backend's [`StoreError`].
    fn put(&self, record: TaskRecord) -> TaskFuture<'_, ()>;

    /// The task `id`, or `None`.
    ///
    /// # Errors
    /// The backend's [`StoreError`], or [`StoreError::Invalid`] for a stored body that
    /// is not a task.
    fn get<'a>(&'a self, id: &'a str) -> TaskFuture<'a, Option<TaskRecord>>;

    /// The tasks of agent `agent` in state `state`, at most `limit` (what
    /// [`A2aServer::sweep`](super::A2aServer::sweep) reads: tasks left `working`).
    ///
    /// # Errors
    /// As [`get`](Self::get).
    fn in_state<'a>(
        &'a self,
        agent: &'a str,
        state: TaskState,
        limit: usize,
    ) -> TaskFuture<'a, Vec<TaskRecord>>;
}

/// Tasks in this process's memory (lost when it exits): the default of
/// [`A2aServer`](super::A2aServer).
#[derive(Clone, Debug, Default)]
pub struct InMemoryTasks {
    tasks: Arc<Mutex<HashMap<String, TaskRecord>>>,
}

impl InMemoryTasks {
    /// No tasks.
    pub fn new() -> Self {
        Self::default()
    }
}

impl TaskStore for InMemoryTasks {
    fn put(&self, record: TaskRecord) -> TaskFuture<'_, ()> {
        Box::pin(async move {
            if let Ok(mut tasks) = self.tasks.lock() {
                tasks.insert(record.task.id.clone(), record);
            }
            Ok(())
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> TaskFuture<'a, Option<TaskRecord>> {
        Box::pin(async move { Ok(self.tasks.lock().ok().and_then(|t| t.get(id).cloned())) })
    }

    fn in_state<'a>(
        &'a self,
        agent: &'a str,
        state: TaskState,
        limit: usize,
    ) -> TaskFuture<'a, Vec<TaskRecord>> {
        Box::pin(async move {
            let tasks = self.tasks.lock().map(|t| {
                let mut found: Vec<TaskRecord> = t
                    .values()
                    .filter(|r| r.agent == agent && r.task.status.state == state)
                    .cloned()
                    .collect();
                found.sort_by(|a, b| a.task.id.cmp(&b.task.id));
                found.truncate(limit);
                found
            });
            Ok(tasks.unwrap_or_default())
        })
    }
}

/// The protocol name of the rows this crate writes (`protocol_tasks.protocol`).
const PROTOCOL: &str = "a2a";

impl TaskStore for agent_store::Store {
    fn put(&self, record: TaskRecord) -> TaskFuture<'_, ()> {
        Box::pin(async move {
            let body = serde_json::to_string(&record.task)
                .map_err(|e| StoreError::invalid(format!("a task that is not JSON: {e}")))?;
            let row = agent_store::ProtocolTask::new(
                PROTOCOL,
                &record.task.id,
                &record.task.context_id,
                record.agent,
                record.run_id,
                record.task.status.state.as_str(),
                body,
            );
            self.put_protocol_task(&row).await
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> TaskFuture<'a, Option<TaskRecord>> {
        Box::pin(async move {
            let Some(row) = self.protocol_task(PROTOCOL, id).await? else {
                return Ok(None);
            };
            let task: Task = serde_json::from_str(&row.body).map_err(|e| {
                StoreError::invalid(format!("the stored A2A task {id} is not a task: {e}"))
            })?;
            Ok(Some(TaskRecord::new(task, row.agent, row.run_id)))
        })
    }

    fn in_state<'a>(
        &'a self,
        agent: &'a str,
        state: TaskState,
        limit: usize,
    ) -> TaskFuture<'a, Vec<TaskRecord>> {
        Box::pin(async move {
            let rows = self
                .protocol_tasks_in_state(PROTOCOL, agent, state.as_str(), limit)
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let task: Task = serde_json::from_str(&row.body).map_err(|e| {
                    StoreError::invalid(format!(
                        "the stored A2A task {} is not a task: {e}",
                        row.id
                    ))
                })?;
                out.push(TaskRecord::new(task, row.agent, row.run_id));
            }
            Ok(out)
        })
    }
}
