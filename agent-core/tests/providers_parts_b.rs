//! Content parts on the OpenAI family of wires against wiremock: the exact JSON of each
//! part kind and source in a user message and (Responses API) a function call output,
//! plain and streamed; what each route takes (a part a model cannot take is a typed
//! error and no request is sent); a text-only request unchanged; a compatible server
//! text-only unless its options declare more.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::content::{Detail, Input, Part};
use agent_core::llm::{
    COMMON_IMAGES, ContentCapabilities, LlmClient, LlmErrorKind, LlmRequest, Message, StreamDelta,
    ToolCall, ToolResult,
};
use agent_core::providers::{OpenAiClient, OpenAiResponsesClient, ProviderOptions};
use agent_core::tool::{ContentFuture, ToolContent, ToolDefinition, ToolFuture};
use agent_core::{AgentError, Tool, ToolContext, ToolRegistry, run_agent};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::MockServer;

/// A 1x1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
const PDF_BYTES: &[u8] = b"%PDF-1.4\n1 0 obj << /Type /Page >>\n";
const PDF_B64: &str = "JVBERi0xLjQKMSAwIG9iaiA8PCAvVHlwZSAvUGFnZSA+Pgo=";
const WAV_BYTES: &[u8] = b"RIFF\x24\x00\x00\x00WAVEfmt ";
const WAV_B64: &str = "UklGRiQAAABXQVZFZm10IA==";
const MP3_BYTES: &[u8] = b"ID3\x04\x00\x00\x00\x00\x00\x00";
const MP3_B64: &str = "SUQzBAAAAAAAAA==";

const CHAT: &str = "/v1/chat/completions";
const RESPONSES: &str = "/v1/responses";

fn png() -> Part {
    Part::from_base64(PNG_B64, "image/png").unwrap()
}

fn pdf() -> Part {
    Part::from_bytes_as(PDF_BYTES.to_vec(), "application/pdf").unwrap()
}

fn png_url() -> String {
    format!("data:image/png;base64,{PNG_B64}")
}

fn pdf_url() -> String {
    format!("data:application/pdf;base64,{PDF_B64}")
}

fn base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

fn options(server: &MockServer) -> ProviderOptions {
    ProviderOptions::default()
        .with_api_key(KEY)
        .with_base_url(base(server))
}

fn chat(server: &MockServer) -> OpenAiClient {
    OpenAiClient::openai(&options(server)).unwrap()
}

fn responses(server: &MockServer) -> OpenAiResponsesClient {
    OpenAiResponsesClient::openai(&options(server)).unwrap()
}

fn request(model: &str, message: Message) -> LlmRequest {
    LlmRequest::new(model).with_message(message)
}

/// Sends `request` once plain and once streamed, and returns both bodies.
async fn plain_and_streamed(
    server: &MockServer,
    client: &dyn LlmClient,
    request: &LlmRequest,
    path: &str,
    fixtures: (&str, &str),
) -> (Value, Value) {
    mount_post(server, path, json_fixture(200, fixtures.0), Some(1)).await;
    client.complete(request).await.unwrap();
    let plain = bodies(server).await.remove(0);
    server.reset().await;
    let sse = raw_fixture(200, fixtures.1, "text/event-stream");
    mount_post(server, path, sse, Some(1)).await;
    let mut sink = |_: StreamDelta<'_>| {};
    client.complete_streaming(request, &mut sink).await.unwrap();
    let streamed = bodies(server).await.remove(0);
    (plain, streamed)
}

const CHAT_FIXTURES: (&str, &str) = ("openai/text.json", "streaming/openai/text.sse");
const RESPONSES_FIXTURES: (&str, &str) = ("responses/text.json", "streaming/responses/text.sse");

