//! Parts as Gemini `Part`s: `inlineData` (`mimeType`, `data` as base64) for bytes,
//! `fileData` (`mimeType`, `fileUri`) for a Files API URI or an external URL, in user
//! contents (source: "File input methods",
//! <https://ai.google.dev/gemini-api/docs/file-input-methods>, and the `Part`
//! reference, <https://ai.google.dev/api/caching#Part>), with the part's
//! `mediaResolution` (`{"level": "MEDIA_RESOLUTION_HIGH"}`, "Media resolution",
//! <https://ai.google.dev/gemini-api/docs/media-resolution>) when it has one and the
//! model takes it (Gemini 3, and aliases); the same, without a resolution, inside a
//! Gemini 3 `functionResponse`'s `parts` (see [`capabilities`]).

use serde::Serialize;

use crate::content::{MediaResolution, Part, Source};
use crate::llm::{ContentCapabilities, LlmError};
use crate::providers::inline::{Base64, base_type, unsendable};

/// `{"mimeType", "data"}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Blob<'a> {
    mime_type: &'a str,
    data: Base64<'a>,
}

/// `{"mimeType", "fileUri"}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileData<'a> {
    mime_type: &'a str,
    file_uri: &'a str,
}

/// `{"inlineData": ...}` or `{"fileData": ...}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum Media<'a> {
    InlineData(Blob<'a>),
    FileData(FileData<'a>),
}

/// `{"level": "MEDIA_RESOLUTION_..."}`.
#[derive(Serialize)]
pub(super) struct Resolution {
    level: &'static str,
}

/// A user content's media part: the media and, when set and taken, its resolution.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UserMedia<'a> {
    #[serde(flatten)]
    media: Media<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    media_resolution: Option<Resolution>,
}

/// [`part`] with its `mediaResolution` when it has one and `resolutions` (the model
/// takes them per part: see [`takes_resolutions`]).
///
/// # Errors
/// Those of [`part`].
pub(super) fn user_part(part: &Part, resolutions: bool) -> Result<UserMedia<'_>, LlmError> {
    let level = resolution(part).filter(|_| resolutions);
    Ok(UserMedia {
        media: self::part(part)?,
        media_resolution: level.map(|level| Resolution {
            level: level.as_str(),
        }),
    })
}

/// The part's media resolution, if it has one.
fn resolution(part: &Part) -> Option<MediaResolution> {
    part.media().and_then(|m| m.media_resolution)
}

/// Whether a model (by its version) takes a media resolution per part: Gemini 3 and
/// later, and an alias without a version (a current model; "Per-part media resolution
/// (Gemini 3 only)", <https://ai.google.dev/gemini-api/docs/media-resolution>).
pub(crate) fn takes_resolutions(version: Option<(u32, u32)>) -> bool {
    version.is_none_or(|(major, _)| major >= 3)
}

/// The Gemini part of an image, a document or audio (a text part is not one: the
/// caller sends it as text).
///
/// # Errors
/// A permanent [`LlmError`] for a URL or file URI that is empty.
pub(super) fn part(part: &Part) -> Result<Media<'_>, LlmError> {
    let media = match part {
        Part::Text { .. } => return Err(unsendable("gemini", part, "text is sent as text")),
        Part::Image(media) | Part::Document(media) | Part::Audio(media) => media,
    };
    let mime_type = gemini_type(base_type(&media.media_type));
    Ok(match &media.source {
        Source::Bytes(bytes) => Media::InlineData(Blob {
            mime_type,
            data: Base64(bytes.as_slice()),
        }),
        Source::Url(uri) | Source::File(uri) if uri.is_empty() => {
            return Err(unsendable("gemini", part, "an empty URI"));
        }
        Source::Url(uri) | Source::File(uri) => Media::FileData(FileData {
            mime_type,
            file_uri: uri,
        }),
    })
}

/// The types a Gemini 3 function response takes in its `parts` ("Multimodal function
/// responses", <https://ai.google.dev/gemini-api/docs/function-calling#multimodal>).
const IN_RESPONSES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/webp",
    "application/pdf",
    "text/plain",
];

/// Whether a model (by its version, see [`capabilities`]) takes parts inside a
/// `functionResponse`: Gemini 3 and later (earlier models answer 400 "Multimodal
/// function responses are not supported for this model"; an alias without a version
/// is not assumed to).
pub(crate) fn multimodal_responses(version: Option<(u32, u32)>) -> bool {
    version.is_some_and(|(major, _)| major >= 3)
}

