//! Which parts OpenAI's models take, per wire and model family
//! ([`ContentCapabilities`]): what `OpenAiClient` and `OpenAiResponsesClient` answer
//! for `content_capabilities`, unless `ProviderOptions::content_capabilities` says
//! otherwise.

use crate::content::TokenRule;
use crate::llm::ContentCapabilities;
use crate::llm::{COMMON_IMAGES, PDF};

/// OpenAI's audio input: `input_audio` with `wav` or `mp3` data, on the audio models
/// of Chat Completions (source: the audio guide).
pub(crate) const OPENAI_AUDIO_SOURCE: &str = "https://platform.openai.com/docs/guides/audio";

/// Azure OpenAI's vision-enabled chat models: images by URL or base64, at most 50 per
/// request, 20 MB each (source: "Azure OpenAI quotas and limits").
pub(crate) const AZURE_SOURCE: &str =
    "https://learn.microsoft.com/en-us/azure/ai-foundry/openai/quotas-limits";

/// The largest image OpenAI and Azure take: 20 MB (20,000,000 bytes, the strict
/// reading of "MB"), per image.
const MAX_IMAGE_BYTES: usize = 20_000_000;

/// The most bytes of files one OpenAI request may carry: 32 MB (32,000,000 bytes).
const MAX_DOCUMENT_TOTAL_BYTES: usize = 32_000_000;

/// Where OpenAI's limits come from, cited in errors: the images and vision guide,
/// "Image input requirements" (PNG, JPEG, WebP and non-animated GIF, up to 20 MB per
/// image, up to 500 images per request), and the PDF files guide, "File size
/// limitations" ("up to 100 pages and 32MB of total content in a single request to
/// the API, across multiple file inputs").
const OPENAI_SOURCES: &str = "https://platform.openai.com/docs/guides/images-vision and \
     https://platform.openai.com/docs/guides/pdf-files";

/// The audio types of `input_audio` (`wav`, `mp3`), with their common aliases.
pub(crate) const AUDIO: &[&str] = &[
    "audio/wav",
    "audio/x-wav",
    "audio/wave",
    "audio/mpeg",
    "audio/mp3",
];

/// The document types the Responses API's `input_file` takes that this crate names:
/// PDF (text and page images), and text, Markdown, CSV, JSON, HTML and the Office
/// formats (text extracted) (source: the file inputs guide,
/// <https://platform.openai.com/docs/guides/file-inputs>).
pub(crate) const RESPONSES_DOCUMENTS: &[&str] = &[
    "application/pdf",
    "text/plain",
    "text/markdown",
    "text/csv",
    "text/html",
    "application/json",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
];

/// What an OpenAI model takes beside text, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// Images and PDFs: gpt-4o, gpt-4.1, gpt-4.5, gpt-5, chatgpt-4o, gpt-4-turbo, o1,
    /// o3, o4-mini (and their dated and fine-tuned names).
    Vision,
    /// Audio (Chat Completions only): gpt-4o-audio-preview, gpt-4o-mini-audio-preview,
    /// gpt-audio.
    Audio,
    /// Text alone: gpt-3.5, gpt-4, o1-mini, o1-preview, o3-mini, the search, realtime,
    /// transcription and speech models, and any name not known.
    Text,
}

/// The family of an OpenAI model name (or of an Azure deployment named after its model).
pub(crate) fn family(model: &str) -> Family {
    let name = model.to_ascii_lowercase();
    family_of(name.strip_prefix("ft:").unwrap_or(&name))
}

/// Whether `name` is `prefix`, or `prefix` followed by `-`, `:` or `.` (a dated, a
/// fine-tuned or a point-release name).
fn named(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', ':', '.']))
}

/// [`family`] of a lowercase name without `ft:`.
fn family_of(name: &str) -> Family {
    if name.contains("-audio") || name.starts_with("gpt-audio") {
        return Family::Audio;
    }
    let text_only = [
        "-search",
        "-realtime",
        "-transcribe",
        "-tts",
        "embedding",
        "instruct",
    ];
    if text_only.iter().any(|m| name.contains(m)) {
        return Family::Text;
    }
    let is = |prefix: &str| named(name, prefix);
    let vision = [
        "gpt-4o",
        "chatgpt-4o",
        "gpt-4.1",
        "gpt-4.5",
        "gpt-5",
        "o4-mini",
    ]
    .iter()
    .any(|p| is(p))
        || (is("gpt-4-turbo") && !name.contains("preview"))
        || (is("o1") && !is("o1-mini") && !is("o1-preview"))
        || (is("o3") && !is("o3-mini"));
    if vision { Family::Vision } else { Family::Text }
}

