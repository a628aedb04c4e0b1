//! [`FeedbackStore`]: every run recorded, human feedback attached, eval sets exported.

use std::collections::BTreeMap;
use std::io;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Ending;
use crate::scores::Scores;
use crate::store::StoreFuture;
use crate::usage::Usage;

/// Run records and the feedback people give on them.
///
/// After every run of a config with a feedback store, the runner calls
/// [`record`](Self::record) once with the run's [`RunRecord`]. Records are keyed by
/// trace id: recording the same run twice keeps one record (the later one).
pub trait FeedbackStore: Send + Sync {
    /// Stores one run (an upsert by trace id). Resolves once the record is durable, or,
    /// for a write-behind store, once it is queued (its failure is then counted by
    /// [`flush`](Self::flush)).
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when it cannot be stored.
    fn record<'a>(&'a self, run: &'a RunRecord) -> StoreFuture<'a, ()>;

    /// Attaches a person's feedback to a recorded run, replacing any earlier feedback.
    ///
    /// # Errors
    /// [`StoreError::NotFound`](crate::store::StoreError::NotFound) when no run has this
    /// trace id; another [`StoreError`](crate::store::StoreError) when it cannot be stored.
    fn attach_feedback<'a>(
        &'a self,
        trace_id: &'a str,
        feedback: &'a Feedback,
    ) -> StoreFuture<'a, ()>;

    /// The run with this trace id, with its feedback, if recorded.
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the store cannot be read.
    fn run<'a>(&'a self, trace_id: &'a str) -> StoreFuture<'a, Option<RunRecord>>;

    /// Recorded runs matching `query`, newest first, with their feedback.
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the store cannot be read.
    fn runs<'a>(&'a self, query: &'a RunQuery) -> StoreFuture<'a, Vec<RunRecord>>;

    /// The eval set: every recorded run that [`EvalExample::from_record`] accepts under
    /// `filter`, oldest first.
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the store cannot be read.
    fn eval_set<'a>(&'a self, filter: &'a EvalFilter) -> StoreFuture<'a, Vec<EvalExample>>;

    /// Resolves once every record accepted before it is written or has failed, with the
    /// number of accepted writes that failed since the previous flush and were not
    /// reported by their own call (always 0 for a store whose `record` waits for the
    /// write). `run_batch` adds it to the receipt's `store_failures`.
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the store cannot flush (its writer
    /// stopped).
    fn flush(&self) -> StoreFuture<'_, u64>;
}

/// One recorded run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunRecord {
    /// The run's trace id (32 lowercase hex digits); the record's key.
    pub trace_id: String,
    /// The config's name.
    pub agent: String,
    /// The config's variant label (builder: `variant`), for sweeps.
    pub variant: Option<String>,
    /// The config's fingerprint ([`AgentConfig::fingerprint`](crate::AgentConfig::fingerprint)).
    pub fingerprint: String,
    /// The model as configured.
    pub model: String,
    /// The memory thread the run belonged to.
    pub thread: Option<String>,
    /// The run's input.
    pub input: String,
    /// The output: the submitted JSON value (or the escalation's arguments) when the
    /// output type ends through `submit_output`; otherwise the final text as a JSON
    /// string; `null` when there was none.
    pub output: Value,
    /// How the run ended.
    pub ending: Ending,
    /// The error category, when it failed.
    pub category: Option<String>,
    /// The error message, when it failed.
    pub error: Option<String>,
    /// What the run spent (LLM calls, tool calls, tokens, cost in USD).
    pub usage: Usage,
    /// The grader's scores, if any.
    pub scores: Option<Scores>,
    /// Wall-clock time of the run (ms).
    pub duration_ms: u64,
    /// When the run started (ms since the Unix epoch).
    pub started_at_ms: u64,
    /// The run's metadata ([`RunOptions::metadata`](crate::RunOptions::metadata)).
    pub metadata: BTreeMap<String, String>,
    /// The feedback attached to the run, when read back from a store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Feedback>,
}

