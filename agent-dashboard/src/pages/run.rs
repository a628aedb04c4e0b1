//! One run: its record (ending, category, usage, cost, metadata), its transcript from
//! the trace store (each tool call with its arguments, outcome and duration; images as
//! thumbnails from the store, documents and audio as links: see `blobs.rs`), the trace
//! id, and the feedback form.

use std::collections::{BTreeMap, HashMap};

use agent_core::llm::Message;
use agent_core::store::{Feedback, FeedbackStore, RunRecord, TraceEvent, TraceRecord, TraceStore};
use axum::Form;
use axum::extract::{Path, Query};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::blobs::{parts, without_bytes};
use super::layout::{count, frame, usd};
use super::login::gate;
use super::scope::encode;
use crate::app::{App, State};
use crate::auth::Viewer;
use crate::dates::format_ms;
use crate::page_error::PageError;

/// Metadata keys whose values are never shown (parts of a lower-cased key).
const SECRET_KEYS: [&str; 7] = [
    "key",
    "token",
    "secret",
    "password",
    "authorization",
    "cookie",
    "credential",
];

/// A metadata value as shown: `<redacted>` when its key looks secret.
pub(crate) fn shown_value<'a>(key: &str, value: &'a str) -> &'a str {
    let key = key.to_ascii_lowercase();
    if SECRET_KEYS.iter().any(|s| key.contains(s)) {
        "<redacted>"
    } else {
        value
    }
}

/// `?saved=1` after a feedback POST.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Saved {
    saved: Option<String>,
}

