//! Content parts on the Bedrock Converse wire, against wiremock: `image` and
//! `document` blocks with their bytes as base64, in a user message and in `toolResult`
//! content, plain (`/converse`) and streamed (`/converse-stream`, the same body);
//! document names made safe and unique; a URL, a file id, a type or a size Converse
//! does not take refused before any request; text-only bodies unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::content::{Input, Kind, Part};
use agent_core::llm::{LlmClient, LlmRequest, Message, StreamDelta, ToolCall, ToolResult};
use agent_core::providers::{AwsCredentials, BedrockClient, ProviderOptions};
use agent_core::{AgentError, run_agent};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::MockServer;

const MODEL: &str = "anthropic.claude-sonnet-4-5-20250929-v1:0";
const ROUTE: &str = "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0";
const PATH: &str = "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse";
const STREAM_PATH: &str = "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream";
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
const PDF: &[u8] = b"%PDF-1.4\n1 0 obj << /Type /Page >>\n";
const PDF_B64: &str = "JVBERi0xLjQKMSAwIG9iaiA8PCAvVHlwZSAvUGFnZSA+Pgo=";
const SOURCE: &str =
    "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Message.html";

fn png() -> Part {
    Part::from_base64(PNG_B64, "image/png").unwrap()
}

fn pdf(name: &str) -> Part {
    Part::from_bytes_as(PDF.to_vec(), "application/pdf")
        .unwrap()
        .named(name)
}

/// A SigV4 client at the mock server (fake credentials in the AWS examples' format).
fn client(server: &MockServer) -> BedrockClient {
    BedrockClient::new(
        &ProviderOptions::default()
            .with_aws_credentials(AwsCredentials::new(
                "AKIDEXAMPLE",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            ))
            .with_aws_region("us-east-1")
            .with_base_url(server.uri()),
    )
    .unwrap()
}

async fn server() -> MockServer {
    let server = MockServer::start().await;
    for path in [PATH, STREAM_PATH] {
        mount_post(&server, path, json_fixture(200, "bedrock/text.json"), None).await;
    }
    server
}

/// The body of one plain and one streamed request of `request` (the same body, posted
/// to `/converse` then `/converse-stream`).
async fn plain_and_streamed(request: &LlmRequest) -> Value {
    let server = server().await;
    let client = client(&server);
    client.complete(request).await.unwrap();
    let mut sink = |_: StreamDelta<'_>| {};
    let _ = client.complete_streaming(request, &mut sink).await;
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].url.path(), PATH);
    assert_eq!(sent[1].url.path(), STREAM_PATH);
    assert_eq!(
        sent[1].body, sent[0].body,
        "the streamed request encodes the same"
    );
    serde_json::from_slice(&sent[0].body).unwrap()
}

#[tokio::test]
async fn a_user_messages_parts_go_as_image_and_document_blocks_of_bytes() {
    let parts = vec![
        png(),
        pdf("invoice_0042.pdf"),
        pdf("invoice_0042.pdf"),
        Part::from_bytes_as(b"Order A-1001 shipped on 2 May.".to_vec(), "text/plain").unwrap(),
        Part::text("That is all."),
    ];
    let request =
        LlmRequest::new(MODEL).with_message(Message::user_with("The unit arrived cracked.", parts));
    let body = plain_and_streamed(&request).await;
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"text": "The unit arrived cracked."},
            {"image": {"format": "png", "source": {"bytes": PNG_B64}}},
            {"document": {"format": "pdf", "name": "invoice 0042", "source": {"bytes": PDF_B64}}},
            {"document": {"format": "pdf", "name": "invoice 0042 (2)", "source": {"bytes": PDF_B64}}},
            {"document": {"format": "txt", "name": "document 3", "source": {"bytes": "T3JkZXIgQS0xMDAxIHNoaXBwZWQgb24gMiBNYXku"}}},
            {"text": "That is all."}
        ]}])
    );
}

#[tokio::test]
async fn a_tool_results_parts_go_inside_its_content() {
    let request = LlmRequest::new(MODEL)
        .with_message(Message::user("Why does checkout fail?"))
        .with_message(Message::assistant(
            "",
            vec![
                ToolCall::new("tooluse_1", "screenshot", json!({})),
                ToolCall::new("tooluse_2", "export", json!({})),
            ],
        ))
        .with_message(Message::tool_results(vec![
            ToolResult::ok("tooluse_1", "screenshot", "the checkout page").with_parts(vec![png()]),
            ToolResult::ok("tooluse_2", "export", "").with_parts(vec![pdf("report.pdf")]),
        ]))
        .with_message(Message::user_with("", vec![png()]));
    let body = plain_and_streamed(&request).await;
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [
            {"toolResult": {"toolUseId": "tooluse_1", "content": [
                {"text": "the checkout page"},
                {"image": {"format": "png", "source": {"bytes": PNG_B64}}}
            ]}},
            {"toolResult": {"toolUseId": "tooluse_2", "content": [
                {"document": {"format": "pdf", "name": "report", "source": {"bytes": PDF_B64}}}
            ]}},
            {"image": {"format": "png", "source": {"bytes": PNG_B64}}}
        ]})
    );
}

