//! [`Part`] and what it is made of: [`Media`], [`Source`], [`Kind`], [`Detail`],
//! [`MediaResolution`].

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::bytes::{self, Bytes};
use super::error::ContentError;
use super::sniff;

/// One part of a message's content: text, or an image, a document or audio.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Part {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image (`image/png`, `image/jpeg`, `image/gif`, `image/webp`).
    Image(Media),
    /// A document (`application/pdf`; `text/plain` and others where a provider takes
    /// them).
    Document(Media),
    /// Audio (`audio/wav`, `audio/mpeg`, ...).
    Audio(Media),
}

/// An image, a document or audio: where its bytes are, and what they are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Media {
    /// Where the bytes are.
    pub source: Source,
    /// The media type (`image/png`, `application/pdf`, `audio/wav`); for a URL or a file
    /// id, the type the caller gave (providers that need one get it).
    pub media_type: String,
    /// A file name, for documents (some providers show it to the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How closely the model looks at an image (OpenAI's `detail`); `None`: the
    /// provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Detail>,
    /// How many tokens Gemini 3 spends on an image or a PDF (Gemini's per-part
    /// `mediaResolution`); `None`: the model's default. Sent to Gemini 3 models (and
    /// to aliases without a version); earlier Gemini models and other providers do not
    /// take it and are not sent it, as `detail` goes to OpenAI alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_resolution: Option<MediaResolution>,
}

/// Where a part's bytes are.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Source {
    /// The bytes themselves (serialized as base64).
    Bytes(Bytes),
    /// A URL the provider fetches (never fetched by this crate).
    Url(String),
    /// A file the provider holds, by its id (OpenAI's and Anthropic's Files APIs,
    /// Gemini's file URIs).
    File(String),
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Bytes(bytes) => fmt::Debug::fmt(bytes, f),
            Source::Url(url) => write!(f, "Url({url})"),
            Source::File(id) => write!(f, "File({id})"),
        }
    }
}

/// How closely a model looks at an image (OpenAI's `detail`: `low` is 85 tokens
/// whatever the size; `high` tiles the image).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Detail {
    /// The provider decides.
    Auto,
    /// A low-resolution look (cheaper).
    Low,
    /// A high-resolution look.
    High,
}

/// How many tokens Gemini 3 spends on an image or a PDF page, Gemini's per-part
/// `mediaResolution` ("Media resolution", Token counts,
/// <https://ai.google.dev/gemini-api/docs/media-resolution>): an image 280, 560,
/// 1,120 or 2,240 tokens (low, medium, high, ultra high; 1,120 when unset); a PDF page
/// 280, 560 or 1,120 (low, medium, high; 560 when unset), plus its text. Ultra high is
/// documented for images alone; a PDF page at ultra high is estimated as an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MediaResolution {
    /// `MEDIA_RESOLUTION_LOW`: 280 tokens.
    Low,
    /// `MEDIA_RESOLUTION_MEDIUM`: 560 tokens.
    Medium,
    /// `MEDIA_RESOLUTION_HIGH`: 1,120 tokens.
    High,
    /// `MEDIA_RESOLUTION_ULTRA_HIGH`: 2,240 tokens (images; per part only).
    UltraHigh,
}

impl MediaResolution {
    /// Gemini's name for the level (`MEDIA_RESOLUTION_LOW`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            MediaResolution::Low => "MEDIA_RESOLUTION_LOW",
            MediaResolution::Medium => "MEDIA_RESOLUTION_MEDIUM",
            MediaResolution::High => "MEDIA_RESOLUTION_HIGH",
            MediaResolution::UltraHigh => "MEDIA_RESOLUTION_ULTRA_HIGH",
        }
    }

    /// The tokens Gemini 3 spends on an image (or a PDF page) at this level.
    pub fn tokens(self) -> u64 {
        match self {
            MediaResolution::Low => 280,
            MediaResolution::Medium => 560,
            MediaResolution::High => 1_120,
            MediaResolution::UltraHigh => 2_240,
        }
    }
}

