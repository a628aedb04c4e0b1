//! The overview: runs per ending per day, the escalated and stuck rates against their
//! thresholds, partial answers, cost and tokens per day, latency p50/p95, store
//! failures; per variant.

use std::collections::BTreeMap;

use agent_core::Ending;
use agent_store::{DayCount, LatencyCount};
use axum::extract::Query;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::layout::{count, ending_color, frame, percent, usd};
use super::login::gate;
use super::scope::{Scope, ScopeParams};
use crate::app::{App, State};
use crate::chart::{self, Series};
use crate::page_error::PageError;

/// The days the trend compares: the last `TREND_DAYS` of the range against the
/// `TREND_DAYS` before them.
const TREND_DAYS: i64 = 7;

/// Sums of one group of runs (a day, a variant, the whole range).
#[derive(Clone, Debug, Default)]
pub(crate) struct Totals {
    pub(crate) by_ending: BTreeMap<Ending, u64>,
    pub(crate) runs: u64,
    pub(crate) partial_answers: u64,
    pub(crate) store_failures: u64,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    /// Latency bucket floor (ms) -> runs.
    pub(crate) latency: BTreeMap<u64, u64>,
}

impl Totals {
    pub(crate) fn add(&mut self, row: &DayCount) {
        *self.by_ending.entry(row.ending).or_insert(0) += row.runs;
        self.runs += row.runs;
        if row.ending == Ending::Answered {
            self.partial_answers += row.partial;
        }
        self.store_failures += row.store_failures;
        self.tokens += row.tokens;
        self.cost_usd += row.cost_usd;
    }

    pub(crate) fn add_latency(&mut self, row: &LatencyCount) {
        *self.latency.entry(row.latency_floor_ms).or_insert(0) += row.runs;
    }

    pub(crate) fn merge(&mut self, other: &Totals) {
        for (e, n) in &other.by_ending {
            *self.by_ending.entry(*e).or_insert(0) += n;
        }
        self.runs += other.runs;
        self.partial_answers += other.partial_answers;
        self.store_failures += other.store_failures;
        self.tokens += other.tokens;
        self.cost_usd += other.cost_usd;
        for (b, n) in &other.latency {
            *self.latency.entry(*b).or_insert(0) += n;
        }
    }

    pub(crate) fn ending(&self, ending: Ending) -> u64 {
        self.by_ending.get(&ending).copied().unwrap_or(0)
    }

    /// The share of runs with `ending`, `None` without runs.
    pub(crate) fn rate(&self, ending: Ending) -> Option<f64> {
        (self.runs > 0).then(|| self.ending(ending) as f64 / self.runs as f64)
    }

    /// The latency (ms, bucket floor: two significant digits) at quantile `q`, by
    /// nearest rank.
    pub(crate) fn latency_ms(&self, q: f64) -> Option<u64> {
        let n: u64 = self.latency.values().sum();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (floor, runs) in &self.latency {
            seen += runs;
            if seen >= rank {
                return Some(*floor);
            }
        }
        None
    }
}

