//! [`LlmJudge`]: a rubric graded by a model, through this crate's own run loop.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::{
    Case, Grade, GradeError, GradeFuture, Grader, RunGradeFuture, RunGrader, Scores, unanswered,
};
use crate::config::{AgentConfig, AgentConfigBuilder, ConfigError};
use crate::output::AgentOutput;
use crate::runner::run_agent;
use agent_macros::{agent_output, agent_type};

/// The judge's verdict: a score per rubric criterion and an overall reason. The judge's
/// run ends with this value, validated like any output (and checked against the rubric:
/// every criterion once, by its name).
#[agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeVerdict {
    /// One entry per rubric criterion: each criterion exactly once, by its name.
    pub criteria: Vec<CriterionVerdict>,
    /// One or two sentences: the overall judgement of the answer.
    pub reason: String,
}

/// The judge's score on one criterion.
#[agent_type]
#[derive(Debug, Clone, PartialEq)]
pub struct CriterionVerdict {
    /// The criterion's name, exactly as in the rubric.
    pub criterion: String,
    /// One sentence: why this score.
    pub reason: String,
    /// From 1 (does not meet the criterion at all) to 5 (fully meets it).
    #[schemars(range(min = 1, max = 5))]
    pub score: u8,
}

#[derive(Clone, Debug)]
struct Criterion {
    name: String,
    description: String,
    weight: f64,
}

/// What a judge scores: named criteria, each with a description and a weight, and
/// optional extra instructions.
///
/// ```
/// use agent_core::Rubric;
///
/// let rubric = Rubric::new()
///     .criterion("faithful", "The summary states only what the ticket and the order records say.")
///     .criterion_weighted("actionable", "The summary says what the support agent should do next.", 2.0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Rubric {
    criteria: Vec<Criterion>,
    instructions: Option<String>,
}

impl Rubric {
    /// An empty rubric (a judge needs at least one criterion).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a criterion of weight 1. The name is what the judge must echo back and the
    /// score's name in the [`Grade`].
    #[must_use]
    pub fn criterion(self, name: impl Into<String>, description: impl Into<String>) -> Self {
        self.criterion_weighted(name, description, 1.0)
    }

    /// Adds a criterion with this weight in the overall score.
    #[must_use]
    pub fn criterion_weighted(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        weight: f64,
    ) -> Self {
        self.criteria.push(Criterion {
            name: name.into(),
            description: description.into(),
            weight,
        });
        self
    }

