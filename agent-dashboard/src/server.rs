//! The routes, the security headers, and the listener.

use std::sync::Arc;

use agent_store::{Store, StoreOptions};
use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::{get, post};

use crate::app::App;
use crate::auth::Auth;
use crate::cli::{Config, ConfigError};
use crate::page_error::PageError;
use crate::pages;

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
/// `/pending` (`POST /pending/{run_id}`), `/blobs/{sha256}` (a stored part's bytes),
/// `/login`, `POST /logout`.
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
        .route("/blobs/{sha256}", get(pages::blobs::serve))
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