/// How OpenAI counts an image's tokens for a vision model, by its name (the table of
/// "Calculating costs",
/// <https://platform.openai.com/docs/guides/images-vision#calculating-costs>): 32-px
/// patches times 1.62 (gpt-4.1-mini, gpt-5-mini), 2.46 (gpt-4.1-nano, gpt-5-nano) or
/// 1.72 (o4-mini); 512-px tiles of 2,833 + 5,667 (gpt-4o-mini), 70 + 140 (gpt-5,
/// gpt-5-chat-latest), 75 + 150 (o1, o1-pro, o3) or 85 + 170 (gpt-4o, gpt-4.1,
/// gpt-4.5, and any other). A point release the table does not name (gpt-5.1) is
/// counted by its family's row (gpt-5's; its -mini and -nano by gpt-5-mini's and
/// gpt-5-nano's).
pub(crate) fn token_rule(model: &str) -> TokenRule {
    let name = model.to_ascii_lowercase();
    let name = name.strip_prefix("ft:").unwrap_or(&name);
    let is = |prefix: &str| named(name, prefix);
    let gpt_5 = is("gpt-5");
    let patches = |multiplier_percent| TokenRule::OpenAiPatches { multiplier_percent };
    if is("o4-mini") {
        patches(172)
    } else if is("gpt-4.1-mini") || (gpt_5 && name.contains("-mini")) {
        patches(162)
    } else if is("gpt-4.1-nano") || (gpt_5 && name.contains("-nano")) {
        patches(246)
    } else if is("gpt-4o-mini") {
        TokenRule::OPENAI_GPT_4O_MINI
    } else if gpt_5 {
        TokenRule::OPENAI_GPT_5
    } else if is("o1") || is("o3") {
        TokenRule::OPENAI_O
    } else {
        TokenRule::OPENAI_GPT_4O
    }
}

/// OpenAI Chat Completions: images (`image_url`: URL or data URL; 20 MB each, 500 a
/// request) and PDFs (`file`: data or file id; 32 MB and 100 pages a request
/// together, <https://platform.openai.com/docs/guides/pdf-files>) for vision models;
/// `input_audio` (wav, mp3) for audio models; tool messages take text only. No pixel
/// limit is documented (OpenAI scales a large image down). Tokens by the model's
/// rule ([`token_rule`]).
pub(crate) fn chat(model: &str) -> ContentCapabilities {
    match family(model) {
        Family::Vision => ContentCapabilities {
            image_types: COMMON_IMAGES,
            document_types: PDF,
            audio_types: &[],
            urls: true,
            file_ids: true,
            parts_in_tool_results: false,
            ..openai_limits(model)
        },
        Family::Audio => audio(),
        Family::Text => ContentCapabilities::TEXT_ONLY,
    }
}

/// OpenAI's limits for vision models, text alone otherwise: images at most 20 MB each
/// and 500 a request; documents at most 32 MB and 100 PDF pages a request together;
/// tokens by the model's rule ([`token_rule`]).
fn openai_limits(model: &str) -> ContentCapabilities {
    ContentCapabilities {
        max_image_bytes: Some(MAX_IMAGE_BYTES),
        max_images: Some(500),
        max_total_document_bytes: Some(MAX_DOCUMENT_TOTAL_BYTES),
        max_pdf_pages: Some(100),
        tokens: token_rule(model),
        source: OPENAI_SOURCES,
        ..ContentCapabilities::TEXT_ONLY
    }
}

/// The audio models of Chat Completions: wav and mp3 bytes.
fn audio() -> ContentCapabilities {
    ContentCapabilities {
        image_types: &[],
        document_types: &[],
        audio_types: AUDIO,
        urls: false,
        file_ids: false,
        parts_in_tool_results: false,
        max_part_bytes: None,
        max_parts: None,
        tokens: TokenRule::OPENAI_GPT_4O,
        source: OPENAI_AUDIO_SOURCE,
        ..ContentCapabilities::TEXT_ONLY
    }
}

/// The OpenAI Responses API: for vision models, images (`input_image`: URL, data URL
/// or file id) and documents (`input_file`: data, file id or URL), also inside a
/// `function_call_output`; no audio model is served there.
pub(crate) fn responses(model: &str) -> ContentCapabilities {
    match family(model) {
        Family::Vision => ContentCapabilities {
            image_types: COMMON_IMAGES,
            document_types: RESPONSES_DOCUMENTS,
            audio_types: &[],
            urls: true,
            file_ids: true,
            parts_in_tool_results: true,
            ..openai_limits(model)
        },
        Family::Audio | Family::Text => ContentCapabilities::TEXT_ONLY,
    }
}

/// Azure OpenAI Chat Completions, by the deployment's name (read as the model's name:
/// a deployment named otherwise takes text unless the options say more): images by
/// URL or bytes for vision models, audio bytes for audio models.
pub(crate) fn azure_chat(deployment: &str) -> ContentCapabilities {
    match family(deployment) {
        Family::Vision => ContentCapabilities {
            image_types: COMMON_IMAGES,
            document_types: &[],
            audio_types: &[],
            urls: true,
            file_ids: false,
            parts_in_tool_results: false,
            max_image_bytes: Some(MAX_IMAGE_BYTES),
            max_images: Some(50),
            tokens: token_rule(deployment),
            source: AZURE_SOURCE,
            ..ContentCapabilities::TEXT_ONLY
        },
        Family::Audio => ContentCapabilities {
            source: AZURE_SOURCE,
            ..audio()
        },
        Family::Text => ContentCapabilities::TEXT_ONLY,
    }
}

