//! Content parts on the Anthropic Messages wire, against wiremock: the exact `image`
//! and `document` blocks for each source (base64, plain text, URL, Files API id) in a
//! user message and inside `tool_result` content, plain and streamed (the same body
//! with `stream: true`); the Files API beta header only when a file id is sent; parts
//! a model cannot take refused before any request; text-only bodies unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::content::{Input, Kind, Part};
use agent_core::llm::{LlmClient, LlmRequest, Message, StreamDelta, ToolCall, ToolResult};
use agent_core::providers::{AnthropicClient, ProviderOptions};
use agent_core::{AgentError, run_agent};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::MockServer;

const MODEL: &str = "claude-sonnet-4-5";
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
const PDF: &[u8] = b"%PDF-1.4\n1 0 obj << /Type /Page >>\n";
const PDF_B64: &str = "JVBERi0xLjQKMSAwIG9iaiA8PCAvVHlwZSAvUGFnZSA+Pgo=";

fn png() -> Part {
    Part::from_base64(PNG_B64, "image/png").unwrap()
}

fn pdf() -> Part {
    Part::from_bytes_as(PDF.to_vec(), "application/pdf")
        .unwrap()
        .named("invoice.pdf")
}

fn client(server: &MockServer) -> AnthropicClient {
    AnthropicClient::new(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(server.uri()),
    )
    .unwrap()
}

async fn server() -> MockServer {
    let server = MockServer::start().await;
    mount_post(
        &server,
        "/v1/messages",
        json_fixture(200, "anthropic/text.json"),
        None,
    )
    .await;
    server
}

/// The body of one plain and one streamed request of `request`: the streamed one is the
/// plain one with `stream: true`.
async fn plain_and_streamed(request: &LlmRequest) -> (Value, Vec<wiremock::Request>) {
    let server = server().await;
    let client = client(&server);
    client.complete(request).await.unwrap();
    let mut sink = |_: StreamDelta<'_>| {};
    client.complete_streaming(request, &mut sink).await.unwrap();
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    let plain: Value = serde_json::from_slice(&sent[0].body).unwrap();
    let mut streamed: Value = serde_json::from_slice(&sent[1].body).unwrap();
    assert_eq!(streamed["stream"], true);
    streamed.as_object_mut().unwrap().remove("stream");
    assert_eq!(streamed, plain, "the streamed request encodes the same");
    (plain, sent)
}

#[tokio::test]
async fn a_user_messages_parts_go_as_image_and_document_blocks_from_every_source() {
    let parts = vec![
        png(),
        pdf(),
        Part::from_bytes_as(b"Order A-1001 shipped on 2 May.".to_vec(), "text/plain")
            .unwrap()
            .named("shipping.txt"),
        Part::from_url("https://example.test/unit.jpg", "image/jpeg").unwrap(),
        Part::from_url("https://example.test/manual.pdf", "application/pdf").unwrap(),
        Part::from_file_id("file_011CNha8iCJcU1wXNR6q4V8w", "application/pdf").unwrap(),
        Part::text("That is all."),
    ];
    let request =
        LlmRequest::new(MODEL).with_message(Message::user_with("The unit arrived cracked.", parts));
    let (body, sent) = plain_and_streamed(&request).await;
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "The unit arrived cracked."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}, "title": "invoice.pdf"},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Order A-1001 shipped on 2 May."}, "title": "shipping.txt"},
            {"type": "image", "source": {"type": "url", "url": "https://example.test/unit.jpg"}},
            {"type": "document", "source": {"type": "url", "url": "https://example.test/manual.pdf"}},
            {"type": "document", "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"}},
            {"type": "text", "text": "That is all."}
        ]}])
    );
    // A file id needs the Files API beta header, on both requests.
    for request in &sent {
        assert_eq!(
            header(request, "anthropic-beta"),
            Some("files-api-2025-04-14")
        );
    }
}

#[tokio::test]
async fn a_message_of_parts_alone_sends_no_empty_text() {
    let request = LlmRequest::new(MODEL).with_message(Message::user_with("", vec![png()]));
    let (body, sent) = plain_and_streamed(&request).await;
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
        ]}])
    );
    assert_eq!(header(&sent[0], "anthropic-beta"), None);
}

#[tokio::test]
async fn a_tool_results_parts_go_inside_its_content() {
    let request = LlmRequest::new(MODEL)
        .with_message(Message::user("Why does checkout fail?"))
        .with_message(Message::assistant(
            "",
            vec![
                ToolCall::new("toolu_1", "screenshot", json!({})),
                ToolCall::new("toolu_2", "lookup_order", json!({"id": "A-1001"})),
            ],
        ))
        .with_message(Message::tool_results(vec![
            ToolResult::ok("toolu_1", "screenshot", "the checkout page")
                .with_parts(vec![png(), pdf()]),
            ToolResult::ok("toolu_2", "lookup_order", "shipped"),
        ]));
    let (body, _) = plain_and_streamed(&request).await;
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "the checkout page"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}, "title": "invoice.pdf"}
            ]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "shipped"}
        ]})
    );
}

