//! Response clean-up shared by the adapters: unique call ids (case C9), tool calls
//! written as text by llama.cpp-style servers, and blank ids and models (C57).

use std::collections::HashSet;

use serde_json::Value;

use crate::llm::LlmResponse;
use crate::message::ToolCall;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// A blank request id or model is none: what a proxy's placeholder or a stream's
/// filter-results chunk sends (`"id": ""`, `"model": ""`, C57's kind), on every wire,
/// plain or streamed, so a response's id and model are the provider's or nothing.
pub(crate) fn blank_identity(mut response: LlmResponse) -> LlmResponse {
    response.request_id = response.request_id.filter(|id| !id.trim().is_empty());
    response.model = response.model.filter(|m| !m.trim().is_empty());
    response
}

/// Gives every call a unique, non-empty id: a missing (empty) or repeated id is replaced
/// by a fresh random one, `call_` and 16 hex digits (case C9).
pub(crate) fn fill_ids(calls: &mut [ToolCall]) {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut replace = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        if call.id.is_empty() || !seen.insert(call.id.as_str()) {
            replace.push(i);
        }
    }
    for i in replace {
        if let Some(call) = calls.get_mut(i) {
            call.id = format!("call_{:016x}", fastrand::u64(..));
        }
    }
}

/// Recovers tool calls that a server left in the text as
/// `<tool_call>{"name": .., "arguments": ..}</tool_call>` (the Hermes / Qwen 2.5 format,
/// which llama.cpp emits as text when its parser does not match the model's output).
///
/// Returns the text without the recovered blocks (trimmed) and the calls, in order, with
/// empty ids; `None` when no block holds a call, so the turn stays plain text. Rules:
/// - the block's JSON must be an object with a string `name`; `arguments` (or
///   `parameters`) is read as [`ToolCall::from_wire`] reads it;
/// - a block cut off by `max_tokens` (no closing tag, truncated JSON) whose name can
///   still be read becomes a call with invalid arguments saying it was truncated, so
///   the runner asks for a shorter call (as for case C8);
/// - anything else in a block is left in the text.
///
/// JSON outside `<tool_call>` tags is never a call (case C5: text is text).
pub(crate) fn recover_tool_calls(text: &str) -> Option<(String, Vec<ToolCall>)> {
    if !text.contains(OPEN) {
        return None;
    }
    let mut kept = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        kept.push_str(&rest[..start]);
        let body_and_more = &rest[start + OPEN.len()..];
        let (body, next, block_len) = match body_and_more.find(CLOSE) {
            Some(end) => (
                &body_and_more[..end],
                &body_and_more[end + CLOSE.len()..],
                OPEN.len() + end + CLOSE.len(),
            ),
            None => (body_and_more, "", rest.len() - start),
        };
        match parse_block(body) {
            Some(call) => calls.push(call),
            None => kept.push_str(&rest[start..start + block_len]),
        }
        rest = next;
    }
    kept.push_str(rest);
    if calls.is_empty() {
        None
    } else {
        Some((kept.trim().to_owned(), calls))
    }
}

fn parse_block(body: &str) -> Option<ToolCall> {
    let body = strip_fence(body.trim());
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(map)) => {
            let name = map.get("name")?.as_str()?.to_owned();
            let arguments = map.get("arguments").or_else(|| map.get("parameters"));
            Some(ToolCall::from_wire("", name, arguments))
        }
        Ok(_) => None,
        Err(e) if e.is_eof() => {
            let name = name_of_truncated(body)?;
            Some(ToolCall::with_invalid_arguments(
                "",
                name,
                format!(
                    "the tool call was truncated JSON ({e}); the output was probably cut off: send shorter arguments"
                ),
            ))
        }
        Err(_) => None,
    }
}

/// Removes a Markdown code fence around a block, if any.
fn strip_fence(body: &str) -> &str {
    let Some(inner) = body.strip_prefix("```") else {
        return body;
    };
    let inner = inner.strip_prefix("json").unwrap_or(inner);
    inner.strip_suffix("```").unwrap_or(inner).trim()
}

/// The value of the first `"name": "..."` in cut-off JSON, when it is complete.
fn name_of_truncated(body: &str) -> Option<String> {
    let after_key = &body[body.find("\"name\"")? + "\"name\"".len()..];
    let after_colon = after_key.trim_start().strip_prefix(':')?.trim_start();
    let quoted = after_colon.strip_prefix('"')?;
    let end = quoted.find('"')?;
    let name = &quoted[..end];
    (!name.is_empty() && !name.contains('\\')).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    #[test]
    fn c9_missing_and_repeated_ids_are_replaced() {
        let mut calls = vec![
            ToolCall::new("", "a", json!({})),
            ToolCall::new("x", "b", json!({})),
            ToolCall::new("x", "c", json!({})),
            ToolCall::new("", "d", json!({})),
        ];
        fill_ids(&mut calls);
        assert_eq!(calls[1].id, "x");
        let ids: HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), 4);
        assert!(
            calls
                .iter()
                .all(|c| c.id.starts_with("call_") || c.id == "x")
        );
    }

    #[test]
    fn tagged_calls_are_recovered_and_text_kept() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"lookup_order\", \"arguments\": {\"order_id\": \"A1\"}}\n</tool_call>\n<tool_call>{\"name\": \"ping\", \"arguments\": \"\"}</tool_call>";
        let (rest, calls) = recover_tool_calls(text).unwrap();
        assert_eq!(rest, "Let me check.");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "lookup_order");
        assert_eq!(calls[0].arguments, json!({"order_id": "A1"}));
        assert_eq!(calls[1].arguments, json!({}));
        assert!(calls[1].arguments_error.is_none());
    }

    #[test]
    fn string_arguments_and_fences_are_read() {
        let text = "<tool_call>```json\n{\"name\": \"t\", \"arguments\": \"{\\\"a\\\": 1}\"}\n```</tool_call>";
        let (_, calls) = recover_tool_calls(text).unwrap();
        assert_eq!(calls[0].arguments, json!({"a": 1}));
    }

    // C8 in text form: a cut-off block becomes a call with truncated arguments.
    #[test]
    fn c8_truncated_block_becomes_a_call_with_an_error() {
        let text =
            "<tool_call>\n{\"name\": \"submit_output\", \"arguments\": {\"severity\": 2, \"summ";
        let (rest, calls) = recover_tool_calls(text).unwrap();
        assert_eq!(rest, "");
        assert_eq!(calls[0].name, "submit_output");
        assert_eq!(calls[0].arguments, json!({}));
        assert!(
            calls[0]
                .arguments_error
                .as_deref()
                .unwrap()
                .contains("truncated")
        );
    }

    // C5: JSON in text without tags stays text; unparseable blocks stay text.
    #[test]
    fn c5_untagged_json_and_garbage_blocks_stay_text() {
        assert!(recover_tool_calls("{\"name\": \"t\", \"arguments\": {}}").is_none());
        assert!(recover_tool_calls("<tool_call>not json</tool_call>").is_none());
        assert!(recover_tool_calls("<tool_call>{\"arguments\": {}}</tool_call>").is_none());
        let (rest, calls) = recover_tool_calls(
            "a <tool_call>oops</tool_call> b <tool_call>{\"name\":\"t\"}</tool_call>",
        )
        .unwrap();
        assert_eq!(rest, "a <tool_call>oops</tool_call> b");
        assert_eq!(calls.len(), 1);
    }
}
