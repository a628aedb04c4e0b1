//! Parts as Converse content blocks: `image` (`format`, `source: {bytes}`) and
//! `document` (`format`, `name`, `source: {bytes}`), the bytes as base64 in the JSON
//! body, in user messages and in `toolResult` content (source: the `Message`,
//! `ImageBlock`, `DocumentBlock` and `ToolResultContentBlock` references,
//! <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Message.html>,
//! <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_DocumentBlock.html>,
//! <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ToolResultContentBlock.html>).
//! Converse takes no URL and no file id: bytes only.

use std::collections::HashSet;

use serde::Serialize;

use crate::content::{Part, Source};
use crate::llm::{COMMON_IMAGES, ContentCapabilities, LlmError};
use crate::providers::inline::{Base64, base_type, unsendable};

/// `{"format": "png", "source": {"bytes": "<base64>"}}`.
#[derive(Serialize)]
pub(super) struct Image<'a> {
    format: &'static str,
    source: BytesSource<'a>,
}

/// `{"format": "pdf", "name": "...", "source": {"bytes": "<base64>"}}`.
#[derive(Serialize)]
pub(super) struct Document<'a> {
    format: &'static str,
    name: String,
    source: BytesSource<'a>,
}

#[derive(Serialize)]
struct BytesSource<'a> {
    bytes: Base64<'a>,
}

/// An image or a document block.
pub(super) enum Media<'a> {
    Image(Image<'a>),
    Document(Document<'a>),
}

/// The document types Converse takes, by media type, with their `format`.
const DOCUMENT_FORMATS: &[(&str, &str)] = &[
    ("application/pdf", "pdf"),
    ("text/csv", "csv"),
    ("application/msword", "doc"),
    (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "docx",
    ),
    ("application/vnd.ms-excel", "xls"),
    (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "xlsx",
    ),
    ("text/html", "html"),
    ("text/plain", "txt"),
    ("text/markdown", "md"),
];

/// The media types of [`DOCUMENT_FORMATS`].
const DOCUMENT_TYPES: &[&str] = &[
    "application/pdf",
    "text/csv",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.ms-excel",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "text/html",
    "text/plain",
    "text/markdown",
];

/// The document names of one request: each unique, each made of the characters
/// Converse allows.
#[derive(Default)]
pub(super) struct Names {
    used: HashSet<String>,
}

impl Names {
    /// A name for a document: the part's name made safe, or `document N` (its place
    /// among the request's documents, from 1) when it has none (or nothing of it is
    /// left), with ` (2)`, ` (3)`, ... after a name already taken.
    fn name(&mut self, given: Option<&str>) -> String {
        let mut base = given.map(safe_name).unwrap_or_default();
        if base.is_empty() {
            base = format!("document {}", self.used.len() + 1);
        }
        let mut name = base.clone();
        let mut n = 2;
        while self.used.contains(&name) {
            name = format!("{base} ({n})");
            n += 1;
        }
        self.used.insert(name.clone());
        name
    }
}

/// `name` as Converse takes it ("Alphanumeric characters, whitespace characters (no
/// more than one in a row), hyphens, parentheses, square brackets", 1 to 200
/// characters; source: the `DocumentBlock` page): the extension dropped (the
/// `format` carries it), every other character a space, spaces collapsed and trimmed,
/// at most 200 characters; empty when nothing is left.
pub(super) fn safe_name(name: &str) -> String {
    let stem = match name.rsplit_once('.') {
        Some((stem, ext))
            if !stem.trim().is_empty()
                && (1..=5).contains(&ext.len())
                && ext.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            stem
        }
        _ => name,
    };
    let mut out = String::with_capacity(stem.len().min(200));
    for c in stem.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']') {
            c
        } else {
            ' '
        };
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        if out.len() == 200 {
            break;
        }
        out.push(c);
    }
    out.trim_end().to_owned()
}

/// The block of an image or a document given as bytes (a text part is not one: the
/// caller sends it as text).
///
/// # Errors
/// A permanent [`LlmError`] for audio, a URL or file id, a type Converse does not take.
pub(super) fn block<'a>(part: &'a Part, names: &mut Names) -> Result<Media<'a>, LlmError> {
    let (media, image) = match part {
        Part::Image(media) => (media, true),
        Part::Document(media) => (media, false),
        Part::Audio(_) => return Err(unsendable("bedrock", part, "Converse takes no audio")),
        Part::Text { .. } => return Err(unsendable("bedrock", part, "text is sent as text")),
    };
    let Source::Bytes(bytes) = &media.source else {
        return Err(unsendable(
            "bedrock",
            part,
            "Converse takes no URL or file id: pass the bytes",
        ));
    };
    let media_type = base_type(&media.media_type);
    let source = BytesSource {
        bytes: Base64(bytes.as_slice()),
    };
    if image {
        let format = match media_type {
            "image/png" => "png",
            "image/jpeg" => "jpeg",
            "image/gif" => "gif",
            "image/webp" => "webp",
            _ => {
                return Err(unsendable(
                    "bedrock",
                    part,
                    "Converse takes PNG, JPEG, GIF and WebP images",
                ));
            }
        };
        return Ok(Media::Image(Image { format, source }));
    }
    let Some((_, format)) = DOCUMENT_FORMATS.iter().find(|(t, _)| *t == media_type) else {
        return Err(unsendable(
            "bedrock",
            part,
            "Converse takes pdf, csv, doc, docx, xls, xlsx, html, txt and md documents",
        ));
    };
    Ok(Media::Document(Document {
        format,
        name: names.name(media.name.as_deref()),
        source,
    }))
}

