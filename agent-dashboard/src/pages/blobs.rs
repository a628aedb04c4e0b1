//! Content parts on the pages: images as thumbnails served from the store by hash
//! (`GET /blobs/{sha256}`), documents and audio as a named, sized link, URLs and
//! provider file ids as text. Bytes never appear on a page as text: a part is shown by
//! its kind, media type, size and name.
//!
//! A blob is served with its stored media type when that is an image the browser shows
//! safely (PNG, JPEG, GIF, WebP); anything else (PDF, audio, SVG, HTML, a malformed
//! type) is served as a download (`Content-Disposition: attachment`), so no stored
//! bytes ever render as a document of the dashboard's origin. Every response carries
//! the dashboard's CSP (`img-src 'self'`: the thumbnails load only from here) and
//! `X-Content-Type-Options: nosniff`.

use agent_core::content::{Part, Source};
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::Value;

use super::layout::count;
use super::login::gate;
use crate::app::State;
use crate::page_error::PageError;

/// Image types shown inline (`<img>` and when opened); all others are downloads.
const INLINE: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// `GET /blobs/{sha256}`: the bytes of a stored part.
pub(crate) async fn serve(
    axum::extract::State(app): State,
    headers: HeaderMap,
    Path(sha256): Path<String>,
) -> Response {
    let here = format!("/blobs/{sha256}");
    if let Err(r) = gate(&app, &headers, &here) {
        return *r;
    }
    let blob = match app.store.blob(&sha256).await {
        Ok(Some(blob)) => blob,
        Ok(None) => return PageError::not_found("no such blob in the store").into_response(),
        Err(e) => return PageError::from(e).into_response(),
    };
    let inline = INLINE.contains(&blob.media_type.as_str());
    let content_type = if inline || is_media_type(&blob.media_type) {
        HeaderValue::from_str(&blob.media_type)
            .unwrap_or(HeaderValue::from_static("application/octet-stream"))
    } else {
        HeaderValue::from_static("application/octet-stream")
    };
    let disposition = if inline { "inline" } else { "attachment" };
    let mut response = blob.bytes.as_slice().to_vec().into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, content_type);
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static(disposition),
    );
    response
}

/// Whether `media_type` is `type/subtype` of letters, digits and `.+-` only (a type
/// that can go into a header as it is).
fn is_media_type(media_type: &str) -> bool {
    let mut halves = media_type.splitn(2, '/');
    let ok = |s: Option<&str>| {
        s.is_some_and(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
        })
    };
    ok(halves.next()) && ok(halves.next())
}

/// The parts of a message or tool result: text as text, images as thumbnails linking
/// to the full image, documents and audio as links named by the part's name (or kind)
/// with media type and size.
pub(crate) fn parts(parts: &[Part]) -> Markup {
    html! {
        @if !parts.is_empty() {
            div.parts {
                @for part in parts { (one(part)) }
            }
        }
    }
}

fn one(part: &Part) -> Markup {
    if let Some(text) = part.as_text() {
        return html! { pre { (text) } };
    }
    let Some(media) = part.media() else {
        return html! { p.note { "(a part of a newer kind)" } };
    };
    let kind = part.kind().as_str();
    let label = media.name.as_deref().unwrap_or(kind);
    match &media.source {
        Source::Bytes(bytes) => {
            let href = format!("/blobs/{}", bytes.sha256());
            let size = format!("{} bytes", count(bytes.len() as u64));
            let about = format!("{label} ({}, {size})", media.media_type);
            if part.kind() == agent_core::content::Kind::Image
                && INLINE.contains(&media.media_type.as_str())
            {
                html! {
                    a.part.image href=(href) title=(about) {
                        img.thumb src=(href) alt=(about) loading="lazy";
                    }
                }
            } else {
                html! {
                    a.part.file href=(href) download=(label) data-kind=(kind) {
                        (label) " (" (media.media_type) ", " (size) ")"
                    }
                }
            }
        }
        Source::Url(url) => html! {
            p.part data-kind=(kind) { (kind) " (" (media.media_type) ") at " code { (url) } " (not fetched by the dashboard)" }
        },
        Source::File(id) => html! {
            p.part data-kind=(kind) { (kind) " (" (media.media_type) "), provider file " code { (id) } }
        },
        _ => html! { p.part data-kind=(kind) { (kind) " (" (media.media_type) ")" } },
    }
}

/// `value` with every part's inline bytes (`"source":{"bytes":"<base64>"}`) replaced
/// by a note of their size, for JSON shown as text (outputs, events).
pub(crate) fn without_bytes(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let shown = match (k.as_str(), v) {
                        ("source", Value::Object(src)) => match src.get("bytes") {
                            Some(Value::String(b64)) if src.len() == 1 => Value::String(format!(
                                "<bytes: about {} (base64 not shown)>",
                                count(b64.len() as u64 * 3 / 4)
                            )),
                            _ => without_bytes(v),
                        },
                        _ => without_bytes(v),
                    };
                    (k.clone(), shown)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_bytes).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_are_checked_before_they_become_headers() {
        assert!(is_media_type("application/pdf"));
        assert!(is_media_type("image/svg+xml"));
        assert!(!is_media_type("text/html\r\nx: y"));
        assert!(!is_media_type("image/"));
        assert!(!is_media_type("nonsense"));
    }

    #[test]
    fn bytes_in_json_become_a_size() {
        let value =
            serde_json::json!({"a": [{"source": {"bytes": "AAAA"}, "media_type": "image/png"}]});
        assert_eq!(
            without_bytes(&value),
            serde_json::json!({"a": [{"source": "<bytes: about 3 (base64 not shown)>", "media_type": "image/png"}]})
        );
    }
}
