//! Tools from MCP servers for agent-core, through the official Rust MCP SDK (`rmcp`).
//!
//! [`McpServer::stdio`] (a child process) or [`McpServer::http`] (streamable HTTP)
//! says where a server is; [`McpServer::connect`] performs the handshake and lists its
//! tools (all pages) as [`McpTools`], whose [`registry`](McpTools::registry) goes into a
//! config beside `#[tool]` fns. Each MCP tool becomes an ordinary
//! [`agent_core::Tool`]: its `inputSchema` is its parameter schema, so the runner
//! validates the model's arguments against it and each provider adapter sends it
//! through the same schema transform as local tools' schemas.
//!
//! Once connected, nothing an MCP server does ends a run: a result marked `isError`, a
//! protocol error, a call slower than [`McpServer::call_timeout`], or a server that
//! exited or closed its connection each come back to the model as a tool error, and the
//! run goes on to end as usual. See `docs/mcp.md`.
//!
//! The tools follow the server (`docs/cases.md`, C36): [`McpTools`] is an
//! [`agent_core::tool::ToolSource`], so after `notifications/tools/list_changed` the list is
//! read again before the next LLM call of a run, which offers the new list; a call to a
//! removed tool is answered by the runner as an unknown tool, never sent. Durable runs
//! do not record a source's tools, so a changed list does not stop a resume.
//!
//! The call timeout is an idle timeout (C37): `notifications/progress` with the call's
//! `progressToken` starts it again, and the run's deadline
//! ([`ToolContext::deadline`](agent_core::ToolContext::deadline)) bounds the whole call.
//!
//! A server may ask back during a call: [`McpServer::sampling`] lets it ask for an LLM
//! completion (answered by an allowed model, counted in the calling run's usage; see
//! [`McpSampling`]) and [`McpServer::elicitation`] for input (answered by a handler, the
//! answer checked against the requested schema). Without them neither capability is
//! declared and such requests get a JSON-RPC error. See `docs/interop.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use agent_core::{AgentConfig, ToolRegistry, run_agent};
//! use agent_mcp::McpServer;
//!
//! let files = McpServer::stdio(tokio::process::Command::new("my-mcp-server"))
//!     .prefix("fs")
//!     .connect()
//!     .await?;
//! let mut tools = ToolRegistry::new(); // or tools![my_local_tool]
//! tools.extend(files.registry());
//! let config: AgentConfig<String> = AgentConfig::builder("files")
//!     .model("claude-sonnet-4-5")
//!     .tools(tools)
//!     .build()?;
//! let result = run_agent(&config, "Summarise README.md").await;
//! # let _ = result;
//! # Ok(())
//! # }
//! ```

mod client;
mod connect;
mod connection;
mod elicit;
mod error;
mod listing;
mod names;
mod serve;
mod server;
mod tool;
mod watch;

pub use client::{Elicitation, ElicitationFuture, McpSampling};
pub use connect::McpTools;
pub use error::McpError;
pub use serve::{
    DEFAULT_ALLOWED_HOSTS, DEFAULT_MAX_REQUEST_BYTES, META_CATEGORY, META_ENDING, META_TRACE_ID,
    McpService,
};
pub use server::{DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, McpServer};
