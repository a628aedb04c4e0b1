//! [`Comparison`]: what a sweep found, per variant and per run; a table and JSON.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::stats::{bootstrap_mean, mean, nearest_rank};
use super::{Sample, Variant};
use crate::error::Ending;
use crate::eval::batch::Receipt;
use crate::eval::grader::{Grade, GradeError, add_usage};
use crate::eval::turns::TurnStats;
use crate::output::AgentOutput;
use crate::result::AgentResult;
use crate::usage::Usage;

/// A mean over runs with its 95% bootstrap interval.
///
/// The interval is the percentile bootstrap: the runs' values resampled with
/// replacement (`resamples` times, as many values each time), each resample's mean,
/// and the nearest-rank 2.5th and 97.5th percentiles of those means; the generator is
/// seeded (the sweep's `seed`), so the same values give the same interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Estimate {
    /// The mean of the values.
    pub mean: f64,
    /// The interval's lower end.
    pub low: f64,
    /// The interval's upper end.
    pub high: f64,
    /// How many values (runs).
    pub n: usize,
}

impl Estimate {
    /// The estimate over these values; `None` for none.
    pub(crate) fn of(values: &[f64], resamples: u32, seed: u64) -> Option<Self> {
        let (low, high) = bootstrap_mean(values, resamples, seed)?;
        Some(Estimate {
            mean: mean(values)?,
            low,
            high,
            n: values.len(),
        })
    }
}

/// Paired outcomes against the baseline on the same samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WinLoss {
    /// Samples where this variant did better than the baseline.
    pub wins: usize,
    /// Samples where it did worse.
    pub losses: usize,
    /// Samples where both did the same.
    pub ties: usize,
}

impl WinLoss {
    fn add(&mut self, ordering: std::cmp::Ordering) {
        match ordering {
            std::cmp::Ordering::Greater => self.wins += 1,
            std::cmp::Ordering::Less => self.losses += 1,
            std::cmp::Ordering::Equal => self.ties += 1,
        }
    }

    /// The samples compared (`wins + losses + ties`).
    pub fn pairs(&self) -> usize {
        self.wins + self.losses + self.ties
    }
}

/// A variant against the baseline, sample by sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Paired {
    /// Answered where the baseline did not (win), the reverse (loss), or both or
    /// neither (tie); every sample counts.
    pub answered: WinLoss,
    /// The grade's overall score above, below or equal to (within 1e-9) the baseline's;
    /// only samples where both runs have a grade count. `None` without a grader.
    pub score: Option<WinLoss>,
}

/// The 50th and 95th percentiles (nearest rank) of a quantity over runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Spread {
    /// The median.
    pub p50: f64,
    /// The 95th percentile.
    pub p95: f64,
}

impl Spread {
    fn of(mut values: Vec<f64>) -> Self {
        values.sort_unstable_by(f64::total_cmp);
        Spread {
            p50: nearest_rank(&values, 0.5).unwrap_or(0.0),
            p95: nearest_rank(&values, 0.95).unwrap_or(0.0),
        }
    }
}

/// Why a run has no grade.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GradeFailure {
    /// [`GradeError::category`].
    pub category: String,
    /// The error's message.
    pub message: String,
}

/// One run of a sweep, in brief (the whole result goes to the sweep's observer).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunRecord {
    /// The variant's name.
    pub variant: String,
    /// The sample's id.
    pub sample: String,
    /// How the run ended.
    pub ending: Ending,
    /// The error category, when it did not answer.
    pub category: Option<String>,
    /// The error's message, when it did not answer.
    pub error: Option<String>,
    /// LLM calls.
    pub llm_calls: u32,
    /// Tool executions.
    pub tool_calls: u32,
    /// Input tokens (tokens).
    pub input_tokens: u64,
    /// Output tokens (tokens).
    pub output_tokens: u64,
    /// Cost (USD), when priced.
    pub cost_usd: Option<f64>,
    /// Run duration (ms).
    pub duration_ms: f64,
    /// The run's trace id.
    pub trace_id: String,
    /// The grade, when the sweep has a grader and grading succeeded.
    pub grade: Option<Grade>,
    /// Why grading failed, when it did.
    pub grade_error: Option<GradeFailure>,
}