/// `GET /runs/{id}`.
pub(crate) async fn page(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(saved): Query<Saved>,
) -> Response {
    let here = format!("/runs/{}", encode(&id));
    let viewer = match gate(&app, &headers, &here) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    match body(&app, &viewer, &id, saved.saved.is_some()).await {
        Ok(body) => frame(&format!("Run {id}"), "/runs", &viewer, body).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn body(app: &App, viewer: &Viewer, id: &str, saved: bool) -> Result<Markup, PageError> {
    if id.is_empty() || id.len() > 128 || id.contains('\0') {
        return Err(PageError::bad_request("a run id is 1 to 128 characters"));
    }
    let (record, trace) = tokio::join!(app.store.run(id), app.store.trace(id));
    let (record, trace) = (record?, trace?);
    if record.is_none() && trace.is_none() {
        return Err(PageError::not_found(format!("no run {id} in the store")));
    }
    Ok(html! {
        @if saved { p.ok #saved { "Feedback saved." } }
        (summary(app, id, record.as_ref(), trace.as_ref()))
        @if let Some(r) = &record { (handover(r)) }
        h2 { "Input" }
        pre #input { (record.as_ref().map(|r| r.input.as_str()).or(trace.as_ref().map(|t| t.input.as_str())).unwrap_or("")) }
        h2 { "Output" }
        pre #output { (pretty(record.as_ref().map(|r| &r.output).or(trace.as_ref().map(|t| &t.output)))) }
        h2 { "Transcript" }
        @match &trace {
            Some(t) => (transcript(t)),
            None => p.note { "No trace is stored for this run (the config had no trace store)." },
        }
        @if let Some(r) = &record { (feedback_section(viewer, r)) }
    })
}

fn pretty(value: Option<&serde_json::Value>) -> String {
    match value {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => serde_json::to_string_pretty(&without_bytes(v)).unwrap_or_default(),
        None => String::new(),
    }
}

fn summary(app: &App, id: &str, record: Option<&RunRecord>, trace: Option<&TraceRecord>) -> Markup {
    let link = app
        .config
        .trace_url
        .as_deref()
        .map(|t| t.replace("{trace_id}", &encode(id)));
    let (
        agent,
        variant,
        model,
        ending,
        category,
        error,
        thread,
        started,
        duration,
        usage,
        metadata,
    ) = match (record, trace) {
        (Some(r), _) => (
            &r.agent,
            &r.variant,
            &r.model,
            r.ending,
            &r.category,
            &r.error,
            &r.thread,
            r.started_at_ms,
            r.duration_ms,
            &r.usage,
            &r.metadata,
        ),
        (None, Some(t)) => (
            &t.agent,
            &t.variant,
            &t.model,
            t.ending,
            &t.category,
            &t.error,
            &t.thread,
            t.started_at_ms,
            t.duration_ms,
            &t.usage,
            &t.metadata,
        ),
        (None, None) => return html! {},
    };
    html! {
        table #summary {
            tr { th { "trace id" } td #trace-id {
                @if let Some(href) = &link { a href=(href) rel="noreferrer" { (id) } } @else { (id) }
            } }
            tr { th { "agent" } td { (agent) @if let Some(v) = variant { " (variant " (v) ")" } } }
            tr { th { "model" } td { (model) } }
            tr { th { "ending" } td #ending { (ending.as_str()) } }
            tr { th { "category" } td #category { (category.as_deref().unwrap_or("-")) } }
            @if let Some(e) = error { tr { th { "error" } td #error { (e) } } }
            @if let Some(t) = thread { tr { th { "thread" } td { a href={ "/runs?thread=" (encode(t)) } { (t) } } } }
            tr { th { "started (UTC)" } td { (format_ms(started)) } }
            tr { th { "duration" } td { (duration) " ms" } }
            tr { th { "usage" } td #usage {
                (usage.llm_calls) " LLM calls, " (usage.tool_calls) " tool calls, "
                (count(usage.input_tokens)) " input + " (count(usage.output_tokens)) " output tokens"
                @if usage.cache_read_tokens > 0 { ", " (count(usage.cache_read_tokens)) " cache reads" }
            } }
            tr { th { "cost" } td #cost { (usage.cost_usd.map(usd).unwrap_or_else(|| "not priced".to_owned())) } }
            @for (k, v) in metadata {
                tr { th { "metadata " (k) } td { (shown_value(k, v)) } }
            }
        }
    }
}

/// The hand-over brief and the customer message: stored records do not hold them, so
/// they are shown from the run's metadata (`handover`, `customer_message`) when the
/// application put them there.
fn handover(record: &RunRecord) -> Markup {
    let brief = record.metadata.get("handover");
    let customer = record.metadata.get("customer_message");
    html! {
        h2 { "Hand-over" }
        @match brief {
            Some(b) => pre #handover { (b) },
            None => p #handover {
                @if record.error.is_some() {
                    "No hand-over brief stored (the record has the error above; an application that wants the brief here puts it in the run's metadata as handover)."
                } @else { "None: the run answered." }
            },
        }
        h2 { "Customer message" }
        @match customer {
            Some(c) => pre #customer-message { (c) },
            None => p #customer-message { "None stored (metadata customer_message)." },
        }
    }
}

fn transcript(trace: &TraceRecord) -> Markup {
    let mut finished: HashMap<&str, (bool, u64)> = HashMap::new();
    let mut others: Vec<String> = Vec::new();
    for event in &trace.events {
        match event {
            TraceEvent::ToolFinished {
                call_id,
                is_error,
                duration_ms,
                ..
            } => {
                finished.insert(call_id.as_str(), (*is_error, *duration_ms));
            }
            TraceEvent::TurnStarted { .. } => {}
            other => others.push(
                serde_json::to_value(other)
                    .map(|v| without_bytes(&v).to_string())
                    .unwrap_or_default(),
            ),
        }
    }
    let mut results: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
    for m in &trace.transcript {
        if let Message::Tool { results: rs } = m {
            for r in rs {
                results.insert(r.call_id.as_str(), (r.content.as_str(), r.is_error));
            }
        }
    }
    html! {
        @if !trace.history.is_empty() {
            p { (trace.history.len()) " messages came before the input (thread or history); not shown." }
        }
        div #transcript {
            @for m in &trace.transcript {
                @match m {
                    Message::User { content, parts: ps } => div.msg.user {
                        strong { "user" }
                        @if !content.is_empty() || ps.is_empty() { pre { (content) } }
                        (parts(ps))
                    },
                    Message::Assistant { text, tool_calls, reasoning } => div.msg.assistant {
                        strong { "assistant" }
                        @if !reasoning.is_empty() { details.reasoning { summary { "reasoning" } pre { (reasoning) } } }
                        @if !text.is_empty() { pre { (text) } }
                        @for call in tool_calls {
                            div.call data-call-id=(call.id) {
                                "call " code { (call.name) } " (" (call.id) ")"
                                pre.args { (serde_json::to_string_pretty(&call.arguments).unwrap_or_default()) }
                                @if let Some(e) = &call.arguments_error { p.alert { "arguments: " (e) } }
                                @match (results.get(call.id.as_str()), finished.get(call.id.as_str())) {
                                    (_, Some((is_error, ms))) => p.outcome { (if *is_error { "failed" } else { "ran" }) " in " (ms) " ms" },
                                    (Some(_), None) => p.outcome { "answered by the runner (not run as a tool)" },
                                    (None, None) => p.outcome { "no result" },
                                }
                            }
                        }
                    },
                    Message::Tool { results: rs } => div.msg.tool {
                        @for r in rs {
                            strong { "result of " code { (r.name) } " (" (r.call_id) ")" @if r.is_error { " error" } }
                            pre { (r.content) }
                            (parts(&r.parts))
                        }
                    },
                    Message::Paused { text, .. } => div.msg.assistant { strong { "assistant (paused turn)" } pre { (text) } },
                    _ => div.msg { "(a message of a newer kind)" },
                }
            }
        }
        @if !others.is_empty() {
            h3 { "Events" }
            @for e in &others { pre { (e) } }
        }
    }
}

fn feedback_section(viewer: &Viewer, record: &RunRecord) -> Markup {
    html! {
        h2 { "Feedback" }
        @if let Some(f) = &record.feedback {
            table #feedback {
                tr { th { "rating" } td #rating { (f.rating.map(|r| r.to_string()).unwrap_or_default()) } }
                tr { th { "corrected output" } td { pre #corrected { (pretty(f.corrected_output.as_ref())) } } }
                tr { th { "note" } td { (f.note.as_deref().unwrap_or("")) } }
                tr { th { "given (UTC)" } td { (format_ms(f.given_at_ms)) } }
            }
        } @else {
            p { "No feedback yet." }
        }
        @match &viewer.csrf {
            Some(csrf) => {
                form #feedback-form method="post" action={ "/runs/" (encode(&record.trace_id)) "/feedback" } {
                    input type="hidden" name="csrf" value=(csrf);
                    p { label { "rating " input name="rating" size="4" placeholder="-1, 1 or 1-5"; } }
                    p { label { "corrected output (JSON; other text is stored as a JSON string)" br;
                        textarea name="corrected_output" rows="5" cols="80" {} } }
                    p { label { "note " input name="note" size="60"; } }
                    button type="submit" { "save feedback" }
                }
            }
            None => p.note { "Read-only: start the dashboard with --token and log in to attach feedback." },
        }
    }
}

/// The feedback form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct FeedbackForm {
    csrf: String,
    #[serde(default)]
    rating: String,
    #[serde(default)]
    corrected_output: String,
    #[serde(default)]
    note: String,
}

/// `POST /runs/{id}/feedback`: writes the feedback, then shows the run again.
pub(crate) async fn feedback_post(
    app: &App,
    headers: &HeaderMap,
    id: &str,
    form: &FeedbackForm,
) -> Result<Response, PageError> {
    app.auth.check_write(headers, &form.csrf)?;
    let mut fb = Feedback::new();
    let rating = form.rating.trim();
    if !rating.is_empty() {
        let r: i32 = rating.parse().map_err(|_| {
            PageError::bad_request(format!("rating: {rating:?} is not a whole number"))
        })?;
        fb = fb.rating(r);
    }
    let corrected = form.corrected_output.trim();
    if !corrected.is_empty() {
        let value = serde_json::from_str(corrected)
            .unwrap_or_else(|_| serde_json::Value::String(corrected.to_owned()));
        fb = fb.corrected_output(value);
    }
    let note = form.note.trim();
    if !note.is_empty() {
        fb = fb.note(note);
    }
    app.store.attach_feedback(id, &fb).await?;
    Ok(Redirect::to(&format!("/runs/{}?saved=1", encode(id))).into_response())
}

/// The route of [`feedback_post`].
pub(crate) async fn feedback(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<FeedbackForm>,
) -> Response {
    match feedback_post(&app, &headers, &id, &form).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}
