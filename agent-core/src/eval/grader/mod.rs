//! Graders: scores for what a run produced; never a change to a run's outcome.
//!
//! Two layers:
//! - [`Grader`]: the config's `.grader(..)`, called by the runner on each validated
//!   value; its [`Scores`] land in `AgentResult::scores`.
//! - [`RunGrader`]: grades a whole run after it ended (a [`Case`]: the input, the
//!   [`AgentResult`], and optionally the expected answer) and gives a [`Grade`]: named
//!   scores in `0.0..=1.0`, a reason for each, one overall score, and what grading
//!   itself spent. [`sweep`](crate::eval::sweep) calls it on every run; you can call it on
//!   any result.
//!
//! The built-in run graders: [`GroundTruth`] (field by field against an expected value),
//! [`Heuristic`] (a closure over the output and the run), [`LlmJudge`] (a rubric graded
//! by a model through this crate's own loop) and [`Composite`] (a weighted combination
//! with a pass threshold). [`LlmJudge`] is also a config [`Grader`] for output types that
//! implement `Serialize`.

mod composite;
mod ground_truth;
mod heuristic;
mod judge;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::AgentError;
use crate::output::AgentOutput;
use crate::output::{Extracted, extract_json};
use crate::result::AgentResult;
use crate::usage::Usage;

use crate::scores::{GradeFuture, Grader, Scores};
pub use composite::Composite;
pub use ground_truth::{Comparator, GroundTruth, Match};
pub use heuristic::{Check, Heuristic};
pub use judge::{CriterionVerdict, JudgeVerdict, LlmJudge, Rubric};

/// What a [`RunGrader`] gives one run: named scores in `0.0..=1.0` with a reason each,
/// one overall score, an optional pass/fail, and what grading spent.
///
/// Each built-in grader documents its score names and how `score` is formed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Grade {
    /// The overall score, `0.0..=1.0` (each grader says how it is formed).
    pub score: f64,
    /// Why, overall (a judge's overall reason, a check's reason, a summary of fields).
    pub reason: String,
    /// Named scores, each `0.0..=1.0` (a field, a check, a criterion).
    pub scores: Scores,
    /// Why, per score name (the same keys as `scores`, where a reason was given).
    pub reasons: BTreeMap<String, String>,
    /// Whether the run passed, for graders with a pass threshold ([`Composite`]).
    pub passed: Option<bool>,
    /// What grading itself spent (an [`LlmJudge`]'s LLM calls, tokens and cost),
    /// apart from the graded run's own `usage`; zero for graders that call no model.
    pub usage: Usage,
}

impl Grade {
    /// A grade of one score: `scores = {name: score}`, its reason, `score` the same value.
    pub fn single(name: impl Into<String>, score: f64, reason: impl Into<String>) -> Self {
        let name = name.into();
        let reason = reason.into();
        Grade {
            score,
            reason: reason.clone(),
            scores: BTreeMap::from([(name.clone(), score)]),
            reasons: BTreeMap::from([(name, reason)]),
            passed: None,
            usage: Usage::default(),
        }
    }

    /// A grade from named scores with reasons; `score` is their weighted mean (each
    /// name's weight from `weight`; 0 when there are no scores or the weights sum to
    /// 0); `reason` says how many scores are full (`2 of 3 scores are 1`).
    pub fn weighted(
        entries: impl IntoIterator<Item = (String, f64, String)>,
        weight: impl Fn(&str) -> f64,
    ) -> Self {
        let mut grade = Grade::default();
        let (mut sum, mut total) = (0.0, 0.0);
        for (name, score, reason) in entries {
            let w = weight(&name);
            sum += w * score;
            total += w;
            grade.scores.insert(name.clone(), score);
            grade.reasons.insert(name, reason);
        }
        grade.score = if total > 0.0 { sum / total } else { 0.0 };
        let full = grade.scores.values().filter(|v| **v >= 1.0).count();
        grade.reason = format!("{full} of {} scores are 1", grade.scores.len());
        grade
    }

    /// Sets the overall reason.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// Sets what grading spent.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// Checks that `score` and every named score are finite and in `0.0..=1.0`.
    ///
    /// # Errors
    /// [`GradeError::OutOfRange`] naming the first bad score (`score` for the overall).
    pub fn check(&self) -> Result<(), GradeError> {
        let overall = std::iter::once(("score", self.score));
        let named = self.scores.iter().map(|(k, v)| (k.as_str(), *v));
        match overall.chain(named).find(|(_, v)| !in_unit(*v)) {
            None => Ok(()),
            Some((name, value)) => Err(GradeError::OutOfRange {
                name: name.to_owned(),
                value,
            }),
        }
    }
}

