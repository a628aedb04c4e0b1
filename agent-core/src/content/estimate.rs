//! Token estimates of parts, before a request (the provider's reported usage wins after
//! it): what the token budget, the context-window check and compaction count for an
//! image, a document or audio, by the rule of the provider the call goes to
//! ([`TokenRule`]).
//!
//! An image's size is read from its header only (`imagesize`: the first bytes of a
//! PNG, JPEG, GIF or WebP), never decoded; a PDF's pages are counted from its page
//! objects. Text-only messages never reach this module (the callers look at a
//! message's parts first).

use super::part::{Detail, Kind, MediaResolution, Part, Source};

/// How a provider counts the input tokens of an image, a document or audio: the rule
/// the runner's estimates follow for the model a call goes to (from
/// [`ContentCapabilities::tokens`](crate::llm::ContentCapabilities::tokens)). Every
/// rule counts a text document as its bytes / 4, audio as 32 tokens a second, and a
/// part whose size cannot be read (a URL, a file id, bytes of unknown layout) by the
/// rule's ceiling for its kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenRule {
    /// The larger of the providers' rules, for a client that names none (custom
    /// clients, compatible servers): an image `width × height / 750` tokens within
    /// 85..=1,600 (1,600 when its size cannot be read); a PDF 3,000 tokens a page.
    #[default]
    Conservative,
    /// Anthropic (and Claude on Bedrock), "Calculate image costs",
    /// <https://docs.anthropic.com/en/docs/build-with-claude/vision>: an image whose
    /// long edge is over 1,568 px is scaled down (aspect kept) to 1,568 px, then costs
    /// `⌈width × height / 750⌉` tokens, at most 1,600 (an image over ~1,600 tokens,
    /// about 1.15 megapixels, is scaled down to that); 1,600 when its size cannot be
    /// read. A PDF: 3,000 tokens a page (1,500 to 3,000 for a page's text, plus the
    /// page as an image, <https://docs.anthropic.com/en/docs/build-with-claude/pdf-support>).
    Anthropic,
    /// OpenAI's tile rule (and Azure OpenAI's), "Calculating costs",
    /// <https://platform.openai.com/docs/guides/images-vision#calculating-costs>, for
    /// the models it names with their own `base` and `tile` tokens: `detail: low` costs
    /// `base`; `high` (and `auto` or unset, counted as `high`) scales the image to fit
    /// in 2,048 × 2,048, then so that its shortest side is 768 px (both only down),
    /// and costs `base` plus `tile` per 512-px tile; `base + 8 × tile` (the most tiles,
    /// 2 × 4) when its size cannot be read. The rows the page gives:
    /// [`OPENAI_GPT_4O`](Self::OPENAI_GPT_4O) (gpt-4o, gpt-4.1, gpt-4.5: 85, 170),
    /// [`OPENAI_GPT_4O_MINI`](Self::OPENAI_GPT_4O_MINI) (2,833, 5,667),
    /// [`OPENAI_GPT_5`](Self::OPENAI_GPT_5) (gpt-5, gpt-5-chat-latest: 70, 140),
    /// [`OPENAI_O`](Self::OPENAI_O) (o1, o1-pro, o3: 75, 150). A PDF: 3,000 tokens a
    /// page (its text and an image of each page,
    /// <https://platform.openai.com/docs/guides/pdf-files>).
    OpenAiTiles {
        /// The tokens of `detail: low`, and the base of `high`.
        base: u16,
        /// The tokens of each 512-px tile at `high`.
        tile: u16,
    },
    /// OpenAI's patch rule, "Calculating costs" (as above), for gpt-4.1-mini,
    /// gpt-4.1-nano, gpt-5-mini, gpt-5-nano and o4-mini: the 32-px patches that cover
    /// the image, at most 1,536 (a larger image is scaled down, aspect kept, to fit in
    /// 1,536 whole patches), times the model's multiplier, rounded to the nearest
    /// token (1.62 for gpt-4.1-mini and gpt-5-mini, 2.46 for gpt-4.1-nano and
    /// gpt-5-nano, 1.72 for o4-mini); `detail` does not change it; 1,536 patches
    /// when its size cannot be read. A PDF: 3,000 tokens a page.
    OpenAiPatches {
        /// The multiplier in hundredths (162 is 1.62).
        multiplier_percent: u16,
    },
    /// Google Gemini before Gemini 3, "Multimodal tokens",
    /// <https://ai.google.dev/gemini-api/docs/tokens>: an image with both sides at
    /// most 384 px is 258 tokens; a larger one is cut into 768 × 768 tiles, 258 tokens
    /// each; a PDF is 258 tokens a page
    /// (<https://ai.google.dev/gemini-api/docs/document-processing>); audio 32 tokens a
    /// second. A part's [`MediaResolution`] is not counted (these models are not sent
    /// it).
    Gemini,
    /// Gemini 3 and later, "Media resolution", Token counts,
    /// <https://ai.google.dev/gemini-api/docs/media-resolution>: an image costs what its
    /// part's [`MediaResolution`] says (280, 560, 1,120 or 2,240), 1,120 when unset,
    /// whatever its size; a PDF page 280, 560 or 1,120, 560 when unset (its text
    /// besides is not counted); audio 32 tokens a second.
    Gemini3,
}