/// `GET /`: the overview of one agent (and variant) over a day range.
pub(crate) async fn page(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Query(params): Query<ScopeParams>,
) -> Response {
    let viewer = match gate(&app, &headers, "/") {
        Ok(v) => v,
        Err(r) => return *r,
    };
    match body(&app, &params).await {
        Ok(body) => frame("Overview", "/", &viewer, body).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn body(app: &App, params: &ScopeParams) -> Result<Markup, PageError> {
    let scope = Scope::resolve(app, params).await?;
    let Some(run_scope) = scope.run_scope() else {
        return Ok(html! { p.note { "The store has no runs yet." } });
    };
    let (overview, blobs) = tokio::join!(app.store.overview(&run_scope), app.store.blob_usage());
    let (overview, blobs) = (overview?, blobs?);
    let agent = run_scope.agent.as_str();
    let days = scope.day_labels();
    let mut per_day = vec![Totals::default(); days.len()];
    let mut per_variant: BTreeMap<Option<String>, Totals> = BTreeMap::new();
    let day_index = |day: i64| usize::try_from(day - scope.first_day).ok();
    for row in &overview.counts {
        if let Some(t) = day_index(row.day).and_then(|i| per_day.get_mut(i)) {
            t.add(row);
        }
        per_variant.entry(row.variant.clone()).or_default().add(row);
    }
    for row in &overview.latency {
        if let Some(t) = day_index(row.day).and_then(|i| per_day.get_mut(i)) {
            t.add_latency(row);
        }
        per_variant
            .entry(row.variant.clone())
            .or_default()
            .add_latency(row);
    }
    let mut all = Totals::default();
    for t in &per_day {
        all.merge(t);
    }
    let escalated_max = app.config.thresholds.escalated_for(agent);
    let stuck_max = app.config.thresholds.stuck_for(agent);

    let mut series: Vec<Series<'_, u64>> = Vec::new();
    series.push(Series {
        name: "answered",
        color: ending_color(Ending::Answered),
        values: per_day
            .iter()
            .map(|t| t.ending(Ending::Answered) - t.partial_answers.min(t.ending(Ending::Answered)))
            .collect(),
    });
    series.push(Series {
        name: "partial",
        color: "#9c6",
        values: per_day.iter().map(|t| t.partial_answers).collect(),
    });
    for ending in Ending::ALL.into_iter().skip(1) {
        series.push(Series {
            name: ending.as_str(),
            color: ending_color(ending),
            values: per_day.iter().map(|t| t.ending(ending)).collect(),
        });
    }
    let rate_series = |ending: Ending, name: &'static str, color: &'static str| Series {
        name,
        color,
        values: per_day.iter().map(|t| t.rate(ending)).collect(),
    };
    let pct = |v: f64| percent(v);
    let latency = |q: f64| -> Vec<Option<f64>> {
        per_day
            .iter()
            .map(|t| t.latency_ms(q).map(|ms| ms as f64))
            .collect()
    };
    let ms_fmt = |v: f64| format!("{v:.0} ms");

    Ok(html! {
        (scope.form("/", html! {}))
        p {
            "Agent " strong { (agent) }
            @if let Some(v) = &scope.variant { ", variant " strong { (v) } }
            ": " strong #total-runs { (count(all.runs)) } " runs from " (days.first().map_or("", String::as_str))
            " to " (days.last().map_or("", String::as_str)) " (UTC). "
            a href={ "/runs?" (scope.query()) } { "list them" } " · "
            a href={ "/turns?" (scope.query()) } { "turns" }
        }
        (pager("escalated", "the gave-up rate: the product's pager", &per_day, Ending::Escalated, escalated_max))
        (pager("stuck", "engineering's pager", &per_day, Ending::Stuck, stuck_max))
        @if all.store_failures > 0 {
            p.alert #store-failures { (count(all.store_failures)) " failed store calls in this range (metadata store_failures)." }
        } @else {
            p #store-failures { "No failed store calls in this range." }
        }
        (chart::stacked("Runs per ending per day", &days, &series))
        (ending_table(&all))
        (chart::lines("Escalated rate per day", &days, &[rate_series(Ending::Escalated, "escalated", "#36c")], Some(escalated_max), &pct))
        (chart::lines("Stuck rate per day", &days, &[rate_series(Ending::Stuck, "stuck", "#c33")], Some(stuck_max), &pct))
        (chart::bars("Cost per day (USD)", &days, &per_day.iter().map(|t| t.cost_usd).collect::<Vec<_>>(), "#a60", None, &|v| usd(v)))
        (chart::bars("Tokens per day (input + output)", &days, &per_day.iter().map(|t| t.tokens as f64).collect::<Vec<_>>(), "#468", None, &|v| format!("{v:.0}")))
        (chart::lines("Latency per day (ms, p50 and p95)", &days, &[
            Series { name: "p50", color: "#393", values: latency(0.5) },
            Series { name: "p95", color: "#c33", values: latency(0.95) },
        ], None, &ms_fmt))
        h2 { "Per variant" }
        (variant_table(&per_variant, escalated_max, stuck_max))
        p { small { "Latencies are bucket floors: durations rounded down to two significant digits, computed in the database." } }
        p #blobs { small {
            "Stored parts (images, documents, audio) of the whole store: " (count(blobs.blobs)) " blobs, "
            (count(blobs.bytes)) " bytes, each kept once however many runs, turns and threads carry it."
        } }
    })
}

