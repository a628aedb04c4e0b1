//! [`GroundTruth`]: the answer against an expected value, field by field.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::heuristic::Check;
use super::{Case, Grade, GradeError, RunGradeFuture, RunGrader, in_unit, unanswered};
use crate::output::AgentOutput;

/// How one field of the answer is compared with the expected value.
#[derive(Clone)]
#[non_exhaustive]
pub enum Match {
    /// Equal as JSON, numbers by value (`2` equals `2.0`): 1 or 0.
    Exact,
    /// Both numbers, at most this far apart (`Within(1.0)`: 3 matches 2 and 4): 1 or 0.
    Within(f64),
    /// Both arrays with the same elements, order and repeats ignored: 1 or 0.
    SameSet,
    /// Your comparator: `(answer's field, expected field)` to a score in `0.0..=1.0` and
    /// a reason (a `bool`, an `f64`, or either with a reason: see [`Check`]). The
    /// answer's field is `null` when the answer lacks it.
    Custom(Arc<Comparator>),
}

/// A custom comparator: `(answer's field, expected field)` to a [`Check`].
pub type Comparator = dyn Fn(&Value, &Value) -> Check + Send + Sync;

impl Match {
    /// A [`Match::Custom`] from a closure.
    pub fn custom<F, R>(compare: F) -> Self
    where
        F: Fn(&Value, &Value) -> R + Send + Sync + 'static,
        R: Into<Check>,
    {
        Match::Custom(Arc::new(move |got, want| compare(got, want).into()))
    }
}

impl fmt::Debug for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Match::Exact => f.write_str("Exact"),
            Match::Within(t) => write!(f, "Within({t})"),
            Match::SameSet => f.write_str("SameSet"),
            Match::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

#[derive(Clone, Debug)]
struct Field {
    name: String,
    how: Match,
    weight: f64,
}

/// Compares a run's answer with an expected value, field by field, weighted.
///
/// Fields are top-level keys (`"queue"`) or JSON Pointers into the answer
/// (`"/customer/name"`). Each declared field that the expected value has is scored with
/// its [`Match`] (1 or 0 for the built-in matches) under its name; a field the expected
/// value lacks is not scored, so partial labels work. With no field declared, every key
/// of an expected object is compared with [`Match::Exact`]; an expected value that is
/// not an object is compared whole, as the score `answer`.
///
/// `score` is the weighted mean of the field scores (weight 1 unless set; a weight
/// below 0 or not finite counts as 0). A run that did not answer scores 0 on every
/// field. The answer is read as the run read it ([`Case::answer_json`]).
///
/// ```
/// use agent_core::{GroundTruth, Match};
///
/// let truth = GroundTruth::new()
///     .field_weighted("queue", Match::Exact, 2.0)
///     .field("severity", Match::Within(1.0))
///     .field("tags", Match::SameSet);
/// ```
///
/// # Errors
/// [`GradeError::NoExpected`] without an expected value; [`GradeError::NotJson`] when
/// the answer holds no JSON; [`GradeError::Failed`] when the expected value has none of
/// the declared fields; [`GradeError::OutOfRange`] when a custom comparator gives a
/// score outside `0.0..=1.0`.
#[derive(Clone, Debug, Default)]
pub struct GroundTruth {
    fields: Vec<Field>,
}

impl GroundTruth {
    /// Compares every key of the expected value exactly (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// Compares `field` with `how`, weight 1.
    #[must_use]
    pub fn field(self, field: impl Into<String>, how: Match) -> Self {
        self.field_weighted(field, how, 1.0)
    }

    /// Compares `field` with `how`, with this weight in the overall score.
    #[must_use]
    pub fn field_weighted(mut self, field: impl Into<String>, how: Match, weight: f64) -> Self {
        let weight = if weight.is_finite() && weight > 0.0 {
            weight
        } else {
            0.0
        };
        self.fields.push(Field {
            name: field.into(),
            how,
            weight,
        });
        self
    }

    /// The fields to score against `expected`: the declared ones it has, or every key.
    fn fields_for(&self, expected: &Value) -> Vec<Field> {
        if self.fields.is_empty() {
            return match expected {
                Value::Object(map) => map
                    .keys()
                    .map(|k| Field {
                        name: k.clone(),
                        how: Match::Exact,
                        weight: 1.0,
                    })
                    .collect(),
                _ => vec![Field {
                    name: "answer".to_owned(),
                    how: Match::Exact,
                    weight: 1.0,
                }],
            };
        }
        self.fields
            .iter()
            .filter(|f| lookup(expected, &f.name).is_some())
            .cloned()
            .collect()
    }

