//! An MCP tool's image, audio and embedded resource content as parts: through the
//! runner to a scripted model (the parts in the tool result), and to OpenAI Chat
//! Completions against wiremock (which takes no parts in a tool message: the image and
//! the PDF go in a user message right after the results, naming the call).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agent_core::content::Part;
use agent_core::providers::ProviderOptions;
use agent_core::testing::ScriptedModel;
use agent_core::{AgentConfig, OutputMode, run_agent};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{Answer, PDF, PNG, results_of};
use crate::http::{connect, start};

fn png() -> Part {
    Part::from_bytes_as(PNG.to_vec(), "image/png").unwrap()
}

fn pdf() -> Part {
    Part::from_bytes_as(PDF.to_vec(), "application/pdf")
        .unwrap()
        .named("b-7.pdf")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_image_and_blob_resource_reach_the_model_as_parts() {
    let server = start().await;
    let tools = connect(&server).await;
    let model = ScriptedModel::new()
        .tool_call("web_screenshot", json!({}))
        .submit(json!({"summary": "seen"}));
    let config = AgentConfig::<Answer>::builder("mcp-parts")
        .llm(model.clone())
        .tools(tools.registry())
        .build()
        .unwrap();
    let result = run_agent(&config, "look").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "seen");
    let result = &results_of(&model.requests(), 1)[0];
    assert!(!result.is_error);
    // The text blocks and the text resource, no placeholder for the others.
    assert_eq!(result.content, "captured\npage 2 is blank");
    assert_eq!(result.parts, [png(), pdf()]);
    tools.close();
    server.kill();
}

fn chat_reply(message: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }))
}

fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_chat_completions_the_parts_follow_the_results_in_a_user_message() {
    let server = start().await;
    let tools = connect(&server).await;
    let openai = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(chat_reply(call("call_1", "web_screenshot", "{}")))
        .up_to_n_times(1)
        .mount(&openai)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(chat_reply(call(
            "call_2",
            "submit_output",
            r#"{"summary":"seen"}"#,
        )))
        .mount(&openai)
        .await;
    let options = ProviderOptions::default()
        .with_api_key("sk-test")
        .with_base_url(format!("{}/v1", openai.uri()));
    let config = AgentConfig::<Answer>::builder("mcp-parts")
        .model("gpt-4o")
        .output_mode(OutputMode::Tool)
        .provider(options)
        .tools(tools.registry())
        .build()
        .unwrap();
    let result = run_agent(&config, "look").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "seen");
    let sent = openai.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&sent[1].body).unwrap();
    let messages = body["messages"].as_array().unwrap();
    let at = messages.iter().position(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        messages[at],
        json!({"role": "tool", "tool_call_id": "call_1",
            "content": "captured\npage 2 is blank"})
    );
    let png_url = format!(
        "data:image/png;base64,{}",
        agent_core::content::Bytes::from(PNG).to_base64()
    );
    let pdf_url = format!(
        "data:application/pdf;base64,{}",
        agent_core::content::Bytes::from(PDF).to_base64()
    );
    assert_eq!(
        messages[at + 1],
        json!({"role": "user", "content": [
            {"type": "text", "text": format!(
                "Parts the tool results above returned, in order: image image/png, {} bytes \
                 (call call_1: web_screenshot); document application/pdf, {} bytes (call \
                 call_1: web_screenshot).",
                PNG.len(),
                PDF.len()
            )},
            {"type": "image_url", "image_url": {"url": png_url}},
            {"type": "file", "file": {"filename": "b-7.pdf", "file_data": pdf_url}}
        ]})
    );
    tools.close();
    server.kill();
}
