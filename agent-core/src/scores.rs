//! In-run grading: the config's [`Grader`], called by the runner on each validated
//! value, and the [`Scores`] it gives, which land in `AgentResult::scores`. The
//! after-the-fact run graders built on them are in the evaluation layer.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

/// Named scores, each in `0.0..=1.0`.
pub type Scores = BTreeMap<String, f64>;

/// The future a [`Grader`] returns.
pub type GradeFuture<'a> = Pin<Box<dyn Future<Output = Result<Scores, String>> + Send + 'a>>;

/// Scores the validated value of a successful run (an LLM judge, a heuristic, a check
/// against a gold label).
///
/// The scores land in `AgentResult::scores`. A grader that fails, panics, runs past
/// `grader_timeout` or the deadline, or returns a score outside `0.0..=1.0` (or not
/// finite) never changes the outcome: `scores` is `None` and the failure is traced. It
/// must not block its thread: the timeout can only stop it at an `.await`.
pub trait Grader<T>: Send + Sync {
    /// Scores `output`, the value the run produced for `input`.
    ///
    /// # Errors
    /// A message saying why no scores could be given.
    fn grade<'a>(&'a self, output: &'a T, input: &'a str) -> GradeFuture<'a>;
}

/// A [`Grader`] from a synchronous closure.
pub struct FnGrader<F>(pub F);

impl<F> std::fmt::Debug for FnGrader<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnGrader(..)")
    }
}

impl<T, F> Grader<T> for FnGrader<F>
where
    T: Sync,
    F: Fn(&T, &str) -> Result<Scores, String> + Send + Sync,
{
    fn grade<'a>(&'a self, output: &'a T, input: &'a str) -> GradeFuture<'a> {
        let result = (self.0)(output, input);
        Box::pin(async move { result })
    }
}