impl From<Grade> for Scores {
    /// The named scores (the overall score is not among them).
    fn from(grade: Grade) -> Self {
        grade.scores
    }
}

pub(crate) fn in_unit(v: f64) -> bool {
    v.is_finite() && (0.0..=1.0).contains(&v)
}

/// Why a [`RunGrader`] gave no [`Grade`]. Never changes the graded run's outcome.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GradeError {
    /// The grader compares with an expected answer and the case has none.
    #[error("no expected answer to compare with")]
    NoExpected,
    /// The run's answer could not be read as JSON.
    #[error("the answer is not JSON: {message}")]
    NotJson {
        /// What was wrong.
        message: String,
    },
    /// The judge's own run ended without a verdict.
    #[error("the judge gave no verdict: {error} ({})", .error.category())]
    Judge {
        /// How the judge's run ended.
        error: Box<AgentError>,
        /// What the judge's run spent.
        usage: Box<Usage>,
    },
    /// A score was outside `0.0..=1.0` or not finite.
    #[error("score {name:?} is {value}, outside 0..=1")]
    OutOfRange {
        /// The score's name (`score` for the overall score).
        name: String,
        /// The value given.
        value: f64,
    },
    /// Grading took longer than allowed.
    #[error("grading timed out after {} ms", .limit.as_millis())]
    Timeout {
        /// The limit.
        limit: Duration,
    },
    /// The grader panicked (caught).
    #[error("the grader panicked: {message}")]
    Panicked {
        /// The panic message.
        message: String,
    },
    /// A part of a [`Composite`] failed, so the combination has no score.
    #[error("part {part:?} failed: {error}")]
    Part {
        /// The part's name.
        part: String,
        /// Its error.
        error: Box<GradeError>,
        /// What all the parts spent.
        usage: Box<Usage>,
    },
    /// A grader's own failure (a custom comparator, a user's grader).
    #[error("{message}")]
    Failed {
        /// What went wrong.
        message: String,
    },
}

impl GradeError {
    /// The stable tag: `no_expected`, `not_json`, `judge_failed`, `out_of_range`,
    /// `timeout`, `panicked`, `part_failed` or `failed`.
    pub fn category(&self) -> &'static str {
        match self {
            GradeError::NoExpected => "no_expected",
            GradeError::NotJson { .. } => "not_json",
            GradeError::Judge { .. } => "judge_failed",
            GradeError::OutOfRange { .. } => "out_of_range",
            GradeError::Timeout { .. } => "timeout",
            GradeError::Panicked { .. } => "panicked",
            GradeError::Part { .. } => "part_failed",
            GradeError::Failed { .. } => "failed",
        }
    }

    /// What grading spent before it failed (a judge's LLM calls; zero otherwise).
    pub fn usage(&self) -> Usage {
        match self {
            GradeError::Judge { usage, .. } | GradeError::Part { usage, .. } => (**usage).clone(),
            _ => Usage::default(),
        }
    }

    /// A [`GradeError::Failed`] with this message.
    pub fn failed(message: impl Into<String>) -> Self {
        GradeError::Failed {
            message: message.into(),
        }
    }
}

/// One run to grade: its input, its result, and the expected answer when there is one.
///
/// ```
/// # use agent_core::{AgentConfig, Case, GroundTruth, Match, RunGrader, json, run_agent};
/// # use agent_core::testing::ScriptedModel;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let config: AgentConfig<String> = AgentConfig::builder("a")
/// #     .llm(ScriptedModel::new().text("billing")).build()?;
/// let result = run_agent(&config, "I was charged twice").await;
/// let expected = json!("billing");
/// let grade = GroundTruth::new()
///     .grade_run(&Case::new("I was charged twice", &result).expected(&expected))
///     .await?;
/// assert_eq!(grade.score, 1.0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Case<'a, T> {
    /// The run's input.
    pub input: &'a str,
    /// The run's result.
    pub result: &'a AgentResult<T>,
    /// The expected answer as JSON (the whole value or some of its fields), if any.
    pub expected: Option<&'a Value>,
}

impl<T> Clone for Case<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Case<'_, T> {}

