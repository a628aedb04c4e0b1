//! [`ContentError`]: why a part could not be made.

/// Why a part could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContentError {
    /// The file could not be read.
    #[error("the file {path} cannot be read: {reason}")]
    Unreadable {
        /// The file's path.
        path: String,
        /// Why (the system's error).
        reason: String,
    },
    /// No bytes.
    #[error("the content is empty (0 bytes)")]
    Empty,
    /// The bytes are of no media type this crate recognizes.
    #[error(
        "the bytes are of no known type (images: PNG, JPEG, GIF, WebP; documents: PDF; \
         audio: WAV, MP3, FLAC, OGG); give the media type with the bytes"
    )]
    UnknownType,
    /// The media type given does not match the bytes.
    #[error("the media type {declared} does not match the bytes, which are {sniffed}")]
    Mismatch {
        /// The type given.
        declared: String,
        /// The type the bytes are.
        sniffed: String,
    },
    /// The text is not base64.
    #[error("the content is not valid base64: {reason}")]
    Base64 {
        /// Why.
        reason: String,
    },
    /// A media type that is not `type/subtype`.
    #[error("`{media_type}` is not a media type (type/subtype)")]
    InvalidMediaType {
        /// What was given.
        media_type: String,
    },
}
