//! No-progress guards: repeated identical calls, and turns that learn nothing new.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::error::StuckReason;
use crate::message::{ToolCall, ToolResult};

/// JSON with object keys sorted and no whitespace, so `{"b":1, "a":2}` and
/// `{"a":2,"b":1}` compare equal.
pub(crate) fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The state of both guards over one run.
pub(crate) struct Guard {
    repeat_limit: u32,
    no_progress_limit: u32,
    calls: HashMap<(String, String), u32>,
    seen_results: HashSet<(String, String)>,
    idle_turns: u32,
}

impl Guard {
    pub(crate) fn new(repeat_limit: u32, no_progress_limit: u32) -> Self {
        Self {
            repeat_limit,
            no_progress_limit,
            calls: HashMap::new(),
            seen_results: HashSet::new(),
            idle_turns: 0,
        }
    }

    /// Records the user-tool calls of a turn, before they run; fires when one of them
    /// reaches the repeat limit. A call counts once per turn (parallel duplicates in one
    /// turn are one attempt: C6, C11), and a call whose arguments arrived unusable does
    /// not count (its `{}` is not what the model sent; the no-progress guard still sees
    /// it).
    pub(crate) fn record_calls(&mut self, calls: &[ToolCall]) -> Option<StuckReason> {
        let mut fired = None;
        let mut this_turn: HashSet<(String, String)> = HashSet::new();
        for call in calls.iter().filter(|c| c.arguments_error.is_none()) {
            let key = (call.name.clone(), canonical_json(&call.arguments));
            if !this_turn.insert(key.clone()) {
                continue;
            }
            let count = self.calls.entry(key.clone()).or_insert(0);
            *count += 1;
            if *count >= self.repeat_limit && fired.is_none() {
                fired = Some(StuckReason::RepeatedCall {
                    tool: key.0,
                    arguments: key.1,
                    times: *count,
                });
            }
        }
        fired
    }

    /// Records the results of a tool turn; fires after `no_progress_limit` consecutive
    /// tool turns whose every result (tool name and content) was seen before.
    pub(crate) fn record_results(&mut self, results: &[ToolResult]) -> Option<StuckReason> {
        let mut new_content = false;
        for r in results {
            new_content |= self
                .seen_results
                .insert((r.name.clone(), r.content.clone()));
        }
        if new_content {
            self.idle_turns = 0;
            None
        } else {
            self.idle_turns += 1;
            (self.idle_turns >= self.no_progress_limit).then_some(StuckReason::NoProgress {
                turns: self.idle_turns,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_ignores_key_order_and_whitespace() {
        let a: Value = serde_json::from_str(r#"{"b": [1, {"y":1,"x":2}], "a": "s"}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":"s","b":[1,{"x":2,"y":1}]}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":"s","b":[1,{"x":2,"y":1}]}"#);
    }

    #[test]
    fn repeat_fires_at_the_limit() {
        let mut g = Guard::new(2, 3);
        let call = ToolCall::new("1", "lookup", json!({"id": 1, "x": 2}));
        assert!(g.record_calls(std::slice::from_ref(&call)).is_none());
        let same = ToolCall::new("2", "lookup", json!({"x": 2, "id": 1}));
        let fired = g.record_calls(&[same]).unwrap();
        assert_eq!(
            fired,
            StuckReason::RepeatedCall {
                tool: "lookup".into(),
                arguments: r#"{"id":1,"x":2}"#.into(),
                times: 2
            }
        );
    }

    #[test]
    fn duplicates_within_a_turn_and_unusable_arguments_do_not_count() {
        let mut g = Guard::new(2, 3);
        let same = || ToolCall::new("1", "ping", json!({}));
        assert!(
            g.record_calls(&[same(), same(), same()]).is_none(),
            "one turn, one attempt"
        );
        let broken = || ToolCall::with_invalid_arguments("2", "lookup", "truncated");
        assert!(g.record_calls(&[broken()]).is_none());
        assert!(g.record_calls(&[broken()]).is_none());
        assert!(
            g.record_calls(&[same()]).is_some(),
            "ping in a second turn is a repeat"
        );
    }

    #[test]
    fn no_progress_counts_consecutive_idle_turns() {
        let mut g = Guard::new(2, 2);
        let r = |c: &str| vec![ToolResult::ok("id", "lookup", c)];
        assert!(g.record_results(&r("not found")).is_none());
        assert!(g.record_results(&r("not found")).is_none());
        assert!(g.record_results(&r("found!")).is_none());
        assert!(g.record_results(&r("found!")).is_none());
        assert_eq!(
            g.record_results(&r("not found")),
            Some(StuckReason::NoProgress { turns: 2 })
        );
    }
}
