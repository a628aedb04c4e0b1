//! Anthropic's tool search tool (used with `ToolSearch::prefer_native`): the BM25
//! variant `{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}`
//! in `tools`, the other tools `defer_loading: true`, the beta header
//! `anthropic-beta: advanced-tool-use-2025-11-20`. The model's searches come back as a
//! `server_tool_use` block named `tool_search_tool_bm25` (or `_regex`) and a
//! `tool_search_tool_result` block whose `content` (`tool_search_tool_search_result`)
//! lists `tool_references` (`{"type": "tool_reference", "tool_name"}`); the API loads
//! the referenced tools, and both blocks must go back unchanged in the turn that holds
//! them (source: "Tool search tool",
//! <https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool>,
//! read 2026-12-07; models: Claude Opus 4.5, Sonnet 4.5, Haiku 4.5 and later).
//!
//! The blocks are kept with the turn's first tool call, in its provider data under
//! [`SEARCH_BLOCKS`]; they are sent back only in a request that has the search tool
//! (another request's tools could not take them), and a switch to another model
//! drops them with the rest of the provider data.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

use crate::llm::ToolCall;

/// The `type` of the search tool sent.
pub(crate) const TOOL_TYPE: &str = "tool_search_tool_bm25_20251119";
/// The `name` of the search tool sent.
pub(crate) const TOOL_NAME: &str = "tool_search_tool_bm25";
/// The beta header value the tool search tool takes on the Claude API.
pub(crate) const BETA: &str = "advanced-tool-use-2025-11-20";
/// The key of a call's provider data that holds its turn's search blocks.
pub(crate) const SEARCH_BLOCKS: &str = "anthropic_tool_search";
/// The prefix of the search tools' names (`tool_search_tool_bm25`, `_regex`).
const NAME_PREFIX: &str = "tool_search_tool_";

/// The search tool's entry in `tools`.
#[derive(Serialize)]
pub(super) struct SearchTool<T: Serialize> {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cache_control: Option<T>,
}

/// The search blocks kept with a call (none when it has none).
pub(super) fn blocks_of(call: &ToolCall) -> &[Value] {
    call.provider_data
        .as_ref()
        .and_then(|d| d.get(SEARCH_BLOCKS))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The tools the search blocks of `history` reference (names): the ones the API loads
/// from those blocks when they go back.
pub(super) fn referenced(history: &[crate::message::Message]) -> HashSet<&str> {
    let mut names = HashSet::new();
    use crate::message::Message;
    for message in history {
        let blocks = match message {
            Message::Assistant { tool_calls, .. } => tool_calls.first().map_or(&[][..], blocks_of),
            // A paused turn's content goes back whole, its search blocks included.
            Message::Paused {
                content: Value::Array(blocks),
                ..
            } => blocks,
            _ => &[],
        };
        for block in blocks {
            names.extend(references(block));
        }
    }
    names
}

/// What a reply block is to the search: a search (`server_tool_use` of a
/// `tool_search_tool_*`), a result, or neither.
pub(crate) enum SearchBlock {
    /// The model's search.
    Search,
    /// Its result.
    Result,
}

/// Whether `block` is a search block, and which.
pub(crate) fn search_block(block: &Value) -> Option<SearchBlock> {
    match block.get("type").and_then(Value::as_str)? {
        "server_tool_use"
            if block
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.starts_with(NAME_PREFIX)) =>
        {
            Some(SearchBlock::Search)
        }
        "tool_search_tool_result" => Some(SearchBlock::Result),
        _ => None,
    }
}

/// The tool names a `tool_search_tool_result` block references (none for an error
/// result or another block).
pub(crate) fn references(block: &Value) -> impl Iterator<Item = &str> {
    block
        .get("content")
        .and_then(|c| c.get("tool_references"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("tool_name").and_then(Value::as_str))
}