impl<'a, T> Case<'a, T> {
    /// A case without an expected answer.
    pub fn new(input: &'a str, result: &'a AgentResult<T>) -> Self {
        Case {
            input,
            result,
            expected: None,
        }
    }

    /// Sets the expected answer.
    #[must_use]
    pub fn expected(mut self, expected: &'a Value) -> Self {
        self.expected = Some(expected);
        self
    }

    /// The validated value, when the run answered.
    pub fn output(&self) -> Option<&'a T> {
        self.result.outcome.as_ref().ok()
    }
}

impl<T: AgentOutput> Case<'_, T> {
    /// The answer as JSON, when the run answered: the submitted arguments (tool mode),
    /// the JSON object read from the reply as the run read it (native and prompted
    /// modes: bare, fenced or with text around it), or the text itself as a JSON string
    /// (`String` outputs).
    ///
    /// # Errors
    /// `None` when the run did not answer; [`GradeError::NotJson`] when its output text
    /// holds no JSON (only for a hand-made result: a run that answered always has it).
    pub fn answer_json(&self) -> Option<Result<Value, GradeError>> {
        self.output()?;
        if T::output_tool().is_none() {
            return Some(Ok(Value::String(self.result.output.clone())));
        }
        Some(match extract_json(&self.result.output) {
            Extracted::Value(v) => Ok(v),
            Extracted::Truncated => Err(GradeError::NotJson {
                message: "the JSON object is cut off".to_owned(),
            }),
            Extracted::NotJson => Err(GradeError::NotJson {
                message: "no JSON object in the output".to_owned(),
            }),
            Extracted::Ambiguous(n) => Err(GradeError::NotJson {
                message: format!("{n} different JSON objects in the output"),
            }),
        })
    }
}

/// The future a [`RunGrader`] returns.
pub type RunGradeFuture<'a> = Pin<Box<dyn Future<Output = Result<Grade, GradeError>> + Send + 'a>>;

/// Grades a run after it ended: the built-in [`GroundTruth`], [`Heuristic`],
/// [`LlmJudge`] and [`Composite`], or your own.
///
/// Called on every run, answered or not: each grader says what it gives a run that did
/// not answer (the built-ins other than [`Heuristic`] score it 0 on everything, so a
/// mean over runs counts a missing answer as a wrong one). A grader must not block its
/// thread; [`sweep`](crate::eval::sweep) stops one at its timeout only at an `.await`.
pub trait RunGrader<T>: Send + Sync {
    /// Grades one run.
    ///
    /// # Errors
    /// A [`GradeError`] saying why no grade could be given.
    fn grade_run<'a>(&'a self, case: &'a Case<'a, T>) -> RunGradeFuture<'a>;
}

impl<T, G: RunGrader<T> + ?Sized> RunGrader<T> for Arc<G> {
    fn grade_run<'a>(&'a self, case: &'a Case<'a, T>) -> RunGradeFuture<'a> {
        (**self).grade_run(case)
    }
}

impl<T, G: RunGrader<T> + ?Sized> RunGrader<T> for Box<G> {
    fn grade_run<'a>(&'a self, case: &'a Case<'a, T>) -> RunGradeFuture<'a> {
        (**self).grade_run(case)
    }
}

/// The grade of a run that did not answer: 0 on every name, each with the reason.
pub(crate) fn unanswered<T>(
    names: impl IntoIterator<Item = String>,
    result: &AgentResult<T>,
) -> Grade {
    let reason = format!(
        "no answer: the run ended {} ({})",
        result.ending(),
        result.category().unwrap_or("answered")
    );
    let mut grade = Grade::default();
    for name in names {
        grade.scores.insert(name.clone(), 0.0);
        grade.reasons.insert(name, reason.clone());
    }
    grade.reason = reason;
    grade
}

/// Adds `b` to `a`: counts and tokens summed, costs summed where either has one.
pub(crate) fn add_usage(a: &mut Usage, b: &Usage) {
    a.llm_calls = a.llm_calls.saturating_add(b.llm_calls);
    a.tool_calls = a.tool_calls.saturating_add(b.tool_calls);
    a.input_tokens = a.input_tokens.saturating_add(b.input_tokens);
    a.output_tokens = a.output_tokens.saturating_add(b.output_tokens);
    a.cache_read_tokens = a.cache_read_tokens.saturating_add(b.cache_read_tokens);
    a.cache_write_tokens = a.cache_write_tokens.saturating_add(b.cache_write_tokens);
    a.cost_usd = match (a.cost_usd, b.cost_usd) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
    };
}
