//! [`RunDiff`]: how two runs differ (endings, output field by field, tool calls).

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::error::Ending;
use crate::store::TraceRecord;

/// How two runs differ: their endings, their outputs field by field, and their tool-call
/// sequences. Its `Display` is a short plain-text report.
///
/// ```
/// # use agent_core::store::RunDiff;
/// # fn show(a: &agent_core::store::TraceRecord, b: &agent_core::store::TraceRecord) {
/// let diff = RunDiff::between(a, b);
/// if !diff.is_same() {
///     println!("{diff}");
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RunDiff {
    /// The left run's trace id.
    pub left: String,
    /// The right run's trace id.
    pub right: String,
    /// The endings, left then right.
    pub endings: (Ending, Ending),
    /// The error categories, left then right.
    pub categories: (Option<String>, Option<String>),
    /// Every output field that differs, by JSON Pointer (`""` for the whole value).
    pub output: Vec<FieldDiff>,
    /// The tool calls of each run, as `name(arguments)` with canonical JSON arguments.
    pub tool_calls: (Vec<String>, Vec<String>),
    /// The index of the first tool call that differs, if the sequences differ.
    pub first_divergent_call: Option<usize>,
    /// LLM calls, left then right.
    pub llm_calls: (u32, u32),
}

/// One output field that differs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FieldDiff {
    /// The field's JSON Pointer (`/queue`, `/items/0/name`; `""` for the whole value).
    pub path: String,
    /// The left value (`None` when the left output has no such field).
    pub left: Option<Value>,
    /// The right value (`None` when the right output has no such field).
    pub right: Option<Value>,
}

impl RunDiff {
    /// Compares two recorded runs.
    pub fn between(left: &TraceRecord, right: &TraceRecord) -> Self {
        let mut output = Vec::new();
        diff_values("", Some(&left.output), Some(&right.output), &mut output);
        let calls = |t: &TraceRecord| -> Vec<String> {
            t.tool_calls()
                .map(|c| format!("{}({})", c.name, c.arguments))
                .collect()
        };
        let (a, b) = (calls(left), calls(right));
        let first_divergent_call = if a == b {
            None
        } else {
            Some(
                a.iter()
                    .zip(&b)
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.len().min(b.len())),
            )
        };
        Self {
            left: left.trace_id.clone(),
            right: right.trace_id.clone(),
            endings: (left.ending, right.ending),
            categories: (left.category.clone(), right.category.clone()),
            output,
            tool_calls: (a, b),
            first_divergent_call,
            llm_calls: (left.usage.llm_calls, right.usage.llm_calls),
        }
    }

    /// Whether the runs ended the same way with the same output and the same tool calls.
    pub fn is_same(&self) -> bool {
        self.endings.0 == self.endings.1
            && self.categories.0 == self.categories.1
            && self.output.is_empty()
            && self.first_divergent_call.is_none()
    }
}

fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn diff_values(path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<FieldDiff>) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let sub = format!("{path}/{}", pointer_escape(key));
                diff_values(&sub, x.get(key), y.get(key), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                diff_values(&format!("{path}/{i}"), x.get(i), y.get(i), out);
            }
        }
        (a, b) if a != b => out.push(FieldDiff {
            path: path.to_owned(),
            left: a.cloned(),
            right: b.cloned(),
        }),
        _ => {}
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "(absent)".to_owned(), Value::to_string)
}

impl fmt::Display for RunDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "left  {}\nright {}", self.left, self.right)?;
        let cat = |c: &Option<String>| c.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
        let mark = |same: bool| if same { "same" } else { "DIFFERENT" };
        writeln!(
            f,
            "ending: {}{} -> {}{} [{}]",
            self.endings.0,
            cat(&self.categories.0),
            self.endings.1,
            cat(&self.categories.1),
            mark(self.endings.0 == self.endings.1 && self.categories.0 == self.categories.1)
        )?;
        writeln!(f, "LLM calls: {} -> {}", self.llm_calls.0, self.llm_calls.1)?;
        if self.output.is_empty() {
            writeln!(f, "output: same")?;
        } else {
            writeln!(f, "output: {} field(s) differ", self.output.len())?;
            for d in &self.output {
                let path = if d.path.is_empty() {
                    "(whole)"
                } else {
                    &d.path
                };
                writeln!(
                    f,
                    "  {path}: {} -> {}",
                    show(d.left.as_ref()),
                    show(d.right.as_ref())
                )?;
            }
        }
        match self.first_divergent_call {
            None => write!(f, "tool calls: same ({})", self.tool_calls.0.len()),
            Some(i) => {
                writeln!(f, "tool calls: differ from call #{}", i + 1)?;
                writeln!(f, "  left:  {}", self.tool_calls.0.join(", "))?;
                write!(f, "  right: {}", self.tool_calls.1.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, ToolCall};
    use crate::usage::Usage;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn trace(id: &str, ending: Ending, output: Value, calls: &[&str]) -> TraceRecord {
        TraceRecord {
            trace_id: id.into(),
            agent: "a".into(),
            variant: None,
            fingerprint: "f".into(),
            model: "m".into(),
            started_at_ms: 0,
            input: "in".into(),
            history: vec![],
            thread: None,
            metadata: BTreeMap::new(),
            transcript: vec![
                Message::user("in"),
                Message::assistant(
                    "",
                    calls
                        .iter()
                        .map(|n| ToolCall::new("c", *n, json!({"k": 1})))
                        .collect(),
                ),
            ],
            events: vec![],
            ending,
            category: None,
            error: None,
            output,
            usage: Usage::default(),
            duration_ms: 0,
        }
    }

    #[test]
    fn identical_runs_are_the_same() {
        let a = trace("a", Ending::Answered, json!({"q": 1}), &["lookup"]);
        let d = RunDiff::between(&a, &a);
        assert!(d.is_same(), "{d}");
        assert!(d.to_string().contains("tool calls: same (1)"));
    }

    #[test]
    fn outputs_differ_field_by_field_and_calls_at_the_first_divergence() {
        let a = trace(
            "a",
            Ending::Answered,
            json!({"queue": "billing", "sev": 2, "tags": ["x"], "a/b": 1}),
            &["lookup", "refund"],
        );
        let b = trace(
            "b",
            Ending::Answered,
            json!({"queue": "shipping", "sev": 2, "tags": ["x", "y"]}),
            &["lookup", "cancel"],
        );
        let d = RunDiff::between(&a, &b);
        assert!(!d.is_same());
        let paths: Vec<&str> = d.output.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["/a~1b", "/queue", "/tags/1"]);
        assert_eq!(d.output[0].right, None);
        assert_eq!(d.output[1].left, Some(json!("billing")));
        assert_eq!(d.first_divergent_call, Some(1));
        let text = d.to_string();
        assert!(
            text.contains("/queue: \"billing\" -> \"shipping\""),
            "{text}"
        );
        assert!(text.contains("differ from call #2"), "{text}");
    }

    #[test]
    fn a_prefix_sequence_diverges_where_it_ends() {
        let a = trace("a", Ending::Answered, json!(null), &["lookup"]);
        let b = trace("b", Ending::Stuck, json!("text"), &["lookup", "lookup"]);
        let d = RunDiff::between(&a, &b);
        assert_eq!(d.first_divergent_call, Some(1));
        assert_eq!(d.endings, (Ending::Answered, Ending::Stuck));
        assert_eq!(d.output.len(), 1);
        assert_eq!(d.output[0].path, "");
    }
}
