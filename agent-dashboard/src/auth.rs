//! The token, sessions and CSRF checks.
//!
//! The token is entered once on `/login`; the server answers with a random session id
//! (32 bytes from the OS, hex) in an `HttpOnly; SameSite=Strict` cookie and keeps, per
//! session, a random CSRF token that every form carries in a hidden field. A POST must
//! have a live session, the session's CSRF token, and no `Origin` header naming
//! another site. The token never leaves the server.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::HeaderMap;
use axum::http::header::{COOKIE, HOST, ORIGIN};

use crate::dates::now_ms;

/// The session cookie's name.
pub(crate) const COOKIE_NAME: &str = "agent_dashboard_session";

/// How long a session lives (12 hours, in ms).
const SESSION_MS: u64 = 12 * 3_600_000;

/// The most sessions kept; the oldest goes first.
const MAX_SESSIONS: usize = 1024;

/// One logged-in browser.
#[derive(Clone, Debug)]
struct Session {
    csrf: String,
    created_ms: u64,
}

/// Who is looking at a page: whether the pages are open, and the CSRF token its forms
/// carry (`None`: the page shows no write forms).
#[derive(Clone, Debug, Default)]
pub(crate) struct Viewer {
    /// The CSRF token for forms, when this viewer may write.
    pub(crate) csrf: Option<String>,
}

/// Why a request is refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not logged in (a token is set): go to `/login`.
    Login,
    /// Writes are off (no token, or `--read-only`).
    ReadOnly,
    /// A POST without the session's CSRF token, or from another origin.
    Forbidden(&'static str),
}

/// The token and the sessions.
#[derive(Debug)]
pub(crate) struct Auth {
    token: Option<String>,
    writes: bool,
    sessions: Mutex<HashMap<String, Session>>,
}

/// `n` random bytes from the OS as hex.
pub(crate) fn random_hex(n: usize) -> Option<String> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_owned())
}

impl Auth {
    pub(crate) fn new(token: Option<String>, writes: bool) -> Self {
        Self {
            token,
            writes,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Whether pages need a login.
    pub(crate) fn locked(&self) -> bool {
        self.token.is_some()
    }

    fn session(&self, headers: &HeaderMap) -> Option<Session> {
        let id = cookie_value(headers)?;
        let sessions = self.sessions.lock().ok()?;
        sessions
            .get(&id)
            .filter(|s| now_ms().saturating_sub(s.created_ms) < SESSION_MS)
            .cloned()
    }

    /// The viewer of a GET: refused with [`Refusal::Login`] when a token is set and
    /// the request has no live session.
    pub(crate) fn viewer(&self, headers: &HeaderMap) -> Result<Viewer, Refusal> {
        if self.token.is_none() {
            return Ok(Viewer::default());
        }
        let session = self.session(headers).ok_or(Refusal::Login)?;
        Ok(Viewer {
            csrf: self.writes.then_some(session.csrf),
        })
    }

    /// A write (POST): needs writes on, a live session, its CSRF token in `csrf`, and
    /// an `Origin` (when the browser sends one) equal to this server's.
    pub(crate) fn check_write(&self, headers: &HeaderMap, csrf: &str) -> Result<(), Refusal> {
        if !self.writes {
            return Err(Refusal::ReadOnly);
        }
        check_origin(headers)?;
        let session = self.session(headers).ok_or(Refusal::Login)?;
        if same(&session.csrf, csrf) {
            Ok(())
        } else {
            Err(Refusal::Forbidden(
                "the form's CSRF token is missing or stale: reload the page and send it again",
            ))
        }
    }

    /// A login attempt: a new session id when `attempt` is the token.
    pub(crate) fn login(&self, headers: &HeaderMap, attempt: &str) -> Result<String, Refusal> {
        check_origin(headers)?;
        let Some(token) = &self.token else {
            return Err(Refusal::ReadOnly);
        };
        if !same(token, attempt) {
            return Err(Refusal::Forbidden("that is not the dashboard's token"));
        }
        let (Some(id), Some(csrf)) = (random_hex(32), random_hex(32)) else {
            return Err(Refusal::Forbidden("the system's random source failed"));
        };
        let now = now_ms();
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.retain(|_, s| now.saturating_sub(s.created_ms) < SESSION_MS);
            if sessions.len() >= MAX_SESSIONS
                && let Some(oldest) = sessions
                    .iter()
                    .min_by_key(|(_, s)| s.created_ms)
                    .map(|(k, _)| k.clone())
            {
                sessions.remove(&oldest);
            }
            sessions.insert(
                id.clone(),
                Session {
                    csrf,
                    created_ms: now,
                },
            );
        }
        Ok(id)
    }

    /// Ends the request's session.
    pub(crate) fn logout(&self, headers: &HeaderMap) {
        if let (Some(id), Ok(mut sessions)) = (cookie_value(headers), self.sessions.lock()) {
            sessions.remove(&id);
        }
    }
}

/// A browser's `Origin` must name the host the request went to.
fn check_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(origin) = headers.get(ORIGIN).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let host = headers
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    if !host.is_empty() && origin_host == host {
        Ok(())
    } else {
        Err(Refusal::Forbidden("a form posted from another site"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn writes_need_the_session_csrf_and_origin() {
        let auth = Auth::new(Some("s3cret".into()), true);
        let mut headers = HeaderMap::new();
        assert_eq!(auth.viewer(&headers).unwrap_err(), Refusal::Login);
        assert!(matches!(
            auth.login(&headers, "nope"),
            Err(Refusal::Forbidden(_))
        ));
        let id = auth.login(&headers, "s3cret").unwrap();
        headers.insert(
            COOKIE,
            HeaderValue::from_str(&format!("{COOKIE_NAME}={id}")).unwrap(),
        );
        let csrf = auth.viewer(&headers).unwrap().csrf.unwrap();
        assert!(matches!(
            auth.check_write(&headers, "x"),
            Err(Refusal::Forbidden(_))
        ));
        assert_eq!(auth.check_write(&headers, &csrf), Ok(()));
        headers.insert(HOST, HeaderValue::from_static("127.0.0.1:8080"));
        headers.insert(ORIGIN, HeaderValue::from_static("http://evil.example"));
        assert!(matches!(
            auth.check_write(&headers, &csrf),
            Err(Refusal::Forbidden(_))
        ));
        headers.insert(ORIGIN, HeaderValue::from_static("http://127.0.0.1:8080"));
        assert_eq!(auth.check_write(&headers, &csrf), Ok(()));
        let read_only = Auth::new(Some("s3cret".into()), false);
        assert_eq!(
            read_only.check_write(&headers, &csrf),
            Err(Refusal::ReadOnly)
        );
    }
}
