//! [`sweep`]: the same samples through named variants of a config, graded and compared.

mod comparison;
#[cfg(feature = "plot")]
mod plot;
pub(crate) mod stats;

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use serde_json::Value;

use crate::config::AgentConfig;
use crate::content::Input;
use crate::error::panic_message;
use crate::eval::grader::{Case, Grade, GradeError, RunGrader};
use crate::output::AgentOutput;
use crate::result::AgentResult;
use crate::run_options::RunOptions;
use crate::runner::run_agent_with;

use comparison::Finished;
pub use comparison::{
    Comparison, Estimate, GradeFailure, Paired, RunRecord, Spread, VariantSummary, WinLoss,
};

/// One input of a sweep: an id (a file name, a row number), the input (text and any
/// parts), and optionally the expected answer for the grader ([`Case::expected`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// The sample's id, unique within the sweep (it names the sample in [`RunRecord`]s).
    pub id: String,
    /// The run's input. A grader sees its text ([`Case::input`]), never its parts.
    pub input: Input,
    /// The expected answer as JSON (the whole value or some of its fields), if any.
    pub expected: Option<Value>,
}

impl Sample {
    /// A sample without an expected answer.
    pub fn new(id: impl Into<String>, input: impl Into<Input>) -> Self {
        Sample {
            id: id.into(),
            input: input.into(),
            expected: None,
        }
    }

    /// Sets the expected answer.
    #[must_use]
    pub fn expected(mut self, expected: Value) -> Self {
        self.expected = Some(expected);
        self
    }
}

/// One named config of a sweep (usually a `with_` variant of a base config).
#[derive(Clone)]
pub struct Variant<T> {
    name: String,
    config: AgentConfig<T>,
}

impl<T> fmt::Debug for Variant<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Variant")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T> Variant<T> {
    /// A variant called `name` (unique within the sweep; it labels the table, the JSON,
    /// the plot, and the runs' `sweep.variant` metadata).
    pub fn new(name: impl Into<String>, config: AgentConfig<T>) -> Self {
        Variant {
            name: name.into(),
            config,
        }
    }

    /// The variant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The variant's config.
    pub fn config(&self) -> &AgentConfig<T> {
        &self.config
    }
}

/// Something that happened in a sweep, for progress bars and recorders. Borrowed: copy
/// what you keep.
#[derive(Debug)]
#[non_exhaustive]
pub enum SweepEvent<'a, T> {
    /// The sweep is about to start `runs` runs (`variants × samples`).
    Started {
        /// The runs to come.
        runs: usize,
    },
    /// One run ended and was graded.
    RunFinished {
        /// The variant's name.
        variant: &'a str,
        /// The sample it ran on.
        sample: &'a Sample,
        /// The whole result (transcript included).
        result: &'a AgentResult<T>,
        /// The grade, when the sweep has a grader.
        grade: Option<&'a Result<Grade, GradeError>>,
        /// Runs finished so far, this one included.
        done: usize,
        /// All the sweep's runs.
        total: usize,
    },
}

