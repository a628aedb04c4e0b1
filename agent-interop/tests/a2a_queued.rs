//! A2A tasks run by queue workers (`A2aServer::queue`): on the real NATS JetStream
//! (`NATS_URL`, default `nats://127.0.0.1:4222`, a namespace per test) and a store on
//! both backends; and the sweep of tasks a stopped process left `working`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use agent_core::CancellationToken;
use agent_core::store::FeedbackStore;
use agent_interop::a2a::types::{Message, Part, Role, Task, TaskState};
use agent_interop::a2a::{A2aServer, INTERRUPTED, TaskRecord, TaskStore};
use agent_store::Store;
use agent_worker::{Queue, QueueOptions, Registry, Worker, WorkerOptions};
use serde_json::{Value, json};

use crate::common::{Place, answering, approving, serve, unique};

/// The queue of a test: its own namespace, or `None` (with a message) when NATS does
/// not answer and `CI` is not `true`.
async fn queue() -> Option<Queue> {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let options = QueueOptions::new().url(url).namespace(unique("a2aq"));
    match Queue::connect(options).await {
        Ok(queue) => Some(queue),
        Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("NATS is unreachable under CI=true")
        }
        Err(e) => {
            eprintln!("skipped: NATS is unreachable ({e})");
            None
        }
    }
}

/// A worker serving `triage` and `refunds` (both checkpointing into `store`), until
/// the token is cancelled.
fn worker(queue: &Queue, store: &Store) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let registry = Registry::new()
        .with(answering())
        .with(approving(Some(store.clone())));
    let worker = Worker::new(
        queue.clone(),
        Arc::new(store.clone()),
        registry,
        WorkerOptions::new(),
    );
    let token = CancellationToken::new();
    let stop = token.clone();
    let handle = tokio::spawn(async move {
        let _ = worker.run(stop).await;
    });
    (token, handle)
}

async fn rpc(url: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let value: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    value
}

fn message(parts: Value, task_id: Option<&str>) -> Value {
    let mut message = json!({"messageId": unique("m"), "role": "ROLE_USER", "parts": parts});
    if let Some(id) = task_id {
        message["taskId"] = json!(id);
    }
    json!({ "message": message })
}

