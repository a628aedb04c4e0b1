//! OpenAI's `tool_search` on the Responses API (used with `ToolSearch::prefer_native`):
//! `{"type": "tool_search"}` in `tools`, the functions to find `defer_loading: true`.
//! The model's searches come back as `tool_search_call` items (`execution: "server"`)
//! each followed by a `tool_search_output` item whose `tools` are the definitions the
//! search loaded; both go back as input items, unchanged, ahead of the calls that
//! follow them (source: "Tool search",
//! <https://developers.openai.com/api/docs/guides/tools-tool-search>, read 2026-12-07:
//! `gpt-5.4` and later).
//!
//! The items are kept as reasoning items are, with the call that follows them (its
//! provider data `reasoning` list); they go back only in a request that has
//! `tool_search`, and a switch to another model drops them with the rest of the
//! provider data.

use std::collections::HashSet;

use serde_json::Value;

use crate::llm::{LlmRequest, NativeToolSearch};
use crate::message::{Message, ToolCall};

/// The `tools` array with `tool_search`: the search tool first, then each function as
/// `function` gives it, with `defer_loading: true` where `native` defers it (`kept`:
/// the items kept with a call, which go back ahead of it).
pub(super) fn tools(
    request: &LlmRequest,
    native: &NativeToolSearch,
    function: impl Fn(&crate::tool::ToolDefinition) -> Value,
    kept: fn(&ToolCall) -> &[Value],
) -> Vec<Value> {
    let referenced = referenced(&request.messages, kept);
    let mut out = Vec::with_capacity(request.tools.len() + 1);
    out.push(serde_json::json!({"type": "tool_search"}));
    for def in request.tools.iter() {
        let mut tool = function(def);
        if native.defers(&def.name, &referenced)
            && let Value::Object(map) = &mut tool
        {
            map.insert("defer_loading".to_owned(), Value::Bool(true));
        }
        out.push(tool);
    }
    out
}

/// Whether `item` is a `tool_search_call` or a `tool_search_output`.
pub(super) fn is_search_item(item: &Value) -> bool {
    matches!(
        item.get("type").and_then(Value::as_str),
        Some("tool_search_call" | "tool_search_output")
    )
}

/// The tools a `tool_search_output` item loaded (names; a namespace's functions
/// included); none for another item.
pub(super) fn loaded(item: &Value) -> Vec<&str> {
    if item.get("type").and_then(Value::as_str) != Some("tool_search_output") {
        return Vec::new();
    }
    let mut names = Vec::new();
    for tool in item
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match tool.get("tools").and_then(Value::as_array) {
            Some(inner) => names.extend(
                inner
                    .iter()
                    .filter_map(|t| t.get("name").and_then(Value::as_str)),
            ),
            None => names.extend(tool.get("name").and_then(Value::as_str)),
        }
    }
    names
}

/// The tools the search items kept in `history` loaded (names).
fn referenced(history: &[Message], kept: fn(&ToolCall) -> &[Value]) -> HashSet<&str> {
    let mut names = HashSet::new();
    for message in history {
        if let Message::Assistant { tool_calls, .. } = message {
            for call in tool_calls {
                for item in kept(call) {
                    names.extend(loaded(item));
                }
            }
        }
    }
    names
}