impl RunRecord {
    /// The run's cost (USD), when the model is priced.
    pub fn cost_usd(&self) -> Option<f64> {
        self.usage.cost_usd
    }
}

/// A person's judgement of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Feedback {
    /// A rating on the application's scale (for example -1/+1, or 1 to 5).
    pub rating: Option<i32>,
    /// What the output should have been (same shape as [`RunRecord::output`]).
    pub corrected_output: Option<Value>,
    /// A free-text note.
    pub note: Option<String>,
    /// When the feedback was given (ms since the Unix epoch; set by the store when 0).
    #[serde(default)]
    pub given_at_ms: u64,
}

impl Feedback {
    /// Empty feedback; add a rating, a correction and a note.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the rating.
    #[must_use]
    pub fn rating(mut self, rating: i32) -> Self {
        self.rating = Some(rating);
        self
    }

    /// Sets the corrected output.
    #[must_use]
    pub fn corrected_output(mut self, output: Value) -> Self {
        self.corrected_output = Some(output);
        self
    }

    /// Sets the note.
    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// Which runs [`FeedbackStore::runs`] lists.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunQuery {
    /// Only runs of this config name.
    pub agent: Option<String>,
    /// Only runs of this variant label.
    pub variant: Option<String>,
    /// Only runs with this ending.
    pub ending: Option<Ending>,
    /// At most this many runs (default 50).
    pub limit: usize,
}

impl Default for RunQuery {
    fn default() -> Self {
        Self {
            agent: None,
            variant: None,
            ending: None,
            limit: 50,
        }
    }
}

impl RunQuery {
    /// The newest 50 runs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only runs of this config name.
    #[must_use]
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Only runs of this variant label.
    #[must_use]
    pub fn variant(mut self, variant: impl Into<String>) -> Self {
        self.variant = Some(variant.into());
        self
    }

    /// Only runs with this ending.
    #[must_use]
    pub fn ending(mut self, ending: Ending) -> Self {
        self.ending = Some(ending);
        self
    }

    /// At most `limit` runs.
    #[must_use]
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
}

/// Which runs go into an eval set.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct EvalFilter {
    /// Only runs of this config name.
    pub agent: Option<String>,
    /// Only runs of this variant label.
    pub variant: Option<String>,
    /// Leave out runs whose feedback rating is below this (runs with a correction stay:
    /// the correction is the expected output).
    pub min_rating: Option<i32>,
    /// Only runs that have feedback.
    pub only_with_feedback: bool,
}

impl EvalFilter {
    /// Every run with an expected output.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only runs of this config name.
    #[must_use]
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Only runs of this variant label.
    #[must_use]
    pub fn variant(mut self, variant: impl Into<String>) -> Self {
        self.variant = Some(variant.into());
        self
    }

    /// Leave out accepted outputs rated below `rating`.
    #[must_use]
    pub fn min_rating(mut self, rating: i32) -> Self {
        self.min_rating = Some(rating);
        self
    }

    /// Only runs that have feedback.
    #[must_use]
    pub fn only_with_feedback(mut self) -> Self {
        self.only_with_feedback = true;
        self
    }
}

/// Where an eval example's expected output came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExpectedSource {
    /// A person's corrected output.
    Correction,
    /// The output of a run that ended answered.
    Accepted,
}

/// One line of an eval set: an input and the output it should produce.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EvalExample {
    /// The run the example comes from.
    pub trace_id: String,
    /// The input.
    pub input: String,
    /// The expected output: the correction, else the accepted output.
    pub expected: Value,
    /// Which of the two it is.
    pub source: ExpectedSource,
}

