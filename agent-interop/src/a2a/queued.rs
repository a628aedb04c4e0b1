//! Tasks run by queue workers (`A2aServer::queue`): a message puts the task's run on
//! agent-worker's NATS JetStream queue as a job (run id = task id), a worker runs it
//! and stores its record, and the task's state is written from that record when the
//! worker says it is done. And the sweep of tasks left `working` by a process that
//! stopped (`A2aServer::sweep`).

use std::sync::Arc;

use agent_core::durable::{CheckpointStore, PendingCall, paused_runs, record_decisions};
use agent_core::store::StoreError;
use agent_core::{AgentOutput, Ending};
use agent_worker::{Job, QueueEvent};
use futures::StreamExt;
use tokio::sync::mpsc;

use super::jsonrpc::{RpcCode, RpcError};
use super::mapping::{self, input_of};
use super::run::{Shared, Started, refused, send_end, store};
use super::tasks::{Queued, TaskRecord, TaskStore};
use super::types::{StreamResponse, Task, TaskState};

/// Runs the queued task to its end on a task of its own (so that a client that goes
/// away loses nothing) and returns it as stored.
pub(crate) async fn run_to_end<T: AgentOutput + Sync>(
    shared: &Arc<Shared<T>>,
    queued: &Arc<Queued>,
    started: Started,
) -> Result<Task, RpcError> {
    let (shared, queued) = (Arc::clone(shared), Arc::clone(queued));
    let job = tokio::spawn(async move { run_queued(&shared, &queued, started).await });
    job.await
        .map_err(|_| internal("the task's wait stopped unexpectedly", "a panic"))?
}

/// The queued task's A2A stream, as `run::run_streamed` sends an in-process one: the
/// task (working), then, when the worker is done, the artifact and final status
/// updates. A wait that fails ends the stream (the task, as stored, is `GetTask`'s).
pub(crate) fn run_streamed<T: AgentOutput + Sync>(
    shared: &Arc<Shared<T>>,
    queued: &Arc<Queued>,
    started: Started,
) -> mpsc::Receiver<StreamResponse> {
    let (sender, receiver) = mpsc::channel(64);
    let (shared, queued) = (Arc::clone(shared), Arc::clone(queued));
    tokio::spawn(async move {
        let first = StreamResponse {
            task: Some(started.record().task.clone()),
            ..StreamResponse::default()
        };
        let _ = sender.send(first).await;
        match run_queued(&shared, &queued, started).await {
            Ok(task) => send_end(&sender, &task).await,
            Err(error) => {
                tracing::warn!(error = %error.message, "a queued A2A task did not end");
            }
        }
    });
    receiver
}

fn internal(what: &str, error: impl std::fmt::Display) -> RpcError {
    RpcError::new(RpcCode::InternalError, format!("{what}: {error}"))
}

/// Puts the task's run on the queue (a new run as a job; a resume as its decisions
/// recorded in the checkpoint, then the job put back) and waits for a worker to end
/// it; returns the task as stored. A task canceled meanwhile stays canceled.
pub(crate) async fn run_queued<T: AgentOutput + Sync>(
    shared: &Shared<T>,
    queued: &Queued,
    started: Started,
) -> Result<Task, RpcError> {
    // Opened before the job goes on the queue: its end cannot come first.
    let mut events = queued
        .queue
        .events()
        .await
        .map_err(|e| internal("the queue cannot be read", e))?;
    let agent = shared.config.name().to_owned();
    let record = match started {
        Started::New { record, input } => {
            let job = Job::new(agent, input, record.run_id.clone());
            if let Err(error) = queued.queue.submit(&job).await {
                let task = mapping::failed(record.task.clone(), "unavailable", &error.to_string());
                let _ = store(shared, TaskRecord { task, ..record }).await;
                return Err(internal("the task could not be queued", error));
            }
            record
        }
        Started::Resume {
            record,
            before,
            decisions,
        } => {
            let recorded =
                record_decisions(queued.checkpoints.as_ref(), &record.run_id, decisions).await;
            if let Err(error) = recorded {
                return Err(refused(shared, *before, error).await);
            }
            let job = Job::new(agent, String::new(), record.run_id.clone());
            if let Err(error) = queued.queue.resume(&job).await {
                return Err(refused(shared, *before, error).await);
            }
            record
        }
    };
    let run_id = record.run_id.clone();
    while let Some(event) = events.next().await {
        match event {
            QueueEvent::Done(done) if done.run_id == run_id => {
                return settle(shared, queued, record).await;
            }
            QueueEvent::Dead(letter) if letter.run_id() == Some(run_id.as_str()) => {
                let task = mapping::failed(record.task.clone(), "dead_letter", &letter.reason);
                return keep(shared, TaskRecord { task, ..record }).await;
            }
            _ => {}
        }
    }
    Err(RpcError::new(
        RpcCode::InternalError,
        "the queue's connection ended before the task's run did; the task stays working \
         (GetTask reads it later; A2aServer::sweep settles it)",
    ))
}

