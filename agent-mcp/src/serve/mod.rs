//! Serving agents and tools to MCP clients: [`McpService`], rmcp's server side over
//! stdio and streamable HTTP.

mod agent;
mod call;
mod plain;

use std::fmt;
use std::sync::Arc;

use agent_core::tool::StateMap;
use agent_core::{AgentConfig, AgentOutput, Tool, ToolRegistry};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::McpError;
use call::{Call, Entry, Shared};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

/// The largest JSON-RPC message [`McpService`] reads by default: 4 MiB (bytes). A larger
/// HTTP request body is answered with HTTP 413 and a JSON-RPC error; a larger stdio
/// line is dropped (its id cannot be read, so it gets no answer) and the server goes on.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

pub use call::{META_CATEGORY, META_ENDING, META_TRACE_ID};

/// Agents and tools served to MCP clients (an IDE, a desktop assistant, another agent),
/// as MCP tools, over stdio ([`serve_stdio`](Self::serve_stdio)) or streamable HTTP
/// ([`serve_http`](Self::serve_http), or [`router`](Self::router) to mount in your own
/// axum app), through the official Rust MCP SDK (`rmcp`, server side). The protocol
/// versions are rmcp's: 2024-11-05 to 2025-11-25 through `initialize`, and 2026-07-28
/// (`server/discover`, no session).
///
/// - An agent ([`agent`](Self::agent)) is one tool: its input schema is `{"input":
///   string}` (the run's input), its `outputSchema` is the JSON Schema of the agent's
///   output type `T` (the `submit_output` parameters; none for a `String` agent, whose
///   answer is text). A call runs the agent ([`run_agent_with`](agent_core::run_agent_with)):
///   an answer is the result's `structuredContent` (and the same JSON as text); every
///   other ending is a result with `isError: true` whose text names the category and
///   ending, with `_meta` [`META_CATEGORY`], [`META_ENDING`] and [`META_TRACE_ID`].
///   With a `progressToken` in the call's `_meta`, each LLM call, tool result, retry,
///   hand-off and model switch of the run is a `notifications/progress` (progress 1, 2,
///   3, ..., no total). The client's `notifications/cancelled` cancels the run (ending
///   `exhausted`, category `cancelled`).
/// - A tool ([`tools`](Self::tools), [`tool`](Self::tool)) is itself: its parameter
///   schema is the `inputSchema`, its result the text content, a [`ToolError`](agent_core::ToolError)
///   a result with `isError: true`. An irreversible tool is announced with
///   `destructiveHint: true`. A tool that needs a person's approval is refused at
///   serve time (an MCP client cannot give the approval); serve an agent that uses it.
/// - Arguments are validated against the tool's schema before anything runs: an
///   unknown tool or schema-invalid arguments are a JSON-RPC error `-32602` (invalid
///   params) naming the problem; malformed JSON-RPC is `-32700`/`-32600`. Nothing a
///   client sends ends the server.
/// - A served agent never echoes a secret: every error text is scrubbed of the values
///   of the environment variables whose names end in `_API_KEY`, `_TOKEN`, `_SECRET`
///   or `_SECRET_ACCESS_KEY` (8 bytes or longer) and of the strings given to
///   [`secret`](Self::secret), each replaced by `<redacted>`.
///
/// ```no_run
/// # async fn demo(config: agent_core::AgentConfig<String>) -> Result<(), agent_mcp::McpError> {
/// use agent_mcp::McpService;
///
/// McpService::new("support")
///     .agent("triage", "Triages one support ticket.", config)
///     .serve_stdio()          // or .serve_http("127.0.0.1:8000".parse().unwrap())
///     .await?;
/// # Ok(())
/// # }
/// ```
pub struct McpService {
    name: String,
    version: String,
    instructions: Option<String>,
    entries: Vec<Entry>,
    state: StateMap,
    secrets: Vec<String>,
    problems: Vec<String>,
    max_request_bytes: usize,
    allowed_hosts: Vec<String>,
}

