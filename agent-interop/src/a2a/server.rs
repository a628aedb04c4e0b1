//! The A2A server: an agent card at the well-known path and the JSON-RPC endpoint
//! (`SendMessage`, `SendStreamingMessage` over SSE, `GetTask`, `CancelTask`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use agent_core::output::{ESCALATE_TO_HUMAN, SUBMIT_OUTPUT};
use agent_core::{AgentConfig, AgentOutput};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::Stream;
use serde::de::DeserializeOwned;
use serde_json::Value;

use agent_core::durable::CheckpointStore;
use agent_core::store::{FeedbackStore, StoreError};
use agent_worker::Queue;

use super::jsonrpc::{self, RpcCode, RpcError};
use super::mapping::with_history;
use super::queued::Swept;
use super::run::{self, Shared, Started};
use super::tasks::Queued;
use super::tasks::{InMemoryTasks, TaskStore};
use super::types::{
    AGENT_CARD_PATH, AgentCapabilities, AgentCard, AgentInterface, AgentSkill, PROTOCOL_VERSION,
    SendMessageRequest, StreamResponse, TaskIdParams, TaskState,
};

/// The largest request body served by default (bytes): 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;

/// An agent served over A2A 1.0's JSON-RPC binding (see the crate docs for the
/// mapping). Build it, then take its [`router`](Self::router) and serve that with
/// axum:
///
/// ```no_run
/// # use agent_core::AgentConfig;
/// # async fn serve(config: AgentConfig<String>) -> std::io::Result<()> {
/// use agent_interop::a2a::A2aServer;
///
/// let app = A2aServer::new(config).router();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8700").await?;
/// axum::serve(listener, app).await
/// # }
/// ```
pub struct A2aServer<T> {
    config: AgentConfig<T>,
    tasks: Arc<dyn TaskStore>,
    url: Option<String>,
    description: Option<String>,
    skills: Vec<AgentSkill>,
    max_body_bytes: usize,
    queued: Option<Arc<Queued>>,
}