/// Whether `part` may go inside a `functionResponse` (an image or document of a type
/// [`IN_RESPONSES`] lists, without a media resolution: a function response's parts
/// carry their data alone, so a part with one goes beside the responses, where it
/// keeps it); others go beside the responses.
pub(super) fn in_responses(part: &Part) -> bool {
    part.media().is_some_and(|m| {
        m.media_resolution.is_none()
            && IN_RESPONSES.contains(&gemini_type(base_type(&m.media_type)))
    })
}

/// The name Gemini's lists use for a media type (`audio/x-wav` → `audio/wav`,
/// `audio/mpeg` → `audio/mp3`, `audio/x-flac` → `audio/flac`, `image/jpg` →
/// `image/jpeg`).
fn gemini_type(media_type: &str) -> &str {
    match media_type {
        "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => "audio/wav",
        "audio/mpeg" | "audio/x-mpeg" => "audio/mp3",
        "audio/x-flac" => "audio/flac",
        "image/jpg" => "image/jpeg",
        other => other,
    }
}

/// Gemini's image types ("Image understanding",
/// <https://ai.google.dev/gemini-api/docs/image-understanding>).
const IMAGES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/heic",
    "image/heif",
];

/// PDF, and the text types Gemini reads as text ("Document understanding",
/// <https://ai.google.dev/gemini-api/docs/document-processing>).
const DOCUMENTS: &[&str] = &[
    "application/pdf",
    "text/plain",
    "text/html",
    "text/csv",
    "text/xml",
    "text/markdown",
];

/// Gemini's audio types ("Audio understanding",
/// <https://ai.google.dev/gemini-api/docs/audio>), with the names this crate's
/// sniffing gives (`audio/x-wav`, `audio/mpeg`, `audio/x-flac`).
const AUDIO: &[&str] = &[
    "audio/wav",
    "audio/x-wav",
    "audio/mp3",
    "audio/mpeg",
    "audio/aiff",
    "audio/aac",
    "audio/ogg",
    "audio/flac",
    "audio/x-flac",
];

/// The page the limits and sources come from.
const SOURCE: &str = "https://ai.google.dev/gemini-api/docs/file-input-methods";

/// What a Gemini model takes, by its (major, minor) version (`None`: an alias without
/// one, such as `gemini-flash-latest`, which names a current model): Gemini 1.5 and
/// later take images (PNG, JPEG, WebP, HEIC, HEIF), documents (PDF; plain text, HTML,
/// CSV, XML, Markdown read as text) and audio (WAV, MP3, AIFF, AAC, OGG, FLAC), as
/// bytes or a Files API URI; Gemini 2.5 and later (and aliases) also by an external
/// URL the API fetches. Earlier models, text alone. Parts in tool results: Gemini 3
/// and later take them (inside the `functionResponse` when their type is one
/// [`IN_RESPONSES`] lists, else beside the responses after a note naming the call);
/// for earlier models and aliases the runner moves them to the user turn after the
/// results, with a note naming the call. Limits: inline data at most 100 MB of base64 a request
/// (75,000,000 bytes of parts before base64), a PDF at most 50 MB; no pixel limit is
/// documented (Gemini scales and tiles an image). Tokens by Gemini's rule (258 an
/// image up to 384 px, else 258 per 768-px tile; 258 a PDF page), and for Gemini 3 and
/// later by its media resolutions ([`TokenRule::Gemini3`]: 1,120 an image, 560 a PDF
/// page unless the part says otherwise).
///
/// [`TokenRule::Gemini3`]: crate::content::TokenRule::Gemini3
pub(crate) fn capabilities(version: Option<(u32, u32)>) -> ContentCapabilities {
    if version.is_some_and(|v| v < (1, 5)) {
        return ContentCapabilities::TEXT_ONLY;
    }
    ContentCapabilities {
        image_types: IMAGES,
        document_types: DOCUMENTS,
        audio_types: AUDIO,
        urls: version.is_none_or(|v| v >= (2, 5)),
        file_ids: true,
        parts_in_tool_results: multimodal_responses(version),
        max_document_bytes: Some(50_000_000),
        max_total_bytes: Some(75_000_000),
        tokens: if version.is_some_and(|(major, _)| major >= 3) {
            crate::content::TokenRule::Gemini3
        } else {
            crate::content::TokenRule::Gemini
        },
        source: SOURCE,
        ..ContentCapabilities::TEXT_ONLY
    }
}
