//! Content parts on the Gemini wire, against wiremock: `inlineData` for bytes and
//! `fileData` for a Files API URI or an external URL, in a user content, plain
//! (`generateContent`) and streamed (`streamGenerateContent`, the same body); parts a
//! tool returns reach Gemini 3 inside its function response, earlier models in the
//! user content after the function responses;
//! parts a model cannot take refused before any request; text-only bodies unchanged;
//! a part's media resolution as `mediaResolution` on Gemini 3 (not sent to earlier
//! models).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::content::{Input, Kind, MediaResolution, Part};
use agent_core::llm::{LlmClient, LlmRequest, Message, StreamDelta, ToolCall, ToolResult};
use agent_core::providers::{GeminiClient, ProviderOptions};
use agent_core::{AgentError, run_agent};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::MockServer;

const MODEL: &str = "gemini-2.5-flash";
const PATH: &str = "/v1beta/models/gemini-2.5-flash:generateContent";
const STREAM_PATH: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
const PDF: &[u8] = b"%PDF-1.4\n1 0 obj << /Type /Page >>\n";
const PDF_B64: &str = "JVBERi0xLjQKMSAwIG9iaiA8PCAvVHlwZSAvUGFnZSA+Pgo=";
/// A WAV header (RIFF, WAVE, fmt).
const WAV: &[u8] = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00";
const WAV_B64: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEA";
const FILE_URI: &str = "https://generativelanguage.googleapis.com/v1beta/files/abc-123";

fn png() -> Part {
    Part::from_base64(PNG_B64, "image/png").unwrap()
}

fn client(server: &MockServer) -> GeminiClient {
    GeminiClient::new(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(server.uri()),
    )
    .unwrap()
}

async fn server() -> MockServer {
    let server = MockServer::start().await;
    for path in [PATH, STREAM_PATH] {
        mount_post(&server, path, json_fixture(200, "gemini/text.json"), None).await;
    }
    server
}

#[tokio::test]
async fn a_user_contents_parts_go_as_inline_and_file_data() {
    let parts = vec![
        png(),
        Part::from_bytes_as(PDF.to_vec(), "application/pdf").unwrap(),
        Part::from_bytes(WAV.to_vec()).unwrap(),
        Part::from_file_id(FILE_URI, "application/pdf").unwrap(),
        Part::from_url("https://example.test/manual.pdf", "application/pdf").unwrap(),
        Part::text("That is all."),
    ];
    let request =
        LlmRequest::new(MODEL).with_message(Message::user_with("The unit arrived cracked.", parts));
    let server = server().await;
    let client = client(&server);
    client.complete(&request).await.unwrap();
    let mut sink = |_: StreamDelta<'_>| {};
    let _ = client.complete_streaming(&request, &mut sink).await;
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].url.path(), STREAM_PATH);
    assert_eq!(
        sent[1].body, sent[0].body,
        "the streamed request encodes the same"
    );
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [
            {"text": "The unit arrived cracked."},
            {"inlineData": {"mimeType": "image/png", "data": PNG_B64}},
            {"inlineData": {"mimeType": "application/pdf", "data": PDF_B64}},
            // The sniffed `audio/x-wav` goes by the name Gemini lists.
            {"inlineData": {"mimeType": "audio/wav", "data": WAV_B64}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": FILE_URI}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.test/manual.pdf"}},
            {"text": "That is all."}
        ]}])
    );
}

#[tokio::test]
async fn a_text_only_request_is_byte_identical_to_before_parts() {
    let server = server().await;
    let request = text_only_request(MODEL, "fc_1");
    client(&server).complete(&request).await.unwrap();
    let sent = requests(&server).await;
    assert_eq!(
        String::from_utf8_lossy(&sent[0].body),
        r#"{"contents":[{"role":"user","parts":[{"text":"Where is A-1001?"}]},{"role":"model","parts":[{"functionCall":{"id":"fc_1","name":"lookup_order","args":{"id":"A-1001"}},"thoughtSignature":"skip_thought_signature_validator"}]},{"role":"user","parts":[{"functionResponse":{"id":"fc_1","name":"lookup_order","response":{"output":"shipped"}}}]}],"generationConfig":{"maxOutputTokens":512}}"#
    );
}