impl<T: AgentOutput> std::fmt::Debug for A2aServer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aServer")
            .field("agent", &self.config.name())
            .field("url", &self.url)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl<T: AgentOutput + Sync> A2aServer<T> {
    /// Serves `config`, with its tasks in memory (see [`tasks`](Self::tasks)). A paused
    /// run needs the config's checkpoint store (`.checkpoints(..)`) to resume.
    pub fn new(config: AgentConfig<T>) -> Self {
        Self {
            config,
            tasks: Arc::new(InMemoryTasks::new()),
            url: None,
            description: None,
            skills: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            queued: None,
        }
    }

    /// Runs tasks on queue workers instead of in this process: `SendMessage` and
    /// `SendStreamingMessage` put the task's run on `queue` as an agent-worker
    /// [`Job`](agent_worker::Job) (agent = the config's name, run id = the task id), a
    /// [`Worker`](agent_worker::Worker) serving this agent under that name runs it and
    /// stores its record in `store`, and the task's state is written from that record
    /// when the worker publishes that it is done (the table of the crate docs; a paused
    /// run's pending calls are read from its checkpoint in `store`). A message for an
    /// input-required task records its decisions in the run's checkpoint
    /// (`record_decisions`) and puts the job back ([`Queue::resume`]); decisions that do
    /// not fit are refused as in process, the task left input-required. A dead-lettered
    /// job fails its task (category `dead_letter`). `store` must be the workers' store
    /// (results and checkpoints). `CancelTask` marks the task canceled; the worker's run
    /// goes on to its end, which is stored but does not change the task.
    #[must_use]
    pub fn queue<S>(mut self, queue: Queue, store: Arc<S>) -> Self
    where
        S: FeedbackStore + CheckpointStore + 'static,
    {
        let results: Arc<dyn FeedbackStore> = store.clone();
        let checkpoints: Arc<dyn CheckpointStore> = store;
        self.queued = Some(Arc::new(Queued {
            queue,
            results,
            checkpoints,
        }));
        self
    }

    /// Settles this agent's tasks that a stopped process left `working` (call it once
    /// at startup, before serving, from the one process that serves this agent from
    /// this task store):
    /// - tasks run in process (no [`queue`](Self::queue)): their run died with the
    ///   process; each is marked `TASK_STATE_FAILED`, category `interrupted`;
    /// - queued tasks: a run a worker ended (its `Done` was missed) has its state
    ///   written from the stored record; a job that may never have reached the queue
    ///   (no record, or a resume whose decisions are recorded) is put on it again (a
    ///   job that did reach it is not run twice: the worker's checkpoint claim fences a
    ///   second delivery); a resume whose decisions never reached the checkpoint goes
    ///   back to input-required; a run going on in a worker is left.
    ///
    /// # Errors
    /// The task store's (or the results and checkpoint store's) [`StoreError`];
    /// tasks settled before the failure stay settled.
    pub async fn sweep(&self) -> Result<Swept, StoreError> {
        super::queued::sweep(
            self.config.name(),
            self.tasks.as_ref(),
            self.queued.as_deref(),
        )
        .await
    }

    /// Keeps tasks in `store` (an `agent_store::Store`: a task then survives a restart,
    /// and with the same store as the config's checkpoints a paused task resumes in a
    /// new process).
    #[must_use]
    pub fn tasks(mut self, store: impl TaskStore) -> Self {
        self.tasks = Arc::new(store);
        self
    }

    /// The JSON-RPC endpoint's public URL, as the card gives it (default: `http://`,
    /// the request's `Host` header, and `/`).
    #[must_use]
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// The card's description (default: the description of the agent's output).
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Adds a skill to the card (without any, the card has one: the agent itself).
    #[must_use]
    pub fn skill(mut self, skill: AgentSkill) -> Self {
        self.skills.push(skill);
        self
    }

    /// The largest request body taken, in bytes (default [`DEFAULT_MAX_BODY_BYTES`]); a
    /// larger one is answered with HTTP 413 and a JSON-RPC `-32600` error.
    #[must_use]
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// The agent card: the config's name, a description, the JSON-RPC interface at
    /// protocol version 1.0, streaming, the input modes `text/plain` and
    /// `application/json`, the output mode `application/json`, and the skills (by
    /// default one: the agent, tagged with its tools' names, not the runner's own
    /// `submit_output` and `escalate_to_human`).
    pub fn card(&self) -> AgentCard {
        let output = T::output_tool();
        let description = self.description.clone().unwrap_or_else(|| {
            output
                .as_ref()
                .map(|t| t.description.clone())
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| format!("The {} agent.", self.config.name()))
        });
        let skills = if self.skills.is_empty() {
            let mut tags = vec!["agent-core".to_owned()];
            tags.extend(
                self.config
                    .tool_definitions()
                    .iter()
                    .map(|t| t.name.clone())
                    .filter(|n| n != SUBMIT_OUTPUT && n != ESCALATE_TO_HUMAN),
            );
            vec![AgentSkill {
                id: self.config.name().to_owned(),
                name: self.config.name().to_owned(),
                description: description.clone(),
                tags,
                examples: Vec::new(),
                input_modes: Vec::new(),
                output_modes: Vec::new(),
            }]
        } else {
            self.skills.clone()
        };
        AgentCard {
            name: self.config.name().to_owned(),
            description,
            supported_interfaces: vec![AgentInterface {
                url: self.url.clone().unwrap_or_else(|| "/".into()),
                protocol_binding: "JSONRPC".into(),
                protocol_version: PROTOCOL_VERSION.into(),
            }],
            version: env!("CARGO_PKG_VERSION").into(),
            capabilities: AgentCapabilities {
                streaming: true,
                push_notifications: false,
            },
            default_input_modes: vec!["text/plain".into(), "application/json".into()],
            default_output_modes: vec!["application/json".into()],
            skills,
        }
    }

    /// The routes: `GET /.well-known/agent-card.json` and `POST /` (JSON-RPC).
    pub fn router(self) -> Router {
        let shared = Arc::new(Shared {
            card: self.card(),
            url_set: self.url.is_some(),
            config: self.config,
            tasks: self.tasks,
            max_body_bytes: self.max_body_bytes,
            live: Mutex::new(HashMap::new()),
            queued: self.queued,
        });
        Router::new()
            .route(AGENT_CARD_PATH, get(card::<T>))
            .route("/", post(rpc::<T>))
            .with_state(shared)
    }
}

async fn card<T: AgentOutput + Sync>(
    State(shared): State<Arc<Shared<T>>>,
    headers: HeaderMap,
) -> Response {
    let mut card = shared.card.clone();
    if !shared.url_set {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        for interface in &mut card.supported_interfaces {
            interface.url = format!("http://{host}/");
        }
    }
    json_response(
        StatusCode::OK,
        &serde_json::to_value(card).unwrap_or_default(),
    )
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn rpc_error(status: StatusCode, id: &Value, error: &RpcError) -> Response {
    json_response(status, &jsonrpc::error(id, error))
}

fn params<P: DeserializeOwned>(params: Value) -> Result<P, RpcError> {
    serde_json::from_value(params)
        .map_err(|e| RpcError::new(RpcCode::InvalidParams, format!("invalid params: {e}")))
}

/// The v0.3 names of the methods, answered with a pointer to the 1.0 ones.
fn legacy(method: &str) -> Option<&'static str> {
    match method {
        "message/send" => Some("SendMessage"),
        "message/stream" => Some("SendStreamingMessage"),
        "tasks/get" => Some("GetTask"),
        "tasks/cancel" => Some("CancelTask"),
        _ => None,
    }
}

