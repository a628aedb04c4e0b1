//! The routes, the shared state, errors as pages, and the listener.

use std::sync::Arc;

use agent_core::StoreError;
use agent_store::{Store, StoreOptions};
use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::auth::{Auth, Refusal, Viewer};
use crate::cli::{Config, ConfigError};
use crate::pages;

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) store: Store,
    pub(crate) config: Config,
    pub(crate) auth: Auth,
}

pub(crate) type State = axum::extract::State<Arc<App>>;

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

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = pages::layout::error_page(self.title, &self.message);
        (self.status, body).into_response()
    }
}

/// The viewer of a GET, or a redirect to the login page.
pub(crate) fn gate(app: &App, headers: &HeaderMap, here: &str) -> Result<Viewer, Box<Response>> {
    match app.auth.viewer(headers) {
        Ok(viewer) => Ok(viewer),
        Err(Refusal::Login) => {
            let next = pages::login::encode_next(here);
            Err(Box::new(
                Redirect::to(&format!("/login?next={next}")).into_response(),
            ))
        }
        Err(other) => Err(Box::new(PageError::from(other).into_response())),
    }
}

/// Security headers on every response: no scripts, no frames, nothing fetched from
/// elsewhere, no MIME sniffing, no referrer to other sites (`same-origin`:
/// with `no-referrer` browsers send `Origin: null` on form posts, which the origin check
/// refuses).
async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The dashboard's routes over `store` (for tests and embedding; [`serve`] builds it
/// from a [`Config`]). `GET /` overview, `/turns`, `/runs`, `/runs/{id}` (`POST
/// /runs/{id}/feedback`), `/sweeps`, `/sweeps/{name}` (and its `.svg` chart),
/// `/pending` (`POST /pending/{run_id}`), `/login`, `POST /logout`.
pub fn router(store: Store, config: Config) -> Router {
    let auth = Auth::new(config.token.clone(), config.writes());
    let app = Arc::new(App {
        store,
        config,
        auth,
    });
    Router::new()
        .route("/", get(pages::overview::page))
        .route("/turns", get(pages::turns::page))
        .route("/runs", get(pages::runs::page))
        .route("/runs/{id}", get(pages::run::page))
        .route("/runs/{id}/feedback", post(pages::run::feedback))
        .route("/sweeps", get(pages::sweeps::list))
        .route("/sweeps/{name}", get(pages::sweeps::page))
        .route("/sweeps/{name}/chart.svg", get(pages::sweeps::chart))
        .route("/pending", get(pages::pending::page))
        .route("/pending/{run_id}", post(pages::pending::decide))
        .route("/login", get(pages::login::form).post(pages::login::submit))
        .route("/logout", post(pages::login::logout))
        .fallback(|| async { PageError::not_found("no such page") })
        .layer(axum::middleware::map_response(secure))
        .with_state(app)
}

/// Opens the store (lazily: a store that is down at start is a page saying so, and the
/// dashboard recovers when it comes back), listens on `config.listen` and serves until
/// Ctrl-C.
///
/// # Errors
/// A [`ConfigError`] when [`Config::check`] refuses the settings, the store target is
/// malformed, or the address cannot be bound.
pub async fn serve(config: Config) -> Result<(), ConfigError> {
    config.check()?;
    let mut options = StoreOptions::new().lazy(true);
    if let Some(schema) = &config.schema {
        options = options.schema(schema.clone());
    }
    let store = Store::open_with(&config.store, options)
        .await
        .map_err(|e| ConfigError {
            message: format!("the store: {e}"),
        })?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| ConfigError {
            message: format!("cannot listen on {}: {e}", config.listen),
        })?;
    let local = listener.local_addr().map_err(|e| ConfigError {
        message: format!("cannot listen on {}: {e}", config.listen),
    })?;
    let mode = if config.writes() {
        "writes need the token"
    } else {
        "read-only"
    };
    eprintln!("agent-dashboard: serving http://{local}/ ({mode})");
    let app = router(store, config);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| ConfigError {
            message: format!("the server stopped: {e}"),
        })
}