/// What kind of content a part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Kind {
    /// Text.
    Text,
    /// An image.
    Image,
    /// A document.
    Document,
    /// Audio.
    Audio,
}

impl Kind {
    /// The kind's name: `text`, `image`, `document` or `audio`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Image => "image",
            Kind::Document => "document",
            Kind::Audio => "audio",
        }
    }

    /// The kind of a media type: `image/*` an image, `audio/*` audio, anything else a
    /// document.
    pub fn of_media_type(media_type: &str) -> Kind {
        if media_type.starts_with("image/") {
            Kind::Image
        } else if media_type.starts_with("audio/") {
            Kind::Audio
        } else {
            Kind::Document
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text { text: text.into() }
    }

    /// A part of these bytes and media type, its kind from the type (`image/*` an
    /// image, `audio/*` audio, else a document).
    ///
    /// # Errors
    /// [`ContentError::Empty`]; [`ContentError::InvalidMediaType`]; and
    /// [`ContentError::Mismatch`] when the bytes are of a type this crate recognizes and
    /// it is not `media_type`.
    pub fn from_bytes_as(
        bytes: impl Into<Bytes>,
        media_type: impl Into<String>,
    ) -> Result<Self, ContentError> {
        let bytes = bytes.into();
        let media_type = media_type.into();
        if bytes.is_empty() {
            return Err(ContentError::Empty);
        }
        check_media_type(&media_type)?;
        if let Some(sniffed) = sniff::media_type(bytes.as_slice())
            && !sniff::same(sniffed, &media_type)
        {
            return Err(ContentError::Mismatch {
                declared: media_type,
                sniffed: sniffed.to_owned(),
            });
        }
        Ok(Part::of_kind(
            Kind::of_media_type(&media_type),
            Media::new(Source::Bytes(bytes), media_type),
        ))
    }

    /// A part of these bytes, its media type sniffed from them (PNG, JPEG, GIF, WebP,
    /// PDF, WAV, MP3, FLAC, OGG).
    ///
    /// # Errors
    /// [`ContentError::Empty`], [`ContentError::UnknownType`].
    pub fn from_bytes(bytes: impl Into<Bytes>) -> Result<Self, ContentError> {
        let bytes = bytes.into();
        if bytes.is_empty() {
            return Err(ContentError::Empty);
        }
        let media_type = sniff::media_type(bytes.as_slice()).ok_or(ContentError::UnknownType)?;
        Part::from_bytes_as(bytes, media_type)
    }

    /// A part of a file's bytes, its media type sniffed from them (the extension is not
    /// trusted), named after the file.
    ///
    /// # Errors
    /// [`ContentError::Unreadable`], and those of [`from_bytes`](Self::from_bytes).
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, ContentError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| ContentError::Unreadable {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let mut part = Part::from_bytes(bytes)?;
        if let Some(media) = part.media_mut() {
            media.name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        }
        Ok(part)
    }

    /// A part of base64 text (standard alphabet, padding optional) and its media type.
    ///
    /// # Errors
    /// [`ContentError::Base64`], and those of [`from_bytes_as`](Self::from_bytes_as).
    pub fn from_base64(text: &str, media_type: impl Into<String>) -> Result<Self, ContentError> {
        let bytes = bytes::decode_base64(text)?;
        Part::from_bytes_as(bytes, media_type)
    }

    /// A part the provider fetches from `url`, of this media type (its kind from the
    /// type). This crate never fetches it; a provider that takes only bytes (Bedrock)
    /// refuses it before any request.
    ///
    /// # Errors
    /// [`ContentError::InvalidMediaType`].
    pub fn from_url(
        url: impl Into<String>,
        media_type: impl Into<String>,
    ) -> Result<Self, ContentError> {
        let media_type = media_type.into();
        check_media_type(&media_type)?;
        Ok(Part::of_kind(
            Kind::of_media_type(&media_type),
            Media::new(Source::Url(url.into()), media_type),
        ))
    }

    /// A part the provider holds as a file (its id from the provider's Files API), of
    /// this media type.
    ///
    /// # Errors
    /// [`ContentError::InvalidMediaType`].
    pub fn from_file_id(
        id: impl Into<String>,
        media_type: impl Into<String>,
    ) -> Result<Self, ContentError> {
        let media_type = media_type.into();
        check_media_type(&media_type)?;
        Ok(Part::of_kind(
            Kind::of_media_type(&media_type),
            Media::new(Source::File(id.into()), media_type),
        ))
    }

    /// `media` as a part of `kind` (text: an empty text part).
    pub fn of_kind(kind: Kind, media: Media) -> Self {
        match kind {
            Kind::Image => Part::Image(media),
            Kind::Document => Part::Document(media),
            Kind::Audio => Part::Audio(media),
            Kind::Text => Part::text(String::new()),
        }
    }

    /// The part's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Part::Text { .. } => Kind::Text,
            Part::Image(_) => Kind::Image,
            Part::Document(_) => Kind::Document,
            Part::Audio(_) => Kind::Audio,
        }
    }

    /// The media of an image, a document or audio; `None` for text.
    pub fn media(&self) -> Option<&Media> {
        match self {
            Part::Image(media) | Part::Document(media) | Part::Audio(media) => Some(media),
            Part::Text { .. } => None,
        }
    }

    /// The media, to change (a name, a detail).
    pub fn media_mut(&mut self) -> Option<&mut Media> {
        match self {
            Part::Image(media) | Part::Document(media) | Part::Audio(media) => Some(media),
            Part::Text { .. } => None,
        }
    }

    /// The text of a text part; `None` for any other.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Part::Text { text } => Some(text),
            _ => None,
        }
    }

    /// This part with a file name (documents), when it has media.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        if let Some(media) = self.media_mut() {
            media.name = Some(name.into());
        }
        self
    }

    /// This part with an image detail, when it has media.
    #[must_use]
    pub fn with_detail(mut self, detail: Detail) -> Self {
        if let Some(media) = self.media_mut() {
            media.detail = Some(detail);
        }
        self
    }

    /// This part with a Gemini 3 media resolution (see [`MediaResolution`]), when it
    /// has media.
    #[must_use]
    pub fn with_media_resolution(mut self, resolution: MediaResolution) -> Self {
        if let Some(media) = self.media_mut() {
            media.media_resolution = Some(resolution);
        }
        self
    }

    /// The size of the part's bytes (0 for text, a URL or a file id).
    pub fn byte_len(&self) -> usize {
        match self.media().map(|m| &m.source) {
            Some(Source::Bytes(bytes)) => bytes.len(),
            _ => 0,
        }
    }

    /// A short text that names the part without its bytes: `image/png, 12,345 bytes`,
    /// `document application/pdf at https://...`, for notes, traces and summaries.
    pub fn describe(&self) -> String {
        match self {
            Part::Text { text } => format!("text, {} bytes", text.len()),
            _ => {
                let media = self.media();
                let kind = self.kind();
                match media {
                    Some(Media {
                        source: Source::Bytes(bytes),
                        media_type,
                        ..
                    }) => format!("{kind} {media_type}, {} bytes", bytes.len()),
                    Some(Media {
                        source: Source::Url(url),
                        media_type,
                        ..
                    }) => format!("{kind} {media_type} at {url}"),
                    Some(Media {
                        source: Source::File(id),
                        media_type,
                        ..
                    }) => format!("{kind} {media_type}, file {id}"),
                    None => kind.to_string(),
                }
            }
        }
    }
}

impl Media {
    /// Media from its source and media type.
    pub fn new(source: Source, media_type: impl Into<String>) -> Self {
        Self {
            source,
            media_type: media_type.into(),
            name: None,
            detail: None,
            media_resolution: None,
        }
    }
}

/// Whether `media_type` is `type/subtype`.
fn check_media_type(media_type: &str) -> Result<(), ContentError> {
    let ok = media_type.split_once('/').is_some_and(|(t, s)| {
        !t.is_empty()
            && !s.is_empty()
            && media_type
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/+-.;= ".contains(&b))
    });
    if ok {
        Ok(())
    } else {
        Err(ContentError::InvalidMediaType {
            media_type: media_type.to_owned(),
        })
    }
}
