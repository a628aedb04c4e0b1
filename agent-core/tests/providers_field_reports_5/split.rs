//! C61's kind on every streaming wire: a stream split at any byte (1, 3 and 64-byte
//! writes, each flushed on its own) is the same turn, the same error and the same
//! deltas as the stream written at once. Chat Completions (OpenAI, Azure, a compatible
//! server), Anthropic, the Responses API (OpenAI, Azure), Bedrock's binary event
//! stream, and Vertex AI's Gemini and Claude.

use super::*;
use crate::providers_field_reports_4::{gemini_stream_of, stream_once, turn};

use agent_core::llm::{LlmClient, LlmRequest};
use agent_core::providers::{
    AnthropicClient, BedrockClient, OpenAiClient, OpenAiResponsesClient, VertexClient,
};

/// Which client reads the stream.
#[derive(Clone, Copy, Debug)]
enum Reader {
    Chat,
    AzureChat,
    Compatible,
    Anthropic,
    Responses,
    AzureResponses,
    Bedrock,
    Vertex,
}

fn client(reader: Reader, base: &str) -> Box<dyn LlmClient> {
    let o = options(base);
    match reader {
        Reader::Chat => Box::new(OpenAiClient::openai(&o).unwrap()),
        Reader::AzureChat => Box::new(OpenAiClient::azure("prod-gpt-4o", &o).unwrap()),
        Reader::Compatible => Box::new(OpenAiClient::compatible("dispatch", &o).unwrap()),
        Reader::Anthropic => Box::new(AnthropicClient::new(&o).unwrap()),
        Reader::Responses => Box::new(OpenAiResponsesClient::openai(&o).unwrap()),
        Reader::AzureResponses => Box::new(OpenAiResponsesClient::azure(&o).unwrap()),
        Reader::Bedrock => Box::new(
            BedrockClient::new(&o.with_aws_region("us-east-1").with_bearer_token(KEY)).unwrap(),
        ),
        Reader::Vertex => Box::new(
            VertexClient::new(
                &o.with_gcp_project(PROJECT)
                    .with_gcp_location(LOCATION)
                    .with_bearer_token("ya29.kinds-test-token"),
            )
            .unwrap(),
        ),
    }
}

/// One streamed call of `request` through `reader`, the body written in pieces of
/// `piece` bytes: the outcome (the turn, or the error's text), the text the sink got,
/// and the calls it saw start.
async fn read(
    reader: Reader,
    request: &LlmRequest,
    body: &[u8],
    content_type: &str,
    piece: usize,
) -> (Result<agent_core::llm::LlmResponse, String>, String, usize) {
    let base = trickle_server(body.to_vec(), content_type, piece).await;
    let client = client(reader, &base);
    let (response, deltas) = stream_once(client.as_ref(), request).await;
    let text = deltas
        .iter()
        .filter_map(|d| d.strip_prefix("text "))
        .collect();
    let started = deltas.iter().filter(|d| d.starts_with("start ")).count();
    (response.map(turn).map_err(|e| e.to_string()), text, started)
}

const SSE: &str = "text/event-stream";
const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

#[tokio::test]
async fn c61_every_stream_split_at_any_byte_is_the_same_turn_as_written_at_once() {
    let mut cases: Vec<(String, Reader, &str, Vec<u8>, &str)> = Vec::new();
    let sse_files = |dir: &str, files: &[&str]| -> Vec<(String, Vec<u8>)> {
        files
            .iter()
            .map(|f| {
                let path = format!("streaming/{dir}/{f}");
                (path.clone(), fixture(&path).into_bytes())
            })
            .collect()
    };
    let chat = sse_files(
        "openai",
        &[
            "text.sse",
            "submit.sse",
            "parallel_tool_calls.sse",
            "cut.sse",
            "error_mid_stream.sse",
        ],
    );
    for (path, body) in &chat {
        for reader in [Reader::Chat, Reader::AzureChat] {
            cases.push((path.clone(), reader, "gpt-4.1", body.clone(), SSE));
        }
    }
    for (path, body) in sse_files("compatible", &["native_answer.sse"]) {
        cases.push((path, Reader::Compatible, "qwen2.5-7b-instruct", body, SSE));
    }
    let claude = sse_files(
        "anthropic",
        &[
            "submit.sse",
            "parallel_tool_use.sse",
            "thinking_submit.sse",
            "cut.sse",
            "error_overloaded.sse",
        ],
    );
    for (path, body) in &claude {
        cases.push((
            path.clone(),
            Reader::Anthropic,
            "claude-sonnet-4-5",
            body.clone(),
            SSE,
        ));
        cases.push((
            format!("vertex {path}"),
            Reader::Vertex,
            "claude-sonnet-4-5@20250929",
            body.clone(),
            SSE,
        ));
    }
    let responses = sse_files(
        "responses",
        &[
            "text.sse",
            "submit.sse",
            "incomplete.sse",
            "failed.sse",
            "cut.sse",
            "error.sse",
        ],
    );
    for (path, body) in &responses {
        for reader in [Reader::Responses, Reader::AzureResponses] {
            cases.push((path.clone(), reader, "gpt-5-mini", body.clone(), SSE));
        }
    }
    for file in ["text.json", "tool_use.json", "reasoning_text.json"] {
        let frames: Vec<(String, Value)> =
            serde_json::from_str(&fixture(&format!("streaming/bedrock/{file}"))).unwrap();
        let mut body = bedrock_bytes(&frames);
        cases.push((
            format!("bedrock {file}"),
            Reader::Bedrock,
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            body.clone(),
            EVENT_STREAM,
        ));
        // Cut inside the last message: a typed error, whatever the split.
        body.truncate(body.len() - 5);
        cases.push((
            format!("bedrock {file} cut"),
            Reader::Bedrock,
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            body,
            EVENT_STREAM,
        ));
    }
    for file in [
        "text.json",
        "function_call.json",
        "parallel_calls.json",
        "safety.json",
        "blocked_prompt.json",
    ] {
        let plain: Value = serde_json::from_str(&fixture(&format!("gemini/{file}"))).unwrap();
        // As sent (`\r\n` line ends), and with `\n` ones.
        let crlf = gemini_stream_of(&plain, 5);
        for body in [crlf.replace("\r\n", "\n"), crlf] {
            cases.push((
                format!("vertex gemini {file}"),
                Reader::Vertex,
                "gemini-2.5-flash",
                body.into_bytes(),
                SSE,
            ));
        }
    }
    for (label, reader, model, body, content_type) in cases {
        let request = hello(model);
        let whole = read(reader, &request, &body, content_type, body.len()).await;
        if !["cut", "error", "failed"].iter().any(|w| label.contains(w)) {
            assert!(whole.0.is_ok(), "{label} ({reader:?}): {:?}", whole.0);
        }
        for piece in [1, 3, 64] {
            let split = read(reader, &request, &body, content_type, piece).await;
            assert_eq!(
                split, whole,
                "{label} ({reader:?}), split every {piece} bytes"
            );
        }
    }
}
