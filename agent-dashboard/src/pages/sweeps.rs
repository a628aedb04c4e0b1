//! Stored sweep comparisons (`Comparison::write_json` files in `--sweeps DIR`): the
//! table and the chart the sweep itself makes (`Display` and `Comparison::svg`).

use std::path::PathBuf;

use agent_core::eval::Comparison;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::layout::frame;
use super::login::gate;
use super::scope::encode;
use crate::app::{App, State};
use crate::page_error::PageError;

/// The largest comparison file read (bytes).
const MAX_FILE: u64 = 64 * 1024 * 1024;

fn dir(app: &App) -> Result<&std::path::Path, PageError> {
    app.config.sweeps.as_deref().ok_or_else(|| {
        PageError::not_found("no sweeps directory: start the dashboard with --sweeps DIR")
    })
}

/// A comparison's file: `name` must be a plain file stem (no path).
fn file(app: &App, name: &str) -> Result<PathBuf, PageError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if !ok {
        return Err(PageError::bad_request(
            "a sweep name is a file name without its .json (letters, digits, - _ .)",
        ));
    }
    Ok(dir(app)?.join(format!("{name}.json")))
}

async fn load(app: &App, name: &str) -> Result<Comparison, PageError> {
    let path = file(app, name)?;
    let meta = tokio::fs::metadata(&path)
        .await
        .map_err(|_| PageError::not_found(format!("no sweep {name}")))?;
    if meta.len() > MAX_FILE {
        return Err(PageError::bad_request(format!(
            "sweep {name} is larger than 64 MiB"
        )));
    }
    let text = tokio::fs::read_to_string(&path)
        .await
        .map_err(|e| PageError::not_found(format!("sweep {name}: {e}")))?;
    serde_json::from_str(&text).map_err(|e| {
        PageError::bad_request(format!("sweep {name} is not a stored Comparison: {e}"))
    })
}

/// `GET /sweeps`: the stored comparisons.
pub(crate) async fn list(axum::extract::State(app): State, headers: HeaderMap) -> Response {
    let viewer = match gate(&app, &headers, "/sweeps") {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let body = async {
        let dir = dir(&app)?;
        let mut names = Vec::new();
        let mut entries = tokio::fs::read_dir(dir)
            .await
            .map_err(|e| PageError::not_found(format!("the sweeps directory: {e}")))?;
        while let Ok(Some(entry)) = entries.next_entry().await {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".json") {
                names.push(stem.to_owned());
            }
        }
        names.sort();
        Ok::<Markup, PageError>(html! {
            @if names.is_empty() { p.note { "No comparisons (*.json) in the sweeps directory." } }
            ul #sweeps { @for n in &names { li { a href={ "/sweeps/" (encode(n)) } { (n) } } } }
        })
    };
    match body.await {
        Ok(body) => frame("Sweeps", "/sweeps", &viewer, body).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /sweeps/{name}`: the comparison's table and chart.
pub(crate) async fn page_of(app: &App, name: &str) -> Result<Markup, PageError> {
    let comparison = load(app, name).await?;
    Ok(html! {
        p { "The sweep's own table (" code { "Comparison" } "'s Display) and chart (" code { "Comparison::svg" } ")." }
        img #sweep-chart src={ "/sweeps/" (encode(name)) "/chart.svg" } alt={ "chart of sweep " (name) } style="max-width:100%";
        pre #sweep-table { (comparison.to_string()) }
    })
}

/// The route of [`page_of`].
pub(crate) async fn page(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let viewer = match gate(&app, &headers, "/sweeps") {
        Ok(v) => v,
        Err(r) => return *r,
    };
    match page_of(&app, &name).await {
        Ok(body) => frame(&format!("Sweep {name}"), "/sweeps", &viewer, body).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /sweeps/{name}/chart.svg`: the sweep's SVG, served as an image (shown with
/// `<img>`, so nothing in it runs).
pub(crate) async fn chart(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    if let Err(r) = gate(&app, &headers, "/sweeps") {
        return *r;
    }
    let svg = async {
        let comparison = load(&app, &name).await?;
        comparison.svg().map_err(|e| PageError {
            status: axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            title: "The chart failed",
            message: e.to_string(),
        })
    };
    match svg.await {
        Ok(svg) => {
            let mut response = svg.into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("image/svg+xml"),
            );
            response
        }
        Err(e) => e.into_response(),
    }
}
