//! [`run_batch`] and its [`Receipt`]: many inputs, every run accounted for.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Serialize;

use crate::config::AgentConfig;
use crate::content::Input;
use crate::error::Ending;
use crate::eval::tally::RunTally;
use crate::eval::turns::TurnStats;
use crate::output::AgentOutput;
use crate::result::AgentResult;
use crate::runner::run_agent;

/// The results of a batch, in input order, and its receipt.
#[derive(Debug)]
#[non_exhaustive]
pub struct Batch<T> {
    /// One result per input, in input order.
    pub results: Vec<AgentResult<T>>,
    /// Counts, spend and latency over all results.
    pub receipt: Receipt,
    /// What the provider batch jobs did, when the config has `.provider_batch(..)`
    /// (`None` for live calls).
    pub provider_batch: Option<crate::providers::BatchReport>,
}

/// Runs the agent on every input (text, or an [`Input`] with parts), at most `concurrency` runs at a time (a `concurrency`
/// of 0 is treated as 1), and returns every result in input order with a [`Receipt`].
///
/// A run starts as soon as a slot frees up, whatever the runs before it in the input
/// are doing: one slow run keeps only its own slot.
///
/// Like [`run_agent`], never panics and never returns early: each input ends in its own
/// `AgentResult`. When the config has a feedback or trace store, the batch flushes them
/// before it returns, so every run it recorded is durable (a failed flush, and
/// write-behind writes that failed, are counted in [`Receipt::store_failures`]). The runs
/// share the current task, so dropping the returned future stops them all.
///
/// With the builder's `.provider_batch(..)` (OpenAI and Anthropic routes), the runs'
/// LLM calls go through the provider's batch API: each round of calls of the runs
/// still going is one batch job, polled until it ends, billed at the batch price; every
/// run still ends in its value or one typed error, with its own budgets. The rules
/// (rounds, deadline, expired and failed jobs, resuming after a crash) are in
/// `docs/batch.md`; [`Batch::provider_batch`] reports the jobs.
pub async fn run_batch<T, I, S>(config: &AgentConfig<T>, inputs: I, concurrency: usize) -> Batch<T>
where
    T: AgentOutput,
    I: IntoIterator<Item = S>,
    S: Into<Input>,
{
    let started = Instant::now();
    // Converted up front: a stream adapter whose closure takes a borrowed input type
    // (`&str`) keeps rustc from proving the batch's future `Send`.
    let inputs: Vec<Input> = inputs.into_iter().map(Into::into).collect();
    let gated = config
        .inner
        .settings_provider_batch()
        .zip(config.batch_gate());
    let (results, provider_batch) = match gated {
        Some((batch, gate)) => {
            let (results, report) =
                super::provider_batch::run_gated(config, inputs, concurrency, batch, gate).await;
            (results, Some(report))
        }
        None => (live(config, inputs, concurrency).await, None),
    };
    // Every record is durable before the batch returns.
    let flush_failures = crate::runner::flush_stores(&config.inner).await;
    let mut receipt = Receipt::from_results_with_cap(&results, config.max_llm_calls());
    receipt.store_failures = receipt.store_failures.saturating_add(flush_failures);
    receipt.wall_time = started.elapsed();
    Batch {
        results,
        receipt,
        provider_batch,
    }
}

/// The runs, each with live LLM calls, results in input order.
async fn live<T: AgentOutput>(
    config: &AgentConfig<T>,
    inputs: Vec<Input>,
    concurrency: usize,
) -> Vec<AgentResult<T>> {
    // Unordered: a run starts as soon as any slot frees up, so one slow run (a long
    // Retry-After) holds back no other; the results are put back in input order.
    let mut indexed: Vec<(usize, AgentResult<T>)> = futures::stream::iter(inputs)
        .enumerate()
        .map(|(i, input)| async move { (i, run_agent(config, input).await) })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    indexed.sort_unstable_by_key(|(i, _)| *i);
    indexed.into_iter().map(|(_, r)| r).collect()
}