/// What one variant did over all samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VariantSummary {
    /// The variant's name.
    pub name: String,
    /// Its model, as configured; `(provider)` for a client set without a model name.
    pub model: String,
    /// Its resolved output mode (`tool`, `native`, `prompted`).
    pub output_mode: String,
    /// Its `max_llm_calls`.
    pub max_llm_calls: u32,
    /// Runs (one per sample).
    pub runs: usize,
    /// Runs per ending (every ending, zero included).
    pub endings: BTreeMap<Ending, usize>,
    /// Runs per error category (only those that occurred).
    pub categories: BTreeMap<String, usize>,
    /// The share of runs that answered, with its interval (`None` for no runs).
    pub answered: Option<Estimate>,
    /// The grade's overall score over the graded runs (`None` without grades).
    pub score: Option<Estimate>,
    /// Each named score over the graded runs that have it.
    pub scores: BTreeMap<String, Estimate>,
    /// The share of graded runs that passed, for graders with a threshold.
    pub pass_rate: Option<Estimate>,
    /// Runs with a grade.
    pub graded: usize,
    /// Runs whose grading failed, per [`GradeError::category`].
    pub grade_failures: BTreeMap<String, usize>,
    /// Against the baseline on the same samples (`None` for the baseline itself).
    pub vs_baseline: Option<Paired>,
    /// Input tokens over the runs (tokens).
    pub input_tokens: u64,
    /// Output tokens over the runs (tokens).
    pub output_tokens: u64,
    /// The runs' cost (USD), `None` when no run was priced.
    pub cost_usd: Option<f64>,
    /// What grading spent (a judge's LLM calls, tokens, cost), apart from the runs.
    pub grading: Usage,
    /// LLM calls per run.
    pub llm_calls: Spread,
    /// Run duration (ms).
    pub latency_ms: Spread,
    /// LLM calls per ending, cap hits, suggested `max_llm_calls`.
    pub turns: TurnStats,
}

/// What a [`sweep`](crate::eval::sweep) found: one [`VariantSummary`] per variant (in the
/// order given) and one [`RunRecord`] per run (variant by variant, samples in order).
///
/// Its `Display` is a table with a column per variant; it serializes to JSON
/// ([`write_json`](Self::write_json)); with the `plot` feature, `write_svg` draws it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Comparison {
    /// Samples per variant.
    pub samples: usize,
    /// The baseline variant's name.
    pub baseline: String,
    /// Bootstrap resamples per interval.
    pub resamples: u32,
    /// The bootstrap's seed.
    pub seed: u64,
    /// Wall-clock time of the sweep (ms).
    pub wall_time_ms: f64,
    /// One summary per variant, in the order given.
    pub variants: Vec<VariantSummary>,
    /// Every run.
    pub runs: Vec<RunRecord>,
}