#[tokio::test]
async fn chat_user_parts_of_each_kind_and_source_plain_and_streamed() {
    let server = MockServer::start().await;
    let client = chat(&server);
    let parts = vec![
        png().with_detail(Detail::High),
        Part::from_url("https://img.example/unit.jpg", "image/jpeg").unwrap(),
        pdf().named("invoice.pdf"),
        pdf(),
        Part::from_file_id("file-abc", "application/pdf").unwrap(),
        Part::text("and one more line"),
    ];
    let request = request(
        "gpt-4o",
        Message::user_with("The unit arrived cracked.", parts),
    );
    let (plain, streamed) =
        plain_and_streamed(&server, &client, &request, CHAT, CHAT_FIXTURES).await;
    let expected = json!([{"role": "user", "content": [
        {"type": "text", "text": "The unit arrived cracked."},
        {"type": "image_url", "image_url": {"url": png_url(), "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "https://img.example/unit.jpg"}},
        {"type": "file", "file": {"filename": "invoice.pdf", "file_data": pdf_url()}},
        {"type": "file", "file": {"filename": "document.pdf", "file_data": pdf_url()}},
        {"type": "file", "file": {"file_id": "file-abc"}},
        {"type": "text", "text": "and one more line"}
    ]}]);
    assert_eq!(plain["messages"], expected);
    assert_eq!(streamed["messages"], expected);
    assert_eq!(streamed["stream"], json!(true));
    assert!(plain.get("stream").is_none());
}

#[tokio::test]
async fn chat_audio_goes_as_input_audio_with_its_format() {
    let server = MockServer::start().await;
    let client = chat(&server);
    let parts = vec![
        Part::from_bytes_as(WAV_BYTES.to_vec(), "audio/wav").unwrap(),
        Part::from_bytes(MP3_BYTES.to_vec()).unwrap(),
    ];
    let request = request("gpt-4o-audio-preview", Message::user_with("", parts));
    let (plain, streamed) =
        plain_and_streamed(&server, &client, &request, CHAT, CHAT_FIXTURES).await;
    // No text part: the message had none.
    let expected = json!([{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": MP3_B64, "format": "mp3"}}
    ]}]);
    assert_eq!(plain["messages"], expected);
    assert_eq!(streamed["messages"], expected);
}

#[tokio::test]
async fn a_responses_text_only_request_keeps_string_content() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        RESPONSES,
        json_fixture(200, "responses/text.json"),
        None,
    )
    .await;
    responses(&server)
        .complete(&request("gpt-4o", Message::user_with("hi", Vec::new())))
        .await
        .unwrap();
    assert_eq!(
        bodies(&server).await[0]["input"],
        json!([{"type": "message", "role": "user", "content": "hi"}])
    );
}