impl McpService {
    /// A service named `name` (the `serverInfo.name` clients see), version this
    /// crate's, with no tools yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
            entries: Vec::new(),
            state: StateMap::new(),
            secrets: Vec::new(),
            problems: Vec::new(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            allowed_hosts: DEFAULT_ALLOWED_HOSTS
                .iter()
                .map(|h| (*h).to_owned())
                .collect(),
        }
    }

    /// The version clients see in `serverInfo` (default: this crate's version).
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// The `instructions` clients get at `initialize` (how to use the tools).
    #[must_use]
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Serves `config` as the tool `name` (1 to 128 characters of `[A-Za-z0-9_.-]`, unique
    /// in the service), described to clients by `description`. See [`McpService`] for the
    /// mapping. An illegal or duplicate name makes serving fail with
    /// [`McpError::Service`].
    #[must_use]
    pub fn agent<T>(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        config: AgentConfig<T>,
    ) -> Self
    where
        T: AgentOutput + Sync,
    {
        let served = agent::ServedAgent::new(name.into(), description.into(), config);
        self.push(served.entry());
        self
    }

    /// Serves every tool of `registry` as an MCP tool of the same name, schema and
    /// description (a source's tools as they are now). See [`McpService`].
    #[must_use]
    pub fn tools(mut self, registry: ToolRegistry) -> Self {
        for tool in registry.tools() {
            self.push(plain::entry(Arc::clone(tool)));
        }
        self
    }

    /// Serves one tool (see [`tools`](Self::tools)).
    #[must_use]
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.push(plain::entry(Arc::new(tool)));
        self
    }

    /// Application state for the served tools (`State<S>` parameters of `#[tool]` fns),
    /// one value per type. Agents use their config's state.
    #[must_use]
    pub fn state<S: Send + Sync + 'static>(mut self, value: S) -> Self {
        self.state.insert(value);
        self
    }

    /// A string no error text may show (a key that is not in the environment),
    /// replaced by `<redacted>`; strings under 8 bytes are ignored.
    #[must_use]
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        let secret = secret.into();
        if secret.len() >= MIN_SECRET {
            self.secrets.push(secret);
        }
        self
    }

    /// The largest JSON-RPC message read, in bytes (default
    /// [`DEFAULT_MAX_REQUEST_BYTES`]).
    #[must_use]
    pub fn max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = bytes.max(1024);
        self
    }

    /// The `Host` header values (host or `host:port`) streamable HTTP accepts (default
    /// [`DEFAULT_ALLOWED_HOSTS`], loopback only, against DNS rebinding). Set your
    /// public host names when serving beyond this machine.
    #[must_use]
    pub fn allowed_hosts<I: IntoIterator<Item = S>, S: Into<String>>(mut self, hosts: I) -> Self {
        self.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    /// The names of the served tools, in order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.entries.iter().map(|e| e.tool.name.as_ref())
    }

    fn push(&mut self, entry: Result<Entry, String>) {
        match entry {
            Ok(entry) => {
                let name = entry.tool.name.to_string();
                if let Some(problem) = name_problem(&name) {
                    self.problems.push(problem);
                } else if self.entries.iter().any(|e| e.tool.name == name) {
                    self.problems
                        .push(format!("two served tools are named {name:?}"));
                } else {
                    self.entries.push(entry);
                }
            }
            Err(problem) => self.problems.push(problem),
        }
    }

    /// The rmcp handler, or why the service cannot be served.
    pub(crate) fn into_handler(self) -> Result<(Handler, Limits), McpError> {
        if !self.problems.is_empty() {
            return Err(McpError::Service {
                message: self.problems.join("; "),
            });
        }
        let mut secrets = env_secrets();
        secrets.extend(self.secrets);
        let handler = Handler {
            inner: Arc::new(Inner {
                name: self.name,
                version: self.version,
                instructions: self.instructions,
                entries: self.entries,
                shared: Shared {
                    state: Arc::new(self.state),
                    secrets,
                },
            }),
        };
        let limits = Limits {
            max_request_bytes: self.max_request_bytes,
            allowed_hosts: self.allowed_hosts,
        };
        Ok((handler, limits))
    }

    /// Serves on this process's stdin and stdout (the stdio transport: one client, the
    /// process that started this one) until the client closes stdin. Nothing else may
    /// write to stdout; logs go to stderr.
    ///
    /// # Errors
    /// [`McpError::Service`] for an illegal service (see [`agent`](Self::agent));
    /// [`McpError::Initialize`] when the client's `initialize` fails.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        let (handler, limits) = self.into_handler()?;
        let label = handler.inner.name.clone();
        let (stdin, stdout) = rmcp::transport::stdio();
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(stdin, stdout)
            .with_max_line_length(limits.max_request_bytes);
        let running = rmcp::ServiceExt::serve(handler, transport)
            .await
            .map_err(|e| McpError::Initialize {
                server: label,
                message: e.to_string(),
            })?;
        let _ = running.waiting().await;
        Ok(())
    }

    /// Serves streamable HTTP at `http://ADDR/mcp` until the process ends (see
    /// [`router`](Self::router) for the endpoint's behaviour).
    ///
    /// # Errors
    /// [`McpError::Service`] for an illegal service; [`McpError::Bind`] when the
    /// address cannot be bound.
    pub async fn serve_http(self, addr: std::net::SocketAddr) -> Result<(), McpError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| McpError::Bind { addr, source })?;
        self.serve_listener(listener, CancellationToken::new())
            .await
    }

    /// Serves streamable HTTP at `/mcp` on a bound listener until `shutdown` is
    /// cancelled (then open calls are dropped, which cancels their runs).
    ///
    /// # Errors
    /// [`McpError::Service`] for an illegal service; [`McpError::Bind`] when the
    /// listener fails.
    pub async fn serve_listener(
        self,
        listener: tokio::net::TcpListener,
        shutdown: CancellationToken,
    ) -> Result<(), McpError> {
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
        let router = http_router(self, shutdown.child_token())?;
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
            .map_err(|source| McpError::Bind { addr, source })
    }

    /// The streamable HTTP endpoint as an axum router with one route, `/mcp` (POST for
    /// requests, GET for the session's stream, DELETE to end a session), to merge
    /// into your own app. Sessions are kept in memory for the handshake-era versions;
    /// 2026-07-28 requests are served without a session. A body over
    /// [`max_request_bytes`](Self::max_request_bytes) is answered with HTTP 413 and a
    /// JSON-RPC error (`-32600`); a `Host` not in [`allowed_hosts`](Self::allowed_hosts)
    /// with HTTP 403.
    ///
    /// # Errors
    /// [`McpError::Service`] for an illegal service.
    pub fn router(self, shutdown: CancellationToken) -> Result<axum::Router, McpError> {
        http_router(self, shutdown)
    }
}

