//! [`Listing`]: one server's tool list, shared and swapped when the server announces a
//! change (`notifications/tools/list_changed`), as a [`ToolSource`] for the runner.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use agent_core::{
    Tool,
    tool::{ToolSnapshot, ToolSource},
};

use crate::connection::Connection;
use crate::server::scrub;
use crate::tool::{McpTool, map_tools};

/// The tool list of one connection and what it was read at.
pub(crate) struct Listing {
    pub(crate) connection: Arc<Connection>,
    prefix: Option<String>,
    /// How many `notifications/tools/list_changed` the transport has received.
    changed: Arc<AtomicU64>,
    /// The value of `changed` when the current list was read.
    read_at: AtomicU64,
    current: RwLock<Current>,
    /// One re-read at a time; runs that wait for it then see its list.
    reading: tokio::sync::Mutex<()>,
    /// The bound on one re-read (the connect timeout).
    timeout: Duration,
}

struct Current {
    /// Increased when a re-read finds a different list.
    version: u64,
    tools: Arc<[Arc<McpTool>]>,
}

impl Listing {
    pub(crate) fn new(
        connection: Arc<Connection>,
        prefix: Option<String>,
        changed: Arc<AtomicU64>,
        tools: Vec<Arc<McpTool>>,
        timeout: Duration,
    ) -> Self {
        // Changes announced while connecting are in the list just read.
        let read_at = AtomicU64::new(changed.load(Ordering::SeqCst));
        Self {
            connection,
            prefix,
            changed,
            read_at,
            current: RwLock::new(Current {
                version: 0,
                tools: tools.into(),
            }),
            reading: tokio::sync::Mutex::new(()),
            timeout,
        }
    }

    /// The list as last read.
    pub(crate) fn tools(&self) -> Arc<[Arc<McpTool>]> {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&current.tools)
    }

    fn stale(&self) -> bool {
        self.changed.load(Ordering::SeqCst) != self.read_at.load(Ordering::SeqCst)
    }

    /// Reads the list again if the server announced a change since the last read. A
    /// failed or timed-out read keeps the list (with a warning) until the next
    /// announcement.
    pub(crate) async fn reread(&self) {
        if !self.stale() {
            return;
        }
        let _one = self.reading.lock().await;
        let seen = self.changed.load(Ordering::SeqCst);
        if seen == self.read_at.load(Ordering::SeqCst) {
            return;
        }
        let connection = &self.connection;
        let listed = tokio::time::timeout(
            self.timeout.min(Duration::from_secs(u64::from(u32::MAX))),
            connection.service.list_all_tools(),
        )
        .await;
        self.read_at.store(seen, Ordering::SeqCst);
        let listed = match listed {
            Ok(Ok(listed)) => listed,
            Ok(Err(error)) => {
                tracing::warn!(
                    server = %connection.label,
                    error = %scrub(error.to_string(), &connection.secrets),
                    "the MCP server's tool list changed but could not be read again; the \
                     old list stays"
                );
                return;
            }
            Err(_) => {
                tracing::warn!(
                    server = %connection.label,
                    timeout_ms = self.timeout.as_millis(),
                    "the MCP server's tool list changed but reading it again timed out; \
                     the old list stays"
                );
                return;
            }
        };
        let tools = map_tools(self.prefix.as_deref(), listed, connection);
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        let same = current.tools.len() == tools.len()
            && current.tools.iter().zip(&tools).all(|(a, b)| {
                a.definition == b.definition
                    && a.mcp_name == b.mcp_name
                    && a.irreversible == b.irreversible
            });
        if !same {
            current.version += 1;
            current.tools = tools.into();
        }
    }
}

impl ToolSource for Listing {
    fn snapshot(&self) -> ToolSnapshot {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        let tools = current
            .tools
            .iter()
            .map(|t| Arc::clone(t) as Arc<dyn Tool>)
            .collect();
        ToolSnapshot::new(current.version, tools)
    }

    fn refresh(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.reread())
    }
}
