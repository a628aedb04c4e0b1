//! A page that could not be made ([`PageError`]): its status and what to tell the reader,
//! from a store error or a refused request. It is rendered by `pages/layout.rs`.

use agent_core::store::StoreError;
use axum::http::StatusCode;

use crate::auth::Refusal;

/// A page that could not be made: its status and what to tell the reader.
#[derive(Debug)]
pub(crate) struct PageError {
    pub(crate) status: StatusCode,
    pub(crate) title: &'static str,
    pub(crate) message: String,
}

impl PageError {
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            title: "Bad request",
            message: message.into(),
        }
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            title: "Not found",
            message: message.into(),
        }
    }
}

impl From<StoreError> for PageError {
    fn from(error: StoreError) -> Self {
        let (status, title) = match &error {
            StoreError::Unavailable { .. } | StoreError::Timeout { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "The store is unavailable")
            }
            StoreError::NotFound { .. } => (StatusCode::NOT_FOUND, "Not found"),
            StoreError::Invalid { .. } => (StatusCode::BAD_REQUEST, "Bad request"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "The store failed"),
        };
        let hint = if status == StatusCode::SERVICE_UNAVAILABLE {
            " The dashboard keeps running: reload this page when the store is back."
        } else {
            ""
        };
        Self {
            status,
            title,
            message: format!("{error}.{hint}"),
        }
    }
}

impl From<Refusal> for PageError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Login => Self {
                status: StatusCode::UNAUTHORIZED,
                title: "Log in first",
                message: "this dashboard needs its token: log in at /login".to_owned(),
            },
            Refusal::ReadOnly => Self {
                status: StatusCode::FORBIDDEN,
                title: "Read-only",
                message: "this dashboard is read-only: start it with --token (and without \
                          --read-only) to write feedback and decisions"
                    .to_owned(),
            },
            Refusal::Forbidden(why) => Self {
                status: StatusCode::FORBIDDEN,
                title: "Refused",
                message: why.to_owned(),
            },
        }
    }
}
