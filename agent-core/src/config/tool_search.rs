//! [`ToolSearch`]: deferred tool loading. With it a config offers the model only the
//! search tool [`SEARCH_TOOLS`] and the tools marked always-on; each search reveals
//! its matching tools, which every later LLM call of the run offers too.

use serde_json::json;

use crate::tool::ToolDefinition;

use crate::error::ConfigError;

use super::bm25::Bm25;

/// The name of the search tool a config with [`ToolSearch`] offers. A user tool of this
/// name is a [`ConfigError::ReservedToolName`] in such a config.
pub const SEARCH_TOOLS: &str = "search_tools";

/// Deferred tool loading, for configs with many tools (an MCP server with 200 tools
/// costs its whole schema list in every request without it). Set it with the builder's
/// `tool_search`.
///
/// Each LLM call then offers the model the search tool [`SEARCH_TOOLS`]
/// (`{"query": string}`), the tools named [`always_on`](Self::always_on), the tools its
/// searches revealed so far, and the runner's own (`submit_output`,
/// `escalate_to_human`, `transfer_to_*`). A search ranks the other tools by their
/// name, description and parameter names with BM25, computed in this process, and
/// reveals the best [`max_results`](Self::max_results) (default 5): its result lists
/// them (name and description) and they stay offered for the rest of the run. The
/// revealed names are part of the run's checkpoint (a resumed run offers them too) and
/// each reveal is a [`RunEvent::ToolsRevealed`](crate::observe::RunEvent::ToolsRevealed)
/// and a trace event. A search that matches nothing answers with a note (not an error
/// result) naming some searchable tools. A call to a tool not revealed yet, or to a
/// name no tool has, is answered as an unknown tool (its result lists the tools the
/// turn offered), never run. Each search counts as one tool call in
/// `Usage::tool_calls` and toward `max_tool_calls`.
///
/// The ranking is local on every provider; the providers' own tool search (Anthropic's
/// tool search tool, OpenAI's `tool_search`) is not used: see `docs/providers.md`.
///
/// `build()` returns a [`ConfigError`] when there is no tool to find (every tool is
/// always-on, or there is none), when an always-on name is no tool of the config, when
/// `max_results` is 0, and ([`ConfigError::ReservedToolName`]) when a user tool is named
/// `search_tools`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolSearch {
    /// The most tools one search reveals (default 5).
    pub max_results: usize,
    /// The tools offered from the first call on, by name.
    pub always_on: Vec<String>,
}

impl Default for ToolSearch {
    fn default() -> Self {
        Self::bm25()
    }
}

impl ToolSearch {
    /// Tool search ranked by BM25 in this process: 5 results per search, no tool
    /// always-on.
    pub fn bm25() -> Self {
        Self {
            max_results: 5,
            always_on: Vec::new(),
        }
    }

    /// The most tools one search reveals (at least 1).
    #[must_use]
    pub fn max_results(mut self, max_results: usize) -> Self {
        self.max_results = max_results;
        self
    }

    /// Tools offered from the first LLM call on, without a search (names of the
    /// config's tools).
    #[must_use]
    pub fn always_on<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.always_on.extend(names.into_iter().map(Into::into));
        self
    }
}

/// The `InvalidSetting` error of a tool search setting.
fn invalid(value: impl Into<String>, reason: &'static str) -> ConfigError {
    ConfigError::InvalidSetting {
        setting: "tool_search",
        value: value.into(),
        reason,
    }
}

/// A config's tool search, checked and compiled.
pub(crate) struct SearchPlan {
    pub(crate) max_results: usize,
    pub(crate) always_on: Vec<String>,
    /// The search tool as the model sees it.
    pub(crate) definition: ToolDefinition,
}

impl SearchPlan {
    /// Whether the tool `name` is offered without a search.
    pub(crate) fn is_always_on(&self, name: &str) -> bool {
        self.always_on.iter().any(|n| n == name)
    }

    /// The index of the searchable tools of `tools` (every one not always-on).
    pub(crate) fn index<'a>(&self, tools: impl Iterator<Item = &'a ToolDefinition>) -> Bm25 {
        Bm25::new(
            tools
                .enumerate()
                .filter(|(_, d)| !self.is_always_on(&d.name)),
        )
    }
}

/// Checks `search` against the config's user tools (`names`, in order).
///
/// # Errors
/// See [`ToolSearch`].
pub(super) fn plan(
    search: Option<&ToolSearch>,
    names: &[&str],
) -> Result<Option<SearchPlan>, ConfigError> {
    let Some(search) = search else {
        return Ok(None);
    };
    if search.max_results == 0 {
        return Err(invalid(
            "max_results(0)",
            "a search must be able to reveal at least one tool",
        ));
    }
    if names.contains(&SEARCH_TOOLS) {
        return Err(ConfigError::ReservedToolName {
            name: SEARCH_TOOLS.to_owned(),
        });
    }
    if let Some(unknown) = search
        .always_on
        .iter()
        .find(|n| !names.contains(&n.as_str()))
    {
        return Err(invalid(
            format!("always_on({unknown:?})"),
            "an always-on name must be one of the config's tools",
        ));
    }
    let searchable = names
        .iter()
        .filter(|n| !search.always_on.iter().any(|a| a == *n))
        .count();
    if searchable == 0 {
        return Err(invalid(
            format!("{} tools, all always-on", names.len()),
            "there is no tool to find: add tools, or leave tool_search unset",
        ));
    }
    Ok(Some(SearchPlan {
        max_results: search.max_results,
        always_on: search.always_on.clone(),
        definition: definition(),
    }))
}

/// The search tool's definition.
fn definition() -> ToolDefinition {
    ToolDefinition::new(
        SEARCH_TOOLS,
        "Find the tools you need. Most tools are not listed until a search finds them: \
         describe what you want to do (for example \"refund an order\") and the best \
         matching tools are listed, with what they do; from then on you can call them.",
        json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Words for what the tool should do or work on."
                }
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    )
}
