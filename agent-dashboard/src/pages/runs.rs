//! The list of runs: filtered by agent, variant, ending, category, thread, days and
//! text, paged on the server (newest first, keyset paging).

use agent_core::Ending;
use agent_store::{PageCursor, RunFilter};
use axum::extract::Query;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{frame, usd};
use super::login::gate;
use super::scope::encode;
use crate::app::{App, State};
use crate::dates::{day_start_ms, format_ms, parse_day};
use crate::page_error::PageError;

/// The query string; empty values are absent. `after` is `MS.TRACE_ID` from the
/// previous page's "next" link.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RunParams {
    agent: Option<String>,
    variant: Option<String>,
    ending: Option<String>,
    category: Option<String>,
    thread: Option<String>,
    from: Option<String>,
    to: Option<String>,
    q: Option<String>,
    after: Option<String>,
    limit: Option<String>,
}

fn given(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

impl RunParams {
    fn filter(&self) -> Result<RunFilter, PageError> {
        let mut f = RunFilter::new();
        f.agent = given(&self.agent);
        f.variant = given(&self.variant);
        f.category = given(&self.category);
        f.thread = given(&self.thread);
        f.text = given(&self.q);
        if let Some(e) = given(&self.ending) {
            f.ending = Some(Ending::ALL.into_iter().find(|x| x.as_str() == e).ok_or_else(|| {
                PageError::bad_request(format!(
                    "ending: {e:?} is not one of answered, escalated, exhausted, stuck, failed, paused"
                ))
            })?);
        }
        if let Some(d) = given(&self.from) {
            let day = parse_day(&d).map_err(|e| PageError::bad_request(format!("from: {e}")))?;
            f.from_ms = Some(day_start_ms(day));
        }
        if let Some(d) = given(&self.to) {
            let day = parse_day(&d).map_err(|e| PageError::bad_request(format!("to: {e}")))?;
            f.to_ms = Some(day_start_ms(day + 1));
        }
        if let Some(a) = given(&self.after) {
            let bad = || PageError::bad_request(format!("after: {a:?} is not MS.TRACE_ID"));
            let (ms, id) = a.split_once('.').ok_or_else(bad)?;
            let ms: u64 = ms.parse().map_err(|_| bad())?;
            f.after = Some(PageCursor::new(ms, id));
        }
        if let Some(l) = given(&self.limit) {
            f.limit = l
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=500).contains(n))
                .ok_or_else(|| PageError::bad_request("limit: a number from 1 to 500"))?;
        }
        Ok(f)
    }

    /// The query string without `after` (for the next page's link).
    fn query(&self) -> String {
        [
            ("agent", &self.agent),
            ("variant", &self.variant),
            ("ending", &self.ending),
            ("category", &self.category),
            ("thread", &self.thread),
            ("from", &self.from),
            ("to", &self.to),
            ("q", &self.q),
            ("limit", &self.limit),
        ]
        .iter()
        .filter_map(|(k, v)| given(v).map(|v| format!("{k}={}", encode(&v))))
        .collect::<Vec<_>>()
        .join("&")
    }
}

/// `GET /runs`.
pub(crate) async fn page(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Query(params): Query<RunParams>,
) -> Response {
    let viewer = match gate(&app, &headers, "/runs") {
        Ok(v) => v,
        Err(r) => return *r,
    };
    match body(&app, &params).await {
        Ok(body) => frame("Runs", "/runs", &viewer, body).into_response(),
        Err(e) => e.into_response(),
    }
}

fn text_input(name: &str, label: &str, value: &Option<String>, size: u32) -> Markup {
    html! { label { (label) " " input name=(name) size=(size) value=(value.as_deref().unwrap_or("")); } }
}

/// The first `max` characters of `text` on one line.
pub(crate) fn snippet(text: &str, max: usize) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max).collect();
        format!("{cut}…")
    } else {
        line
    }
}

async fn body(app: &App, params: &RunParams) -> Result<Markup, PageError> {
    let filter = params.filter()?;
    let runs_page = app.store.runs_page(&filter).await?;
    let ending = given(&params.ending);
    Ok(html! {
        form method="get" action="/runs" {
            (text_input("agent", "agent", &params.agent, 12))
            (text_input("variant", "variant", &params.variant, 8))
            label { "ending "
                select name="ending" {
                    option value="" { "any" }
                    @for e in Ending::ALL {
                        option value=(e.as_str()) selected[ending.as_deref() == Some(e.as_str())] { (e.as_str()) }
                    }
                }
            }
            (text_input("category", "category", &params.category, 14))
            (text_input("thread", "thread", &params.thread, 10))
            (text_input("from", "from", &params.from, 10))
            (text_input("to", "to", &params.to, 10))
            (text_input("q", "text", &params.q, 14))
            button type="submit" { "filter" }
        }
        @if runs_page.runs.is_empty() {
            p.note #no-runs { "No runs match." }
        } @else {
            table #runs {
                tr {
                    th { "started (UTC)" } th { "agent" } th { "variant" } th { "ending" } th { "category" }
                    th { "thread" } th { "LLM calls" } th { "ms" } th { "cost" } th { "input" } th { "feedback" }
                }
                @for run in &runs_page.runs {
                    tr.run data-trace-id=(run.trace_id) {
                        td { a href={ "/runs/" (encode(&run.trace_id)) } { (format_ms(run.started_at_ms)) } }
                        td { (run.agent) }
                        td { (run.variant.as_deref().unwrap_or("")) }
                        td { (run.ending.as_str()) }
                        td { (run.category.as_deref().unwrap_or("")) }
                        td { (run.thread.as_deref().unwrap_or("")) }
                        td.n { (run.usage.llm_calls) }
                        td.n { (run.duration_ms) }
                        td.n { (run.usage.cost_usd.map(usd).unwrap_or_default()) }
                        td { (snippet(&run.input, 80)) }
                        td { (run.feedback.as_ref().and_then(|f| f.rating).map(|r| r.to_string()).unwrap_or_default()) }
                    }
                }
            }
        }
        @if let Some(next) = &runs_page.next {
            p { a #next href={ "/runs?" (params.query()) "&after=" (next.started_at_ms) "." (encode(&next.trace_id)) } { "next page (older runs)" } }
        }
    })
}
