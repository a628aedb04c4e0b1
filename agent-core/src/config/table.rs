//! The tool table a turn runs with: the config's frozen one, or one rebuilt from the
//! current snapshots of its tool sources (see `ToolSource`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::output::{ESCALATE_TO_HUMAN, SUBMIT_OUTPUT};
use crate::tool::ToolDefinition;
use crate::tool::ToolSnapshot;

use super::bm25::Bm25;
use super::checks::{check_object_schema, is_legal_tool_name};
use super::tool_search::SearchPlan;
use super::{Compiled, CompiledTool};

/// The user tools of a turn, and what is offered with them.
pub(crate) struct ToolTable {
    /// The user tools, in registration order (a source's tools where it was added).
    pub(crate) tools: Vec<Arc<CompiledTool>>,
    /// A tool's position in `tools`, by name (foldhash: it is looked up three times
    /// per call, and SipHash was most of a lookup's cost).
    pub(crate) index: foldhash::HashMap<String, usize>,
    /// Every tool offered in an ordinary turn: the user tools, then `submit_output`,
    /// then `escalate_to_human` when enabled.
    pub(crate) offered: Arc<[ToolDefinition]>,
    /// The version of each of the config's tool sources this table was built from.
    pub(crate) versions: Vec<u64>,
    /// The tool sets `tools_for` chose so far, by which user tools they keep (one bit
    /// per tool, up to 64 tools), so each set is one `Arc` (and is encoded once).
    pub(crate) subsets: Mutex<HashMap<u64, Arc<[ToolDefinition]>>>,
    /// The tool search index of this table's tools, built at the first search.
    search_index: OnceLock<Bm25>,
}

impl ToolTable {
    pub(crate) fn new(
        tools: Vec<Arc<CompiledTool>>,
        index: foldhash::HashMap<String, usize>,
        offered: Arc<[ToolDefinition]>,
        versions: Vec<u64>,
    ) -> Self {
        Self {
            tools,
            index,
            offered,
            versions,
            subsets: Mutex::new(HashMap::new()),
            search_index: OnceLock::new(),
        }
    }

    /// The index `plan` searches in this table (built once per table: a tool source's
    /// change makes a new table).
    pub(crate) fn search_index(&self, plan: &SearchPlan) -> &Bm25 {
        self.search_index
            .get_or_init(|| plan.index(self.tools.iter().map(|t| &t.definition)))
    }

    /// The tool `name` of this table.
    pub(crate) fn get(&self, name: &str) -> Option<&CompiledTool> {
        self.index
            .get(name)
            .and_then(|&i| self.tools.get(i))
            .map(Arc::as_ref)
    }
}

impl<T> Compiled<T> {
    /// The config's tool sources, in order (see `ToolSource`).
    pub(crate) fn tool_sources(&self) -> &[crate::tool::RegisteredSource] {
        self.settings.tools.sources()
    }

    /// The config's plain user tools as a checkpoint records them: name and parameters,
    /// in the config's order. A `ToolSource`'s tools are left out: they may change during
    /// a run and between a crash and its resume, so they are checked per call instead (a
    /// pending call to a tool the source no longer has is answered as unknown).
    pub(crate) fn tool_signatures(&self) -> Vec<(String, serde_json::Value)> {
        self.settings
            .tools
            .entries()
            .iter()
            .filter(|e| e.source.is_none())
            .map(|e| (e.definition.name.clone(), e.definition.parameters.clone()))
            .collect()
    }

    /// The names of the tools that came from the config's tool sources (as `build()`
    /// saw them).
    pub(crate) fn source_tool_names(&self) -> Vec<&str> {
        self.settings
            .tools
            .entries()
            .iter()
            .filter(|e| e.source.is_some())
            .map(|e| e.definition.name.as_str())
            .collect()
    }

