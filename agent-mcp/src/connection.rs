//! [`Connection`]: one live connection to an MCP server, shared by its tools.

use std::time::Duration;

use std::sync::Arc;

use rmcp::service::{RoleClient, RunningService};

use crate::client::{Calls, Client};

/// One live connection, shared by the tools of one server.
pub(crate) struct Connection {
    pub(crate) service: RunningService<RoleClient, Client>,
    pub(crate) label: String,
    pub(crate) call_timeout: Duration,
    /// Strings no tool error may show (see `McpServer::secrets`).
    pub(crate) secrets: Vec<String>,
    /// The tool calls in flight (whose run a server's sampling request is counted in).
    pub(crate) calls: Arc<Calls>,
}