/// A run on `model` whose one tool returns a PNG: the body of its second request.
async fn tool_run(model: &str) -> Value {
    let server = MockServer::start().await;
    let path = format!("/v1beta/models/{model}:generateContent");
    mount_post(
        &server,
        &path,
        json_fixture(200, "gemini/function_call.json"),
        Some(1),
    )
    .await;
    mount_post(
        &server,
        &path,
        json_fixture(200, "gemini/submit.json"),
        None,
    )
    .await;
    let config = triage(model, &server.uri())
        .tool(Photo(png()))
        .build()
        .unwrap();
    let result = run_agent(&config, "My parcel A-1001 is a week late.").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    bodies(&server).await.swap_remove(1)
}

#[tokio::test]
async fn gemini_3_takes_a_tools_image_inside_its_function_response() {
    let body = tool_run("gemini-3-pro-preview").await;
    assert_eq!(
        body["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {
            "id": "fc_8d1c2a7e",
            "name": "lookup_order",
            "response": {"output": "a photo of the parcel"},
            "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG_B64}}]
        }}]})
    );
}

#[tokio::test]
async fn before_gemini_3_a_tools_parts_follow_the_function_responses_in_the_same_user_content() {
    let body = tool_run("gemini-2.5-flash").await;
    let user = &body["contents"][2];
    assert_eq!(user["role"], "user");
    let parts = user["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 3, "{parts:?}");
    assert_eq!(
        parts[0]["functionResponse"],
        json!({"id": "fc_8d1c2a7e", "name": "lookup_order", "response": {"output": "a photo of the parcel"}})
    );
    let note = parts[1]["text"].as_str().unwrap();
    assert!(note.contains("call fc_8d1c2a7e: lookup_order"), "{note}");
    assert_eq!(
        parts[2],
        json!({"inlineData": {"mimeType": "image/png", "data": PNG_B64}})
    );
}

#[tokio::test]
async fn on_gemini_3_a_tool_part_a_function_response_cannot_hold_goes_beside_it() {
    let server = MockServer::start().await;
    let path = "/v1beta/models/gemini-3-pro-preview:generateContent";
    mount_post(&server, path, json_fixture(200, "gemini/text.json"), None).await;
    let request = LlmRequest::new("gemini-3-pro-preview")
        .with_message(Message::user("Play the voicemail."))
        .with_message(Message::assistant(
            "",
            vec![ToolCall::new("fc_1", "voicemail", json!({}))],
        ))
        .with_message(Message::tool_results(vec![
            ToolResult::ok("fc_1", "voicemail", "one message")
                .with_parts(vec![Part::from_bytes(WAV.to_vec()).unwrap(), png()]),
        ]));
    client(&server).complete(&request).await.unwrap();
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["contents"][2],
        json!({"role": "user", "parts": [
            {"functionResponse": {
                "id": "fc_1",
                "name": "voicemail",
                "response": {"output": "one message"},
                "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG_B64}}]
            }},
            {"text": "The parts call fc_1 (voicemail) returned:"},
            {"inlineData": {"mimeType": "audio/wav", "data": WAV_B64}}
        ]})
    );
}

/// A request on `model` whose user turn holds a PNG at high resolution, a PDF by URL at
/// low and a PNG without one, and whose tool result holds a PNG at medium and one
/// without: the body sent.
async fn resolutions_body(model: &str) -> Value {
    let server = MockServer::start().await;
    let path = format!("/v1beta/models/{model}:generateContent");
    mount_post(&server, &path, json_fixture(200, "gemini/text.json"), None).await;
    let pdf = Part::from_url("https://example.test/manual.pdf", "application/pdf").unwrap();
    let request = LlmRequest::new(model)
        .with_message(Message::user_with(
            "Read these.",
            vec![
                png().with_media_resolution(MediaResolution::High),
                pdf.with_media_resolution(MediaResolution::Low),
                png(),
            ],
        ))
        .with_message(Message::assistant(
            "",
            vec![ToolCall::new("fc_1", "photo", json!({}))],
        ))
        .with_message(Message::tool_results(vec![
            ToolResult::ok("fc_1", "photo", "two photos").with_parts(vec![
                png().with_media_resolution(MediaResolution::Medium),
                png(),
            ]),
        ]));
    client(&server).complete(&request).await.unwrap();
    bodies(&server).await.swap_remove(0)
}