/// What a batch did: counts per ending and per category, tokens, cost, run durations,
/// and LLM calls per run ([`TurnStats`]: a histogram per ending and a suggested
/// `max_llm_calls`). Its `Display` is a plain-text table.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Receipt {
    /// The number of runs.
    pub runs: usize,
    /// Runs per ending (every ending present, zero included).
    pub endings: BTreeMap<Ending, usize>,
    /// Failed runs per error category (only categories that occurred).
    pub categories: BTreeMap<&'static str, usize>,
    /// Answered runs whose value is partial (`AgentResult::is_partial`); they are also
    /// in `endings[answered]`, so full answers are `answered - partial`.
    pub partial: usize,
    /// LLM calls over all runs.
    pub llm_calls: u64,
    /// Tool executions over all runs.
    pub tool_calls: u64,
    /// Input tokens over all runs (tokens).
    pub input_tokens: u64,
    /// Output tokens over all runs (tokens).
    pub output_tokens: u64,
    /// Cost over the runs that have one (USD); `None` when no run was priced.
    pub cost_usd: Option<f64>,
    /// Median run duration.
    pub p50: Duration,
    /// 95th-percentile run duration.
    pub p95: Duration,
    /// Wall-clock time of the whole batch (zero when built with [`Receipt::from_results`]).
    pub wall_time: Duration,
    /// Store calls that failed over all runs (`AgentResult::store_failures`), plus a
    /// failed final flush; none of them changed an outcome.
    pub store_failures: u64,
    /// Guardrail verdicts other than a pass over all runs
    /// ([`Usage::guardrail_interventions`](crate::usage::Usage::guardrail_interventions)):
    /// output rejections, tool denials, replaced arguments, redacted results and trips.
    pub guardrail_interventions: u64,
    /// Child runs over all runs: agents the runs called as tools (the entries of
    /// [`Usage::children`](crate::usage::Usage::children), their own children included). Their
    /// tokens and cost are in the totals above; their LLM calls and tool executions
    /// are not.
    pub child_runs: u64,
    /// LLM calls per run: histogram per ending, cap hits, suggested `max_llm_calls`.
    pub turns: TurnStats,
}

impl Receipt {
    /// A receipt over any results (their cap unknown: `turns.hit_cap` counts the runs
    /// that ended `max_llm_calls`).
    pub fn from_results<T>(results: &[AgentResult<T>]) -> Self {
        Self::build(&results.iter().collect::<Vec<_>>(), None)
    }

    /// A receipt over results that ran with this `max_llm_calls` (`turns.hit_cap` also
    /// counts the runs that used all of it).
    pub fn from_results_with_cap<T>(results: &[AgentResult<T>], max_llm_calls: u32) -> Self {
        Self::build(&results.iter().collect::<Vec<_>>(), Some(max_llm_calls))
    }

    pub(crate) fn build<T>(results: &[&AgentResult<T>], cap: Option<u32>) -> Self {
        let tallies: Vec<RunTally> = results.iter().map(|r| RunTally::from(*r)).collect();
        Self::from_tallies(&tallies, cap)
    }

    /// A receipt over runs as tallied ([`RunTally`]: from results, or from stored
    /// records); `max_llm_calls` is their cap when known (`turns.hit_cap` then also
    /// counts the runs that used all of it). `wall_time` is zero.
    pub fn from_tallies(runs: &[RunTally], max_llm_calls: Option<u32>) -> Self {
        let mut endings: BTreeMap<Ending, usize> = Ending::ALL.iter().map(|e| (*e, 0)).collect();
        let mut categories = BTreeMap::new();
        let mut r = Receipt {
            runs: runs.len(),
            ..Receipt::default()
        };
        let mut durations: Vec<Duration> = Vec::with_capacity(runs.len());
        for run in runs {
            *endings.entry(run.ending).or_insert(0) += 1;
            r.partial += usize::from(run.partial);
            if let Some(category) = run.category {
                *categories.entry(category.as_str()).or_insert(0) += 1;
            }
            r.llm_calls = r.llm_calls.saturating_add(u64::from(run.usage.llm_calls));
            r.tool_calls = r.tool_calls.saturating_add(u64::from(run.usage.tool_calls));
            r.input_tokens = r.input_tokens.saturating_add(run.usage.input_tokens);
            r.output_tokens = r.output_tokens.saturating_add(run.usage.output_tokens);
            if let Some(cost) = run.usage.cost_usd {
                r.cost_usd = Some(r.cost_usd.unwrap_or(0.0) + cost);
            }
            r.guardrail_interventions = r
                .guardrail_interventions
                .saturating_add(u64::from(run.usage.guardrail_interventions));
            r.child_runs = r.child_runs.saturating_add(child_runs(&run.usage));
            durations.push(run.duration);
            r.store_failures = r.store_failures.saturating_add(run.store_failures);
        }
        durations.sort_unstable();
        r.p50 = percentile(&durations, 50);
        r.p95 = percentile(&durations, 95);
        r.endings = endings;
        r.categories = categories;
        r.turns = TurnStats::from_tallies(runs, max_llm_calls);
        r
    }

