//! Makes a model turn's tool calls safe to run, answer and re-send to any provider,
//! whatever the client returned.

use foldhash::HashSet;

use serde_json::Value;

use crate::config::is_legal_tool_name;
use crate::message::{ToolCall, json_kind};

/// The deepest argument nesting accepted (serde_json's own parser limit): deeper values
/// are refused before anything walks them recursively.
const MAX_DEPTH: usize = 128;

/// Fixes a turn's calls in place:
/// - every id is non-empty and unique over the whole run (case C9; Anthropic rejects a
///   repeated `tool_use` id), else a synthesised `call_<trace>_<llm call>_<index>`
///   (with a further suffix if even that was taken);
/// - a name that breaks `^[A-Za-z0-9_-]{1,64}$` (no tool can have it) is rewritten to a
///   legal one that `is_known` rejects, since OpenAI rejects a history holding the
///   original; the call is answered as an unknown tool, never run;
/// - arguments that are not an object, or nest deeper than 128 levels, become `{}` with
///   an [`arguments_error`](ToolCall::arguments_error) saying why.
pub(crate) fn sanitize_calls(
    calls: &mut [ToolCall],
    seen_ids: &mut HashSet<String>,
    trace_id: &str,
    llm_call: u32,
    is_known: &dyn Fn(&str) -> bool,
) {
    for (i, call) in calls.iter_mut().enumerate() {
        if call.id.is_empty() || seen_ids.contains(&call.id) {
            let prefix = trace_id.get(..8).unwrap_or(trace_id);
            let base = format!("call_{prefix}_{llm_call}_{i}");
            let mut id = base.clone();
            let mut n = 0u32;
            while seen_ids.contains(&id) {
                n += 1;
                id = format!("{base}_{n}");
            }
            call.id = id;
        }
        seen_ids.insert(call.id.clone());
        if !is_legal_tool_name(&call.name) {
            let mut name = legal_name(&call.name);
            if is_known(&name) {
                // Never let a rewritten name reach a real tool.
                name = format!("unknown_{name}").chars().take(64).collect();
                if is_known(&name) {
                    name = "unknown_tool_name".to_owned();
                }
            }
            call.name = name;
        }
        if call.arguments_error.is_none() {
            let problem = if !call.arguments.is_object() {
                Some(format!(
                    "the arguments must be a JSON object, got {}",
                    json_kind(&call.arguments)
                ))
            } else if deeper_than(&call.arguments, MAX_DEPTH) {
                Some(format!(
                    "the arguments nest more than {MAX_DEPTH} levels deep"
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                let refused =
                    std::mem::replace(&mut call.arguments, Value::Object(serde_json::Map::new()));
                dismantle(refused);
                call.arguments_error = Some(problem);
            } else {
                // `3.0` for an integer parameter is a 3 (C29).
                crate::validate::whole_numbers_as_integers(&mut call.arguments);
            }
        }
    }
}

/// `name` with every character outside `[A-Za-z0-9_-]` replaced by `_`, cut to 64
/// characters; `unnamed_tool` when nothing is left.
fn legal_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "unnamed_tool".to_owned()
    } else {
        cleaned
    }
}

/// Drops a value without recursion (serde_json's own drop recurses, and a value nested
/// deeply enough overflows the stack).
fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// Whether `value` nests deeper than `limit`, without recursion.
fn deeper_than(value: &Value, limit: usize) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((v, depth)) = stack.pop() {
        if depth > limit {
            return true;
        }
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|x| (x, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|x| (x, depth + 1))),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use foldhash::HashSetExt;
    use serde_json::json;

    fn nested(depth: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..depth {
            let mut map = serde_json::Map::new();
            map.insert("a".to_owned(), v);
            v = Value::Object(map);
        }
        v
    }

    #[test]
    fn ids_are_unique_over_the_run() {
        let mut seen = HashSet::new();
        let mut turn1 = vec![
            ToolCall::new("a", "t", json!({})),
            ToolCall::new("", "t", json!({})),
        ];
        sanitize_calls(&mut turn1, &mut seen, "0123456789abcdef", 1, &|_| false);
        let mut turn2 = vec![ToolCall::new("a", "t", json!({}))];
        sanitize_calls(&mut turn2, &mut seen, "0123456789abcdef", 2, &|_| false);
        assert_eq!(turn1[0].id, "a");
        assert_eq!(turn1[1].id, "call_01234567_1_1");
        assert_eq!(turn2[0].id, "call_01234567_2_0");
    }

    #[test]
    fn a_synthesised_id_never_collides() {
        let mut seen = HashSet::new();
        let mut calls = vec![
            ToolCall::new("call_01234567_1_1", "t", json!({})),
            ToolCall::new("call_01234567_1_1", "t", json!({})),
        ];
        sanitize_calls(&mut calls, &mut seen, "0123456789abcdef", 1, &|_| false);
        assert_eq!(calls[1].id, "call_01234567_1_1_1");
    }

    #[test]
    fn a_rewritten_name_never_names_a_real_tool() {
        let mut seen = HashSet::new();
        let known = |n: &str| n == "get_order";
        let mut calls = vec![ToolCall::new("1", "get order", json!({}))];
        sanitize_calls(&mut calls, &mut seen, "trace", 1, &known);
        assert_eq!(calls[0].name, "unknown_get_order");
    }

    #[test]
    fn illegal_names_become_legal() {
        assert_eq!(legal_name("functions.lookup"), "functions_lookup");
        assert_eq!(legal_name("lööküp"), "l__k_p");
        assert_eq!(legal_name(""), "unnamed_tool");
        assert_eq!(legal_name(&"x".repeat(100)).len(), 64);
    }

    #[test]
    fn non_objects_and_deep_nesting_are_refused_without_recursion() {
        let mut seen = HashSet::new();
        let mut calls = vec![
            ToolCall::new("1", "t", json!([1])),
            ToolCall::new("2", "t", nested(127)),
            ToolCall::new("3", "t", nested(100_000)),
        ];
        sanitize_calls(&mut calls, &mut seen, "trace", 1, &|_| false);
        assert_eq!(
            calls[0].arguments_error.as_deref(),
            Some("the arguments must be a JSON object, got an array")
        );
        assert!(calls[1].arguments_error.is_none());
        assert!(
            calls[2]
                .arguments_error
                .as_deref()
                .unwrap()
                .contains("128 levels")
        );
        assert_eq!(
            calls[2].arguments,
            json!({}),
            "the deep value was dismantled, not dropped"
        );
    }
}
