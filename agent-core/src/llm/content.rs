//! [`ContentCapabilities`]: which parts a model takes beside text, from where, and how
//! large, so that the runner refuses what a model cannot take before any request,
//! instead of sending it for the provider to reject, or dropping it.

use crate::content::{Kind, Part, Source, TokenRule};

/// Which content a model takes beside text (see
/// [`LlmClient::content_capabilities`](super::LlmClient::content_capabilities)): the
/// media types of each kind, the sources, whether tool results may carry parts, and the
/// limits a request's parts must keep, with the page they come from.
///
/// A client that says nothing takes text alone ([`ContentCapabilities::TEXT_ONLY`]); a
/// custom client that takes more says so by returning its own value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContentCapabilities {
    /// The image types taken (`image/png`, ...); empty: no images.
    pub image_types: &'static [&'static str],
    /// The document types taken (`application/pdf`, `text/plain`, ...); empty: none.
    pub document_types: &'static [&'static str],
    /// The audio types taken (`audio/wav`, `audio/mpeg`, ...); empty: none.
    pub audio_types: &'static [&'static str],
    /// Whether a part may be a URL the provider fetches.
    pub urls: bool,
    /// Whether a part may be a provider file id.
    pub file_ids: bool,
    /// Whether a tool result may carry parts (else the runner sends them in a user
    /// message after the results, with a note naming the call).
    pub parts_in_tool_results: bool,
    /// The largest part, in bytes (of its bytes, before any encoding), when limited.
    pub max_part_bytes: Option<usize>,
    /// The most parts (images, documents, audio) one request may carry, when limited.
    pub max_parts: Option<usize>,
    /// The largest image, in bytes (before base64), when images have their own limit.
    pub max_image_bytes: Option<usize>,
    /// The largest document, in bytes (before base64), when documents have their own
    /// limit.
    pub max_document_bytes: Option<usize>,
    /// The most images one request may carry, when limited.
    pub max_images: Option<usize>,
    /// The most documents one request may carry, when limited.
    pub max_documents: Option<usize>,
    /// The most bytes (before base64) the parts of one request may have together, when
    /// the provider limits the request's size (base64 adds a third: a 32 MB request
    /// carries about 24 MB of parts).
    pub max_total_bytes: Option<usize>,
    /// The most PDF pages the documents of one request may have together, when limited.
    /// Pages are counted from each PDF's page objects where they are readable (a PDF
    /// whose page objects are in compressed object streams counts none, and the
    /// provider's own check stays the last word).
    pub max_pdf_pages: Option<usize>,
    /// The most bytes (before base64) the documents of one request may have together,
    /// when limited apart from other parts (OpenAI: 32 MB of files a request).
    pub max_total_document_bytes: Option<usize>,
    /// The largest image, as (width, height) in pixels, when limited (read from the
    /// image's header when its bytes are at hand; a URL or a file id is not checked).
    pub max_image_dimensions: Option<(u32, u32)>,
    /// A smaller pixel limit for requests with many images: `(count, (width,
    /// height))`, each image at most `width × height` px when a request carries more
    /// than `count` images (Anthropic: 2,000 × 2,000 px above 20 images).
    pub many_images_dimensions: Option<(usize, (u32, u32))>,
    /// How the provider counts a part's input tokens: the rule of the runner's
    /// estimates (the token budget, the context-window check, compaction) before a
    /// call; the provider's reported usage wins after it.
    pub tokens: TokenRule,
    /// Where these facts come from (a provider's documentation page).
    pub source: &'static str,
}

/// The image types every provider that takes images takes.
pub const COMMON_IMAGES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];
/// PDF alone.
pub const PDF: &[&str] = &["application/pdf"];

impl ContentCapabilities {
    /// Text alone: the default of every client that does not say otherwise.
    pub const TEXT_ONLY: ContentCapabilities = ContentCapabilities {
        image_types: &[],
        document_types: &[],
        audio_types: &[],
        urls: false,
        file_ids: false,
        parts_in_tool_results: false,
        max_part_bytes: None,
        max_parts: None,
        max_image_bytes: None,
        max_document_bytes: None,
        max_images: None,
        max_documents: None,
        max_total_bytes: None,
        max_pdf_pages: None,
        max_total_document_bytes: None,
        max_image_dimensions: None,
        many_images_dimensions: None,
        tokens: TokenRule::Conservative,
        source: "",
    };

    /// Any part, from any source, anywhere, unlimited: for in-process test clients.
    pub const ANY: ContentCapabilities = ContentCapabilities {
        image_types: &["*"],
        document_types: &["*"],
        audio_types: &["*"],
        urls: true,
        file_ids: true,
        parts_in_tool_results: true,
        max_part_bytes: None,
        max_parts: None,
        max_image_bytes: None,
        max_document_bytes: None,
        max_images: None,
        max_documents: None,
        max_total_bytes: None,
        max_pdf_pages: None,
        max_total_document_bytes: None,
        max_image_dimensions: None,
        many_images_dimensions: None,
        tokens: TokenRule::Conservative,
        source: "",
    };

    /// Whether the model takes any part beside text.
    pub fn takes_parts(&self) -> bool {
        !(self.image_types.is_empty()
            && self.document_types.is_empty()
            && self.audio_types.is_empty())
    }