    /// Grades an answer (as JSON) against the expected value.
    ///
    /// # Errors
    /// As for the type.
    pub fn compare(&self, answer: &Value, expected: &Value) -> Result<Grade, GradeError> {
        let fields = self.fields_for(expected);
        if fields.is_empty() {
            return Err(self.none_of_the_fields());
        }
        let whole = self.fields.is_empty() && !expected.is_object();
        let mut entries = Vec::with_capacity(fields.len());
        for field in &fields {
            let (got, want) = if whole {
                (answer, expected)
            } else {
                (
                    lookup(answer, &field.name).unwrap_or(&Value::Null),
                    lookup(expected, &field.name).unwrap_or(&Value::Null),
                )
            };
            let check = compare(&field.how, got, want);
            if !in_unit(check.score) {
                return Err(GradeError::OutOfRange {
                    name: field.name.clone(),
                    value: check.score,
                });
            }
            entries.push((field.name.clone(), check.score, check.reason));
        }
        let grade = Grade::weighted(entries, |name| {
            fields
                .iter()
                .find(|f| f.name == name)
                .map_or(1.0, |f| f.weight)
        });
        let matched = grade.scores.values().filter(|v| **v >= 1.0).count();
        let reason = format!("{matched} of {} fields match", grade.scores.len());
        Ok(grade.with_reason(reason))
    }

    fn none_of_the_fields(&self) -> GradeError {
        let names: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
        GradeError::failed(format!(
            "the expected answer has none of the fields {names:?}"
        ))
    }
}

impl<T: AgentOutput + Sync> RunGrader<T> for GroundTruth {
    fn grade_run<'a>(&'a self, case: &'a Case<'a, T>) -> RunGradeFuture<'a> {
        Box::pin(async move {
            let expected = case.expected.ok_or(GradeError::NoExpected)?;
            match case.answer_json() {
                None => {
                    let fields = self.fields_for(expected);
                    if fields.is_empty() {
                        return Err(self.none_of_the_fields());
                    }
                    Ok(unanswered(fields.into_iter().map(|f| f.name), case.result))
                }
                Some(answer) => self.compare(&answer?, expected),
            }
        })
    }
}

/// A top-level key, or a JSON Pointer when the name starts with `/`.
fn lookup<'v>(value: &'v Value, name: &str) -> Option<&'v Value> {
    if name.starts_with('/') {
        value.pointer(name)
    } else {
        value.get(name)
    }
}

fn compare(how: &Match, got: &Value, want: &Value) -> Check {
    match how {
        Match::Exact => {
            let ok = json_eq(got, want);
            Check::new(
                f64::from(u8::from(ok)),
                if ok {
                    format!("{got} as expected")
                } else {
                    format!("{got}, expected {want}")
                },
            )
        }
        Match::Within(tolerance) => match (got.as_f64(), want.as_f64()) {
            (Some(g), Some(w)) => {
                let ok = (g - w).abs() <= *tolerance;
                let verb = if ok { "within" } else { "not within" };
                Check::new(
                    f64::from(u8::from(ok)),
                    format!("{got}, expected {want}: {verb} {tolerance}"),
                )
            }
            _ => Check::new(0.0, format!("{got}, expected the number {want}")),
        },
        Match::SameSet => match (got.as_array(), want.as_array()) {
            (Some(g), Some(w)) => {
                let missing: Vec<&Value> = w.iter().filter(|x| !contains(g, x)).collect();
                let extra: Vec<&Value> = g.iter().filter(|x| !contains(w, x)).collect();
                if missing.is_empty() && extra.is_empty() {
                    Check::new(1.0, "the same set as expected")
                } else {
                    Check::new(
                        0.0,
                        format!("missing {}, extra {}", list(&missing), list(&extra)),
                    )
                }
            }
            _ => Check::new(0.0, format!("{got}, expected the list {want}")),
        },
        Match::Custom(f) => f(got, want),
    }
}

fn list(values: &[&Value]) -> String {
    let items: Vec<String> = values.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(", "))
}

fn contains(set: &[Value], x: &Value) -> bool {
    set.iter().any(|y| json_eq(x, y))
}

/// JSON equality with numbers compared by value (`2 == 2.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value_and_sets_ignore_order_and_repeats() {
        assert!(json_eq(&json!(2), &json!(2.0)));
        assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_eq(&json!([1, 2]), &json!([2, 1])));
        let same = compare(&Match::SameSet, &json!(["a", "b", "a"]), &json!(["b", "a"]));
        assert_eq!(same.score, 1.0);
        let differ = compare(&Match::SameSet, &json!(["a", "c"]), &json!(["b", "a"]));
        assert_eq!(differ.score, 0.0);
        assert_eq!(differ.reason, r#"missing ["b"], extra ["c"]"#);
    }

    #[test]
    fn pointers_reach_nested_fields() {
        let answer = json!({"customer": {"name": "Ana"}});
        assert_eq!(lookup(&answer, "/customer/name"), Some(&json!("Ana")));
        assert_eq!(lookup(&answer, "customer/name"), None);
    }
}
