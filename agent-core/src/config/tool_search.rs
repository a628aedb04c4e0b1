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
/// The ranking is local on every provider unless [`prefer_native`](Self::prefer_native)
/// is set: then a route whose provider documents a tool search of its own uses it
/// instead (Anthropic's tool search tool, OpenAI Responses' `tool_search`; see
/// `docs/providers.md`, "Tool search: the providers' own"), and every other route the
/// local search, with the same revealed set.
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
    /// Whether a route whose provider runs a tool search of its own uses it (see
    /// [`prefer_native`](Self::prefer_native)); `false` by default.
    pub native: bool,
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
            native: false,
        }
    }

    /// The most tools one search reveals (at least 1).
    #[must_use]
    pub fn max_results(mut self, max_results: usize) -> Self {
        self.max_results = max_results;
        self
    }

    /// Use the provider's own tool search on the routes whose provider documents one
    /// and whose client sends it ([`LlmClient::native_tool_search`](crate::llm::LlmClient::native_tool_search)),
    /// the local BM25 search on every other route:
    ///
    /// - the Anthropic Messages API (`AnthropicClient`) for Claude 4.5 and later
    ///   (`claude-opus-4-5`, `claude-sonnet-4-5`, `claude-haiku-4-5`, 4.6, 5, ...): the
    ///   tool `{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}`,
    ///   the header `anthropic-beta: advanced-tool-use-2025-11-20` (source:
    ///   <https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool>);
    /// - the OpenAI Responses API (`OpenAiResponsesClient` on OpenAI, not Azure) for
    ///   `gpt-5.4` and later: the tool `{"type": "tool_search"}` (source:
    ///   <https://developers.openai.com/api/docs/guides/tools-tool-search>).
    ///
    /// On those routes the request carries every tool, the searchable ones (all but
    /// [`always_on`](Self::always_on)) with `defer_loading: true`, and no
    /// `search_tools`; [`max_results`](Self::max_results) is the provider's to decide.
    /// The tools a provider search returns are added to the run's revealed set (the
    /// checkpoint, a `ToolsRevealed` event and trace event, as the local search's);
    /// each provider search counts as one tool call in `Usage::tool_calls` and toward
    /// `max_tool_calls`, counted when its turn arrives (it ran at the provider, so it
    /// cannot be refused: a turn past the limit has its own tool calls refused). A
    /// name no tool of the config has is ignored, with a warning. After a switch to a
    /// fallback model without a native search, or a resume on one, the provider's
    /// search blocks are dropped and the local search goes on with the revealed set
    /// (revealed tools offered, `search_tools` for the rest). A batched call
    /// (`run_batch`) uses the local search.
    #[must_use]
    pub fn prefer_native(mut self) -> Self {
        self.native = true;
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
    /// Whether routes with a native tool search use it (`prefer_native`).
    pub(crate) native: bool,
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
        native: search.native,
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
