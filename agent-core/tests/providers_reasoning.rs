//! Reasoning controls (`.reasoning(..)`) on each wire: OpenAI `reasoning_effort` and
//! Responses `reasoning.effort`, Anthropic extended thinking (budget, thinking blocks
//! sent back with their calls, forced tool choice as `auto`, no temperature), Gemini
//! `thinkingConfig`; a model that cannot honour the setting is a `ConfigError` at build.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::sync::atomic::{AtomicUsize, Ordering};

use agent_core::{
    ConfigError,
    llm::{Effort, Reasoning},
    run_agent,
};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers each request with the next body of `bodies` (the last one again after).
struct Bodies(Vec<Value>, AtomicUsize);

impl Respond for Bodies {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.1.fetch_add(1, Ordering::SeqCst).min(self.0.len() - 1);
        ResponseTemplate::new(200).set_body_json(self.0[n].clone())
    }
}

async fn server(bodies: Vec<Value>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Bodies(bodies, AtomicUsize::new(0)))
        .mount(&server)
        .await;
    server
}

fn submit_args() -> Value {
    json!({"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."})
}

fn openai_submit() -> Value {
    json!({"id": "c", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "submit_output", "arguments": submit_args().to_string()}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
}

/// The non-empty reasoning texts of a transcript's assistant turns, in order.
fn transcript_reasoning(transcript: &[agent_core::llm::Message]) -> Vec<&str> {
    transcript
        .iter()
        .map(agent_core::llm::Message::reasoning)
        .filter(|r| !r.is_empty())
        .collect()
}

fn invalid(e: ConfigError) -> String {
    match e {
        ConfigError::InvalidSetting {
            setting: "reasoning",
            reason,
            ..
        } => reason.to_owned(),
        other => panic!("not a reasoning error: {other}"),
    }
}

#[tokio::test]
async fn openai_sends_the_effort_and_rejects_what_it_cannot_send() {
    let server = server(vec![openai_submit()]).await;
    let config = triage("gpt-5-mini", &server.uri())
        .reasoning(Reasoning::effort(Effort::Low))
        .temperature(0.2)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let body = &bodies(&server).await[0];
    assert_eq!(body["reasoning_effort"], "low");
    assert!(body.get("temperature").is_none());

    let err = |model: &str, r: Reasoning| {
        invalid(
            triage(model, &server.uri())
                .reasoning(r)
                .build()
                .map(|_| ())
                .unwrap_err(),
        )
    };
    assert!(err("gpt-4o", Reasoning::effort(Effort::High)).contains("not a reasoning model"));
    assert!(err("gpt-5", Reasoning::budget(4_000)).contains("not a token budget"));
    assert!(err("o3", Reasoning::effort(Effort::Minimal)).contains("gpt-5 models only"));
    assert!(err("dispatch/qwen", Reasoning::effort(Effort::Low)).contains("compatible servers"));
}

#[tokio::test]
async fn the_responses_api_gets_reasoning_effort() {
    let server = server(vec![json!({
        "id": "resp_1", "object": "response", "status": "completed", "model": "o3",
        "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "submit_output",
            "arguments": submit_args().to_string(), "status": "completed"}],
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    })])
    .await;
    let config = triage("openai-responses/o3", &server.uri())
        .reasoning(Reasoning::effort(Effort::High))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(
        bodies(&server).await[0]["reasoning"],
        json!({"effort": "high"})
    );
}

#[tokio::test]
async fn anthropic_thinks_within_its_budget_and_gets_its_thinking_blocks_back() {
    let thinking = json!({"type": "thinking", "thinking": "The order id is in the ticket.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"});
    let server = server(vec![
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [thinking.clone(),
                {"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {"order_id": "A-1001"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 50}}),
        json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "toolu_2", "name": "submit_output", "input": submit_args()}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 200, "output_tokens": 30}}),
    ])
    .await;
    let tool = CountingTool::lookup_order();
    let config = triage("claude-sonnet-4-5", &server.uri())
        .tool(tool.clone())
        .reasoning(Reasoning::effort(Effort::Medium))
        .max_tokens(16_000)
        .temperature(0.3)
        .wrap_up(true)
        .max_llm_calls(2)
        .build()
        .unwrap();
    let result = run_agent(&config, "Where is A-1001?").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(tool.calls(), 1);
    assert_eq!(
        transcript_reasoning(&result.transcript),
        ["The order id is in the ticket."]
    );
    let sent = bodies(&server).await;
    for body in &sent {
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 8192})
        );
        assert!(body.get("temperature").is_none(), "{body}");
    }
    // The second call is the wrap-up turn, whose forced submit_output goes as `auto`.
    assert_eq!(sent[1]["tool_choice"]["type"], "auto");
    // The thinking block goes back first in its turn, signature and all.
    let assistant = &sent[1]["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0], thinking);
    assert_eq!(assistant["content"][1]["type"], "tool_use");

    let err = |model: &str, r: Reasoning, max: u32| {
        invalid(
            triage(model, &server.uri())
                .reasoning(r)
                .max_tokens(max)
                .build()
                .map(|_| ())
                .unwrap_err(),
        )
    };
    assert!(
        err("claude-3-5-haiku-latest", Reasoning::budget(2_000), 8_000).contains("does not think")
    );
    assert!(err("claude-sonnet-4-5", Reasoning::budget(512), 8_000).contains("at least 1,024"));
    assert!(
        err("claude-sonnet-4-5", Reasoning::effort(Effort::High), 8_000)
            .contains("less than max_tokens")
    );
}