/// A run's grade: `None` without a grader.
pub(crate) type Graded = Option<Result<Grade, GradeError>>;
/// One finished run: variant index, sample index, result, grade.
pub(crate) type Finished<T> = (usize, usize, AgentResult<T>, Graded);
/// A run and its grade.
type Cell<T> = (AgentResult<T>, Graded);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Comparison {
    pub(crate) fn build<T: AgentOutput>(
        variants: &[Variant<T>],
        samples: &[Sample],
        finished: Vec<Finished<T>>,
        baseline: usize,
        resamples: u32,
        seed: u64,
        wall_time: Duration,
    ) -> Self {
        let mut grid: Vec<Vec<Option<Cell<T>>>> = variants
            .iter()
            .map(|_| samples.iter().map(|_| None).collect())
            .collect();
        for (v, s, result, grade) in finished {
            grid[v][s] = Some((result, grade));
        }
        let mut runs = Vec::with_capacity(variants.len() * samples.len());
        let mut summaries = Vec::with_capacity(variants.len());
        for (variant, row) in variants.iter().zip(&grid) {
            let mut done = Vec::with_capacity(samples.len());
            for (sample, cell) in samples.iter().zip(row) {
                if let Some(cell) = cell {
                    runs.push(record(&variant.name, &sample.id, &cell.0, cell.1.as_ref()));
                    done.push(cell);
                }
            }
            summaries.push(summarize(variant, &done, resamples, seed));
        }
        // Paired against the baseline, sample by sample.
        let key = |cell: &Option<Cell<T>>| {
            cell.as_ref().map(|(r, g)| {
                let score = g.as_ref().and_then(|g| g.as_ref().ok()).map(|g| g.score);
                (r.is_ok(), score)
            })
        };
        let graded = grid.iter().flatten().flatten().any(|(_, g)| g.is_some());
        for (v, summary) in summaries.iter_mut().enumerate() {
            if v == baseline {
                continue;
            }
            let mut paired = Paired {
                answered: WinLoss::default(),
                score: graded.then(WinLoss::default),
            };
            for (mine, theirs) in grid[v].iter().zip(&grid[baseline]) {
                let (Some((a, sa)), Some((b, sb))) = (key(mine), key(theirs)) else {
                    continue;
                };
                paired.answered.add(a.cmp(&b));
                if let (Some(x), Some(y), Some(wl)) = (sa, sb, paired.score.as_mut()) {
                    let ordering = if (x - y).abs() <= 1e-9 {
                        std::cmp::Ordering::Equal
                    } else if x > y {
                        std::cmp::Ordering::Greater
                    } else {
                        std::cmp::Ordering::Less
                    };
                    wl.add(ordering);
                }
            }
            summary.vs_baseline = Some(paired);
        }
        Comparison {
            samples: samples.len(),
            baseline: variants
                .get(baseline)
                .map(|v| v.name.clone())
                .unwrap_or_default(),
            resamples,
            seed,
            wall_time_ms: ms(wall_time),
            variants: summaries,
            runs,
        }
    }

    /// The summary of the variant with this name.
    pub fn variant(&self, name: &str) -> Option<&VariantSummary> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// The runs of the variant with this name, samples in order.
    pub fn runs_of<'a>(&'a self, variant: &'a str) -> impl Iterator<Item = &'a RunRecord> + 'a {
        self.runs.iter().filter(move |r| r.variant == variant)
    }

    /// Writes the comparison as pretty-printed JSON.
    ///
    /// # Errors
    /// The I/O error of creating or writing the file.
    pub fn write_json(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }
}

fn record<T>(
    variant: &str,
    sample: &str,
    result: &AgentResult<T>,
    grade: Option<&Result<Grade, GradeError>>,
) -> RunRecord {
    RunRecord {
        variant: variant.to_owned(),
        sample: sample.to_owned(),
        ending: result.ending(),
        category: result.category().map(str::to_owned),
        error: result.outcome.as_ref().err().map(ToString::to_string),
        llm_calls: result.usage.llm_calls,
        tool_calls: result.usage.tool_calls,
        input_tokens: result.usage.input_tokens,
        output_tokens: result.usage.output_tokens,
        cost_usd: result.usage.cost_usd,
        duration_ms: ms(result.duration),
        trace_id: result.trace_id.clone(),
        grade: grade.and_then(|g| g.as_ref().ok()).cloned(),
        grade_error: grade.and_then(|g| g.as_ref().err()).map(|e| GradeFailure {
            category: e.category().to_owned(),
            message: e.to_string(),
        }),
    }
}