/// Transport limits of a service.
pub(crate) struct Limits {
    pub(crate) max_request_bytes: usize,
    pub(crate) allowed_hosts: Vec<String>,
}

/// The shortest string treated as a secret (shorter ones would redact ordinary words).
const MIN_SECRET: usize = 8;

/// The values of the environment variables that hold keys, by their names' endings.
fn env_secrets() -> Vec<String> {
    const ENDINGS: [&str; 4] = ["_API_KEY", "_TOKEN", "_SECRET", "_SECRET_ACCESS_KEY"];
    std::env::vars_os()
        .filter_map(|(name, value)| {
            let name = name.to_str()?;
            let value = value.into_string().ok()?;
            (ENDINGS.iter().any(|e| name.ends_with(e)) && value.len() >= MIN_SECRET)
                .then_some(value)
        })
        .collect()
}

/// Why `name` is not a legal MCP tool name (1 to 128 of `[A-Za-z0-9_.-]`, the rule of
/// the 2025-11-25 specification's "Tool names").
fn name_problem(name: &str) -> Option<String> {
    let legal = (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    (!legal).then(|| {
        format!("{name:?} is not a legal MCP tool name (1 to 128 of A-Z, a-z, 0-9, _, -, .)")
    })
}

/// The rmcp server handler: cheap to clone (one per HTTP session).
#[derive(Clone)]
pub(crate) struct Handler {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    version: String,
    instructions: Option<String>,
    entries: Vec<Entry>,
    shared: Shared,
}

impl Handler {
    fn find(&self, name: &str) -> Option<&Entry> {
        self.inner
            .entries
            .iter()
            .find(|e| e.tool.name.as_ref() == name)
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.inner.name.clone(),
                self.inner.version.clone(),
            ));
        if let Some(text) = &self.inner.instructions {
            info = info.with_instructions(text.clone());
        }
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.inner.entries.iter().map(|e| e.tool.clone()).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.find(name).map(|e| e.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(entry) = self.find(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {:?}", request.name.as_ref()),
                None,
            ));
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        if let Err(errors) = entry.validator.validate(&arguments) {
            return Err(ErrorData::invalid_params(
                format!(
                    "the arguments of {} do not match its inputSchema: {errors}",
                    entry.tool.name
                ),
                None,
            ));
        }
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| (context.peer.clone(), token));
        let call = Call {
            request_id: request_id_text(&context.id),
            cancel: context.ct.clone(),
            progress,
        };
        let result = entry.served.call(arguments, call, &self.inner.shared).await;
        Ok(result.into())
    }
}

