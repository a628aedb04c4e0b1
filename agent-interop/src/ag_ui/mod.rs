//! AG-UI 1.0 (the Agent-User Interaction protocol, <https://docs.ag-ui.com>, schema
//! <https://ag-ui.com/spec/1.0/schema.json>): a run as an SSE stream of AG-UI events
//! over axum ([`AgUiServer`]), mapped from `run_agent_stream`'s events by
//! [`Mapper`] (its table says what each event becomes).
//!
//! `POST /` takes a `RunAgentInput` (`threadId`, `runId`, `messages`, ...) and answers
//! with `text/event-stream`, one event per `data:` line. The run's input is the text of
//! the last `user` message. A run that pauses (a call waiting for approval, or a
//! deferred result) finishes with an `interrupt` outcome; the front end answers with a
//! new `RunAgentInput` on the same thread whose `resume` entries answer the interrupts
//! (see [`decision_of`]), which resumes the paused run from its checkpoint (the config
//! needs a checkpoint store). The paused run is found by `parentRunId` when given, else
//! by the thread's last paused run in this server.

mod events;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use agent_core::durable::Decisions;
use agent_core::stream::{RunStream, resume_agent_stream_with, run_agent_stream_with};
use agent_core::{AgentConfig, AgentOutput, RunOptions};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use events::{AG_UI_VERSION, Mapper, decision_of, interrupt};

/// The largest `RunAgentInput` taken by default (bytes): 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;

/// An agent served as an AG-UI event stream (see the module docs).
pub struct AgUiServer<T> {
    config: AgentConfig<T>,
    max_body_bytes: usize,
}

impl<T: AgentOutput> std::fmt::Debug for AgUiServer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgUiServer")
            .field("agent", &self.config.name())
            .field("max_body_bytes", &self.max_body_bytes)
            .finish()
    }
}

struct Shared<T> {
    config: AgentConfig<T>,
    max_body_bytes: usize,
    /// The last paused run of each thread.
    paused: Mutex<HashMap<String, String>>,
}

/// The members of `RunAgentInput` this server reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunAgentInput {
    thread_id: String,
    run_id: String,
    #[serde(default)]
    parent_run_id: Option<String>,
    messages: Vec<Value>,
    #[serde(default)]
    resume: Option<Vec<ResumeEntry>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResumeEntry {
    interrupt_id: String,
    status: String,
    #[serde(default)]
    payload: Option<Value>,
}

impl<T: AgentOutput + Sync> AgUiServer<T> {
    /// Serves `config`.
    pub fn new(config: AgentConfig<T>) -> Self {
        Self {
            config,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// The largest request body taken, in bytes (default [`DEFAULT_MAX_BODY_BYTES`]);
    /// a larger one is answered with HTTP 413.
    #[must_use]
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// The route: `POST /`.
    pub fn router(self) -> Router {
        let shared = Arc::new(Shared {
            config: self.config,
            max_body_bytes: self.max_body_bytes,
            paused: Mutex::new(HashMap::new()),
        });
        Router::new().route("/", post(run::<T>)).with_state(shared)
    }
}

fn refuse(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        json!({ "error": message }).to_string(),
    )
        .into_response()
}

/// The text of the last `user` message (a string `content`, or its `text` parts).
fn last_user_text(messages: &[Value]) -> Option<String> {
    let message = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
    match message.get("content")? {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

async fn run<T: AgentOutput + Sync>(
    State(shared): State<Arc<Shared<T>>>,
    request: Request,
) -> Response {
    let bytes = match axum::body::to_bytes(request.into_body(), shared.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is larger than {} bytes", shared.max_body_bytes),
            );
        }
    };
    let input: RunAgentInput = match serde_json::from_slice(&bytes) {
        Ok(input) => input,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("not a RunAgentInput: {e}")),
    };
    let start = match begin(&shared, &input) {
        Ok(start) => start,
        Err(message) => return refuse(StatusCode::BAD_REQUEST, message),
    };
    let (sender, receiver) = mpsc::channel::<Value>(256);
    tokio::spawn(drive(
        Arc::clone(&shared),
        input.thread_id,
        input.run_id,
        start,
        sender,
    ));
    let events = futures::stream::unfold(receiver, |mut receiver| async move {
        let value = receiver.recv().await?;
        Some((
            Ok::<_, Infallible>(Event::default().data(value.to_string())),
            receiver,
        ))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// What a request starts.
enum Start {
    New(String),
    Resume(String, Decisions),
}

fn begin<T>(shared: &Shared<T>, input: &RunAgentInput) -> Result<Start, String> {
    match &input.resume {
        Some(entries) if !entries.is_empty() => {
            let run_id = match &input.parent_run_id {
                Some(id) => id.clone(),
                None => shared
                    .paused
                    .lock()
                    .ok()
                    .and_then(|p| p.get(&input.thread_id).cloned())
                    .ok_or_else(|| {
                        format!(
                            "thread {} has no paused run here: name it with parentRunId",
                            input.thread_id
                        )
                    })?,
            };
            let mut decisions = Decisions::new();
            for entry in entries {
                let decision = decision_of(&entry.status, entry.payload.as_ref())
                    .map_err(|e| format!("interrupt {}: {e}", entry.interrupt_id))?;
                decisions = decisions.with(entry.interrupt_id.clone(), decision);
            }
            Ok(Start::Resume(run_id, decisions))
        }
        _ => last_user_text(&input.messages)
            .filter(|t| !t.trim().is_empty())
            .map(Start::New)
            .ok_or_else(|| "the input has no user message with text".to_owned()),
    }
}

/// Runs (or resumes) the run and sends its AG-UI events. The run goes on to its end
/// when the client goes away (its checkpoint and stores keep it).
async fn drive<T: AgentOutput + Sync>(
    shared: Arc<Shared<T>>,
    thread_id: String,
    run_id: String,
    start: Start,
    sender: mpsc::Sender<Value>,
) {
    let mut mapper = Mapper::new(&thread_id, &run_id);
    let _ = sender.send(mapper.started()).await;
    let config: &AgentConfig<T> = &shared.config;
    let (agent_run, stream): (String, RunStream<'_, T>) = match start {
        Start::New(input) => {
            let options = RunOptions::new().run_id(run_id.clone());
            (
                run_id.clone(),
                run_agent_stream_with(config, input, options),
            )
        }
        Start::Resume(paused, decisions) => {
            match resume_agent_stream_with(config, &paused, RunOptions::new().decisions(decisions))
                .await
            {
                Ok(stream) => (paused, stream),
                Err(error) => {
                    let message = format!("resume_failed: run {paused} cannot go on: {error}");
                    let error =
                        json!({"type": "RUN_ERROR", "message": message, "code": "resume_failed"});
                    let _ = sender.send(error).await;
                    return;
                }
            }
        }
    };
    let mut stream = stream;
    while let Some(event) = stream.next().await {
        if let agent_core::stream::StreamEvent::Finished(result) = &event
            && let Ok(mut paused) = shared.paused.lock()
        {
            if result.ending() == agent_core::Ending::Paused {
                paused.insert(thread_id.clone(), agent_run.clone());
            } else {
                paused.remove(&thread_id);
            }
        }
        for value in mapper.map(&event) {
            let _ = sender.send(value).await;
        }
    }
}