fn summarize<T: AgentOutput>(
    variant: &Variant<T>,
    done: &[&Cell<T>],
    resamples: u32,
    seed: u64,
) -> VariantSummary {
    let config = &variant.config;
    let cap = config.max_llm_calls();
    let results: Vec<&AgentResult<T>> = done.iter().map(|(r, _)| r).collect();
    let receipt = Receipt::build(&results, Some(cap));
    let answered: Vec<f64> = results
        .iter()
        .map(|r| f64::from(u8::from(r.is_ok())))
        .collect();
    let grades: Vec<&Grade> = done
        .iter()
        .filter_map(|(_, g)| g.as_ref().and_then(|g| g.as_ref().ok()))
        .collect();
    let mut grade_failures = BTreeMap::new();
    let mut grading = Usage::default();
    for (_, g) in done {
        match g {
            Some(Ok(grade)) => add_usage(&mut grading, &grade.usage),
            Some(Err(e)) => {
                add_usage(&mut grading, &e.usage());
                *grade_failures.entry(e.category().to_owned()).or_insert(0) += 1;
            }
            None => {}
        }
    }
    let overall: Vec<f64> = grades.iter().map(|g| g.score).collect();
    let mut by_name: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for g in &grades {
        for (name, v) in &g.scores {
            by_name.entry(name.as_str()).or_default().push(*v);
        }
    }
    let passes: Vec<f64> = grades
        .iter()
        .filter_map(|g| g.passed.map(|p| f64::from(u8::from(p))))
        .collect();
    VariantSummary {
        name: variant.name.clone(),
        model: if config.model().is_empty() {
            format!("({})", config.provider())
        } else {
            config.model().to_owned()
        },
        output_mode: config.output_mode().as_str().to_owned(),
        max_llm_calls: cap,
        runs: receipt.runs,
        endings: receipt.endings.clone(),
        categories: receipt
            .categories
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect(),
        answered: Estimate::of(&answered, resamples, seed),
        score: Estimate::of(&overall, resamples, seed),
        scores: by_name
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), Estimate::of(&v, resamples, seed)?)))
            .collect(),
        pass_rate: Estimate::of(&passes, resamples, seed),
        graded: grades.len(),
        grade_failures,
        vs_baseline: None,
        input_tokens: receipt.input_tokens,
        output_tokens: receipt.output_tokens,
        cost_usd: receipt.cost_usd,
        grading,
        llm_calls: Spread::of(
            results
                .iter()
                .map(|r| f64::from(r.usage.llm_calls))
                .collect(),
        ),
        latency_ms: Spread::of(results.iter().map(|r| ms(r.duration)).collect()),
        turns: receipt.turns,
    }
}

/// A table cell per variant for one row.
struct Row {
    label: String,
    cells: Vec<String>,
}

fn pct(x: f64) -> String {
    format!("{:.1}", x * 100.0)
}

fn estimate(e: Option<&Estimate>, percent: bool) -> String {
    match e {
        None => "-".to_owned(),
        Some(e) if percent => format!("{}% [{}, {}]", pct(e.mean), pct(e.low), pct(e.high)),
        Some(e) => format!("{:.3} [{:.3}, {:.3}]", e.mean, e.low, e.high),
    }
}

fn win_loss(w: Option<WinLoss>) -> String {
    w.map_or_else(
        || "-".to_owned(),
        |w| format!("+{} -{} ={}", w.wins, w.losses, w.ties),
    )
}

