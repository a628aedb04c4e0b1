//! Content parts: the images, documents and audio a run's input, a user message or a tool
//! result carries beside its text ([`Part`]), where their bytes come from ([`Source`]),
//! and the typed errors of making one ([`ContentError`]).
//!
//! A part is made from bytes (its media type given, or sniffed from the bytes), from a
//! file (the type sniffed from the file's bytes, never trusted from its extension), from
//! a URL or a provider's file id (the provider fetches it; this crate never does), or
//! from base64. Bytes are shared (`Arc`), so a part is cheap to clone, and never shown:
//! `Debug` prints the media type, the size and a hash.

mod bytes;
mod error;
mod estimate;
mod input;
mod part;
mod sniff;

pub use bytes::Bytes;
pub use error::ContentError;
pub use estimate::TokenRule;
pub(crate) use estimate::{image_size, pdf_pages_of};
pub use input::Input;
pub use part::{Detail, Kind, Media, MediaResolution, Part, Source};

#[cfg(test)]
mod tests;