/// The conservative rule's tokens for an image whose size cannot be read.
const IMAGE_UNKNOWN: u64 = 1_600;
/// The conservative rule's tokens for a PDF page, and for a PDF whose pages cannot be
/// counted.
const PDF_PAGE: u64 = 3_000;

impl TokenRule {
    /// OpenAI's tile rule for gpt-4o, gpt-4.1 and gpt-4.5 (85, 170).
    pub const OPENAI_GPT_4O: TokenRule = TokenRule::OpenAiTiles {
        base: 85,
        tile: 170,
    };
    /// OpenAI's tile rule for gpt-4o-mini (2,833, 5,667).
    pub const OPENAI_GPT_4O_MINI: TokenRule = TokenRule::OpenAiTiles {
        base: 2_833,
        tile: 5_667,
    };
    /// OpenAI's tile rule for gpt-5 and gpt-5-chat-latest (70, 140).
    pub const OPENAI_GPT_5: TokenRule = TokenRule::OpenAiTiles {
        base: 70,
        tile: 140,
    };
    /// OpenAI's tile rule for o1, o1-pro and o3 (75, 150).
    pub const OPENAI_O: TokenRule = TokenRule::OpenAiTiles {
        base: 75,
        tile: 150,
    };

    /// The estimated input tokens of `part` under this rule (0 for text: text is
    /// counted as text).
    pub fn tokens(self, part: &Part) -> u64 {
        let Some(media) = part.media() else {
            return 0;
        };
        let bytes = match &media.source {
            Source::Bytes(bytes) => Some(bytes.as_slice()),
            _ => None,
        };
        match part.kind() {
            Kind::Image if self == TokenRule::Gemini3 => media
                .media_resolution
                .unwrap_or(MediaResolution::High)
                .tokens(),
            Kind::Image => {
                let size = bytes.and_then(image_size);
                self.image_tokens(size, media.detail)
            }
            Kind::Document if media.media_type == "application/pdf" => {
                let pages = bytes.map_or(0, pdf_pages);
                let page = match self {
                    TokenRule::Gemini => 258,
                    TokenRule::Gemini3 => media
                        .media_resolution
                        .unwrap_or(MediaResolution::Medium)
                        .tokens(),
                    _ => PDF_PAGE,
                };
                match pages {
                    0 => PDF_PAGE,
                    pages => pages.saturating_mul(page),
                }
            }
            Kind::Document => bytes.map_or(PDF_PAGE, |b| (b.len() as u64).div_ceil(4)),
            Kind::Audio => bytes.map_or(960, audio_tokens),
            _ => 0,
        }
    }