#[tokio::test]
async fn gemini_gets_a_thinking_budget_or_level() {
    let reply = json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "submit_output", "args": submit_args()}}]},
        "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}});
    let server = server(vec![reply]).await;
    for (model, reasoning, expected) in [
        (
            "gemini-2.5-flash",
            Reasoning::budget(2_048),
            json!({"thinkingBudget": 2048}),
        ),
        (
            "gemini-2.5-pro",
            Reasoning::effort(Effort::High),
            json!({"thinkingBudget": 24576}),
        ),
        (
            "gemini-3-pro-preview",
            Reasoning::effort(Effort::Low),
            json!({"thinkingLevel": "low"}),
        ),
    ] {
        let config = triage(model, &server.uri())
            .reasoning(reasoning)
            .build()
            .unwrap();
        let result = run_agent(&config, "ticket").await;
        assert_eq!(result.outcome, Ok(expected_triage()), "{model}");
        let last = bodies(&server).await.pop().unwrap();
        assert_eq!(
            last["generationConfig"]["thinkingConfig"], expected,
            "{model}"
        );
    }
    let err = |model: &str, r: Reasoning| {
        invalid(
            triage(model, &server.uri())
                .reasoning(r)
                .build()
                .map(|_| ())
                .unwrap_err(),
        )
    };
    assert!(err("gemini-2.0-flash", Reasoning::budget(1_000)).contains("does not think"));
    assert!(err("gemini-3-pro-preview", Reasoning::budget(1_000)).contains("not a token budget"));
    assert!(
        err("gemini-2.5-flash", Reasoning::budget(30_000))
            .contains("over the model's thinking limit")
    );
}

#[tokio::test]
async fn streamed_thinking_arrives_as_reasoning_deltas() {
    use agent_core::stream::StreamEvent;
    let server = MockServer::start().await;
    mount_post(
        &server,
        "/v1/messages",
        raw_fixture(
            200,
            "streaming/anthropic/thinking_submit.sse",
            "text/event-stream",
        ),
        None,
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server.uri())
        .reasoning(Reasoning::budget(2_048))
        .max_tokens(8_000)
        .build()
        .unwrap();
    let mut stream = agent_core::run_agent_stream(&config, "ticket");
    let mut reasoning = String::new();
    let mut result = None;
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::ReasoningDelta { llm_call, text } => {
                assert_eq!(llm_call, 1);
                reasoning.push_str(&text);
            }
            StreamEvent::Finished(r) => result = Some(*r),
            _ => {}
        }
    }
    assert_eq!(reasoning, "The parcel is late; shipping, severity 2.");
    let result = result.unwrap();
    assert_eq!(result.outcome, Ok(expected_triage()));
    // The streamed reasoning is the transcript's too.
    assert_eq!(
        transcript_reasoning(&result.transcript),
        [reasoning.as_str()]
    );
    assert_eq!(bodies(&server).await[0]["thinking"]["budget_tokens"], 2048);
}

/// A reasoning turn that calls `lookup_order`, then `submit_output`, on each wire that
/// returns reasoning as text: the reasoning is the first assistant turn's transcript
/// part, and the next request carries none of it (compatible servers and Gemini take no
/// reasoning back; the Responses API gets its own item back, encrypted, as it came).
#[tokio::test]
async fn reasoning_text_is_a_transcript_part_and_is_not_sent_back() {
    const THOUGHT: &str = "A-1001 is named; look it up first.";
    let lookup_args = json!({"order_id": "A-1001"}).to_string();
    let cases: Vec<(&str, Vec<Value>)> = vec![
        (
            "dispatch/qwen",
            vec![
                json!({"id": "c1", "object": "chat.completion", "model": "qwen",
                    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "",
                        "reasoning_content": THOUGHT,
                        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": lookup_args}}]}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
                openai_submit(),
            ],
        ),
        (
            "gemini-2.5-flash",
            vec![
                json!({"candidates": [{"content": {"role": "model", "parts": [
                        {"text": THOUGHT, "thought": true},
                        {"functionCall": {"name": "lookup_order", "args": {"order_id": "A-1001"}}}]},
                    "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}}),
                json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "submit_output", "args": submit_args()}}]},
                    "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}}),
            ],
        ),
        (
            "openai-responses/gpt-5-mini",
            vec![
                json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5-mini",
                    "output": [
                        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": THOUGHT}], "encrypted_content": "ENC=="},
                        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup_order", "arguments": lookup_args, "status": "completed"}],
                    "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}),
                json!({"id": "resp_2", "object": "response", "status": "completed", "model": "gpt-5-mini",
                    "output": [{"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "submit_output",
                        "arguments": submit_args().to_string(), "status": "completed"}],
                    "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}),
            ],
        ),
    ];
    for (model, replies) in cases {
        let server = server(replies).await;
        let config = triage(model, &server.uri())
            .tool(CountingTool::lookup_order())
            .build()
            .unwrap();
        let result = run_agent(&config, "Where is A-1001?").await;
        assert_eq!(result.outcome, Ok(expected_triage()), "{model}");
        assert_eq!(
            transcript_reasoning(&result.transcript),
            [THOUGHT],
            "{model}"
        );
        let sent = bodies(&server).await;
        assert_eq!(sent.len(), 2, "{model}");
        let second = sent[1].to_string();
        if model.starts_with("openai-responses/") {
            // Its own reasoning item goes back as it came (encrypted content and all),
            // once, ahead of its call; the transcript part adds no other copy.
            assert_eq!(second.matches(THOUGHT).count(), 1, "{second}");
            assert!(second.contains("ENC=="), "{second}");
        } else {
            assert!(!second.contains(THOUGHT), "{model}: {second}");
        }
    }
}