type SweepObserver<T> = dyn Fn(&SweepEvent<'_, T>) + Send + Sync;

/// How a [`sweep`] runs: concurrency, grader, baseline, the bootstrap, an observer.
pub struct SweepOptions<T> {
    concurrency: usize,
    grader: Option<Arc<dyn RunGrader<T>>>,
    baseline: Option<String>,
    resamples: u32,
    seed: u64,
    grade_timeout: Duration,
    observer: Option<Arc<SweepObserver<T>>>,
    feedback_store: Option<Arc<dyn crate::store::FeedbackStore>>,
}

impl<T> Clone for SweepOptions<T> {
    fn clone(&self) -> Self {
        SweepOptions {
            concurrency: self.concurrency,
            grader: self.grader.clone(),
            baseline: self.baseline.clone(),
            resamples: self.resamples,
            seed: self.seed,
            grade_timeout: self.grade_timeout,
            observer: self.observer.clone(),
            feedback_store: self.feedback_store.clone(),
        }
    }
}

impl<T> fmt::Debug for SweepOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SweepOptions")
            .field("concurrency", &self.concurrency)
            .field("grader", &self.grader.is_some())
            .field("baseline", &self.baseline)
            .field("resamples", &self.resamples)
            .field("seed", &self.seed)
            .field("grade_timeout", &self.grade_timeout)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl<T> Default for SweepOptions<T> {
    fn default() -> Self {
        SweepOptions {
            concurrency: 4,
            grader: None,
            baseline: None,
            resamples: 2000,
            seed: 0x5eed,
            grade_timeout: Duration::from_secs(60),
            observer: None,
            feedback_store: None,
        }
    }
}

impl<T> SweepOptions<T> {
    /// Concurrency 4, no grader, the first variant as baseline, 2000 resamples, seed
    /// `0x5eed`, a 60 s grade timeout, no observer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs at a time, over all variants (0 is treated as 1).
    #[must_use]
    pub fn concurrency(mut self, runs: usize) -> Self {
        self.concurrency = runs.max(1);
        self
    }

    /// Grades every run (answered or not) right after it ends, in its slot.
    #[must_use]
    pub fn grader(mut self, grader: impl RunGrader<T> + 'static) -> Self {
        self.grader = Some(Arc::new(grader));
        self
    }

    /// The variant the others are paired against (default: the first).
    #[must_use]
    pub fn baseline(mut self, variant: impl Into<String>) -> Self {
        self.baseline = Some(variant.into());
        self
    }

    /// Bootstrap resamples per interval (default 2000; at least 1).
    #[must_use]
    pub fn resamples(mut self, resamples: u32) -> Self {
        self.resamples = resamples.max(1);
        self
    }

    /// The bootstrap's seed: the same runs, resamples and seed give the same intervals.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How long one grading may take (default 60 s): past it the run's grade is
    /// [`GradeError::Timeout`]. Only stops a grader at an `.await`.
    #[must_use]
    pub fn grade_timeout(mut self, limit: Duration) -> Self {
        self.grade_timeout = limit;
        self
    }

    /// Called inline on every [`SweepEvent`] (keep it quick): a progress bar, or a
    /// recorder that stores each run with its variant name. A panic in it is caught.
    #[must_use]
    pub fn observer(
        mut self,
        observer: impl Fn(&SweepEvent<'_, T>) + Send + Sync + 'static,
    ) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Records every run of the sweep in this feedback store, with its variant's name
    /// as the run's variant label (each variant's config is derived with
    /// `feedback_store` and `variant` set), and flushes the store before `sweep`
    /// returns. A variant whose config already records to a store keeps it, and gets
    /// its name as the label when it has none.
    #[must_use]
    pub fn feedback_store(mut self, store: Arc<dyn crate::store::FeedbackStore>) -> Self {
        self.feedback_store = Some(store);
        self
    }
}

/// Why a sweep did not start. Checked before any run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    /// No variants were given.
    #[error("a sweep needs at least one variant")]
    NoVariants,
    /// Two variants share a name, or a name is empty.
    #[error("variant name {name:?} is empty or used twice: names must be unique")]
    BadVariantName {
        /// The name.
        name: String,
    },
    /// Two samples share an id.
    #[error("sample id {id:?} is used twice: ids must be unique")]
    DuplicateSample {
        /// The id.
        id: String,
    },
    /// The baseline names no variant.
    #[error("the baseline {name:?} is not a variant ({variants})")]
    UnknownBaseline {
        /// The name given.
        name: String,
        /// The variants' names, comma-separated.
        variants: String,
    },
    /// A variant's config could not take its recording settings (`feedback_store`,
    /// `variant`).
    #[error("variant {name:?}: {error}")]
    Config {
        /// The variant's name.
        name: String,
        /// Why.
        error: crate::error::ConfigError,
    },
}

/// Runs every sample through every variant, grades each run, and compares the variants.
///
/// The runs of all variants share one pool of `concurrency` slots, started sample by
/// sample (sample 1 on every variant, then sample 2, ...), so each variant meets the
/// same server load. Each run gets the metadata `sweep.variant` and `sweep.sample`
/// (see [`RunOptions::metadata`]). With a grader, each run is graded in its slot right
/// after it ends ([`Case`] with the sample's expected answer); a grader that fails,
/// panics or times out gives that run a [`GradeError`], never a changed outcome. The
/// observer sees every run with its variant name and whole result, so a recorder (a
/// feedback store) can keep them.
///
/// The [`Comparison`] holds, per variant: every ending and category count, the
/// answered rate and the grader's means with 95% bootstrap intervals, paired wins,
/// losses and ties against the baseline on the same samples, tokens and cost (the
/// grader's own apart), `llm_calls` and latency p50/p95, and the turn data
/// ([`TurnStats`](crate::eval::TurnStats)); and one [`RunRecord`] per run.
///
/// Never panics. Dropping the future stops every run.
///
/// # Errors
/// A [`SweepError`] for no variants, an empty or repeated variant name, a repeated
/// sample id, or a baseline that names no variant; checked before any run.
pub async fn sweep<T>(
    variants: &[Variant<T>],
    samples: &[Sample],
    options: &SweepOptions<T>,
) -> Result<Comparison, SweepError>
where
    T: AgentOutput + Sync,
{
    let baseline = check(variants, samples, options)?;
    // Each variant's config with its recording settings: the sweep's store, and the
    // variant's name as the run label when the config has none.
    let configs: Vec<AgentConfig<T>> = variants
        .iter()
        .map(|v| {
            let store = options.feedback_store.clone();
            let label = v.config.variant().is_none().then(|| v.name.clone());
            if store.is_none() && label.is_none() {
                return Ok(v.config.clone());
            }
            v.config
                .with_(|mut b| {
                    if let Some(store) = store {
                        b = b.feedback_store(store);
                    }
                    if let Some(label) = label {
                        b = b.variant(label);
                    }
                    b
                })
                .map_err(|error| SweepError::Config {
                    name: v.name.clone(),
                    error,
                })
        })
        .collect::<Result<_, _>>()?;
    let configs = &configs;
    let started = Instant::now();
    let total = variants.len() * samples.len();
    notify(options, &SweepEvent::Started { runs: total });
    let done = AtomicUsize::new(0);
    let jobs: Vec<(usize, usize)> = (0..samples.len())
        .flat_map(|s| (0..variants.len()).map(move |v| (v, s)))
        .collect();
    let done = &done;
    let finished: Vec<Finished<T>> = futures::stream::iter(jobs)
        .map(|(v, s)| async move {
            let (variant, sample) = (&variants[v], &samples[s]);
            let run_options = RunOptions::new()
                .metadata("sweep.variant", variant.name.clone())
                .metadata("sweep.sample", sample.id.clone());
            let result = run_agent_with(&configs[v], sample.input.clone(), run_options).await;
            let grade = match &options.grader {
                Some(grader) => {
                    Some(grade(grader.as_ref(), sample, &result, options.grade_timeout).await)
                }
                None => None,
            };
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            notify(
                options,
                &SweepEvent::RunFinished {
                    variant: &variant.name,
                    sample,
                    result: &result,
                    grade: grade.as_ref(),
                    done: n,
                    total,
                },
            );
            (v, s, result, grade)
        })
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await;
    // Every recorded run is durable before the comparison is returned.
    for config in configs {
        crate::runner::flush_stores(&config.inner).await;
    }
    Ok(Comparison::build(
        variants,
        samples,
        finished,
        baseline,
        options.resamples,
        options.seed,
        started.elapsed(),
    ))
}

/// Checks the sweep's setup; the baseline's index.
fn check<T>(
    variants: &[Variant<T>],
    samples: &[Sample],
    options: &SweepOptions<T>,
) -> Result<usize, SweepError> {
    if variants.is_empty() {
        return Err(SweepError::NoVariants);
    }
    for (i, v) in variants.iter().enumerate() {
        if v.name.trim().is_empty() || variants[..i].iter().any(|w| w.name == v.name) {
            return Err(SweepError::BadVariantName {
                name: v.name.clone(),
            });
        }
    }
    let mut ids: Vec<&str> = samples.iter().map(|s| s.id.as_str()).collect();
    ids.sort_unstable();
    if let Some(pair) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(SweepError::DuplicateSample {
            id: pair[0].to_owned(),
        });
    }
    match &options.baseline {
        None => Ok(0),
        Some(name) => variants
            .iter()
            .position(|v| &v.name == name)
            .ok_or_else(|| SweepError::UnknownBaseline {
                name: name.clone(),
                variants: variants
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
    }
}

/// Grades one run behind a catch boundary and a timeout; checks the grade's range.
async fn grade<T>(
    grader: &dyn RunGrader<T>,
    sample: &Sample,
    result: &AgentResult<T>,
    limit: Duration,
) -> Result<Grade, GradeError> {
    let case = Case {
        input: sample.input.as_text(),
        result,
        expected: sample.expected.as_ref(),
    };
    let case = &case;
    let graded = AssertUnwindSafe(async move {
        let future = std::panic::catch_unwind(AssertUnwindSafe(|| grader.grade_run(case)))
            .map_err(|payload| GradeError::Panicked {
                message: panic_message(payload.as_ref()),
            })?;
        tokio::time::timeout(limit, future)
            .await
            .map_err(|_| GradeError::Timeout { limit })?
    })
    .catch_unwind()
    .await;
    match graded {
        Ok(Ok(grade)) => grade.check().map(|()| grade),
        Ok(Err(e)) => Err(e),
        Err(payload) => Err(GradeError::Panicked {
            message: panic_message(payload.as_ref()),
        }),
    }
}

fn notify<T>(options: &SweepOptions<T>, event: &SweepEvent<'_, T>) {
    if let Some(observer) = &options.observer
        && let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| observer(event)))
    {
        tracing::warn!(panic = %panic_message(payload.as_ref()), "sweep observer panicked");
    }
}
