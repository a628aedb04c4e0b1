//! [`Heuristic`]: a closure over the output and the run; [`Check`]: what it gives.

use std::fmt;
use std::sync::Arc;

use super::{Case, Grade, GradeError, RunGradeFuture, RunGrader, in_unit};
use crate::result::AgentResult;

/// The result of one check: a score in `0.0..=1.0` and why.
///
/// Made from what a closure naturally returns: a `bool` (1 or 0, reason `passed` or
/// `failed`), an `f64` (the reason is the number), or either with a reason
/// (`(false, "3 tool calls, more than 2")`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Check {
    /// The score, `0.0..=1.0`.
    pub score: f64,
    /// Why.
    pub reason: String,
}

impl Check {
    /// A check with this score and reason.
    pub fn new(score: f64, reason: impl Into<String>) -> Self {
        Check {
            score,
            reason: reason.into(),
        }
    }
}

impl From<bool> for Check {
    fn from(ok: bool) -> Self {
        Check::new(
            f64::from(u8::from(ok)),
            if ok { "passed" } else { "failed" },
        )
    }
}

impl From<f64> for Check {
    fn from(score: f64) -> Self {
        Check::new(score, format!("{score}"))
    }
}

impl<S: Into<String>> From<(bool, S)> for Check {
    fn from((ok, reason): (bool, S)) -> Self {
        Check::new(f64::from(u8::from(ok)), reason)
    }
}

impl<S: Into<String>> From<(f64, S)> for Check {
    fn from((score, reason): (f64, S)) -> Self {
        Check::new(score, reason)
    }
}

type CheckFn<T> = dyn Fn(&Case<'_, T>) -> Check + Send + Sync;

/// One named check written as a closure over the run: its output, usage, transcript,
/// ending.
///
/// Its grade has one score, under its name, and `score` is that value. With
/// [`new`](Self::new) the closure sees every run, answered or not; with
/// [`on_answer`](Self::on_answer) it sees answered runs only and a run that did not
/// answer scores 0.
///
/// ```
/// use agent_core::{AgentResult, Heuristic};
///
/// # struct Triage { summary: String, order_id: Option<String> }
/// let few_tools = Heuristic::<Triage>::new("at_most_3_tool_calls", |case| {
///     let n = case.result.usage.tool_calls;
///     (n <= 3, format!("{n} tool calls"))
/// });
/// let names_order = Heuristic::on_answer("summary_names_order", |t: &Triage, _run: &AgentResult<Triage>| {
///     t.order_id.as_ref().is_some_and(|id| t.summary.contains(id.as_str()))
/// });
/// ```
///
/// # Errors
/// [`GradeError::OutOfRange`] when the closure gives a score outside `0.0..=1.0` or
/// not finite.
pub struct Heuristic<T> {
    name: String,
    check: Arc<CheckFn<T>>,
}

impl<T> Clone for Heuristic<T> {
    fn clone(&self) -> Self {
        Heuristic {
            name: self.name.clone(),
            check: Arc::clone(&self.check),
        }
    }
}

impl<T> fmt::Debug for Heuristic<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heuristic")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T: 'static> Heuristic<T> {
    /// A check over every run (see [`Case`]).
    pub fn new<F, R>(name: impl Into<String>, check: F) -> Self
    where
        F: Fn(&Case<'_, T>) -> R + Send + Sync + 'static,
        R: Into<Check>,
    {
        Heuristic {
            name: name.into(),
            check: Arc::new(move |case| check(case).into()),
        }
    }

    /// A check over answered runs: the closure gets the validated value and the run; a
    /// run that did not answer scores 0.
    pub fn on_answer<F, R>(name: impl Into<String>, check: F) -> Self
    where
        F: Fn(&T, &AgentResult<T>) -> R + Send + Sync + 'static,
        R: Into<Check>,
    {
        Self::new(name, move |case: &Case<'_, T>| match case.output() {
            Some(output) => check(output, case.result).into(),
            None => Check::new(
                0.0,
                format!(
                    "no answer: the run ended {} ({})",
                    case.result.ending(),
                    case.result.category().unwrap_or("answered")
                ),
            ),
        })
    }

    /// The check's name (its score's name).
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl<T: Sync + 'static> RunGrader<T> for Heuristic<T> {
    fn grade_run<'a>(&'a self, case: &'a Case<'a, T>) -> RunGradeFuture<'a> {
        Box::pin(async move {
            let check = (self.check)(case);
            if !in_unit(check.score) {
                return Err(GradeError::OutOfRange {
                    name: self.name.clone(),
                    value: check.score,
                });
            }
            Ok(Grade::single(self.name.clone(), check.score, check.reason))
        })
    }
}