    /// An image's tokens from its size in pixels (`None`: not readable).
    fn image_tokens(self, size: Option<(u64, u64)>, detail: Option<Detail>) -> u64 {
        match self {
            TokenRule::Conservative => size.map_or(IMAGE_UNKNOWN, |(w, h)| {
                w.saturating_mul(h).div_ceil(750).clamp(85, IMAGE_UNKNOWN)
            }),
            TokenRule::Anthropic => size.map_or(IMAGE_UNKNOWN, |(w, h)| {
                let (w, h) = fit_long_edge(w, h, 1_568);
                w.saturating_mul(h).div_ceil(750).min(IMAGE_UNKNOWN)
            }),
            TokenRule::OpenAiTiles { base, .. } if detail == Some(Detail::Low) => u64::from(base),
            TokenRule::OpenAiTiles { base, tile } => {
                let tiles = size.map_or(8, |(w, h)| {
                    let (w, h) = fit_long_edge(w, h, 2_048);
                    let (w, h) = fit_short_edge(w, h, 768);
                    w.div_ceil(512) * h.div_ceil(512)
                });
                u64::from(base) + u64::from(tile) * tiles
            }
            TokenRule::OpenAiPatches { multiplier_percent } => {
                let patches = size.map_or(PATCHES_MAX, |(w, h)| openai_patches(w, h));
                (patches * u64::from(multiplier_percent) + 50) / 100
            }
            TokenRule::Gemini => match size {
                Some((w, h)) if w <= 384 && h <= 384 => 258,
                Some((w, h)) => 258 * w.div_ceil(768) * h.div_ceil(768),
                None => IMAGE_UNKNOWN,
            },
            TokenRule::Gemini3 => MediaResolution::High.tokens(),
        }
    }
}

/// The most 32-px patches OpenAI's patch rule counts for an image.
const PATCHES_MAX: u64 = 1_536;

/// The 32-px patches OpenAI counts for a `w × h` image: those that cover it, or, when
/// more than 1,536, those of the image scaled down (aspect kept) by
/// `√(32² × 1,536 / (w × h))`, then further so that its tighter side fits in whole
/// patches; at most 1,536, at least 1 a side.
fn openai_patches(w: u64, h: u64) -> u64 {
    let (w, h) = (w.max(1), h.max(1));
    let raw = w.div_ceil(32).saturating_mul(h.div_ceil(32));
    if raw <= PATCHES_MAX {
        return raw;
    }
    let (w, h) = (w as f64, h as f64);
    let shrink = (32.0 * 32.0 * PATCHES_MAX as f64 / (w * h)).sqrt();
    let (across, down) = (w * shrink / 32.0, h * shrink / 32.0);
    // Each side's fit to whole patches; a side under one patch does not decide.
    let fit = |patches: f64| (patches >= 1.0).then(|| patches.floor() / patches);
    let fit = match (fit(across), fit(down)) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => 1.0,
    };
    // A side that fits exactly may come out a hair over its whole number.
    let side = |patches: f64| ((patches * fit - 1e-9).ceil() as u64).max(1);
    (side(across) * side(down)).min(PATCHES_MAX)
}

/// `(w, h)` scaled down (aspect kept, pixels rounded down, at least 1) so that the
/// longer side is at most `max`.
fn fit_long_edge(w: u64, h: u64, max: u64) -> (u64, u64) {
    let long = w.max(h);
    if long <= max {
        return (w, h);
    }
    ((w * max / long).max(1), (h * max / long).max(1))
}

/// `(w, h)` scaled down (aspect kept) so that the shorter side is at most `max`.
fn fit_short_edge(w: u64, h: u64, max: u64) -> (u64, u64) {
    let short = w.min(h);
    if short <= max {
        return (w, h);
    }
    ((w * max / short).max(1), (h * max / short).max(1))
}

/// An image's width and height in pixels, from its header (`None`: not readable).
pub(crate) fn image_size(bytes: &[u8]) -> Option<(u64, u64)> {
    let size = imagesize::blob_size(bytes).ok()?;
    Some((size.width as u64, size.height as u64))
}

/// The estimated input tokens of `part` by the conservative rule (0 for text).
#[cfg(test)]
fn tokens(part: &Part) -> u64 {
    TokenRule::Conservative.tokens(part)
}

/// The pages of `part` when it is a PDF given as bytes (its readable page objects), else 0.
pub(crate) fn pdf_pages_of(part: &Part) -> usize {
    match part.media() {
        Some(media) if media.media_type == "application/pdf" => match &media.source {
            Source::Bytes(bytes) => {
                usize::try_from(pdf_pages(bytes.as_slice())).unwrap_or(usize::MAX)
            }
            _ => 0,
        },
        _ => 0,
    }
}

/// The pages of a PDF: its `/Type /Page` objects (not `/Pages`, the tree's nodes); 0
/// when none is readable (page objects in compressed object streams).
fn pdf_pages(bytes: &[u8]) -> u64 {
    let needle = b"/Type";
    let mut pages = 0;
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], needle) {
        let rest = &bytes[at + found + needle.len()..];
        let rest = rest.strip_prefix(b" ").unwrap_or(rest);
        if rest.starts_with(b"/Page") && !rest.starts_with(b"/Pages") {
            pages += 1;
        }
        at += found + needle.len();
    }
    pages
}