async fn rpc<T: AgentOutput + Sync>(
    State(shared): State<Arc<Shared<T>>>,
    request: Request,
) -> Response {
    if let Some(version) = request
        .headers()
        .get("A2A-Version")
        .and_then(|v| v.to_str().ok())
    {
        let version = version.trim();
        if !version.is_empty() && version != "1.0" && !version.starts_with("1.0.") {
            let error = RpcError::new(
                RpcCode::VersionNotSupported,
                format!("A2A-Version {version} is not served: this server speaks A2A 1.0"),
            );
            return rpc_error(StatusCode::OK, &Value::Null, &error);
        }
    }
    let body: Body = request.into_body();
    let bytes = match axum::body::to_bytes(body, shared.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let error = RpcError::new(
                RpcCode::InvalidRequest,
                format!(
                    "the request body is larger than {} bytes, or could not be read",
                    shared.max_body_bytes
                ),
            );
            return rpc_error(StatusCode::PAYLOAD_TOO_LARGE, &Value::Null, &error);
        }
    };
    let request = match jsonrpc::parse(&bytes) {
        Ok(request) => request,
        Err((id, error)) => return rpc_error(StatusCode::OK, &id, &error),
    };
    let id = request.id.clone();
    let outcome = match request.method.as_str() {
        "SendMessage" => send(&shared, request.params).await,
        "SendStreamingMessage" => {
            return match stream(&shared, id.clone(), request.params).await {
                Ok(sse) => sse.into_response(),
                Err(error) => rpc_error(StatusCode::OK, &id, &error),
            };
        }
        "GetTask" => get_task(&shared, request.params).await,
        "CancelTask" => cancel_task(&shared, request.params).await,
        other => Err(RpcError::new(
            RpcCode::MethodNotFound,
            match legacy(other) {
                Some(new) => {
                    format!("{other} is the A2A 0.3 name; this server speaks A2A 1.0: call {new}")
                }
                None => format!("no method {other}"),
            },
        )),
    };
    match outcome {
        Ok(value) => json_response(StatusCode::OK, &jsonrpc::result(&id, value)),
        Err(error) => rpc_error(StatusCode::OK, &id, &error),
    }
}

async fn send<T: AgentOutput + Sync>(
    shared: &Arc<Shared<T>>,
    params_value: Value,
) -> Result<Value, RpcError> {
    let request: SendMessageRequest = params(params_value)?;
    let history = request
        .configuration
        .as_ref()
        .and_then(|c| c.history_length);
    let started = run::begin(shared, request.message).await?;
    let task = match &shared.queued {
        Some(queued) => super::queued::run_to_end(shared, queued, started).await?,
        None => run::run_to_end(shared, started).await?,
    };
    let response = StreamResponse {
        task: Some(with_history(&task, history)),
        ..StreamResponse::default()
    };
    Ok(serde_json::to_value(response).unwrap_or_default())
}

async fn stream<T: AgentOutput + Sync>(
    shared: &Arc<Shared<T>>,
    id: Value,
    params_value: Value,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<T>>, RpcError> {
    let request: SendMessageRequest = params(params_value)?;
    let started: Started = run::begin(shared, request.message).await?;
    let receiver = match &shared.queued {
        Some(queued) => super::queued::run_streamed(shared, queued, started),
        None => run::run_streamed(shared, started),
    };
    let events = futures::stream::unfold(receiver, move |mut receiver| {
        let id = id.clone();
        async move {
            let event = receiver.recv().await?;
            let body = jsonrpc::result(&id, event);
            Some((Ok(Event::default().data(body.to_string())), receiver))
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

async fn get_task<T: AgentOutput + Sync>(
    shared: &Arc<Shared<T>>,
    params_value: Value,
) -> Result<Value, RpcError> {
    let request: TaskIdParams = params(params_value)?;
    let record = run::load(shared, &request.id).await?;
    Ok(
        serde_json::to_value(with_history(&record.task, request.history_length))
            .unwrap_or_default(),
    )
}

async fn cancel_task<T: AgentOutput + Sync>(
    shared: &Arc<Shared<T>>,
    params_value: Value,
) -> Result<Value, RpcError> {
    let request: TaskIdParams = params(params_value)?;
    let mut record = run::load(shared, &request.id).await?;
    let state = record.task.status.state;
    if state.is_terminal() {
        return Err(RpcError::new(
            RpcCode::TaskNotCancelable,
            format!(
                "task {} is {}: it cannot be canceled",
                request.id,
                state.as_str()
            ),
        ));
    }
    let token = shared
        .live
        .lock()
        .ok()
        .and_then(|live| live.get(&request.id).cloned());
    if let Some(token) = token {
        token.cancel();
    }
    record.task.status = super::mapping::status(TaskState::Canceled, None);
    run::store(shared, record.clone()).await?;
    Ok(serde_json::to_value(&record.task).unwrap_or_default())
}
