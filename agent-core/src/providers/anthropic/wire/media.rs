//! Parts as Messages API blocks: `image` and `document` blocks whose `source` is
//! `base64` (`media_type`, `data`), `text` (a plain-text document's text), `url` or
//! `file` (a Files API id), in user messages and inside `tool_result` content (source:
//! "Vision", <https://docs.anthropic.com/en/docs/build-with-claude/vision>; "PDF
//! support", <https://docs.anthropic.com/en/docs/build-with-claude/pdf-support>; "Files
//! API", <https://docs.anthropic.com/en/docs/build-with-claude/files>).

use serde::Serialize;

use crate::content::{Part, Source};
use crate::llm::{COMMON_IMAGES, ContentCapabilities, LlmError, LlmRequest};
use crate::providers::inline::{Base64, base_type, unsendable};

/// Where an image's or a document's bytes are.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum MediaSource<'a> {
    /// The bytes, as base64.
    Base64 {
        media_type: &'a str,
        data: Base64<'a>,
    },
    /// A plain-text document's text.
    Text {
        media_type: &'static str,
        data: &'a str,
    },
    /// A URL Anthropic fetches.
    Url { url: &'a str },
    /// A file uploaded with the Files API.
    File { file_id: &'a str },
}

/// An `image` or a `document` block.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum MediaBlock<'a> {
    /// An image.
    Image { source: MediaSource<'a> },
    /// A PDF or plain-text document, titled with the part's name.
    Document {
        source: MediaSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
    },
}

/// The block of an image or a document (a text part is not one: the caller sends it
/// as a text block).
///
/// # Errors
/// A permanent [`LlmError`] for audio, a document type other than PDF or plain text, a
/// plain-text document that is not UTF-8 or comes as a URL.
pub(super) fn block(part: &Part) -> Result<MediaBlock<'_>, LlmError> {
    let media = match part {
        Part::Text { .. } => return Err(unsendable("anthropic", part, "text is sent as text")),
        Part::Image(media) => media,
        Part::Document(media) => media,
        Part::Audio(_) => return Err(unsendable("anthropic", part, "Claude takes no audio")),
    };
    let media_type = base_type(&media.media_type);
    let text_document = matches!(part, Part::Document(_)) && media_type == "text/plain";
    let source = match &media.source {
        Source::Bytes(bytes) if text_document => MediaSource::Text {
            media_type: "text/plain",
            data: std::str::from_utf8(bytes.as_slice()).map_err(|_| {
                unsendable("anthropic", part, "a text/plain document must be UTF-8")
            })?,
        },
        Source::Bytes(bytes) => MediaSource::Base64 {
            media_type,
            data: Base64(bytes.as_slice()),
        },
        Source::Url(_) if text_document => {
            return Err(unsendable(
                "anthropic",
                part,
                "a text/plain document goes as bytes or a file id, not a URL",
            ));
        }
        Source::Url(url) => MediaSource::Url { url },
        Source::File(file_id) => MediaSource::File { file_id },
    };
    if let Part::Document(_) = part {
        if !text_document && media_type != "application/pdf" {
            return Err(unsendable(
                "anthropic",
                part,
                "Claude takes PDF and plain-text documents",
            ));
        }
        return Ok(MediaBlock::Document {
            source,
            title: media.name.as_deref(),
        });
    }
    Ok(MediaBlock::Image { source })
}

/// The `anthropic-beta` value that lets a request name Files API ids.
pub(crate) const FILES_BETA: &str = "files-api-2025-04-14";

/// Whether a request names a Files API file (and so needs [`FILES_BETA`]).
pub(crate) fn names_a_file(request: &LlmRequest) -> bool {
    request.messages.iter().any(|m| {
        m.parts()
            .any(|p| matches!(p.media().map(|m| &m.source), Some(Source::File(_))))
    })
}

/// The pages the facts below come from.
const SOURCE: &str = "https://docs.anthropic.com/en/docs/build-with-claude/vision and \
     https://docs.anthropic.com/en/docs/build-with-claude/pdf-support";

/// What a Claude model takes, by its version (read as for structured output:
/// `claude-3-5-sonnet-...` is 3.5, `claude-sonnet-4-5` 4.5, `claude-3-haiku-<date>`
/// 3.0): Claude 3 and later take images (PNG, JPEG, GIF, WebP); Claude 3.5 and later
/// also PDF and plain-text documents; older models and names without a version, text
/// alone. From a URL or a Files API id too; in tool results too. Limits: an image's
/// base64 at most 5 MB (3,750,000 bytes before base64), at most 100 images a request,
/// a request at most 32 MB (24,000,000 bytes of parts before base64), at most 100 PDF
/// pages a request (counted where the PDF's page objects are readable; else the API's
/// 400 decides), an image at most 8,000 × 8,000 px, or 2,000 × 2,000 px when a request
/// carries more than 20 images (the vision page, "Before you upload"). Tokens by
/// Anthropic's rule (`width × height / 750` after the documented downscale).
pub(crate) fn capabilities(version: Option<(u64, u64)>) -> ContentCapabilities {
    let Some(version) = version.filter(|v| *v >= (3, 0)) else {
        return ContentCapabilities::TEXT_ONLY;
    };
    let documents: &'static [&'static str] = if version >= (3, 5) {
        &["application/pdf", "text/plain"]
    } else {
        &[]
    };
    ContentCapabilities {
        image_types: COMMON_IMAGES,
        document_types: documents,
        urls: true,
        file_ids: true,
        parts_in_tool_results: true,
        max_image_bytes: Some(3_750_000),
        max_images: Some(100),
        max_total_bytes: Some(24_000_000),
        max_pdf_pages: (version >= (3, 5)).then_some(100),
        max_image_dimensions: Some((8_000, 8_000)),
        many_images_dimensions: Some((20, (2_000, 2_000))),
        tokens: crate::content::TokenRule::Anthropic,
        source: SOURCE,
        ..ContentCapabilities::TEXT_ONLY
    }
}
