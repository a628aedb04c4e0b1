//! [`McpError`]: why connecting to an MCP server or listing its tools failed.

/// Why [`McpServer::connect`](crate::McpServer::connect) failed, or why an
/// [`McpService`](crate::McpService) could not be served.
///
/// Only connecting and listing return it: once connected, every failure of a call (a
/// dead server, a timeout, a protocol error, a result marked `isError`) is a
/// [`ToolError`](agent_core::ToolError) that the model sees, never an `McpError`.
/// Messages name the server by its label (the program's file name, or the URL's host and
/// path); the bearer token, header values and the URL's query and user info are replaced
/// by `<redacted>` wherever the SDK's own message would show them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The stdio server's process could not be started.
    #[error("could not start MCP server {server}: {source}")]
    Spawn {
        /// The server's label.
        server: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A header given for a streamable HTTP server is not a legal HTTP header.
    #[error("header {name:?} for MCP server {server} is not a legal HTTP header name or value")]
    InvalidHeader {
        /// The server's label.
        server: String,
        /// The header's name (never its value).
        name: String,
    },
    /// The MCP handshake (`initialize`) failed: the server exited, refused, or spoke
    /// something else.
    #[error("could not initialize MCP server {server}: {message}")]
    Initialize {
        /// The server's label.
        server: String,
        /// What the SDK reported.
        message: String,
    },
    /// `tools/list` failed.
    #[error("could not list the tools of MCP server {server}: {message}")]
    ListTools {
        /// The server's label.
        server: String,
        /// What the SDK reported.
        message: String,
    },
    /// Connecting and listing took longer than the connect timeout.
    #[error("MCP server {server} did not finish {step} within {after_ms} ms")]
    Timeout {
        /// The server's label.
        server: String,
        /// `"initialize"` or `"tools/list"`.
        step: &'static str,
        /// The connect timeout, in milliseconds.
        after_ms: u64,
    },
    /// A service to serve is not legal: two tools with one name, a name MCP does not
    /// allow, a tool that needs approval, or a schema that is no object (every problem
    /// named, joined by `; `).
    #[error("cannot serve: {message}")]
    Service {
        /// What is wrong.
        message: String,
    },
    /// The streamable HTTP address could not be bound, or the server failed.
    #[error("cannot serve MCP over HTTP at {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}