/// Writes `record` unless the stored task was canceled meanwhile (that stays).
async fn keep<T>(shared: &Shared<T>, record: TaskRecord) -> Result<Task, RpcError> {
    if let Ok(Some(now)) = shared.tasks.get(&record.task.id).await
        && now.task.status.state == TaskState::Canceled
    {
        return Ok(now.task);
    }
    let task = record.task.clone();
    store(shared, record).await?;
    Ok(task)
}

/// The task as the worker's stored record of its run says it ended.
async fn settle<T>(
    shared: &Shared<T>,
    queued: &Queued,
    record: TaskRecord,
) -> Result<Task, RpcError> {
    let run = queued
        .results
        .run(&record.run_id)
        .await
        .map_err(|e| internal("the run's record cannot be read", e))?
        .ok_or_else(|| internal("no stored record of run", &record.run_id))?;
    let pending = if run.ending == Ending::Paused {
        pending_of(queued.checkpoints.as_ref(), &record.run_id)
            .await
            .map_err(|e| internal("the paused run's checkpoint cannot be read", e))?
            .map(|(pending, _)| pending)
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let task = mapping::finish_record(record.task.clone(), &run, pending);
    keep(shared, TaskRecord { task, ..record }).await
}

/// The calls paused run `run_id` waits on, and whether each has a decision recorded;
/// `None` when the run is not paused.
async fn pending_of(
    checkpoints: &dyn CheckpointStore,
    run_id: &str,
) -> Result<Option<(Vec<PendingCall>, bool)>, StoreError> {
    let runs = paused_runs(checkpoints, usize::MAX).await?;
    Ok(runs.into_iter().find(|r| r.run_id == run_id).map(|r| {
        let decided = r
            .pending
            .iter()
            .all(|p| r.decided.get(&p.call_id).is_some());
        (r.pending, decided)
    }))
}

/// What [`A2aServer::sweep`](super::A2aServer::sweep) did, by task id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Swept {
    /// Tasks marked failed, category `interrupted`: their run was in this server's
    /// process (not queued), and that process stopped before it ended.
    pub failed: Vec<String>,
    /// Tasks whose run a worker had ended: their state written from its record (or, for
    /// a resume whose decisions never reached the checkpoint, set back to
    /// input-required with the calls it waits on).
    pub settled: Vec<String>,
    /// Tasks whose run was put on the queue again (a new task's job, or a resume whose
    /// decisions are recorded): the job may never have reached the queue. A job that
    /// did is not run twice: the run's checkpoint fences a second delivery.
    pub requeued: Vec<String>,
    /// Tasks left as they were: their run is going on in a worker.
    pub left: Vec<String>,
}

/// The most `working` tasks one sweep reads.
const SWEEP_LIMIT: usize = 10_000;

/// Settles the tasks of `agent` in `tasks` left `working` (see `A2aServer::sweep`).
pub(crate) async fn sweep(
    agent: &str,
    tasks: &dyn TaskStore,
    queued: Option<&Queued>,
) -> Result<Swept, StoreError> {
    let working = tasks
        .in_state(agent, TaskState::Working, SWEEP_LIMIT)
        .await?;
    let mut swept = Swept::default();
    for record in working {
        let id = record.task.id.clone();
        let Some(queued) = queued else {
            let task = mapping::interrupted(record.task.clone());
            tasks.put(TaskRecord { task, ..record }).await?;
            swept.failed.push(id);
            continue;
        };
        let run = queued.results.run(&record.run_id).await?;
        match run {
            Some(run) if run.ending != Ending::Paused => {
                let task = mapping::finish_record(record.task.clone(), &run, Vec::new());
                tasks.put(TaskRecord { task, ..record }).await?;
                swept.settled.push(id);
            }
            Some(run) => match pending_of(queued.checkpoints.as_ref(), &record.run_id).await? {
                // Paused, every call decided: the resume's job may be lost.
                Some((_, true)) => {
                    let job = Job::new(agent, String::new(), &record.run_id);
                    queue_again(queued.queue.resume(&job).await, &id)?;
                    swept.requeued.push(id);
                }
                // Paused without the decisions: the resume never got that far.
                Some((pending, false)) => {
                    let task = mapping::finish_record(record.task.clone(), &run, pending);
                    tasks.put(TaskRecord { task, ..record }).await?;
                    swept.settled.push(id);
                }
                // Resumed and going on.
                None => swept.left.push(id),
            },
            None => {
                let input = record
                    .task
                    .history
                    .first()
                    .and_then(|m| input_of(m).ok())
                    .unwrap_or_default();
                let job = Job::new(agent, input, &record.run_id);
                queue_again(queued.queue.submit(&job).await, &id)?;
                swept.requeued.push(id);
            }
        }
    }
    Ok(swept)
}

fn queue_again(outcome: Result<(), agent_worker::QueueError>, id: &str) -> Result<(), StoreError> {
    outcome
        .map_err(|e| StoreError::unavailable(format!("task {id} could not be queued again: {e}")))
}