fn seconds(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

impl Comparison {
    fn rows(&self) -> Vec<Row> {
        let vs = &self.variants;
        let row = |label: &str, f: &dyn Fn(&VariantSummary) -> String| Row {
            label: label.to_owned(),
            cells: vs.iter().map(f).collect(),
        };
        let mut rows = vec![
            row("model", &|v| v.model.clone()),
            row("output mode", &|v| v.output_mode.clone()),
            row("max_llm_calls", &|v| v.max_llm_calls.to_string()),
            row("runs", &|v| v.runs.to_string()),
            row("answered (95% CI)", &|v| {
                estimate(v.answered.as_ref(), true)
            }),
        ];
        for ending in Ending::ALL.iter().skip(1) {
            rows.push(row(&format!("  {ending}"), &|v| {
                v.endings.get(ending).copied().unwrap_or(0).to_string()
            }));
        }
        let categories: std::collections::BTreeSet<&String> =
            vs.iter().flat_map(|v| v.categories.keys()).collect();
        for c in categories {
            rows.push(row(&format!("    {c}"), &|v| {
                v.categories.get(c).copied().unwrap_or(0).to_string()
            }));
        }
        let graded = vs
            .iter()
            .any(|v| v.graded > 0 || !v.grade_failures.is_empty());
        if graded {
            rows.push(row("score (95% CI)", &|v| {
                estimate(v.score.as_ref(), false)
            }));
            let names: std::collections::BTreeSet<&String> =
                vs.iter().flat_map(|v| v.scores.keys()).collect();
            for name in names {
                rows.push(row(&format!("  {name}"), &|v| {
                    estimate(v.scores.get(name), false)
                }));
            }
            if vs.iter().any(|v| v.pass_rate.is_some()) {
                rows.push(row("pass rate (95% CI)", &|v| {
                    estimate(v.pass_rate.as_ref(), true)
                }));
            }
            rows.push(row("grade failures", &|v| {
                v.grade_failures.values().sum::<usize>().to_string()
            }));
        }
        if vs.len() > 1 {
            let label = format!("vs {}: answered +W -L =T", self.baseline);
            rows.push(row(&label, &|v| {
                win_loss(v.vs_baseline.map(|p| p.answered))
            }));
            if graded {
                let label = format!("vs {}: score +W -L =T", self.baseline);
                rows.push(row(&label, &|v| {
                    win_loss(v.vs_baseline.and_then(|p| p.score))
                }));
            }
        }
        let cost = |c: Option<f64>| c.map_or_else(|| "n/a".to_owned(), |c| format!("${c:.4}"));
        rows.extend([
            row("input tokens", &|v| v.input_tokens.to_string()),
            row("output tokens", &|v| v.output_tokens.to_string()),
            row("cost", &|v| cost(v.cost_usd)),
        ]);
        if graded {
            rows.push(row("grading: calls, cost", &|v| {
                format!("{}, {}", v.grading.llm_calls, cost(v.grading.cost_usd))
            }));
        }
        rows.extend([
            row("llm_calls p50 / p95", &|v| {
                format!("{} / {}", v.llm_calls.p50, v.llm_calls.p95)
            }),
            row("latency p50 / p95", &|v| {
                format!(
                    "{} / {}",
                    seconds(v.latency_ms.p50),
                    seconds(v.latency_ms.p95)
                )
            }),
            row("hit the cap", &|v| v.turns.hit_cap.to_string()),
            row("suggested max_llm_calls", &|v| {
                v.turns
                    .suggested_max_llm_calls
                    .map_or_else(|| "n/a".to_owned(), |s| s.to_string())
            }),
        ]);
        rows
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = self.rows();
        let label_width = rows
            .iter()
            .map(|r| r.label.chars().count())
            .max()
            .unwrap_or(0);
        let widths: Vec<usize> = self
            .variants
            .iter()
            .enumerate()
            .map(|(i, v)| {
                rows.iter()
                    .map(|r| r.cells[i].chars().count())
                    .chain(std::iter::once(v.name.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |f: &mut fmt::Formatter<'_>, label: &str, cells: &[&str]| {
            let mut text = format!("{label:<label_width$}");
            for (cell, w) in cells.iter().zip(&widths) {
                text.push_str(&format!("  {cell:>w$}"));
            }
            writeln!(f, "{}", text.trim_end())
        };
        let names: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
        line(f, "", &names)?;
        let total = label_width + widths.iter().map(|w| w + 2).sum::<usize>();
        writeln!(f, "{}", "-".repeat(total))?;
        for r in &rows {
            let cells: Vec<&str> = r.cells.iter().map(String::as_str).collect();
            line(f, &r.label, &cells)?;
        }
        write!(
            f,
            "{} samples per variant; baseline {}; 95% CI: percentile bootstrap, {} resamples, seed {}; wall time {}",
            self.samples,
            self.baseline,
            self.resamples,
            self.seed,
            seconds(self.wall_time_ms)
        )
    }
}
