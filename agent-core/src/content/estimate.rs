//! Token estimates of parts, before a request (the provider's reported usage wins after
//! it): what the token budget, the context-window check and compaction count for an
//! image, a document or audio.
//!
//! The rules follow the providers' published formulas, taking the larger where they
//! differ, so a budget is not passed by surprise:
//! - an image: `width × height / 750` tokens, at least 85 and at most 1,600 (Anthropic,
//!   "Calculate image costs", <https://docs.anthropic.com/en/docs/build-with-claude/vision>;
//!   OpenAI's tiles give 85 to 1,105 at the default detail,
//!   <https://platform.openai.com/docs/guides/images-vision>; Gemini counts 258 per image
//!   up to 384 px, <https://ai.google.dev/gemini-api/docs/tokens>); 1,600 when the size
//!   cannot be read (a URL, a file id, unknown bytes);
//! - a PDF: 3,000 tokens per page (Anthropic: 1,500 to 3,000 per page of text and the
//!   page as an image, <https://docs.anthropic.com/en/docs/build-with-claude/pdf-support>;
//!   Gemini: 258 per page), pages counted from the file; 3,000 when not at hand;
//! - a text document: its bytes / 4, as text;
//! - audio: 32 tokens per second (Gemini, "Audio understanding"); a WAV's length from its
//!   header, else its bytes / 64 (about 16 kbit/s); 960 (30 s) when not at hand.

use super::part::{Kind, Part, Source};

/// The estimated input tokens of `part` (0 for text: text is counted as text).
pub(crate) fn tokens(part: &Part) -> u64 {
    let Some(media) = part.media() else {
        return 0;
    };
    let bytes = match &media.source {
        Source::Bytes(bytes) => Some(bytes.as_slice()),
        _ => None,
    };
    match part.kind() {
        Kind::Image => bytes.and_then(image_tokens).unwrap_or(1_600),
        Kind::Document if media.media_type == "application/pdf" => {
            bytes.map_or(3_000, |b| pdf_pages(b).max(1).saturating_mul(3_000))
        }
        Kind::Document => bytes.map_or(3_000, |b| (b.len() as u64).div_ceil(4)),
        Kind::Audio => bytes.map_or(960, audio_tokens),
        _ => 0,
    }
}

/// `width × height / 750`, within 85..=1,600, when the size can be read.
fn image_tokens(bytes: &[u8]) -> Option<u64> {
    let size = imagesize::blob_size(bytes).ok()?;
    let pixels = (size.width as u64).saturating_mul(size.height as u64);
    Some(pixels.div_ceil(750).clamp(85, 1_600))
}

/// The pages of a PDF: its `/Type /Page` objects (not `/Pages`, the tree's nodes).
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

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
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
        assert_eq!(tokens(&crate::content::Part::text("x")), 0);
    }
}