/// Where `needle` first occurs in `haystack`: each place of its first byte, then the
/// rest compared.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let mut at = 0;
    while let Some(offset) = haystack[at..].iter().position(|b| *b == first) {
        let start = at + offset;
        if haystack[start + 1..].starts_with(rest) {
            return Some(start);
        }
        at = start + 1;
    }
    None
}

/// 32 tokens per second: a WAV's seconds from its header (byte rate at offset 28, data
/// after the 44-byte header), else bytes / 64.
fn audio_tokens(bytes: &[u8]) -> u64 {
    let wav = bytes.len() > 44 && bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WAVE");
    if wav && let Some(rate) = bytes.get(28..32) {
        let rate = u64::from(u32::from_le_bytes([rate[0], rate[1], rate[2], rate[3]]));
        if rate > 0 {
            let seconds = ((bytes.len() - 44) as u64).div_ceil(rate);
            return seconds.saturating_mul(32).max(32);
        }
    }
    (bytes.len() as u64).div_ceil(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_pdfs_and_audio_have_their_published_estimates() {
        // A 1x1 PNG: the floor of 85.
        let png = crate::content::Part::from_base64(
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
            "image/png",
        )
        .unwrap();
        assert_eq!(tokens(&png), 85);
        let url = crate::content::Part::from_url("https://x.test/a.png", "image/png").unwrap();
        assert_eq!(tokens(&url), 1_600);
        let pdf = crate::content::Part::from_bytes_as(
            b"%PDF-1.4\n1 0 obj << /Type /Pages /Kids [2 0 R 3 0 R] >>\n2 0 obj << /Type /Page >>\n3 0 obj << /Type/Page >>\n".to_vec(),
            "application/pdf",
        )
        .unwrap();
        assert_eq!(tokens(&pdf), 6_000);
        assert_eq!(TokenRule::Gemini.tokens(&pdf), 516);
        assert_eq!(tokens(&crate::content::Part::text("x")), 0);
    }

    #[test]
    fn sizes_scale_as_documented() {
        // Anthropic's table: 1000x1000 is ~1,334 tokens, 200x200 ~54, 1092x1092 ~1,590.
        let anthropic = |w, h| TokenRule::Anthropic.image_tokens(Some((w, h)), None);
        assert_eq!(anthropic(1_000, 1_000), 1_334);
        assert_eq!(anthropic(200, 200), 54);
        assert_eq!(anthropic(1_092, 1_092), 1_590);
        // OpenAI's examples: 1024x1024 high is 765; 2048x4096 high is 1,105; low is 85.
        let openai = |w, h, d| TokenRule::OPENAI_GPT_4O.image_tokens(Some((w, h)), d);
        assert_eq!(openai(1_024, 1_024, None), 765);
        assert_eq!(openai(2_048, 4_096, Some(Detail::High)), 1_105);
        assert_eq!(openai(4_096, 8_192, Some(Detail::Low)), 85);
        // OpenAI's patch examples: 1024x1024 is 32 x 32 = 1,024 patches; 1800x2400 is
        // 4,275 patches, scaled to 1056x1408: 33 x 44 = 1,452.
        assert_eq!(openai_patches(1_024, 1_024), 1_024);
        assert_eq!(openai_patches(1_800, 2_400), 1_452);
        // A thin image: the narrow side stays one patch, the count at most 1,536.
        assert_eq!(openai_patches(1, 49_152), 1_536);
        assert_eq!(openai_patches(1, 60_000), 1_536);
        assert_eq!(openai_patches(40, 49_152), 1_229);
        assert_eq!(openai_patches(0, 0), 1);
        // Gemini: 258 up to 384 px both sides, then 258 per 768-px tile.
        let gemini = |w, h| TokenRule::Gemini.image_tokens(Some((w, h)), None);
        assert_eq!(gemini(384, 384), 258);
        assert_eq!(gemini(385, 100), 258);
        assert_eq!(gemini(1_600, 900), 258 * 6);
        assert_eq!(TokenRule::Gemini3.image_tokens(Some((10, 10)), None), 1_120);
    }
}