    /// The number of runs with this ending.
    pub fn count(&self, ending: Ending) -> usize {
        self.endings.get(&ending).copied().unwrap_or(0)
    }
}

/// The child runs of a run, at every depth.
fn child_runs(usage: &crate::usage::Usage) -> u64 {
    usage
        .children
        .iter()
        .map(|c| 1 + child_runs(&c.usage))
        .sum()
}

/// The nearest-rank percentile of sorted durations (zero for none).
fn percentile(sorted: &[Duration], pct: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

impl fmt::Display for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |n: usize| {
            if self.runs == 0 {
                0.0
            } else {
                n as f64 * 100.0 / self.runs as f64
            }
        };
        writeln!(f, "{:<28} {:>8} {:>7}", "ending", "runs", "share")?;
        writeln!(f, "{}", "-".repeat(45))?;
        for (ending, n) in &self.endings {
            writeln!(f, "{:<28} {:>8} {:>6.1}%", ending.as_str(), n, pct(*n))?;
        }
        if !self.categories.is_empty() {
            writeln!(f, "{}", "-".repeat(45))?;
            writeln!(f, "{:<28} {:>8} {:>7}", "category", "runs", "share")?;
            for (category, n) in &self.categories {
                writeln!(f, "{:<28} {:>8} {:>6.1}%", category, n, pct(*n))?;
            }
        }
        writeln!(f, "{}", "-".repeat(45))?;
        writeln!(f, "{:<28} {:>16}", "runs", self.runs)?;
        if self.partial > 0 {
            writeln!(f, "{:<28} {:>16}", "partial answers", self.partial)?;
        }
        writeln!(f, "{:<28} {:>16}", "llm calls", self.llm_calls)?;
        writeln!(f, "{:<28} {:>16}", "tool calls", self.tool_calls)?;
        if self.child_runs > 0 {
            writeln!(f, "{:<28} {:>16}", "child runs", self.child_runs)?;
        }
        if self.guardrail_interventions > 0 {
            let n = self.guardrail_interventions;
            writeln!(f, "{:<28} {:>16}", "guardrail interventions", n)?;
        }
        writeln!(f, "{:<28} {:>16}", "input tokens", self.input_tokens)?;
        writeln!(f, "{:<28} {:>16}", "output tokens", self.output_tokens)?;
        let cost = self
            .cost_usd
            .map_or_else(|| "n/a".to_owned(), |c| format!("${c:.4}"));
        writeln!(f, "{:<28} {:>16}", "cost", cost)?;
        if self.store_failures > 0 {
            writeln!(f, "{:<28} {:>16}", "store failures", self.store_failures)?;
        }
        writeln!(f, "{:<28} {:>16}", "duration p50", ms(self.p50))?;
        writeln!(f, "{:<28} {:>16}", "duration p95", ms(self.p95))?;
        writeln!(f, "{:<28} {:>16}", "wall time", ms(self.wall_time))?;
        write!(f, "{}", TurnsTable(&self.turns))
    }
}

/// The turn rows of a receipt: LLM calls x runs per ending, the suggestion, cap hits.
pub(crate) struct TurnsTable<'a>(pub(crate) &'a TurnStats);

impl fmt::Display for TurnsTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        writeln!(f, "{}", "-".repeat(45))?;
        writeln!(f, "{:<28} {:>16}", "llm calls per run", "(calls x runs)")?;
        for (ending, line) in t.histogram_lines() {
            writeln!(f, "  {:<26} {line}", ending.as_str())?;
        }
        let suggested = match (t.suggested_max_llm_calls, t.answered_p95) {
            (Some(s), Some(p)) => format!("{s} (answered p95 {p} + 1)"),
            _ => "n/a (no answer)".to_owned(),
        };
        writeln!(f, "{:<28} {:>16}", "suggested max_llm_calls", suggested)?;
        let cap = t
            .max_llm_calls
            .map_or_else(String::new, |c| format!(" (cap {c})"));
        write!(
            f,
            "{:<28} {:>16}",
            "runs that hit the cap",
            format!("{}{cap}", t.hit_cap)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let d: Vec<Duration> = (1..=20).map(Duration::from_millis).collect();
        assert_eq!(percentile(&d, 50), Duration::from_millis(10));
        assert_eq!(percentile(&d, 95), Duration::from_millis(19));
        assert_eq!(percentile(&d[..1], 95), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50), Duration::ZERO);
    }
}