#[tokio::test]
async fn gemini_3_gets_each_parts_media_resolution() {
    let body = resolutions_body("gemini-3-pro-preview").await;
    let image = json!({"mimeType": "image/png", "data": PNG_B64});
    assert_eq!(
        body["contents"][0],
        json!({"role": "user", "parts": [
            {"text": "Read these."},
            {"inlineData": image, "mediaResolution": {"level": "MEDIA_RESOLUTION_HIGH"}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.test/manual.pdf"},
             "mediaResolution": {"level": "MEDIA_RESOLUTION_LOW"}},
            {"inlineData": image}
        ]})
    );
    // A function response's parts carry their data alone: the tool's part with a
    // resolution goes beside the response, with it.
    assert_eq!(
        body["contents"][2],
        json!({"role": "user", "parts": [
            {"functionResponse": {
                "id": "fc_1",
                "name": "photo",
                "response": {"output": "two photos"},
                "parts": [{"inlineData": image}]
            }},
            {"text": "The parts call fc_1 (photo) returned:"},
            {"inlineData": image, "mediaResolution": {"level": "MEDIA_RESOLUTION_MEDIUM"}}
        ]})
    );
}

#[tokio::test]
async fn before_gemini_3_no_media_resolution_is_sent() {
    let body = resolutions_body("gemini-2.5-flash").await;
    let text = body.to_string();
    assert!(!text.contains("mediaResolution"), "{text}");
    assert_eq!(
        body["contents"][0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": PNG_B64}})
    );
}

/// A run on `model` with `input`: the refusal, and no request sent.
async fn refused(model: &str, input: Input) -> (Kind, String) {
    let server = server().await;
    let config = triage(model, &server.uri()).build().unwrap();
    let result = run_agent(&config, input).await;
    assert!(requests(&server).await.is_empty(), "no request was sent");
    match result.outcome {
        Err(AgentError::UnsupportedContent { kind, reason, .. }) => (kind, reason),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn parts_a_gemini_model_cannot_take_are_refused_before_any_request() {
    // Before Gemini 2.5, no external URL.
    let url = Part::from_url("https://example.test/unit.png", "image/png").unwrap();
    let (_, reason) = refused("gemini-2.0-flash", Input::text("look").part(url)).await;
    assert!(reason.contains("pass the bytes"), "{reason}");
    // Gemini 1.0 takes text alone.
    let (kind, reason) = refused("gemini-1.0-pro", Input::text("look").part(png())).await;
    assert_eq!(
        (kind, reason.as_str()),
        (Kind::Image, "the model takes no images")
    );
    // GIF is not a Gemini image type.
    let gif = Part::from_bytes_as(b"GIF89a\x01\x00\x01\x00".to_vec(), "image/gif").unwrap();
    let (_, reason) = refused(MODEL, Input::text("look").part(gif)).await;
    assert!(
        reason.starts_with("the model takes images of the types image/png"),
        "{reason}"
    );
    // More than 100 MB of base64 inline in one request.
    let mut big = PDF.to_vec();
    big.resize(40_000_000, b' ');
    let big = Part::from_bytes_as(big, "application/pdf").unwrap();
    let (_, reason) = refused(MODEL, Input::text("read").part(big.clone()).part(big)).await;
    assert_eq!(
        reason,
        "the conversation's parts hold 80000000 bytes together, more than the 75000000 bytes \
         a request may carry (source: https://ai.google.dev/gemini-api/docs/file-input-methods)"
    );
}

#[test]
fn capabilities_follow_the_gemini_version() {
    let options = ProviderOptions::default().with_api_key(KEY);
    let client = GeminiClient::new(&options).unwrap();
    let flash = client.content_capabilities("gemini-2.5-flash");
    assert!(flash.urls && flash.file_ids && !flash.parts_in_tool_results);
    assert!(
        client
            .content_capabilities("gemini-3-pro-preview")
            .parts_in_tool_results
    );
    assert!(flash.audio_types.contains(&"audio/x-wav"));
    assert!(!client.content_capabilities("gemini-2.0-flash").urls);
    assert!(client.content_capabilities("gemini-1.5-pro").takes_parts());
    assert!(client.content_capabilities("gemini-flash-latest").urls);
    assert!(!client.content_capabilities("gemini-1.0-pro").takes_parts());
}