async fn queued_tasks(place: &Place) {
    let Some(queue) = queue().await else { return };
    let store = place.open().await;
    let (stop, running) = worker(&queue, &store);
    let triage = serve(
        A2aServer::new(answering())
            .tasks(store.clone())
            .queue(queue.clone(), Arc::new(store.clone()))
            .router(),
    )
    .await;
    // Answered on the worker: completed with the value.
    let reply = rpc(
        &triage,
        "SendMessage",
        message(json!([{"text": "Where is NW-10231?"}]), None),
    )
    .await;
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    assert!(task["artifacts"][0]["parts"][0]["data"]["severity"].is_number());
    assert_eq!(task["metadata"]["agentCore"]["ending"], "answered");
    let id = task["id"].as_str().unwrap();
    // The worker's record of the run is under the task id.
    let record = store.run(id).await.unwrap().unwrap();
    assert_eq!(record.agent, "triage");
    assert_eq!(record.input, "Where is NW-10231?");
    assert_eq!(
        record.metadata.get("delivery").map(String::as_str),
        Some("1")
    );

    // Paused on the worker: input-required with the pending call from the checkpoint;
    // decisions resume it on the worker.
    let refunds = serve(
        A2aServer::new(approving(Some(store.clone())))
            .tasks(store.clone())
            .queue(queue.clone(), Arc::new(store.clone()))
            .router(),
    )
    .await;
    let reply = rpc(
        &refunds,
        "SendMessage",
        message(json!([{"text": "Refund NW-10231."}]), None),
    )
    .await;
    let task = &reply["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{reply}"
    );
    let pending = &task["status"]["message"]["parts"][1]["data"]["pending"];
    assert_eq!(pending[0]["tool"], "refund");
    let call = pending[0]["call_id"].as_str().unwrap();
    let id = task["id"].as_str().unwrap();
    // Decisions that do not fit: refused, the task still waits.
    let wrong = json!([{"data": {"decisions": {"nope": {"decision": "approve"}}}}]);
    let reply = rpc(&refunds, "SendMessage", message(wrong, Some(id))).await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let got = rpc(&refunds, "GetTask", json!({"id": id})).await;
    assert_eq!(
        got["result"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    let decisions = json!([{"data": {"decisions": {call: {"decision": "approve"}}}}]);
    let reply = rpc(&refunds, "SendMessage", message(decisions, Some(id))).await;
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    let record = store.run(id).await.unwrap().unwrap();
    assert_eq!(record.ending, agent_core::Ending::Answered);
    assert_eq!(
        record.metadata.get("resumed").map(String::as_str),
        Some("true")
    );

    stop.cancel();
    running.await.unwrap();
    queue.delete().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_tasks_run_on_a_worker_on_sqlite() {
    let place = Place::sqlite();
    queued_tasks(&place).await;
    place.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_tasks_run_on_a_worker_on_postgres() {
    let Some(place) = Place::postgres().await else {
        return;
    };
    queued_tasks(&place).await;
    place.remove().await;
}

/// A task as a process that stopped mid-run left it: `working`, its first message
/// holding `text`.
fn left_working(agent: &str, text: &str) -> TaskRecord {
    let id = unique("task");
    let mut first = Message::new(Role::User, vec![Part::text(text)]);
    first.task_id.clone_from(&id);
    let task: Task = serde_json::from_value(json!({
        "id": id,
        "contextId": "ctx",
        "status": {"state": "TASK_STATE_WORKING"},
        "history": [first],
    }))
    .unwrap();
    TaskRecord::new(task, agent, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_fails_tasks_whose_process_stopped() {
    let place = Place::sqlite();
    let store = place.open().await;
    let lost = left_working("triage", "Where is NW-1?");
    let other = left_working("refunds", "Refund NW-2.");
    store.put(lost.clone()).await.unwrap();
    store.put(other.clone()).await.unwrap();
    let server = A2aServer::new(answering()).tasks(store.clone());
    let swept = server.sweep().await.unwrap();
    assert_eq!(swept.failed, std::slice::from_ref(&lost.task.id));
    assert!(swept.settled.is_empty() && swept.requeued.is_empty() && swept.left.is_empty());
    let got = store.get(&lost.task.id).await.unwrap().unwrap();
    assert_eq!(got.task.status.state, TaskState::Failed);
    let facts = &got.task.metadata.as_ref().unwrap()["agentCore"];
    assert_eq!(facts["category"], INTERRUPTED);
    // Another agent's task is not this server's.
    let untouched = store.get(&other.task.id).await.unwrap().unwrap();
    assert_eq!(untouched.task.status.state, TaskState::Working);
    // A second sweep finds nothing.
    assert!(server.sweep().await.unwrap().failed.is_empty());
    place.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_requeues_a_lost_job_and_settles_it_once_a_worker_ran_it() {
    let Some(queue) = queue().await else { return };
    let place = Place::sqlite();
    let store = place.open().await;
    // A task whose job never reached the queue (the process stopped in between).
    let lost = left_working("triage", "Where is NW-3?");
    store.put(lost.clone()).await.unwrap();
    let server = A2aServer::new(answering())
        .tasks(store.clone())
        .queue(queue.clone(), Arc::new(store.clone()));
    let swept = server.sweep().await.unwrap();
    assert_eq!(swept.requeued, std::slice::from_ref(&lost.task.id));
    let (stop, running) = worker(&queue, &store);
    // Bounded wait for the worker's record (not a timing assertion).
    let mut record = None;
    for _ in 0..600 {
        record = store.run(&lost.run_id).await.unwrap();
        if record.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let record = record.expect("the worker ran the requeued job");
    assert_eq!(record.input, "Where is NW-3?");
    let swept = server.sweep().await.unwrap();
    assert_eq!(swept.settled, std::slice::from_ref(&lost.task.id));
    let got = store.get(&lost.task.id).await.unwrap().unwrap();
    assert_eq!(got.task.status.state, TaskState::Completed);
    assert!(got.task.artifacts[0].parts[0].data.as_ref().unwrap()["severity"].is_number());
    stop.cancel();
    running.await.unwrap();
    queue.delete().await.unwrap();
    place.remove().await;
}
