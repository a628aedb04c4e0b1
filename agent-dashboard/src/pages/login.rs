//! `/login` (the token, once per browser), `POST /logout`.

use axum::Form;
use axum::extract::Query;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use super::layout::frame;
use super::scope::encode;
use crate::app::{App, State};
use crate::auth::{COOKIE_NAME, Refusal, Viewer};
use crate::page_error::PageError;

/// Where to go after logging in (a path on this server only).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Next {
    next: Option<String>,
}

/// The viewer of a GET, or a redirect to the login page.
pub(crate) fn gate(app: &App, headers: &HeaderMap, here: &str) -> Result<Viewer, Box<Response>> {
    match app.auth.viewer(headers) {
        Ok(viewer) => Ok(viewer),
        Err(Refusal::Login) => {
            let next = encode(here);
            Err(Box::new(
                Redirect::to(&format!("/login?next={next}")).into_response(),
            ))
        }
        Err(other) => Err(Box::new(PageError::from(other).into_response())),
    }
}

/// A local path (`/...`, not `//host`), else `/`.
fn local(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_owned(),
        _ => "/".to_owned(),
    }
}

/// `GET /login`.
pub(crate) async fn form(axum::extract::State(app): State, Query(next): Query<Next>) -> Response {
    let body = if app.auth.locked() {
        html! {
            form #login method="post" action="/login" {
                input type="hidden" name="next" value=(local(next.next.as_deref()));
                label { "token " input type="password" name="token" autocomplete="current-password"; }
                button type="submit" { "log in" }
            }
            p { "The token was set when the dashboard started (--token or AGENT_DASHBOARD_TOKEN)." }
        }
    } else {
        html! { p.note { "This dashboard has no token: it is read-only and open on loopback." } }
    };
    frame("Log in", "", &Viewer::default(), body).into_response()
}

/// The login form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct LoginForm {
    token: String,
    #[serde(default)]
    next: String,
}

/// `POST /login`: a session cookie for the right token.
pub(crate) async fn submit(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    match app.auth.login(&headers, &form.token) {
        Ok(id) => {
            let mut response = Redirect::to(&local(Some(&form.next))).into_response();
            let cookie = format!("{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/");
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(refusal) => PageError::from(refusal).into_response(),
    }
}

/// The logout form's field.
#[derive(Debug, Deserialize)]
pub(crate) struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /logout`.
pub(crate) async fn logout(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    if app.auth.check_write(&headers, &form.csrf).is_ok() {
        app.auth.logout(&headers);
    }
    let mut response = Redirect::to("/login").into_response();
    let cookie = format!("{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