/// The threshold box of one rate: the last week's rate against the threshold, and its
/// trend against the week before.
fn pager(name: &str, what: &str, per_day: &[Totals], ending: Ending, max: f64) -> Markup {
    let n = per_day.len();
    let week = |from: usize, to: usize| -> Totals {
        let mut t = Totals::default();
        for d in per_day.get(from..to).unwrap_or_default() {
            t.merge(d);
        }
        t
    };
    let k = usize::try_from(TREND_DAYS).unwrap_or(7);
    let last = week(n.saturating_sub(k), n);
    let before = week(n.saturating_sub(2 * k), n.saturating_sub(k));
    let rate = last.rate(ending);
    let trend = match (rate, before.rate(ending)) {
        (Some(now), Some(then)) if now > then => format!("up from {}", percent(then)),
        (Some(now), Some(then)) if now < then => format!("down from {}", percent(then)),
        (Some(_), Some(_)) => "unchanged".to_owned(),
        _ => "no earlier week to compare".to_owned(),
    };
    html! {
        @match rate {
            Some(r) if r > max => {
                p.alert id={ "pager-" (name) } {
                    "Over the threshold: the " (name) " rate (" (what) ") of the last 7 days is "
                    (percent(r)) ", above its threshold " (percent(max)) "; " (trend) "."
                }
            }
            Some(r) => {
                p.ok id={ "pager-" (name) } {
                    "The " (name) " rate (" (what) ") of the last 7 days is " (percent(r))
                    ", within its threshold " (percent(max)) "; " (trend) "."
                }
            }
            None => { p id={ "pager-" (name) } { "No runs in the last 7 days for the " (name) " rate." } }
        }
    }
}

fn ending_table(all: &Totals) -> Markup {
    html! {
        table #endings {
            tr { th { "ending" } th { "runs" } th { "share" } }
            @for ending in Ending::ALL {
                tr {
                    td { (ending.as_str()) }
                    td.n data-ending=(ending.as_str()) { (all.ending(ending)) }
                    td.n { (all.rate(ending).map_or("-".to_owned(), percent)) }
                }
            }
            tr { td { "of which partial answers" } td.n data-ending="partial" { (all.partial_answers) } td {} }
        }
    }
}

fn variant_table(
    per_variant: &BTreeMap<Option<String>, Totals>,
    escalated_max: f64,
    stuck_max: f64,
) -> Markup {
    let ms = |v: Option<u64>| v.map_or("-".to_owned(), |v| format!("{v} ms"));
    html! {
        table #variants {
            tr {
                th { "variant" } th { "runs" } th { "answered" } th { "partial" } th { "escalated" }
                th { "stuck" } th { "exhausted" } th { "failed" } th { "paused" } th { "cost" }
                th { "tokens" } th { "p50" } th { "p95" } th { "store failures" }
            }
            @for (variant, t) in per_variant {
                tr {
                    td { (variant.as_deref().unwrap_or("(none)")) }
                    td.n { (count(t.runs)) }
                    td.n { (count(t.ending(Ending::Answered))) }
                    td.n { (count(t.partial_answers)) }
                    td.n { (rate_cell(t.rate(Ending::Escalated), escalated_max)) }
                    td.n { (rate_cell(t.rate(Ending::Stuck), stuck_max)) }
                    td.n { (count(t.ending(Ending::Exhausted))) }
                    td.n { (count(t.ending(Ending::Failed))) }
                    td.n { (count(t.ending(Ending::Paused))) }
                    td.n { (usd(t.cost_usd)) }
                    td.n { (count(t.tokens)) }
                    td.n { (ms(t.latency_ms(0.5))) }
                    td.n { (ms(t.latency_ms(0.95))) }
                    td.n { (count(t.store_failures)) }
                }
            }
        }
    }
}

fn rate_cell(rate: Option<f64>, max: f64) -> Markup {
    match rate {
        Some(r) if r > max => {
            html! { strong style="color:#c00" { (percent(r)) " (over " (percent(max)) ")" } }
        }
        Some(r) => html! { (percent(r)) },
        None => html! { "-" },
    }
}
