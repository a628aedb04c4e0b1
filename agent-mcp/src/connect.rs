//! Connecting: starting the transport, the MCP handshake, and listing the tools.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use agent_core::{ToolRegistry, tool::ToolSource};
use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};

use crate::client::{Calls, Client};
use crate::connection::Connection;
use crate::error::McpError;
use crate::listing::Listing;
use crate::server::{McpServer, Secret, Transport, scrub};
use crate::tool::map_tools;
use crate::watch::Watched;

/// The tools of one connected MCP server, ready to register beside local tools.
///
/// Cheap to clone; the connection lives while any clone or any tool from
/// [`registry`](Self::registry) lives (a config holds its tools), and a stdio server's
/// process is killed when the last one is dropped.
///
/// The list follows the server: after `notifications/tools/list_changed` it is read
/// again (`tools/list`, all pages) before the next LLM call of every run using
/// [`registry`](Self::registry), and that call offers the new list (C36). The accessors
/// ([`names`](Self::names), [`len`](Self::len), ..) show the list as last read.
///
/// ```no_run
/// # async fn demo(local: agent_core::ToolRegistry) -> Result<(), Box<dyn std::error::Error>> {
/// use agent_core::AgentConfig;
/// use agent_mcp::McpServer;
///
/// let mcp = McpServer::stdio(tokio::process::Command::new("my-mcp-server"))
///     .connect()
///     .await?;
/// let mut tools = local;
/// tools.extend(mcp.registry());
/// let config: AgentConfig<String> = AgentConfig::builder("with-mcp").tools(tools).build()?;
/// # let _ = config;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct McpTools {
    listing: Arc<Listing>,
}

impl McpServer {
    /// Starts the transport, performs the MCP handshake and lists every tool (following
    /// `nextCursor` through all pages), mapping each to an agent-core tool: the name made
    /// provider-legal (see [`McpTools::names`]), the description, and the `inputSchema`
    /// as the parameters (root `type: object` ensured, `$schema` and root `title`
    /// dropped, as for `#[tool]` fns). A tool whose annotations say `destructiveHint:
    /// true` (and not `readOnlyHint: true`) counts as irreversible, as
    /// `#[tool(irreversible)]` does: runs list its calls in their hand-over. The
    /// annotations are the server's hints; tools that give none are not irreversible.
    ///
    /// # Errors
    /// [`McpError`] if the process cannot start, a header is illegal, the handshake or
    /// the listing fails, or all of it takes longer than the connect timeout.
    pub async fn connect(self) -> Result<McpTools, McpError> {
        let label = self.label();
        let secrets = self.secrets();
        let limit = self.connect_timeout;
        let after_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        // Clamped (to about 136 years) so that no timeout overflows the clock.
        let deadline =
            tokio::time::Instant::now() + limit.min(Duration::from_secs(u64::from(u32::MAX)));
        let changed = Arc::new(AtomicU64::new(0));
        let calls = Arc::new(Calls::default());
        let client = Client {
            label: label.clone(),
            sampling: self.sampling,
            elicitation: self.elicitation,
            calls: Arc::clone(&calls),
        };
        let started = tokio::time::timeout_at(
            deadline,
            start(
                self.transport,
                client,
                &label,
                &secrets,
                Arc::clone(&changed),
            ),
        )
        .await;
        let service = match started {
            Ok(service) => service?,
            Err(_) => {
                return Err(McpError::Timeout {
                    server: label,
                    step: "initialize",
                    after_ms,
                });
            }
        };
        let listed = match tokio::time::timeout_at(deadline, service.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                return Err(McpError::ListTools {
                    server: label,
                    message: scrub(e.to_string(), &secrets),
                });
            }
            Err(_) => {
                return Err(McpError::Timeout {
                    server: label,
                    step: "tools/list",
                    after_ms,
                });
            }
        };
        let connection = Arc::new(Connection {
            service,
            label,
            call_timeout: self.call_timeout,
            secrets,
            calls,
        });
        let tools = map_tools(self.prefix.as_deref(), listed, &connection);
        let listing = Listing::new(connection, self.prefix, changed, tools, limit);
        Ok(McpTools {
            listing: Arc::new(listing),
        })
    }
}

