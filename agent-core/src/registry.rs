//! [`ToolRegistry`]: the tools a config offers, in registration order.

use std::fmt;
use std::sync::Arc;

use crate::tool::{Tool, ToolDefinition};

/// The user tools of a config, in registration order.
///
/// Build one by hand (`ToolRegistry::new().with(MyTool)`) or with `tools![a, b]`. The
/// registry accepts anything; the config's `build()` checks it (unique, provider-legal
/// names, no `submit_output`, compilable schemas) and returns a `ConfigError` otherwise.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    entries: Vec<RegisteredTool>,
}

/// One registered tool and its definition (read once, at registration).
#[derive(Clone)]
pub(crate) struct RegisteredTool {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) definition: ToolDefinition,
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
        self.entries.push(RegisteredTool { tool, definition });
    }

    /// Appends every tool of `other`.
    pub fn extend(&mut self, other: ToolRegistry) {
        self.entries.extend(other.entries);
    }

    /// The definitions, in registration order.
    pub fn definitions(&self) -> impl ExactSizeIterator<Item = &ToolDefinition> + '_ {
        self.entries.iter().map(|e| &e.definition)
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

    pub(crate) fn entries(&self) -> &[RegisteredTool] {
        &self.entries
    }
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
