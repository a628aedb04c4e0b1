//! Content parts as OpenAI's wires write them: Chat Completions content parts and the
//! Responses API's input content. Bytes go as base64 (in a data URL where the API takes
//! one); a URL or a file id is passed on as it is (never fetched here).
//!
//! A part the wire has no form for (a PDF by URL on Chat Completions, an image by file
//! id there, audio that is not wav or mp3) is a permanent [`LlmError`] before any
//! request: the runner's capability check refuses most such parts first, this is what
//! is left of it when a client is called directly or the capabilities were declared by
//! hand.

use serde_json::{Map, Value, json};

use crate::content::{Bytes, Detail, Kind, Media, Part, Source};
use crate::llm::LlmError;
use crate::providers::history::EMPTY_TURN;

/// `data:{media_type};base64,{bytes}`.
fn data_url(media_type: &str, bytes: &Bytes) -> String {
    format!("data:{media_type};base64,{}", bytes.to_base64())
}

fn detail(detail: Detail) -> &'static str {
    match detail {
        Detail::Low => "low",
        Detail::High => "high",
        Detail::Auto => "auto",
    }
}

/// The `format` of `input_audio` for a media type: `wav` or `mp3`.
fn audio_format(media_type: &str) -> Option<&'static str> {
    match bare(media_type).as_str() {
        "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" | "audio/x-mpeg" => Some("mp3"),
        _ => None,
    }
}