/// The page the limits come from.
const SOURCE: &str =
    "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Message.html";

/// What a Converse model takes, by its id (after an inference-profile region prefix):
/// images for Anthropic Claude 3 and later, Amazon Nova Lite, Pro and Premier, Meta
/// Llama 3.2 11B and 90B and Llama 4, Mistral Pixtral; documents (pdf, csv, doc, docx,
/// xls, xlsx, html, txt, md) for Claude 3 and later and Nova Lite, Pro and Premier;
/// parts in tool results for Claude only (the `ToolResultContentBlock` page: images
/// "only supported by Anthropic Claude 3 models"); other models, text alone. Bytes
/// only. Limits (the `Message` page): images at most 3.75 MB (3,750,000 bytes), 8,000
/// px wide and 8,000 px high, and 20 a request, documents at most 4.5 MB (4,500,000
/// bytes) and 5 a request. Tokens: Claude by Anthropic's rule, other models by the
/// conservative one.
pub(crate) fn capabilities(model: &str) -> ContentCapabilities {
    let model = model.to_ascii_lowercase();
    let base = model.rsplit('/').next().unwrap_or(&model);
    let family = |prefix: &str| {
        base.find(prefix)
            .filter(|at| *at == 0 || base.as_bytes()[at - 1] == b'.')
            .map(|at| &base[at + prefix.len()..])
    };
    let claude = family("anthropic.")
        .filter(|rest| rest.starts_with("claude"))
        .and_then(crate::providers::inline::claude_version)
        .is_some_and(|version| version >= (3, 0));
    let nova = family("amazon.nova-").is_some_and(|rest| {
        ["lite", "pro", "premier"]
            .iter()
            .any(|m| rest.starts_with(m))
    });
    let vision_only = family("meta.llama3-2-")
        .is_some_and(|rest| rest.starts_with("11b") || rest.starts_with("90b"))
        || family("meta.llama4").is_some()
        || family("mistral.pixtral").is_some();
    if !(claude || nova || vision_only) {
        return ContentCapabilities::TEXT_ONLY;
    }
    ContentCapabilities {
        image_types: COMMON_IMAGES,
        document_types: if claude || nova { DOCUMENT_TYPES } else { &[] },
        parts_in_tool_results: claude,
        max_image_bytes: Some(3_750_000),
        max_document_bytes: Some(4_500_000),
        max_images: Some(20),
        max_documents: Some(5),
        max_image_dimensions: Some((8_000, 8_000)),
        tokens: if claude {
            crate::content::TokenRule::Anthropic
        } else {
            crate::content::TokenRule::Conservative
        },
        source: SOURCE,
        ..ContentCapabilities::TEXT_ONLY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_names_are_made_safe_and_unique() {
        assert_eq!(safe_name("receipt_020.pdf"), "receipt 020");
        assert_eq!(
            safe_name("Q3 report (final) [v2].docx"),
            "Q3 report (final) [v2]"
        );
        assert_eq!(safe_name("../../etc/passwd"), "etc passwd");
        assert_eq!(safe_name("  a   b  "), "a b");
        assert_eq!(safe_name("Rechnung März.pdf"), "Rechnung M rz");
        assert_eq!(safe_name(".pdf"), "pdf");
        assert_eq!(safe_name("***"), "");
        assert_eq!(safe_name(&"x".repeat(300)).len(), 200);
        let mut names = Names::default();
        assert_eq!(names.name(Some("a.pdf")), "a");
        assert_eq!(names.name(Some("a.txt")), "a (2)");
        assert_eq!(names.name(None), "document 3");
        assert_eq!(names.name(Some("%%%")), "document 4");
    }

    #[test]
    fn capabilities_follow_the_model_family() {
        let claude = capabilities("us.anthropic.claude-sonnet-4-5-20250929-v1:0");
        assert!(claude.parts_in_tool_results);
        assert_eq!(claude.document_types, DOCUMENT_TYPES);
        assert!(!claude.urls && !claude.file_ids);
        assert_eq!(claude.max_images, Some(20));
        let haiku3 = capabilities("anthropic.claude-3-haiku-20240307-v1:0");
        assert!(haiku3.takes_parts());
        assert_eq!(
            capabilities("anthropic.claude-v2:1"),
            ContentCapabilities::TEXT_ONLY
        );
        let nova = capabilities("amazon.nova-pro-v1:0");
        assert!(!nova.parts_in_tool_results);
        assert!(!nova.document_types.is_empty());
        assert!(!capabilities("amazon.nova-micro-v1:0").takes_parts());
        let llama = capabilities("us.meta.llama3-2-90b-instruct-v1:0");
        assert!(llama.document_types.is_empty() && !llama.image_types.is_empty());
        assert!(!capabilities("meta.llama3-1-70b-instruct-v1:0").takes_parts());
        assert!(!capabilities("mistral.mistral-large-2407-v1:0").takes_parts());
    }
}
