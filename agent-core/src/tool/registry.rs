//! [`ToolRegistry`]: the tools a config offers, in registration order, and
//! [`ToolSource`]: a set of tools that may change while a run goes on.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::tool::{Tool, ToolDefinition};

/// A set of tools that may change while a run goes on: an MCP server that announces
/// `notifications/tools/list_changed`, say (`agent-mcp`'s `McpTools` is one).
///
/// Add one to a registry with [`ToolRegistry::add_source`]. The config's `build()`
/// checks and offers the tools of the source's [`snapshot`](Self::snapshot) at that
/// moment, as it does plain tools. Before each LLM call of a run, the runner awaits
/// [`refresh`](Self::refresh) and reads the snapshot again; when its
/// [`version`](ToolSnapshot::version) changed, that LLM call and the turn it starts
/// offer the new set: a tool the source no longer has is answered as an unknown tool,
/// never run. Each new tool is checked as `build()` checks one (a legal, unreserved,
/// unique name, an object schema that compiles, the state it needs); one that fails is
/// left out, with a `tracing` warning, and the run goes on. Plain tools (`#[tool]` fns,
/// [`ToolRegistry::add`]) stay frozen at `build()`.
///
/// Durable runs record only the plain tools in their checkpoint and compare only those
/// on resume: a source's tools may differ after a restart without making
/// `resume_agent` fail.
pub trait ToolSource: Send + Sync + 'static {
    /// The tools as they are now, in order, and their version. Cheap and without I/O:
    /// the runner calls it before every LLM call.
    fn snapshot(&self) -> ToolSnapshot;

    /// Brings the snapshot up to date when the source knows it is stale (an MCP server
    /// said its list changed: list it again). Called before each LLM call; the default
    /// does nothing. It must bound its own wait (the run's deadline and cancellation
    /// also drop it) and never fail: a source that cannot refresh keeps its snapshot.
    fn refresh(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }
}

/// What a [`ToolSource`] holds at one moment: its tools and a version number.
#[derive(Clone)]
#[non_exhaustive]
pub struct ToolSnapshot {
    /// Changes whenever the set of tools (or one of their definitions) changes; the
    /// runner rebuilds its tool table only when it does.
    pub version: u64,
    /// The tools, in the order they are offered.
    pub tools: Vec<Arc<dyn Tool>>,
}

impl ToolSnapshot {
    /// A snapshot of `tools` at `version`.
    pub fn new(version: u64, tools: Vec<Arc<dyn Tool>>) -> Self {
        Self { version, tools }
    }
}

impl fmt::Debug for ToolSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSnapshot")
            .field("version", &self.version)
            .field("tools", &self.tools.len())
            .finish()
    }
}

/// The user tools of a config, in registration order.
///
/// Build one by hand (`ToolRegistry::new().with(MyTool)`) or with `tools![a, b]`. The
/// registry accepts anything; the config's `build()` checks it (unique, provider-legal
/// names, no `submit_output`, compilable schemas) and returns a `ConfigError` otherwise.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    entries: Vec<RegisteredTool>,
    sources: Vec<RegisteredSource>,
}

/// One registered tool and its definition (read once, at registration).
#[derive(Clone)]
pub(crate) struct RegisteredTool {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) definition: ToolDefinition,
    /// The index of the source it came from (in `sources`), for a source's tool.
    pub(crate) source: Option<usize>,
}

/// One registered [`ToolSource`] and where its tools go among the entries.
#[derive(Clone)]
pub(crate) struct RegisteredSource {
    pub(crate) source: Arc<dyn ToolSource>,
    /// Its tools are offered before the entry at this index (or last).
    pub(crate) position: usize,
    /// The snapshot's version at registration (its tools are among the entries).
    pub(crate) version: u64,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool and returns the registry (builder style).
    #[must_use]
    pub fn with(mut self, tool: impl Tool) -> Self {
        self.add(tool);
        self
    }

    /// Adds a tool.
    pub fn add(&mut self, tool: impl Tool) {
        self.add_arc(Arc::new(tool));
    }

    /// Adds a shared tool.
    pub fn add_arc(&mut self, tool: Arc<dyn Tool>) {
        let definition = tool.definition();
        self.entries.push(RegisteredTool {
            tool,
            definition,
            source: None,
        });
    }

    /// Adds a source of tools that may change while a run goes on (see [`ToolSource`]):
    /// its current tools are registered now, and runs follow its changes.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        let snapshot = source.snapshot();
        let index = self.sources.len();
        self.sources.push(RegisteredSource {
            source,
            position: self.entries.len(),
            version: snapshot.version,
        });
        for tool in snapshot.tools {
            let definition = tool.definition();
            self.entries.push(RegisteredTool {
                tool,
                definition,
                source: Some(index),
            });
        }
    }

    /// Adds a source of tools and returns the registry (builder style).
    #[must_use]
    pub fn with_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.add_source(source);
        self
    }

    /// Appends every tool and source of `other`.
    pub fn extend(&mut self, other: ToolRegistry) {
        let (entries, sources) = (self.entries.len(), self.sources.len());
        self.sources.extend(other.sources.into_iter().map(|mut s| {
            s.position += entries;
            s
        }));
        self.entries.extend(other.entries.into_iter().map(|mut e| {
            e.source = e.source.map(|i| i + sources);
            e
        }));
    }

    /// The definitions, in registration order.
    pub fn definitions(&self) -> impl ExactSizeIterator<Item = &ToolDefinition> + '_ {
        self.entries.iter().map(|e| &e.definition)
    }

    /// The tools, in registration order (a source's as of its snapshot when it was
    /// added): what a server that offers these tools to another process (an MCP
    /// server, `agent-mcp`'s `McpService`) calls.
    pub fn tools(&self) -> impl ExactSizeIterator<Item = &Arc<dyn Tool>> + '_ {
        self.entries.iter().map(|e| &e.tool)
    }

    /// The tool names, in registration order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.entries.iter().map(|e| e.definition.name.as_str())
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether any tool comes from a [`ToolSource`].
    pub fn has_sources(&self) -> bool {
        !self.sources.is_empty()
    }

    pub(crate) fn entries(&self) -> &[RegisteredTool] {
        &self.entries
    }

    pub(crate) fn sources(&self) -> &[RegisteredSource] {
        &self.sources
    }
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