impl EvalExample {
    /// The example a run gives under `filter`, if any: the correction when feedback has
    /// one; else the output of a run that ended answered, unless its rating is below
    /// `min_rating`; nothing for other runs or runs the filter leaves out.
    pub fn from_record(run: &RunRecord, filter: &EvalFilter) -> Option<Self> {
        if filter.agent.as_ref().is_some_and(|a| *a != run.agent)
            || filter
                .variant
                .as_ref()
                .is_some_and(|v| Some(v) != run.variant.as_ref())
            || (filter.only_with_feedback && run.feedback.is_none())
        {
            return None;
        }
        let feedback = run.feedback.as_ref();
        if let Some(corrected) = feedback.and_then(|f| f.corrected_output.clone()) {
            return Some(Self {
                trace_id: run.trace_id.clone(),
                input: run.input.clone(),
                expected: corrected,
                source: ExpectedSource::Correction,
            });
        }
        let rating = feedback.and_then(|f| f.rating);
        let rated_low = matches!((filter.min_rating, rating), (Some(min), Some(r)) if r < min);
        (run.ending == Ending::Answered && !rated_low).then(|| Self {
            trace_id: run.trace_id.clone(),
            input: run.input.clone(),
            expected: run.output.clone(),
            source: ExpectedSource::Accepted,
        })
    }
}

/// Writes `examples` as JSON Lines: one object per line with `trace_id`, `input`,
/// `expected` and `source`. Returns the number of lines.
///
/// # Errors
/// The writer's I/O error.
pub fn write_jsonl(examples: &[EvalExample], mut out: impl io::Write) -> io::Result<usize> {
    for example in examples {
        serde_json::to_writer(&mut out, example)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(examples.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(ending: Ending, feedback: Option<Feedback>) -> RunRecord {
        RunRecord {
            trace_id: "t".into(),
            agent: "a".into(),
            variant: None,
            fingerprint: "f".into(),
            model: "test".into(),
            thread: None,
            input: "in".into(),
            output: json!({"x": 1}),
            ending,
            category: None,
            error: None,
            usage: Usage::default(),
            scores: None,
            duration_ms: 1,
            started_at_ms: 1,
            metadata: BTreeMap::new(),
            feedback,
        }
    }

    #[test]
    fn the_correction_wins_else_the_accepted_output() {
        let all = EvalFilter::new();
        let plain = EvalExample::from_record(&record(Ending::Answered, None), &all).unwrap();
        assert_eq!(plain.expected, json!({"x": 1}));
        assert_eq!(plain.source, ExpectedSource::Accepted);
        let fixed = Feedback::new().corrected_output(json!({"x": 2}));
        let ex = EvalExample::from_record(&record(Ending::Failed, Some(fixed)), &all).unwrap();
        assert_eq!(ex.expected, json!({"x": 2}));
        assert_eq!(ex.source, ExpectedSource::Correction);
        assert!(EvalExample::from_record(&record(Ending::Failed, None), &all).is_none());
    }

    #[test]
    fn filters_leave_out_low_ratings_and_other_agents() {
        let low = record(Ending::Answered, Some(Feedback::new().rating(-1)));
        assert!(EvalExample::from_record(&low, &EvalFilter::new().min_rating(0)).is_none());
        assert!(EvalExample::from_record(&low, &EvalFilter::new()).is_some());
        let unrated = record(Ending::Answered, None);
        assert!(
            EvalExample::from_record(&unrated, &EvalFilter::new().only_with_feedback()).is_none()
        );
        assert!(EvalExample::from_record(&unrated, &EvalFilter::new().agent("b")).is_none());
    }

    #[test]
    fn jsonl_has_one_object_per_line() {
        let ex =
            EvalExample::from_record(&record(Ending::Answered, None), &EvalFilter::new()).unwrap();
        let mut out = Vec::new();
        assert_eq!(write_jsonl(&[ex.clone(), ex], &mut out).unwrap(), 2);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let v: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["input"], "in");
        assert_eq!(v["expected"], json!({"x": 1}));
    }
}