#[tokio::test]
async fn a_chat_text_only_request_keeps_string_content() {
    let server = MockServer::start().await;
    mount_post(&server, CHAT, json_fixture(200, "openai/text.json"), None).await;
    chat(&server)
        .complete(&request("gpt-4o", Message::user_with("hi", Vec::new())))
        .await
        .unwrap();
    assert_eq!(
        bodies(&server).await[0]["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
}

#[tokio::test]
async fn chat_refuses_what_it_has_no_form_for_before_any_request() {
    let server = MockServer::start().await;
    mount_post(&server, CHAT, json_fixture(200, "openai/text.json"), None).await;
    let client = chat(&server);
    let cases = [
        (
            Part::from_url("https://docs.example/bill.pdf", "application/pdf").unwrap(),
            "permanent provider error: Chat Completions cannot carry the document \
             application/pdf at https://docs.example/bill.pdf (it takes documents as bytes \
             or a file id, not a URL); nothing was sent",
        ),
        (
            Part::from_file_id("file-img", "image/png").unwrap(),
            "permanent provider error: Chat Completions cannot carry the image image/png, \
             file file-img (it takes images by URL or bytes, not by file id); nothing was sent",
        ),
        (
            Part::from_bytes_as(b"just text".to_vec(), "text/plain").unwrap(),
            "permanent provider error: Chat Completions cannot carry the document \
             text/plain, 9 bytes (it takes PDF documents only); nothing was sent",
        ),
    ];
    for (part, message) in cases {
        let error = client
            .complete(&request("gpt-4o", Message::user_with("see", vec![part])))
            .await
            .unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Permanent);
        assert_eq!(error.to_string(), message);
    }
    assert!(requests(&server).await.is_empty());
}

#[tokio::test]
async fn responses_user_parts_of_each_kind_and_source_plain_and_streamed() {
    let server = MockServer::start().await;
    let client = responses(&server);
    let parts = vec![
        png(),
        Part::from_url("https://img.example/unit.jpg", "image/jpeg")
            .unwrap()
            .with_detail(Detail::Low),
        Part::from_file_id("file-img", "image/png").unwrap(),
        pdf().named("invoice.pdf"),
        Part::from_file_id("file-abc", "application/pdf").unwrap(),
        Part::from_url("https://docs.example/bill.pdf", "application/pdf").unwrap(),
        Part::from_bytes_as(b"a,b\n1,2\n".to_vec(), "text/csv").unwrap(),
        Part::from_bytes_as(WAV_BYTES.to_vec(), "audio/wav").unwrap(),
    ];
    let request = request("gpt-4.1", Message::user_with("Look.", parts));
    let (plain, streamed) =
        plain_and_streamed(&server, &client, &request, RESPONSES, RESPONSES_FIXTURES).await;
    let expected = json!([{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Look."},
        {"type": "input_image", "image_url": png_url(), "detail": "auto"},
        {"type": "input_image", "image_url": "https://img.example/unit.jpg", "detail": "low"},
        {"type": "input_image", "file_id": "file-img", "detail": "auto"},
        {"type": "input_file", "filename": "invoice.pdf", "file_data": pdf_url()},
        {"type": "input_file", "file_id": "file-abc"},
        {"type": "input_file", "file_url": "https://docs.example/bill.pdf"},
        {"type": "input_file", "filename": "document.csv",
            "file_data": "data:text/csv;base64,YSxiCjEsMgo="},
        {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}}
    ]}]);
    assert_eq!(plain["input"], expected);
    assert_eq!(streamed["input"], expected);
    assert_eq!(streamed["stream"], json!(true));
}

/// A conversation whose tool result carries an image and a PDF.
fn with_tool_parts(model: &str) -> LlmRequest {
    LlmRequest::new(model)
        .with_message(Message::user("What does the unit look like?"))
        .with_message(Message::assistant(
            "",
            vec![ToolCall::new("call_1", "snapshot", json!({}))],
        ))
        .with_message(Message::tool_results(vec![
            ToolResult::ok("call_1", "snapshot", "captured").with_parts(vec![png(), pdf()]),
        ]))
}

#[tokio::test]
async fn responses_function_call_output_carries_parts_plain_and_streamed() {
    let server = MockServer::start().await;
    let client = responses(&server);
    let request = with_tool_parts("gpt-4.1");
    let (plain, streamed) =
        plain_and_streamed(&server, &client, &request, RESPONSES, RESPONSES_FIXTURES).await;
    let expected = json!({"type": "function_call_output", "call_id": "call_1", "output": [
        {"type": "input_text", "text": "captured"},
        {"type": "input_image", "image_url": png_url(), "detail": "auto"},
        {"type": "input_file", "filename": "document.pdf", "file_data": pdf_url()}
    ]});
    assert_eq!(plain["input"][2], expected);
    assert_eq!(streamed["input"][2], expected);
}