fn request_id_text(id: &rmcp::model::RequestId) -> String {
    match serde_json::to_value(id) {
        Ok(Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

// Streamable HTTP: rmcp's `StreamableHttpService` mounted at `/mcp` in an axum router.

/// The `Host` values streamable HTTP accepts by default: loopback only (`localhost`,
/// `127.0.0.1`, `::1`, any port), against DNS rebinding (rmcp's default).
pub const DEFAULT_ALLOWED_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1"];

fn http_router(service: McpService, shutdown: CancellationToken) -> Result<axum::Router, McpError> {
    let (handler, limits) = service.into_handler()?;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(limits.allowed_hosts)
        .with_max_request_body_bytes(limits.max_request_bytes)
        .with_cancellation_token(shutdown);
    let service: StreamableHttpService<Handler, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(handler.clone()), Default::default(), config);
    Ok(axum::Router::new().nest_service("/mcp", service))
}

impl fmt::Debug for McpService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpService")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("tools", &self.names().collect::<Vec<_>>())
            .field("secrets", &self.secrets.len())
            .field("max_request_bytes", &self.max_request_bytes)
            .field("allowed_hosts", &self.allowed_hosts)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn tool_names_follow_the_specification() {
        assert!(name_problem("triage").is_none());
        assert!(name_problem("orders.lookup-v2_x").is_none());
        assert!(name_problem("").is_some());
        assert!(name_problem("has space").is_some());
        assert!(name_problem(&"x".repeat(129)).is_some());
    }

    #[test]
    fn duplicate_and_illegal_names_fail_at_serve_time() {
        let config: AgentConfig<String> = AgentConfig::builder("a")
            .llm(agent_core::testing::ScriptedModel::new().text("hi"))
            .build()
            .unwrap();
        let service = McpService::new("s")
            .agent("one", "first", config.clone())
            .agent("one", "again", config.clone())
            .agent("bad name", "illegal", config);
        let Err(McpError::Service { message }) = service.into_handler().map(|_| ()) else {
            panic!("expected a service error");
        };
        assert!(
            message.contains("two served tools are named \"one\""),
            "{message}"
        );
        assert!(message.contains("\"bad name\" is not a legal"), "{message}");
    }
}
