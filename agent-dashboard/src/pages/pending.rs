//! Paused runs waiting for decisions (`paused_runs`), with forms that record approve,
//! deny and edit decisions (`record_decisions`). The dashboard has no agent configs:
//! the run goes on when a process with the config resumes it.

use agent_core::durable::{Decisions, paused_runs, record_decisions};
use axum::Form;
use axum::extract::Path;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::frame;
use super::login::gate;
use super::scope::encode;
use crate::app::{App, State};
use crate::auth::Viewer;
use crate::dates::format_ms;
use crate::page_error::PageError;

/// The most paused runs listed.
const LIMIT: usize = 200;

/// `GET /pending`.
pub(crate) async fn page(axum::extract::State(app): State, headers: HeaderMap) -> Response {
    let viewer = match gate(&app, &headers, "/pending") {
        Ok(v) => v,
        Err(r) => return *r,
    };
    match body(&app, &viewer).await {
        Ok(body) => frame("Pending approvals", "/pending", &viewer, body).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn body(app: &App, viewer: &Viewer) -> Result<Markup, PageError> {
    let runs = paused_runs(&app.store, LIMIT).await?;
    Ok(html! {
        p.note {
            "Decisions recorded here are kept in the run's checkpoint; the dashboard has no agent configs, so "
            strong { "the run continues when a process with its config resumes it" } ": "
            code { "cargo run --example runs -- --store STORE resume RUN_ID" }
            " (the runs CLI), or " code { "agent-worker --resume RUN_ID" } " for queued jobs."
        }
        @if runs.is_empty() { p #no-pending { "No paused runs." } }
        @for run in &runs {
            section.paused data-run-id=(run.run_id) {
                h2 { (run.agent) " · " code { (run.run_id) } }
                p { "paused or last decided " (format_ms(run.updated_at_ms)) " UTC" }
                pre { (run.input) }
                table {
                    tr { th { "call" } th { "tool" } th { "arguments" } th { "why" } th { "decision" } }
                    @for call in &run.pending {
                        tr {
                            td { code { (call.call_id) } }
                            td { code { (call.tool) } }
                            td { pre { (serde_json::to_string_pretty(&call.arguments).unwrap_or_default()) } }
                            td { (call.reason.as_str()) }
                            td {
                                @match run.decided.get(&call.call_id) {
                                    Some(d) => { strong { (d.as_str()) } " recorded" }
                                    None => { "waiting" }
                                }
                                @if let Some(csrf) = &viewer.csrf {
                                    (forms(&run.run_id, &call.call_id, &call.arguments, csrf))
                                }
                            }
                        }
                    }
                }
            }
        }
        @if viewer.csrf.is_none() && !runs.is_empty() {
            p.note { "Read-only: start the dashboard with --token and log in to record decisions." }
        }
    })
}

fn forms(run_id: &str, call_id: &str, arguments: &serde_json::Value, csrf: &str) -> Markup {
    let action = format!("/pending/{}", encode(run_id));
    html! {
        form.decide method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="call_id" value=(call_id);
            input type="hidden" name="action" value="approve";
            button type="submit" { "approve" }
        }
        form.decide method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="call_id" value=(call_id);
            input type="hidden" name="action" value="deny";
            input name="reason" placeholder="reason (the model is told)" size="24";
            button type="submit" { "deny" }
        }
        form.decide method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="call_id" value=(call_id);
            input type="hidden" name="action" value="edit";
            textarea name="arguments" rows="3" cols="40" { (serde_json::to_string(arguments).unwrap_or_default()) }
            button type="submit" { "edit and approve" }
        }
    }
}

/// A decision form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct DecisionForm {
    csrf: String,
    call_id: String,
    action: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    arguments: String,
}

async fn decide_inner(
    app: &App,
    headers: &HeaderMap,
    run_id: &str,
    form: &DecisionForm,
) -> Result<Response, PageError> {
    app.auth.check_write(headers, &form.csrf)?;
    let call = form.call_id.as_str();
    let decisions = match form.action.as_str() {
        "approve" => Decisions::new().approve(call),
        "deny" => {
            let reason = form.reason.trim();
            if reason.is_empty() {
                return Err(PageError::bad_request(
                    "deny needs a reason (the model is told it)",
                ));
            }
            Decisions::new().deny(call, reason)
        }
        "edit" => {
            let args = serde_json::from_str(&form.arguments).map_err(|e| {
                PageError::bad_request(format!("the edited arguments are not JSON: {e}"))
            })?;
            Decisions::new().edit(call, args)
        }
        other => {
            return Err(PageError::bad_request(format!(
                "action {other:?}: use approve, deny or edit"
            )));
        }
    };
    record_decisions(&app.store, run_id, decisions)
        .await
        .map_err(|e| PageError::bad_request(format!("not recorded: {e}")))?;
    Ok(Redirect::to("/pending").into_response())
}

/// `POST /pending/{run_id}`: records one decision, then shows the list again.
pub(crate) async fn decide(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Path(run_id): Path<String>,
    Form(form): Form<DecisionForm>,
) -> Response {
    match decide_inner(&app, &headers, &run_id, &form).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}
