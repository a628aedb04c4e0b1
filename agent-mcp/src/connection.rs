//! [`Connection`]: one live connection to an MCP server, shared by its tools.

use std::time::Duration;

use rmcp::service::{RoleClient, RunningService};

/// One live connection, shared by the tools of one server.
pub(crate) struct Connection {
    pub(crate) service: RunningService<RoleClient, ()>,
    pub(crate) label: String,
    pub(crate) call_timeout: Duration,
    /// Strings no tool error may show (see `McpServer::secrets`).
    pub(crate) secrets: Vec<String>,
}