#[tokio::test]
async fn a_text_only_request_is_byte_identical_to_before_parts() {
    let server = server().await;
    let request = text_only_request(MODEL, "toolu_1");
    client(&server).complete(&request).await.unwrap();
    let sent = requests(&server).await;
    assert_eq!(
        String::from_utf8_lossy(&sent[0].body),
        r#"{"model":"claude-sonnet-4-5","max_tokens":512,"messages":[{"role":"user","content":[{"type":"text","text":"Where is A-1001?"}]},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"lookup_order","input":{"id":"A-1001"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"shipped"}]}]}"#
    );
    assert_eq!(header(&sent[0], "anthropic-beta"), None);
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
async fn parts_a_claude_model_cannot_take_are_refused_before_any_request() {
    // Claude 3 (before 3.5) takes images, not PDFs.
    let (kind, reason) = refused(
        "claude-3-haiku-20240307",
        Input::text("invoice").part(pdf()),
    )
    .await;
    assert_eq!(
        (kind, reason.as_str()),
        (Kind::Document, "the model takes no documents")
    );
    // No Claude takes audio.
    let wav = Part::from_bytes_as(
        b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00".to_vec(),
        "audio/wav",
    )
    .unwrap();
    let (kind, reason) = refused(MODEL, Input::text("listen").part(wav)).await;
    assert_eq!(
        (kind, reason.as_str()),
        (Kind::Audio, "the model takes no audio")
    );
    // An image over 5 MB of base64.
    let mut big = PNG.to_vec();
    big.resize(3_750_001, 0);
    let big = Part::from_bytes_as(big, "image/png").unwrap();
    let (kind, reason) = refused(MODEL, Input::text("look").part(big)).await;
    assert_eq!(kind, Kind::Image);
    assert_eq!(
        reason,
        "3750001 bytes is more than the 3750000 bytes an image may have (source: \
         https://docs.anthropic.com/en/docs/build-with-claude/vision and \
         https://docs.anthropic.com/en/docs/build-with-claude/pdf-support)"
    );
    // More than 100 images in one request.
    let mut input = Input::text("look");
    for _ in 0..101 {
        input = input.part(png());
    }
    let (_, reason) = refused(MODEL, input).await;
    assert!(
        reason.starts_with(
            "the conversation holds 101 images, more than the 100 a request may carry"
        ),
        "{reason}"
    );
    // A text-only Claude.
    let (kind, _) = refused("claude-2.1", Input::text("look").part(png())).await;
    assert_eq!(kind, Kind::Image);
}

#[tokio::test]
async fn a_plain_text_document_by_url_fails_typed_without_a_request() {
    // Capabilities cannot say "PDF by URL, plain text not": the wire refuses it while
    // encoding, before anything is sent.
    let server = server().await;
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let url = Part::from_url("https://example.test/notes.txt", "text/plain").unwrap();
    let result = run_agent(&config, Input::text("read").part(url)).await;
    assert!(requests(&server).await.is_empty(), "no request was sent");
    let error = result.outcome.unwrap_err().to_string();
    assert!(
        error.contains(
            "the anthropic request cannot carry the part (document text/plain at \
             https://example.test/notes.txt): a text/plain document goes as bytes or a file \
             id, not a URL"
        ),
        "{error}"
    );
}

/// The first bytes of a PNG.
const PNG: &[u8] = &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

#[test]
fn capabilities_follow_the_claude_version() {
    let options = ProviderOptions::default().with_api_key(KEY);
    let client = AnthropicClient::new(&options).unwrap();
    let sonnet = client.content_capabilities("claude-sonnet-4-5-20250929");
    assert_eq!(sonnet.document_types, ["application/pdf", "text/plain"]);
    assert!(sonnet.urls && sonnet.file_ids && sonnet.parts_in_tool_results);
    assert_eq!(
        (
            sonnet.max_image_bytes,
            sonnet.max_images,
            sonnet.max_total_bytes
        ),
        (Some(3_750_000), Some(100), Some(24_000_000))
    );
    let haiku3 = client.content_capabilities("claude-3-haiku-20240307");
    assert!(!haiku3.image_types.is_empty() && haiku3.document_types.is_empty());
    let sonnet35 = client.content_capabilities("claude-3-5-sonnet-20241022");
    assert!(!sonnet35.document_types.is_empty());
    assert!(!client.content_capabilities("claude-2.1").takes_parts());
}