    /// Whether the model takes `part` (its kind, media type and source; its size and,
    /// for an image, its pixels when the bytes are at hand), alone in a request.
    ///
    /// # Errors
    /// Why not, in words that name the limit (and its source) where one was passed.
    pub fn check(&self, part: &Part) -> Result<(), String> {
        self.check_among(part, 1)
    }

    /// [`check`](Self::check) for a part of a request that carries `images` images
    /// (the pixel limit of [`many_images_dimensions`](Self::many_images_dimensions)
    /// applies above its count).
    pub(crate) fn check_among(&self, part: &Part, images: usize) -> Result<(), String> {
        let Some(media) = part.media() else {
            return Ok(());
        };
        let types = match part.kind() {
            Kind::Image => self.image_types,
            Kind::Document => self.document_types,
            Kind::Audio => self.audio_types,
            _ => return Ok(()),
        };
        let kind = part.kind();
        if types.is_empty() {
            return Err(match kind {
                Kind::Audio => "the model takes no audio".to_owned(),
                _ => format!("the model takes no {kind}s"),
            });
        }
        let media_type = media
            .media_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim();
        if !types.contains(&"*") && !types.contains(&media_type) {
            return Err(format!(
                "the model takes {kind}s of the types {} only",
                types.join(", ")
            ));
        }
        match &media.source {
            Source::Url(_) if !self.urls => {
                return Err(
                    "the model takes no URL (the provider does not fetch one): pass the bytes"
                        .to_owned(),
                );
            }
            Source::File(_) if !self.file_ids => {
                return Err("the model takes no provider file id: pass the bytes".to_owned());
            }
            Source::Bytes(bytes) => {
                if let Some(max) = self.max_part_bytes
                    && bytes.len() > max
                {
                    return Err(format!(
                        "{} bytes is more than the {max} bytes a part may have{}",
                        bytes.len(),
                        self.cited()
                    ));
                }
                let kind_max = match kind {
                    Kind::Image => self.max_image_bytes,
                    Kind::Document => self.max_document_bytes,
                    _ => None,
                };
                if let Some(max) = kind_max
                    && bytes.len() > max
                {
                    return Err(format!(
                        "{} bytes is more than the {max} bytes {} may have{}",
                        bytes.len(),
                        if kind == Kind::Image {
                            "an image"
                        } else {
                            "a document"
                        },
                        self.cited()
                    ));
                }
                if kind == Kind::Image {
                    self.check_pixels(bytes.as_slice(), images)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether an image's pixels (from its header; an unreadable header is not
    /// refused here) are within the limit for a request of `images` images.
    fn check_pixels(&self, bytes: &[u8], images: usize) -> Result<(), String> {
        let many = self
            .many_images_dimensions
            .filter(|(count, _)| images > *count);
        let limit = match (many, self.max_image_dimensions) {
            (Some((_, many)), Some(max)) => Some((many.0.min(max.0), many.1.min(max.1))),
            (Some((_, many)), None) => Some(many),
            (None, max) => max,
        };
        let (Some((max_w, max_h)), Some((w, h))) = (limit, crate::content::image_size(bytes))
        else {
            return Ok(());
        };
        if w <= u64::from(max_w) && h <= u64::from(max_h) {
            return Ok(());
        }
        let when = match many {
            Some((count, _)) => format!(
                " when a request carries more than {count} images (this one carries {images})"
            ),
            None => String::new(),
        };
        Err(format!(
            "{w}x{h} px is more than the {max_w}x{max_h} px an image may have{when}{}",
            self.cited()
        ))
    }

    /// Why a request's parts together break a count or size limit, if they do:
    /// `images`, `documents` and `parts` counted, the bytes of all parts and of the
    /// documents together, `pages` the PDF pages of the documents.
    pub(crate) fn check_totals(
        &self,
        (images, documents, parts): (usize, usize, usize),
        (bytes, document_bytes): (usize, usize),
        pages: usize,
    ) -> Option<String> {
        let over = |count: usize, max: Option<usize>| max.filter(|max| count > *max);
        let (count, max, what) = if let Some(max) = over(parts, self.max_parts) {
            (parts, max, "parts")
        } else if let Some(max) = over(images, self.max_images) {
            (images, max, "images")
        } else if let Some(max) = over(documents, self.max_documents) {
            (documents, max, "documents")
        } else if let Some(max) = over(pages, self.max_pdf_pages) {
            (pages, max, "PDF pages")
        } else if let Some(max) = over(document_bytes, self.max_total_document_bytes) {
            return Some(format!(
                "the conversation's documents hold {document_bytes} bytes together, more than \
                 the {max} bytes of documents a request may carry{}",
                self.cited()
            ));
        } else if let Some(max) = over(bytes, self.max_total_bytes) {
            return Some(format!(
                "the conversation's parts hold {bytes} bytes together, more than the {max} \
                 bytes a request may carry{}",
                self.cited()
            ));
        } else {
            return None;
        };
        Some(format!(
            "the conversation holds {count} {what}, more than the {max} a request may carry{}",
            self.cited()
        ))
    }

    /// " (source: PAGE)" when the facts have a source, else nothing.
    pub(crate) fn cited(&self) -> String {
        if self.source.is_empty() {
            String::new()
        } else {
            format!(" (source: {})", self.source)
        }
    }
}