#[tokio::test]
async fn chat_tool_messages_take_text_parts_and_refuse_media() {
    let server = MockServer::start().await;
    mount_post(&server, CHAT, json_fixture(200, "openai/text.json"), None).await;
    let client = chat(&server);
    let error = client
        .complete(&with_tool_parts("gpt-4o"))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("a tool message takes text only"),
        "{error}"
    );
    assert!(requests(&server).await.is_empty());
    let texts = LlmRequest::new("gpt-4o")
        .with_message(Message::user("go"))
        .with_message(Message::assistant(
            "",
            vec![ToolCall::new("call_1", "snapshot", json!({}))],
        ))
        .with_message(Message::tool_results(vec![
            ToolResult::error("call_1", "snapshot", "no camera")
                .with_parts(vec![Part::text("try later")]),
        ]));
    client.complete(&texts).await.unwrap();
    assert_eq!(
        bodies(&server).await[0]["messages"][2],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "Error: no camera\ntry later"})
    );
}

/// `lookup_order`, returning its text and a PNG (the fixtures call `lookup_order`).
struct Snapshot;

impl Tool for Snapshot {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup_order",
            "Looks the order up, with a photo.",
            json!({"type": "object", "properties": {"order_id": {"type": "string"}}}),
        )
    }

    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Ok("in transit".to_owned()) })
    }

    fn call_content<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ContentFuture<'a> {
        Box::pin(async { Ok(ToolContent::text("in transit").part(png())) })
    }
}

#[tokio::test]
async fn a_chat_run_moves_a_tools_image_to_a_user_message_naming_the_call() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        CHAT,
        json_fixture(200, "openai/tool_call.json"),
        Some(1),
    )
    .await;
    let submit = json_fixture(200, "openai/c5_stop_with_tool_calls.json");
    mount_post(&server, CHAT, submit, None).await;
    let config = triage("gpt-4o", &base(&server))
        .tools(ToolRegistry::new().with(Snapshot))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let sent = bodies(&server).await;
    let messages = sent[1]["messages"].as_array().unwrap();
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_Xh0N8aWZm4ZJWeV1J4V9PnaQ",
            "content": "in transit"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "user", "content": [
            {"type": "text", "text": "Parts the tool results above returned, in order: \
                image image/png, 70 bytes (call call_Xh0N8aWZm4ZJWeV1J4V9PnaQ: lookup_order)."},
            {"type": "image_url", "image_url": {"url": png_url()}}
        ]})
    );
}

#[tokio::test]
async fn a_responses_run_keeps_a_tools_image_in_its_output() {
    let server = MockServer::start().await;
    let tool_call = json_fixture(200, "responses/tool_call.json");
    mount_post(&server, RESPONSES, tool_call, Some(1)).await;
    mount_post(
        &server,
        RESPONSES,
        json_fixture(200, "responses/submit.json"),
        None,
    )
    .await;
    let config = triage("openai-responses/gpt-4.1", &base(&server))
        .tools(ToolRegistry::new().with(Snapshot))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let sent = bodies(&server).await;
    let input = sent[1]["input"].as_array().unwrap();
    assert_eq!(
        input.last().unwrap(),
        &json!({"type": "function_call_output", "call_id": "call_Xh0N8aWZm4ZJWeV1J4V9PnaQ",
        "output": [
            {"type": "input_text", "text": "in transit"},
            {"type": "input_image", "image_url": png_url(), "detail": "auto"}
        ]})
    );
}