    /// The table for the sources' current `snapshots` (one per source, in order): the
    /// config's own when no version changed since `build()`, else the newest table
    /// built, shared by every run of the config, rebuilt when a version changed.
    pub(crate) fn table_for(&self, snapshots: &[ToolSnapshot]) -> Arc<ToolTable> {
        let same = |t: &ToolTable| {
            t.versions.len() == snapshots.len()
                && t.versions
                    .iter()
                    .zip(snapshots)
                    .all(|(v, s)| *v == s.version)
        };
        if same(&self.table) {
            return Arc::clone(&self.table);
        }
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        if !same(&latest) {
            *latest = Arc::new(self.rebuild(snapshots));
        }
        Arc::clone(&latest)
    }

    /// The frozen table with every source's tools replaced by its snapshot's. A new
    /// tool that `build()` would reject is left out, with a warning.
    fn rebuild(&self, snapshots: &[ToolSnapshot]) -> ToolTable {
        let registry = &self.settings.tools;
        let sources = registry.sources();
        let mut tools: Vec<Arc<CompiledTool>> = Vec::new();
        let mut index = foldhash::HashMap::default();
        let mut add = |tool: Arc<CompiledTool>, index: &mut foldhash::HashMap<String, usize>| {
            let name = tool.definition.name.clone();
            if index.contains_key(&name) {
                tracing::warn!(tool = %name, "a tool source offers a tool whose name is taken; it is left out");
                return;
            }
            index.insert(name, tools.len());
            tools.push(tool);
        };
        let mut next = 0;
        let entries = registry.entries();
        for position in 0..=entries.len() {
            while sources.get(next).is_some_and(|s| s.position <= position) {
                for tool in snapshots.get(next).map_or(&[][..], |s| &s.tools[..]) {
                    if let Some(compiled) = self.compile_dynamic(tool) {
                        add(Arc::new(compiled), &mut index);
                    }
                }
                next += 1;
            }
            let frozen = entries
                .get(position)
                .filter(|e| e.source.is_none())
                .and(self.table.tools.get(position));
            if let Some(tool) = frozen {
                add(Arc::clone(tool), &mut index);
            }
        }
        let user = self.table.tools.len();
        let offered: Vec<ToolDefinition> = tools
            .iter()
            .map(|t| t.definition.clone())
            .chain(self.table.offered[user..].iter().cloned())
            .collect();
        let versions = snapshots.iter().map(|s| s.version).collect();
        ToolTable::new(tools, index, offered.into(), versions)
    }

    /// A source's tool checked as `build()` checks one, or `None` (and a warning).
    fn compile_dynamic(&self, tool: &Arc<dyn crate::tool::Tool>) -> Option<CompiledTool> {
        let definition = tool.definition();
        let name = &definition.name;
        let rejected = |why: &str| {
            tracing::warn!(tool = %name, "a tool source's new tool is left out: {why}");
        };
        if !is_legal_tool_name(name) {
            rejected("its name is not provider-legal");
            return None;
        }
        let search = self.tool_search.is_some() && name == super::SEARCH_TOOLS;
        if name == SUBMIT_OUTPUT || name == ESCALATE_TO_HUMAN || search {
            rejected("its name is reserved");
            return None;
        }
        let settings = &self.settings;
        let missing = tool.required_state().into_iter().find(|need| {
            !self.state.contains(need.type_id)
                && !settings.run_state.iter().any(|r| r.type_id == need.type_id)
        });
        if let Some(need) = missing {
            rejected(&format!(
                "the config holds no state of type {}",
                need.type_name
            ));
            return None;
        }
        let validator = match check_object_schema(name, &definition.parameters) {
            Ok(validator) => validator,
            Err(error) => {
                rejected(&error.to_string());
                return None;
            }
        };
        Some(CompiledTool {
            irreversible: tool.irreversible(),
            requires_approval: tool.requires_approval(),
            max_result_bytes: match super::checks::result_cap(name, tool.max_result_tokens()) {
                Ok(cap) => cap,
                Err(error) => {
                    rejected(&error.to_string());
                    return None;
                }
            },
            tool: Arc::clone(tool),
            definition,
            validator,
        })
    }
}