    /// Extra instructions for the judge, appended to its system prompt.
    #[must_use]
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// The criteria's names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.criteria.iter().map(|c| c.name.as_str())
    }

    fn check(&self) -> Result<(), ConfigError> {
        let invalid = |value: String, reason| ConfigError::InvalidSetting {
            setting: "rubric",
            value,
            reason,
        };
        if self.criteria.is_empty() {
            return Err(invalid(
                "no criteria".into(),
                "a judge needs at least one criterion",
            ));
        }
        for (i, c) in self.criteria.iter().enumerate() {
            if c.name.trim().is_empty() {
                return Err(invalid(format!("{:?}", c.name), "a criterion needs a name"));
            }
            if self.criteria[..i].iter().any(|d| d.name == c.name) {
                return Err(invalid(c.name.clone(), "criterion names must be unique"));
            }
            if !(c.weight.is_finite() && c.weight > 0.0) {
                return Err(invalid(
                    format!("{} (weight of {})", c.weight, c.name),
                    "a weight is a finite number above 0",
                ));
            }
        }
        Ok(())
    }

    /// The judge's system prompt.
    fn system_prompt(&self) -> String {
        let mut out = String::from(
            "You are a strict, fair grader. You read a task given to an AI agent, the answer \
             the agent gave, and sometimes a reference answer. Score the answer on each \
             criterion below from 1 (does not meet it at all) to 5 (fully meets it). Give \
             every criterion exactly once, by its exact name, with a one-sentence reason, then \
             an overall reason. Judge only what is written; do not reward length.\n\nCriteria:",
        );
        for c in &self.criteria {
            out.push_str(&format!("\n- {}: {}", c.name, c.description));
        }
        if let Some(extra) = &self.instructions {
            out.push_str("\n\n");
            out.push_str(extra);
        }
        out
    }

    /// What the verdict must hold: every criterion once, by name.
    fn check_verdict(&self, verdict: &JudgeVerdict) -> Result<(), String> {
        let mut problems = Vec::new();
        for c in &self.criteria {
            match verdict
                .criteria
                .iter()
                .filter(|v| v.criterion == c.name)
                .count()
            {
                0 => problems.push(format!("criterion {:?} is missing", c.name)),
                1 => {}
                n => problems.push(format!("criterion {:?} is given {n} times", c.name)),
            }
        }
        for v in &verdict.criteria {
            if !self.criteria.iter().any(|c| c.name == v.criterion) {
                problems.push(format!(
                    "{:?} is not a criterion of the rubric (use {})",
                    v.criterion,
                    self.names().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    fn weight(&self, name: &str) -> f64 {
        self.criteria
            .iter()
            .find(|c| c.name == name)
            .map_or(0.0, |c| c.weight)
    }
}

/// A rubric graded by a model: its own [`AgentConfig<JudgeVerdict>`] run through
/// [`run_agent`], so a judge that fails gives a typed [`GradeError::Judge`] (with the
/// judge run's error and usage), never a panic, never a change to the graded run.
///
/// Each criterion's 1..=5 score maps to `(score - 1) / 4` (1 → 0, 3 → 0.5, 5 → 1),
/// under the criterion's name; `score` is their weighted mean; `reason` is the judge's
/// overall reason; `usage` is what the judge's run spent (LLM calls, tokens, cost),
/// apart from the graded run's. A run that did not answer is not sent to the judge: it
/// scores 0 on every criterion, at no cost.
///
/// The judge sees the task input, the answer as JSON ([`Case::answer_json`]), and the
/// expected answer as a reference when the case has one.
///
/// ```
/// use agent_core::{AgentConfig, JudgeVerdict, LlmJudge, Rubric};
///
/// # fn main() -> Result<(), agent_core::ConfigError> {
/// let judge = LlmJudge::new(
///     Rubric::new().criterion("faithful", "States only what the ticket says."),
///     AgentConfig::<JudgeVerdict>::builder("judge").model("test"),
/// )?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct LlmJudge {
    config: AgentConfig<JudgeVerdict>,
    rubric: Arc<Rubric>,
}

impl fmt::Debug for LlmJudge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmJudge")
            .field("model", &self.config.model())
            .field("rubric", &self.rubric)
            .finish()
    }
}

impl LlmJudge {
    /// A judge from a rubric and a builder for its model and budgets (model or client,
    /// output mode, `max_llm_calls`, pricing, ...). The rubric becomes the builder's
    /// system prompt and output validator, replacing any set on it.
    ///
    /// # Errors
    /// [`ConfigError::InvalidSetting`] (setting `rubric`) for a rubric with no criteria,
    /// an empty or repeated name, or a weight that is not a finite number above 0; else
    /// the [`ConfigError`] of the builder's `build()`.
    pub fn new(
        rubric: Rubric,
        judge: AgentConfigBuilder<JudgeVerdict>,
    ) -> Result<Self, ConfigError> {
        rubric.check()?;
        let rubric = Arc::new(rubric);
        let checker = Arc::clone(&rubric);
        let config = judge
            .system_prompt(rubric.system_prompt())
            .output_validator(move |verdict: &JudgeVerdict| checker.check_verdict(verdict))
            .build()?;
        Ok(LlmJudge { config, rubric })
    }

    /// The judge's config.
    pub fn config(&self) -> &AgentConfig<JudgeVerdict> {
        &self.config
    }

    /// The rubric.
    pub fn rubric(&self) -> &Rubric {
        &self.rubric
    }

    /// Judges one answer (as JSON) to `input`, with an optional reference answer.
    ///
    /// # Errors
    /// [`GradeError::Judge`] when the judge's run ends without a verdict.
    pub async fn judge(
        &self,
        input: &str,
        answer: &Value,
        expected: Option<&Value>,
    ) -> Result<Grade, GradeError> {
        let mut message = format!(
            "Grade the agent's answer on every criterion.\n\n## The task given to the agent\n{}\n\n## The agent's answer\n{}",
            input.trim(),
            pretty(answer)
        );
        if let Some(expected) = expected {
            message.push_str(&format!(
                "\n\n## A reference answer (it may give only some fields)\n{}",
                pretty(expected)
            ));
        }
        let run = run_agent(&self.config, message).await;
        let verdict = match run.outcome {
            Ok(v) => v,
            Err(error) => {
                return Err(GradeError::Judge {
                    error: Box::new(error),
                    usage: Box::new(run.usage),
                });
            }
        };
        let entries = verdict.criteria.into_iter().map(|c| {
            let score = (f64::from(c.score.clamp(1, 5)) - 1.0) / 4.0;
            (c.criterion, score, c.reason)
        });
        Ok(Grade::weighted(entries, |name| self.rubric.weight(name))
            .with_reason(verdict.reason)
            .with_usage(run.usage))
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

impl<T: AgentOutput + Sync> RunGrader<T> for LlmJudge {
    fn grade_run<'a>(&'a self, case: &'a Case<'a, T>) -> RunGradeFuture<'a> {
        Box::pin(async move {
            match case.answer_json() {
                None => Ok(unanswered(
                    self.rubric.names().map(str::to_owned),
                    case.result,
                )),
                Some(answer) => self.judge(case.input, &answer?, case.expected).await,
            }
        })
    }
}

/// As the config's `.grader(..)`: judges each validated value (serialized to JSON); the
/// criteria's scores land in `AgentResult::scores`. A judge that fails leaves `scores`
/// empty and the run's outcome as it was.
impl<T: Serialize + Sync> Grader<T> for LlmJudge {
    fn grade<'a>(&'a self, output: &'a T, input: &'a str) -> GradeFuture<'a> {
        Box::pin(async move {
            let answer = serde_json::to_value(output).map_err(|e| e.to_string())?;
            self.judge(input, &answer, None)
                .await
                .map(Scores::from)
                .map_err(|e| e.to_string())
        })
    }
}