/// The run's typed refusal of the first part, and that nothing was sent.
async fn refused(server: &MockServer, result: &agent_core::AgentResult<Triage>) -> String {
    assert!(requests(server).await.is_empty());
    match &result.outcome {
        Err(AgentError::UnsupportedContent {
            model,
            kind,
            media_type,
            reason,
            ..
        }) => format!("{model} {kind} {media_type}: {reason}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn what_a_model_cannot_take_is_refused_typed_before_any_request() {
    let server = MockServer::start().await;
    mount_post(&server, CHAT, json_fixture(200, "openai/text.json"), None).await;
    let run = |model: &str, part: Part| {
        let config = triage(model, &base(&server)).build().unwrap();
        async move { run_agent(&config, Input::text("see").part(part)).await }
    };
    let text_model = run("gpt-3.5-turbo", png()).await;
    assert_eq!(
        refused(&server, &text_model).await,
        "gpt-3.5-turbo image image/png: the model takes no images"
    );
    let audio_to_vision = run("gpt-4o", Part::from_bytes(WAV_BYTES.to_vec()).unwrap()).await;
    assert_eq!(
        refused(&server, &audio_to_vision).await,
        "gpt-4o audio audio/x-wav: the model takes no audio"
    );
    // Files: 32 MB a request together (each of these is under it; the two are over).
    let half = Part::from_bytes_as(
        [PDF_BYTES, &vec![b' '; 16_000_000]].concat(),
        "application/pdf",
    )
    .unwrap();
    let config = triage("gpt-4o", &base(&server)).build().unwrap();
    let two = run_agent(&config, Input::text("see").part(half.clone()).part(half)).await;
    assert_eq!(
        refused(&server, &two).await,
        "gpt-4o document application/pdf: the conversation's documents hold 32000070 bytes \
         together, more than the 32000000 bytes of documents a request may carry (source: \
         https://platform.openai.com/docs/guides/images-vision and \
         https://platform.openai.com/docs/guides/pdf-files)"
    );
    // An image over 20 MB (20,000,000 bytes).
    let mut huge = b"\x89PNG\r\n\x1a\n".to_vec();
    huge.resize(20_000_001, 0);
    let huge = Part::from_bytes_as(huge, "image/png").unwrap();
    assert_eq!(
        refused(&server, &run("gpt-4o", huge).await).await,
        "gpt-4o image image/png: 20000001 bytes is more than the 20000000 bytes an image may \
         have (source: https://platform.openai.com/docs/guides/images-vision and \
         https://platform.openai.com/docs/guides/pdf-files)"
    );
    let audio_url = Part::from_url("https://a.example/x.wav", "audio/wav").unwrap();
    assert_eq!(
        refused(&server, &run("gpt-4o-audio-preview", audio_url).await).await,
        "gpt-4o-audio-preview audio audio/wav: the model takes no URL (the provider does \
         not fetch one): pass the bytes"
    );
}

#[tokio::test]
async fn azure_takes_images_by_deployment_name_and_no_file_ids() {
    let server = MockServer::start().await;
    let path = "/openai/deployments/gpt-4o/chat/completions";
    mount_post(&server, path, json_fixture(200, "openai/text.json"), None).await;
    let options = ProviderOptions::default()
        .with_api_key(KEY)
        .with_base_url(server.uri());
    let client = OpenAiClient::azure("gpt-4o", &options).unwrap();
    let caps = client.content_capabilities("gpt-4o");
    assert_eq!(caps.image_types, COMMON_IMAGES);
    assert!(caps.document_types.is_empty() && !caps.file_ids && caps.urls);
    assert_eq!(
        (caps.max_images, caps.max_image_bytes),
        (Some(50), Some(20_000_000))
    );
    assert_eq!(
        caps.source,
        "https://learn.microsoft.com/en-us/azure/ai-foundry/openai/quotas-limits"
    );
    assert_eq!(
        client.content_capabilities("support-bot"),
        ContentCapabilities::TEXT_ONLY
    );
    let request = request("gpt-4o", Message::user_with("see", vec![png()]));
    client.complete(&request).await.unwrap();
    assert_eq!(
        bodies(&server).await[0]["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": png_url()}}
        ]}])
    );
    let responses = OpenAiResponsesClient::azure(&options).unwrap();
    assert!(
        !responses
            .content_capabilities("gpt-4o")
            .parts_in_tool_results
    );
    assert!(
        OpenAiResponsesClient::openai(&options)
            .unwrap()
            .content_capabilities("gpt-4o")
            .parts_in_tool_results
    );
}