/// Azure OpenAI's Responses API, by the deployment's name: images by URL or bytes and
/// PDFs by bytes or file id, in user messages only (Azure does not document parts in
/// a `function_call_output`, so the runner moves them to a user message).
pub(crate) fn azure_responses(deployment: &str) -> ContentCapabilities {
    match family(deployment) {
        Family::Vision => ContentCapabilities {
            image_types: COMMON_IMAGES,
            document_types: PDF,
            audio_types: &[],
            urls: true,
            file_ids: true,
            parts_in_tool_results: false,
            max_image_bytes: Some(MAX_IMAGE_BYTES),
            max_images: Some(50),
            tokens: token_rule(deployment),
            source: AZURE_SOURCE,
            ..ContentCapabilities::TEXT_ONLY
        },
        Family::Audio | Family::Text => ContentCapabilities::TEXT_ONLY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_by_name() {
        for vision in [
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4o-2024-08-06",
            "chatgpt-4o-latest",
            "gpt-4.1-nano",
            "gpt-5",
            "gpt-5-mini",
            "gpt-4-turbo",
            "gpt-4-turbo-2024-04-09",
            "o1",
            "o1-2024-12-17",
            "o1-pro",
            "o3",
            "o4-mini",
            "ft:gpt-4o-mini:org::abc",
        ] {
            assert_eq!(family(vision), Family::Vision, "{vision}");
        }
        for audio in [
            "gpt-4o-audio-preview",
            "gpt-4o-mini-audio-preview",
            "gpt-audio",
        ] {
            assert_eq!(family(audio), Family::Audio, "{audio}");
        }
        for text in [
            "gpt-3.5-turbo",
            "gpt-4",
            "gpt-4-0613",
            "gpt-4-turbo-preview",
            "o1-mini",
            "o1-preview",
            "o3-mini",
            "gpt-4o-search-preview",
            "gpt-4o-realtime-preview",
            "gpt-4o-transcribe",
            "gpt-4oops",
            "my-deployment",
        ] {
            assert_eq!(family(text), Family::Text, "{text}");
        }
    }

    #[test]
    fn each_model_has_the_image_rule_of_its_row() {
        let patches = |multiplier_percent| TokenRule::OpenAiPatches { multiplier_percent };
        for (model, rule) in [
            ("gpt-4o", TokenRule::OPENAI_GPT_4O),
            ("gpt-4o-2024-08-06", TokenRule::OPENAI_GPT_4O),
            ("chatgpt-4o-latest", TokenRule::OPENAI_GPT_4O),
            ("gpt-4.1", TokenRule::OPENAI_GPT_4O),
            ("gpt-4.5-preview", TokenRule::OPENAI_GPT_4O),
            ("gpt-4-turbo", TokenRule::OPENAI_GPT_4O),
            ("gpt-4o-mini", TokenRule::OPENAI_GPT_4O_MINI),
            ("ft:gpt-4o-mini:org::abc", TokenRule::OPENAI_GPT_4O_MINI),
            ("gpt-5", TokenRule::OPENAI_GPT_5),
            ("gpt-5-chat-latest", TokenRule::OPENAI_GPT_5),
            ("gpt-5.1", TokenRule::OPENAI_GPT_5),
            ("o1", TokenRule::OPENAI_O),
            ("o1-pro", TokenRule::OPENAI_O),
            ("o3-2025-04-16", TokenRule::OPENAI_O),
            ("gpt-4.1-mini", patches(162)),
            ("gpt-5-mini", patches(162)),
            ("GPT-5-Mini-2025-08-07", patches(162)),
            ("gpt-4.1-nano", patches(246)),
            ("gpt-5-nano", patches(246)),
            ("o4-mini", patches(172)),
            ("o4-mini-2025-04-16", patches(172)),
        ] {
            assert_eq!(token_rule(model), rule, "{model}");
            assert_eq!(chat(model).tokens, rule, "{model}");
            assert_eq!(responses(model).tokens, rule, "{model}");
            assert_eq!(azure_chat(model).tokens, rule, "{model}");
        }
    }

    #[test]
    fn tool_results_take_parts_on_openai_responses_only() {
        assert!(!chat("gpt-4o").parts_in_tool_results);
        assert!(responses("gpt-4o").parts_in_tool_results);
        assert!(!azure_responses("gpt-4o").parts_in_tool_results);
        assert_eq!(chat("gpt-4o-audio-preview").audio_types, AUDIO);
        assert_eq!(
            responses("gpt-4o-audio-preview"),
            ContentCapabilities::TEXT_ONLY
        );
        assert_eq!(azure_chat("support-bot"), ContentCapabilities::TEXT_ONLY);
    }
}
