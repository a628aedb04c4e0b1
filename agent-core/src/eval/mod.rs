//! Evaluation and many runs: judging finished runs, comparing variants of a config,
//! running batches and counting them, and replaying stored runs.
//!
//! A [`RunGrader`] grades a whole run after it ended (a [`Case`]: the input, the
//! result, optionally the expected answer) and gives a [`Grade`]: named scores in
//! `0.0..=1.0` with a reason each, one overall score, and what grading spent. The
//! built-in graders are [`GroundTruth`] (field by field against a label),
//! [`Heuristic`] (a closure over the run), [`LlmJudge`] (a rubric graded by a model
//! through this crate's own loop) and [`Composite`] (a weighted combination with a
//! pass threshold). [`sweep`] runs [`Variant`]s of a config over the same
//! [`Sample`]s and returns a [`Comparison`]: per variant, every ending and category,
//! scores with 95% intervals, wins and losses against the baseline, spend, latency
//! and turn data.
//!
//! [`run_batch`] runs many inputs and returns a [`Receipt`] (counts per ending and
//! category, spend, latency, [`TurnStats`] with a suggested `max_llm_calls`); a
//! [`RunTally`] is one run as a receipt counts it. [`replay`] runs a stored run's input
//! again on a config.
//!
//! The config's in-run scorer, [`Grader`] (the builder's `.grader(..)`), scores every
//! validated value inside the loop; its [`Scores`] land in the result.

pub(crate) mod batch;
pub(crate) mod grader;
mod provider_batch;
mod replay;
pub(crate) mod sweep;
pub(crate) mod tally;
pub(crate) mod turns;

pub use crate::scores::{FnGrader, GradeFuture, Grader, Scores};
pub use batch::{Batch, Receipt, run_batch};
pub use grader::{
    Case, Check, Comparator, Composite, CriterionVerdict, Grade, GradeError, GroundTruth,
    Heuristic, JudgeVerdict, LlmJudge, Match, Rubric, RunGradeFuture, RunGrader,
};
pub use replay::replay;
pub use sweep::{
    Comparison, Estimate, GradeFailure, Paired, RunRecord, Sample, Spread, SweepError, SweepEvent,
    SweepOptions, Variant, VariantSummary, WinLoss, sweep,
};
pub use tally::RunTally;
pub use turns::TurnStats;