#[tokio::test]
async fn a_compatible_server_takes_text_alone_unless_its_options_declare_more() {
    let server = MockServer::start().await;
    mount_post(&server, CHAT, json_fixture(200, "openai/text.json"), None).await;
    let plain = OpenAiClient::compatible("vllm", &options(&server)).unwrap();
    assert_eq!(
        plain.content_capabilities("llava"),
        ContentCapabilities::TEXT_ONLY
    );
    let config = agent_core::AgentConfig::<Triage>::builder("see")
        .llm(plain)
        .model("llava")
        .build()
        .unwrap();
    let result = run_agent(&config, Input::text("see").part(png())).await;
    assert_eq!(
        refused(&server, &result).await,
        "llava image image/png: the model takes no images"
    );
    let mut vision = ContentCapabilities::TEXT_ONLY;
    vision.image_types = COMMON_IMAGES;
    let declared =
        OpenAiClient::compatible("vllm", &options(&server).with_content_capabilities(vision))
            .unwrap();
    assert_eq!(declared.content_capabilities("llava"), vision);
    declared
        .complete(&request("llava", Message::user_with("see", vec![png()])))
        .await
        .unwrap();
    assert_eq!(
        bodies(&server).await[0]["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": png_url()}}
        ]}])
    );
}

#[tokio::test]
async fn the_options_knob_replaces_the_table_for_a_routed_model() {
    let server = MockServer::start().await;
    mount_post(&server, CHAT, json_fixture(200, "openai/text.json"), None).await;
    let table = triage("gpt-4o-mini", &base(&server)).build().unwrap();
    assert_eq!(
        table.content_capabilities().document_types,
        ["application/pdf"]
    );
    let mut vision = ContentCapabilities::TEXT_ONLY;
    vision.image_types = COMMON_IMAGES;
    let config = triage_with("gpt-4o-mini", &base(&server), |o| {
        o.with_content_capabilities(vision)
    })
    .build()
    .unwrap();
    assert_eq!(config.content_capabilities(), vision);
    let result = run_agent(&config, Input::text("see").part(pdf())).await;
    assert_eq!(
        refused(&server, &result).await,
        "gpt-4o-mini document application/pdf: the model takes no documents"
    );
}

#[test]
fn openai_capabilities_by_family() {
    let options = ProviderOptions::default().with_api_key(KEY);
    let client = OpenAiClient::openai(&options).unwrap();
    let vision = client.content_capabilities("gpt-4.1-mini");
    assert_eq!(vision.image_types, COMMON_IMAGES);
    assert_eq!(vision.document_types, ["application/pdf"]);
    assert!(vision.audio_types.is_empty());
    assert!(vision.urls && vision.file_ids && !vision.parts_in_tool_results);
    assert_eq!(vision.max_part_bytes, None);
    assert_eq!(vision.max_image_bytes, Some(20_000_000));
    assert_eq!(vision.max_images, Some(500));
    assert_eq!(vision.max_total_document_bytes, Some(32_000_000));
    assert_eq!(vision.max_pdf_pages, Some(100));
    // gpt-4.1-mini counts 32-px patches times 1.62 ("Calculating costs").
    assert_eq!(
        vision.tokens,
        agent_core::content::TokenRule::OpenAiPatches {
            multiplier_percent: 162
        }
    );
    let audio = client.content_capabilities("gpt-4o-audio-preview");
    assert!(audio.image_types.is_empty());
    assert!(audio.audio_types.contains(&"audio/mpeg"));
    assert_eq!(
        audio.source,
        "https://platform.openai.com/docs/guides/audio"
    );
    assert_eq!(
        client.content_capabilities("o3-mini"),
        ContentCapabilities::TEXT_ONLY
    );
    let responses = OpenAiResponsesClient::openai(&options).unwrap();
    let caps = responses.content_capabilities("gpt-5");
    assert!(caps.parts_in_tool_results);
    assert!(caps.document_types.contains(&"text/csv"));
}