async fn start(
    transport: Transport,
    client: Client,
    label: &str,
    secrets: &[String],
    changed: Arc<AtomicU64>,
) -> Result<RunningService<RoleClient, Client>, McpError> {
    let initialize = |e: &dyn fmt::Display| McpError::Initialize {
        server: label.to_owned(),
        message: scrub(e.to_string(), secrets),
    };
    match transport {
        Transport::Stdio(command) => {
            let child = TokioChildProcess::new(command).map_err(|source| McpError::Spawn {
                server: label.to_owned(),
                source,
            })?;
            let watched = Watched {
                inner: child,
                changed,
            };
            client.serve(watched).await.map_err(|e| initialize(&e))
        }
        Transport::Http {
            url,
            bearer,
            headers,
        } => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url);
            if let Some(Secret(token)) = bearer {
                config = config.auth_header(token);
            }
            let mut map = HashMap::with_capacity(headers.len());
            for (name, Secret(value)) in headers {
                let header = http::HeaderName::from_bytes(name.as_bytes()).ok();
                let value = http::HeaderValue::from_str(&value).ok();
                let (Some(header), Some(mut value)) = (header, value) else {
                    return Err(McpError::InvalidHeader {
                        server: label.to_owned(),
                        name,
                    });
                };
                value.set_sensitive(true);
                map.insert(header, value);
            }
            let config = config.custom_headers(map);
            let transport = StreamableHttpClientTransport::from_config(config);
            let watched = Watched {
                inner: transport,
                changed,
            };
            client.serve(watched).await.map_err(|e| initialize(&e))
        }
    }
}

impl McpTools {
    /// The tools as a registry: a [`ToolSource`] whose tools are the server's, in the
    /// server's order, followed as the server changes them. Add it to a config with
    /// `.tools(registry)`, or merge with local tools with `ToolRegistry::extend`.
    pub fn registry(&self) -> ToolRegistry {
        ToolRegistry::new().with_source(Arc::clone(&self.listing) as Arc<dyn ToolSource>)
    }

    /// The names the model sees, in the server's order: `prefix_` (if set) and the MCP
    /// name, with every character outside `[A-Za-z0-9_-]` replaced by `_`, cut to 64
    /// characters, and made unique with a `_2`, `_3`, .. suffix.
    pub fn names(&self) -> impl ExactSizeIterator<Item = String> + use<> {
        let names: Vec<String> = self
            .listing
            .tools()
            .iter()
            .map(|t| t.definition.name.clone())
            .collect();
        names.into_iter()
    }

    /// The server's own name of the tool the model knows as `model_name`.
    pub fn mcp_name(&self, model_name: &str) -> Option<String> {
        self.listing
            .tools()
            .iter()
            .find(|t| t.definition.name == model_name)
            .map(|t| t.mcp_name.clone())
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.listing.tools().len()
    }

    /// Whether the server offers no tool.
    pub fn is_empty(&self) -> bool {
        self.listing.tools().is_empty()
    }

    /// The server's label (see [`McpServer::label`]).
    pub fn label(&self) -> &str {
        &self.listing.connection.label
    }

    /// Reads the tool list again now if the server said it changed since the last
    /// read (the runner does this before each LLM call; see [`McpTools`]). Bounded by
    /// the connect timeout; a failed read keeps the list as it was.
    pub async fn refresh(&self) {
        self.listing.reread().await;
    }

    /// Closes the connection now (a stdio server's process is killed). Tools still
    /// registered in a config then answer every call with a tool error.
    pub fn close(&self) {
        self.listing
            .connection
            .service
            .cancellation_token()
            .cancel();
    }
}

/// `McpTools` is the same source its [`registry`](McpTools::registry) holds: its
/// snapshot's tools are the server's as agent-core tools (callable directly, with a
/// `ToolContext`), and `refresh` reads the list again after a change.
impl ToolSource for McpTools {
    fn snapshot(&self) -> agent_core::tool::ToolSnapshot {
        self.listing.snapshot()
    }

    fn refresh(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(self.listing.reread())
    }
}

impl fmt::Debug for McpTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTools")
            .field("server", &self.listing.connection.label)
            .field("tools", &self.names().collect::<Vec<_>>())
            .finish()
    }
}
