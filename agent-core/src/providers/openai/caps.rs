//! Which parts OpenAI's models take, per wire and model family
//! ([`ContentCapabilities`]): what `OpenAiClient` and `OpenAiResponsesClient` answer
//! for `content_capabilities`, unless `ProviderOptions::content_capabilities` says
//! otherwise.

use crate::llm::ContentCapabilities;
use crate::llm::{COMMON_IMAGES, PDF};

/// OpenAI's image input requirements: PNG, JPEG, WebP and non-animated GIF, up to
/// 20 MB per image, up to 500 images per request (source: the images and vision
/// guide, "Image input requirements").
pub(crate) const OPENAI_IMAGES_SOURCE: &str =
    "https://platform.openai.com/docs/guides/images-vision";

/// OpenAI's audio input: `input_audio` with `wav` or `mp3` data, on the audio models
/// of Chat Completions (source: the audio guide).
pub(crate) const OPENAI_AUDIO_SOURCE: &str = "https://platform.openai.com/docs/guides/audio";

/// Azure OpenAI's vision-enabled chat models: images by URL or base64, at most 50 per
/// request, 20 MB each (source: "Azure OpenAI quotas and limits").
pub(crate) const AZURE_SOURCE: &str =
    "https://learn.microsoft.com/en-us/azure/ai-foundry/openai/quotas-limits";

/// The largest image OpenAI and Azure take: 20 MB (taken as 20 MiB), per part.
const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

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
    let name = name.strip_prefix("ft:").unwrap_or(&name);
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
    let is = |prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', ':', '.']))
    };
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

/// OpenAI Chat Completions (PDF pages: at most 100 a request,
/// <https://platform.openai.com/docs/guides/pdf-files>): images (`image_url`: URL or data URL) and PDFs (`file`:
/// data or file id) for vision models; `input_audio` (wav, mp3) for audio models;
/// tool messages take text only.
pub(crate) fn chat(model: &str) -> ContentCapabilities {
    match family(model) {
        Family::Vision => ContentCapabilities {
            image_types: COMMON_IMAGES,
            document_types: PDF,
            audio_types: &[],
            urls: true,
            file_ids: true,
            parts_in_tool_results: false,
            max_part_bytes: Some(MAX_IMAGE_BYTES),
            max_parts: Some(500),
            source: OPENAI_IMAGES_SOURCE,
            max_pdf_pages: Some(100),
            ..ContentCapabilities::TEXT_ONLY
        },
        Family::Audio => audio(),
        Family::Text => ContentCapabilities::TEXT_ONLY,
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
            max_part_bytes: Some(MAX_IMAGE_BYTES),
            max_parts: Some(500),
            source: OPENAI_IMAGES_SOURCE,
            max_pdf_pages: Some(100),
            ..ContentCapabilities::TEXT_ONLY
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
            max_part_bytes: Some(MAX_IMAGE_BYTES),
            max_parts: Some(50),
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
            max_part_bytes: Some(MAX_IMAGE_BYTES),
            max_parts: Some(50),
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