#[tokio::test]
async fn a_text_only_request_is_byte_identical_to_before_parts() {
    let server = server().await;
    let request = text_only_request(MODEL, "tooluse_1");
    client(&server).complete(&request).await.unwrap();
    let sent = requests(&server).await;
    assert_eq!(
        String::from_utf8_lossy(&sent[0].body),
        r#"{"messages":[{"role":"user","content":[{"text":"Where is A-1001?"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"tooluse_1","name":"lookup_order","input":{"id":"A-1001"}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"tooluse_1","content":[{"text":"shipped"}]}}]}],"inferenceConfig":{"maxTokens":512}}"#
    );
}

/// A run on `route` with `input`: the refusal, and no request sent.
async fn refused(route: &str, input: Input) -> (Kind, String) {
    let server = server().await;
    let config = triage_with(route, &server.uri(), |o| o.with_aws_region("us-east-1"))
        .build()
        .unwrap();
    let result = run_agent(&config, input).await;
    assert!(requests(&server).await.is_empty(), "no request was sent");
    match result.outcome {
        Err(AgentError::UnsupportedContent { kind, reason, .. }) => (kind, reason),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn parts_converse_cannot_take_are_refused_before_any_request() {
    // A URL: Converse takes bytes only.
    let url = Part::from_url("https://example.test/unit.png", "image/png").unwrap();
    let (kind, reason) = refused(ROUTE, Input::text("look").part(url)).await;
    assert_eq!(kind, Kind::Image);
    assert_eq!(
        reason,
        "the model takes no URL (the provider does not fetch one): pass the bytes"
    );
    // A file id: the same.
    let file = Part::from_file_id("file-abc", "application/pdf").unwrap();
    let (_, reason) = refused(ROUTE, Input::text("read").part(file)).await;
    assert_eq!(
        reason,
        "the model takes no provider file id: pass the bytes"
    );
    // An image over 3.75 MB.
    let mut big = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    big.resize(3_750_001, 0);
    let big = Part::from_bytes_as(big, "image/png").unwrap();
    let (_, reason) = refused(ROUTE, Input::text("look").part(big)).await;
    assert_eq!(
        reason,
        format!(
            "3750001 bytes is more than the 3750000 bytes an image may have (source: {SOURCE})"
        )
    );
    // A document over 4.5 MB.
    let mut big = PDF.to_vec();
    big.resize(4_500_001, b' ');
    let big = Part::from_bytes_as(big, "application/pdf").unwrap();
    let (kind, reason) = refused(ROUTE, Input::text("read").part(big)).await;
    assert_eq!(kind, Kind::Document);
    assert!(
        reason.contains("more than the 4500000 bytes a document may have"),
        "{reason}"
    );
    // Six documents: five a request.
    let mut input = Input::text("read");
    for i in 0..6 {
        input = input.part(pdf(&format!("p{i}.pdf")));
    }
    let (_, reason) = refused(ROUTE, input).await;
    assert_eq!(
        reason,
        format!(
            "the conversation holds 6 documents, more than the 5 a request may carry (source: {SOURCE})"
        )
    );
    // Twenty-one images: twenty a request.
    let mut input = Input::text("look");
    for _ in 0..21 {
        input = input.part(png());
    }
    let (_, reason) = refused(ROUTE, input).await;
    assert!(
        reason.starts_with("the conversation holds 21 images, more than the 20"),
        "{reason}"
    );
    // A GIF is an image Converse takes; a BMP is not.
    let bmp = Part::from_bytes_as(b"BM\x1e\x00\x00\x00".to_vec(), "image/bmp").unwrap();
    let (_, reason) = refused(ROUTE, Input::text("look").part(bmp)).await;
    assert!(
        reason.starts_with("the model takes images of the types"),
        "{reason}"
    );
    // A model with no vision on Converse.
    let (kind, reason) = refused(
        "bedrock/meta.llama3-1-70b-instruct-v1:0",
        Input::text("look").part(png()),
    )
    .await;
    assert_eq!(
        (kind, reason.as_str()),
        (Kind::Image, "the model takes no images")
    );
}

#[tokio::test]
async fn a_tools_parts_reach_a_model_that_takes_none_in_results_after_the_results() {
    // Nova takes images, but not in tool results: the runner moves the part to the
    // user turn after the results, which shares the results' `user` message.
    let server = MockServer::start().await;
    let path = "/model/amazon.nova-pro-v1%3A0/converse";
    mount_post(
        &server,
        path,
        json_fixture(200, "bedrock/tool_use.json"),
        Some(1),
    )
    .await;
    mount_post(
        &server,
        path,
        json_fixture(200, "bedrock/submit.json"),
        None,
    )
    .await;
    let config = triage_with("bedrock/amazon.nova-pro-v1:0", &server.uri(), |o| {
        o.with_aws_region("us-east-1")
    })
    .tool(Photo(png()))
    .build()
    .unwrap();
    let result = run_agent(&config, "My parcel A-1001 is a week late.").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let bodies = bodies(&server).await;
    let results = &bodies[1]["messages"][2];
    assert_eq!(results["role"], "user");
    let content = results["content"].as_array().unwrap();
    assert_eq!(content.len(), 3, "{content:?}");
    assert_eq!(
        content[0]["toolResult"]["content"],
        json!([{"text": "a photo of the parcel"}])
    );
    let note = content[1]["text"].as_str().unwrap();
    assert!(note.contains("lookup_order"), "{note}");
    assert_eq!(
        content[2],
        json!({"image": {"format": "png", "source": {"bytes": PNG_B64}}})
    );
}