/// The media type without parameters, lower case.
fn bare(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The file name sent with a document's bytes: its own, else `document` with the
/// extension of its type (the API reads the type from the name).
fn file_name(media: &Media) -> String {
    if let Some(name) = media.name.as_deref().filter(|n| !n.trim().is_empty()) {
        return name.to_owned();
    }
    let extension = match bare(&media.media_type).as_str() {
        "application/pdf" => ".pdf",
        "text/plain" => ".txt",
        "text/markdown" => ".md",
        "text/csv" => ".csv",
        "text/html" => ".html",
        "application/json" => ".json",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => ".docx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation" => ".pptx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => ".xlsx",
        _ => "",
    };
    format!("document{extension}")
}

/// The error for a part a wire cannot write.
fn unwritable(api: &str, part: &Part, why: &str) -> LlmError {
    LlmError::permanent(format!(
        "{api} cannot carry the {} ({why}); nothing was sent",
        part.describe()
    ))
}

/// The `input_audio` object of audio bytes.
fn input_audio(api: &str, part: &Part, media: &Media) -> Result<Value, LlmError> {
    let Source::Bytes(bytes) = &media.source else {
        return Err(unwritable(
            api,
            part,
            "audio goes as bytes only: pass the bytes",
        ));
    };
    let Some(format) = audio_format(&media.media_type) else {
        return Err(unwritable(api, part, "audio is wav or mp3 only"));
    };
    Ok(json!({
        "type": "input_audio",
        "input_audio": {"data": bytes.to_base64(), "format": format}
    }))
}

const CHAT: &str = "Chat Completions";
const RESPONSES: &str = "the Responses API";

/// One Chat Completions content part (source: Chat Completions reference, user
/// message content parts, <https://platform.openai.com/docs/api-reference/chat/create>):
/// text `{"type": "text", "text"}`; an image
/// `{"type": "image_url", "image_url": {"url", "detail"?}}` (a URL, or the bytes as a
/// data URL); a PDF `{"type": "file", "file": {"filename", "file_data"}}` (a data URL)
/// or `{"type": "file", "file": {"file_id"}}`; audio
/// `{"type": "input_audio", "input_audio": {"data", "format"}}`.
///
/// # Errors
/// A permanent [`LlmError`] for an image by file id, a document by URL or not a PDF,
/// audio by URL or file id, or audio neither wav nor mp3.
pub(crate) fn chat_part(part: &Part) -> Result<Value, LlmError> {
    let media = match part {
        Part::Text { text } => return Ok(json!({"type": "text", "text": text})),
        Part::Image(media) | Part::Document(media) | Part::Audio(media) => media,
    };
    match part.kind() {
        Kind::Image => {
            let url = match &media.source {
                Source::Bytes(bytes) => data_url(&media.media_type, bytes),
                Source::Url(url) => url.clone(),
                Source::File(_) => {
                    return Err(unwritable(
                        CHAT,
                        part,
                        "it takes images by URL or bytes, not by file id",
                    ));
                }
            };
            let mut image = Map::new();
            image.insert("url".to_owned(), Value::String(url));
            if let Some(d) = media.detail {
                image.insert("detail".to_owned(), Value::from(detail(d)));
            }
            Ok(json!({"type": "image_url", "image_url": image}))
        }
        Kind::Document => {
            if bare(&media.media_type) != "application/pdf" {
                return Err(unwritable(CHAT, part, "it takes PDF documents only"));
            }
            match &media.source {
                Source::Bytes(bytes) => Ok(json!({"type": "file", "file": {
                    "filename": file_name(media),
                    "file_data": data_url(&media.media_type, bytes),
                }})),
                Source::File(id) => Ok(json!({"type": "file", "file": {"file_id": id}})),
                Source::Url(_) => Err(unwritable(
                    CHAT,
                    part,
                    "it takes documents as bytes or a file id, not a URL",
                )),
            }
        }
        _ => input_audio(CHAT, part, media),
    }
}

/// One Responses API input content part (source: Responses API reference, input
/// message content, <https://platform.openai.com/docs/api-reference/responses/create>):
/// text `{"type": "input_text", "text"}`; an image
/// `{"type": "input_image", "image_url" | "file_id", "detail"}` (`detail` is required:
/// `auto` when the part sets none); a document
/// `{"type": "input_file", "filename", "file_data"}` (a data URL),
/// `{"type": "input_file", "file_id"}` or `{"type": "input_file", "file_url"}`; audio
/// `{"type": "input_audio", "input_audio": {"data", "format"}}`.
///
/// # Errors
/// A permanent [`LlmError`] for audio by URL or file id, or neither wav nor mp3.
pub(crate) fn responses_part(part: &Part) -> Result<Value, LlmError> {
    let media = match part {
        Part::Text { text } => return Ok(json!({"type": "input_text", "text": text})),
        Part::Image(media) | Part::Document(media) | Part::Audio(media) => media,
    };
    match part.kind() {
        Kind::Image => {
            let level = detail(media.detail.unwrap_or(Detail::Auto));
            Ok(match &media.source {
                Source::Bytes(bytes) => json!({"type": "input_image",
                    "image_url": data_url(&media.media_type, bytes), "detail": level}),
                Source::Url(url) => json!({"type": "input_image", "image_url": url,
                    "detail": level}),
                Source::File(id) => json!({"type": "input_image", "file_id": id,
                    "detail": level}),
            })
        }
        Kind::Document => Ok(match &media.source {
            Source::Bytes(bytes) => json!({"type": "input_file",
                "filename": file_name(media),
                "file_data": data_url(&media.media_type, bytes)}),
            Source::File(id) => json!({"type": "input_file", "file_id": id}),
            Source::Url(url) => json!({"type": "input_file", "file_url": url}),
        }),
        _ => input_audio(RESPONSES, part, media),
    }
}

/// A user turn's content as parts: its text first (left out when the turn had none, so
/// a message of parts alone is not sent with the `(empty)` stand-in), then each part
/// written by `write`, with `text_type` the type of a text part.
///
/// # Errors
/// The first part `write` cannot write.
pub(crate) fn user_content(
    text: &str,
    parts: &[Part],
    text_type: &str,
    write: fn(&Part) -> Result<Value, LlmError>,
) -> Result<Vec<Value>, LlmError> {
    let mut out = Vec::with_capacity(parts.len() + 1);
    let has_media = parts.iter().any(|p| p.media().is_some());
    if !(has_media && text == EMPTY_TURN) {
        out.push(json!({"type": text_type, "text": text}));
    }
    for part in parts {
        out.push(write(part)?);
    }
    Ok(out)
}

/// The text of a Chat Completions tool message with parts: Chat Completions takes text
/// alone there (the runner moves images, documents and audio to a user message after
/// the results), so the text parts a result kept are appended, one per line.
///
/// # Errors
/// A permanent [`LlmError`] for a part that is not text (a client called directly
/// with parts in a tool result).
pub(crate) fn chat_tool_text(content: &str, parts: &[Part]) -> Result<String, LlmError> {
    let mut text = content.to_owned();
    for part in parts {
        match part.as_text() {
            Some(more) => {
                text.push('\n');
                text.push_str(more);
            }
            None => {
                return Err(unwritable(
                    CHAT,
                    part,
                    "a tool message takes text only: send the part in a user message",
                ));
            }
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn names_and_formats() {
        let pdf = Part::from_url("https://x/a", "application/pdf").unwrap();
        assert_eq!(file_name(pdf.media().unwrap()), "document.pdf");
        assert_eq!(
            file_name(pdf.named("bill.pdf").media().unwrap()),
            "bill.pdf"
        );
        assert_eq!(audio_format("audio/x-wav"), Some("wav"));
        assert_eq!(audio_format("audio/mpeg; rate=44100"), Some("mp3"));
        assert_eq!(audio_format("audio/flac"), None);
    }

    #[test]
    fn chat_refuses_what_it_has_no_form_for() {
        let by_id = Part::from_file_id("file-1", "image/png").unwrap();
        let error = chat_part(&by_id).unwrap_err();
        assert_eq!(
            error.to_string(),
            "permanent provider error: Chat Completions cannot carry the image image/png, \
             file file-1 (it takes \
             images by URL or bytes, not by file id); nothing was sent"
        );
        let text_doc = Part::from_file_id("file-2", "text/plain").unwrap();
        assert!(chat_part(&text_doc).is_err());
        assert!(chat_tool_text("x", &[by_id]).is_err());
        assert_eq!(chat_tool_text("x", &[Part::text("y")]).unwrap(), "x\ny");
    }
}
