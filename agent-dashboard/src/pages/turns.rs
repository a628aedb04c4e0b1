//! Round trips per run: the histogram of the answered runs, the runs that hit the cap,
//! and the suggested `max_llm_calls` (agent-core's `TurnStats` rule, from counts the
//! database grouped).

use agent_core::{Ending, eval::TurnStats};
use axum::extract::Query;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{count, frame};
use super::login::gate;
use super::scope::{Scope, ScopeParams};
use crate::app::{App, State};
use crate::chart;
use crate::page_error::PageError;

/// The query string: the scope, and `cap`, the runs' `max_llm_calls` when known.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct TurnParams {
    #[serde(flatten)]
    scope: ScopeParams,
    cap: Option<String>,
}

/// `GET /turns`.
pub(crate) async fn page(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Query(params): Query<TurnParams>,
) -> Response {
    let viewer = match gate(&app, &headers, "/turns") {
        Ok(v) => v,
        Err(r) => return *r,
    };
    match body(&app, &params).await {
        Ok(body) => frame("Turns", "/turns", &viewer, body).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn body(app: &App, params: &TurnParams) -> Result<Markup, PageError> {
    let cap = match params
        .cap
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        Some(c) => Some(c.parse::<u32>().map_err(|_| {
            PageError::bad_request(format!("cap: {c:?} is not a whole number of LLM calls"))
        })?),
        None => None,
    };
    let scope = Scope::resolve(app, &params.scope).await?;
    let Some(run_scope) = scope.run_scope() else {
        return Ok(html! { p.note { "The store has no runs yet." } });
    };
    let counts = app.store.turn_counts(&run_scope).await?;
    let stats = TurnStats::from_counts(
        counts.iter().map(|c| {
            (
                c.ending,
                c.llm_calls,
                c.max_llm_calls_category,
                usize::try_from(c.runs).unwrap_or(usize::MAX),
            )
        }),
        cap,
    );
    let answered = stats.histogram.get(&Ending::Answered);
    let top = answered
        .and_then(|h| h.keys().next_back().copied())
        .unwrap_or(0)
        .max(stats.suggested_max_llm_calls.unwrap_or(0));
    let labels: Vec<String> = (1..=top.max(1)).map(|c| c.to_string()).collect();
    let values: Vec<f64> = (1..=top.max(1))
        .map(|c| stats.count(Ending::Answered, c) as f64)
        .collect();
    let marked = stats
        .answered_p95
        .and_then(|p| usize::try_from(p).ok())
        .and_then(|p| p.checked_sub(1));
    Ok(html! {
        (scope.form("/turns", html! {
            label { "cap (max_llm_calls, if known) " input name="cap" size="4" value=(cap.map(|c| c.to_string()).unwrap_or_default()); }
        }))
        p #suggestion {
            @match (stats.suggested_max_llm_calls, stats.answered_p95) {
                (Some(s), Some(p)) => {
                    "Suggested max_llm_calls: " strong #suggested { (s) }
                    " (the answered runs' p95 is " (p) " round trips, plus one for the wrap-up turn)."
                    @if let Some(c) = cap { @if s > c { " That is above the cap " (c) ": raise it and run again." } }
                }
                _ => { "No answered runs: no suggestion." }
            }
        }
        p { "Runs that hit the cap: " strong #hit-cap { (count(stats.hit_cap as u64)) }
            @if cap.is_none() { " (ended with category max_llm_calls; give the cap to count answers in the wrap-up turn too)" } }
        (chart::bars("Round trips per answered run (runs)", &labels, &values, "#393", marked, &|v| format!("{v:.0}")))
        h2 { "LLM calls x runs, per ending" }
        table #turns {
            tr { th { "ending" } th { "LLM calls x runs" } }
            @for (ending, line) in stats.histogram_lines() {
                tr { td { (ending.as_str()) } td { (line) } }
            }
        }
    })
}
