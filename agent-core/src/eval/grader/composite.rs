//! [`Composite`]: a weighted combination of run graders, with a pass threshold.

use std::fmt;
use std::sync::Arc;

use super::{Case, Grade, GradeError, RunGradeFuture, RunGrader, add_usage};
use crate::usage::Usage;

struct Part<T> {
    name: String,
    weight: f64,
    grader: Arc<dyn RunGrader<T>>,
}

impl<T> Clone for Part<T> {
    fn clone(&self) -> Self {
        Part {
            name: self.name.clone(),
            weight: self.weight,
            grader: Arc::clone(&self.grader),
        }
    }
}

/// A weighted combination of run graders, with an optional pass threshold.
///
/// Every part grades the run (concurrently). The grade's `score` is the weighted mean
/// of the parts' overall scores; `scores` holds each part's overall score under the
/// part's name and each of its named scores as `part.name` (reasons likewise);
/// `passed` is `score >= threshold` when a threshold is set; `usage` adds up what the
/// parts spent. A weight below 0 or not finite counts as 0.
///
/// ```
/// use agent_core::{Composite, GroundTruth, Heuristic, Match};
///
/// let grader = Composite::<String>::new()
///     .part("truth", 3.0, GroundTruth::new().field("queue", Match::Exact))
///     .part("few_tools", 1.0, Heuristic::new("few_tools", |c| c.result.usage.tool_calls <= 3))
///     .pass_threshold(0.75);
/// ```
///
/// # Errors
/// [`GradeError::Part`] with the first failing part (in the order added) and what all
/// the parts spent; [`GradeError::Failed`] for no parts or a repeated part name.
pub struct Composite<T> {
    parts: Vec<Part<T>>,
    threshold: Option<f64>,
}

impl<T> Clone for Composite<T> {
    fn clone(&self) -> Self {
        Composite {
            parts: self.parts.clone(),
            threshold: self.threshold,
        }
    }
}

impl<T> Default for Composite<T> {
    fn default() -> Self {
        Composite {
            parts: Vec::new(),
            threshold: None,
        }
    }
}

impl<T> fmt::Debug for Composite<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<(&str, f64)> = self
            .parts
            .iter()
            .map(|p| (p.name.as_str(), p.weight))
            .collect();
        f.debug_struct("Composite")
            .field("parts", &parts)
            .field("threshold", &self.threshold)
            .finish()
    }
}

impl<T> Composite<T> {
    /// A combination with no parts yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a part: a grader, its name (the prefix of its scores) and its weight.
    #[must_use]
    pub fn part(
        mut self,
        name: impl Into<String>,
        weight: f64,
        grader: impl RunGrader<T> + 'static,
    ) -> Self {
        let weight = if weight.is_finite() && weight > 0.0 {
            weight
        } else {
            0.0
        };
        self.parts.push(Part {
            name: name.into(),
            weight,
            grader: Arc::new(grader),
        });
        self
    }

    /// Sets the pass threshold (`0.0..=1.0`; clamped): `passed` is `score >= threshold`.
    #[must_use]
    pub fn pass_threshold(mut self, threshold: f64) -> Self {
        self.threshold = Some(if threshold.is_nan() {
            1.0
        } else {
            threshold.clamp(0.0, 1.0)
        });
        self
    }

    fn check(&self) -> Result<(), GradeError> {
        if self.parts.is_empty() {
            return Err(GradeError::failed("a composite grader needs parts"));
        }
        for (i, p) in self.parts.iter().enumerate() {
            if self.parts[..i].iter().any(|q| q.name == p.name) {
                return Err(GradeError::failed(format!(
                    "two parts are named {:?}: part names must be unique",
                    p.name
                )));
            }
        }
        Ok(())
    }
}

impl<T: Sync + 'static> RunGrader<T> for Composite<T> {
    fn grade_run<'a>(&'a self, case: &'a Case<'a, T>) -> RunGradeFuture<'a> {
        Box::pin(async move {
            self.check()?;
            let graded =
                futures::future::join_all(self.parts.iter().map(|p| p.grader.grade_run(case)))
                    .await;
            let mut usage = Usage::default();
            for g in &graded {
                match g {
                    Ok(grade) => add_usage(&mut usage, &grade.usage),
                    Err(e) => add_usage(&mut usage, &e.usage()),
                }
            }
            let mut out = Grade::default();
            let (mut sum, mut total) = (0.0, 0.0);
            let mut parts_text = Vec::with_capacity(self.parts.len());
            for (part, g) in self.parts.iter().zip(graded) {
                let grade = g.map_err(|error| GradeError::Part {
                    part: part.name.clone(),
                    error: Box::new(error),
                    usage: Box::new(usage.clone()),
                })?;
                grade.check().map_err(|error| GradeError::Part {
                    part: part.name.clone(),
                    error: Box::new(error),
                    usage: Box::new(usage.clone()),
                })?;
                sum += part.weight * grade.score;
                total += part.weight;
                parts_text.push(format!("{} {:.2} x{}", part.name, grade.score, part.weight));
                out.scores.insert(part.name.clone(), grade.score);
                out.reasons.insert(part.name.clone(), grade.reason);
                for (name, score) in grade.scores {
                    out.scores.insert(format!("{}.{name}", part.name), score);
                }
                for (name, reason) in grade.reasons {
                    out.reasons.insert(format!("{}.{name}", part.name), reason);
                }
            }
            out.score = if total > 0.0 { sum / total } else { 0.0 };
            out.passed = self.threshold.map(|t| out.score >= t);
            out.reason = format!("{} -> {:.2}", parts_text.join(", "), out.score);
            if let Some(t) = self.threshold {
                let verdict = if out.score >= t { "passed" } else { "failed" };
                out.reason.push_str(&format!(" (threshold {t}: {verdict})"));
            }
            out.usage = usage;
            Ok(out)
        })
    }
}
