//! Native output mode with tools on a grammar-based server (`dispatch/`: llama.cpp,
//! vLLM, Ollama): the output schema is a grammar over the whole reply, so a turn that
//! offers tools goes without `response_format` and the answering turn goes with it; on
//! OpenAI, which shows the schema and still calls tools, every turn carries it. Tool
//! parameter patterns reach a grammar server in a form its converter enforces.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::sync::atomic::{AtomicUsize, Ordering};

use agent_core::{
    OutputMode, Tool, ToolContext, run_agent,
    tool::{ToolDefinition, ToolFuture},
};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// `lookup_order(order_id)` with a pattern on the id.
struct Lookup;

impl Tool for Lookup {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup_order",
            "Look up an order.",
            json!({
                "type": "object",
                "properties": {"order_id": {"type": "string", "pattern": "^NW-\\d{5}$"}},
                "required": ["order_id"]
            }),
        )
    }
    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Ok("{\"status\": \"in transit\"}".to_owned()) })
    }
}

/// A tool call, then a text answer that is not JSON, then the answer (JSON text).
struct Script(AtomicUsize);

fn completion(message: Value, finish: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}
    }))
}

impl Respond for Script {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        match self.0.fetch_add(1, Ordering::SeqCst) {
            0 => completion(
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "lookup_order", "arguments": "{\"order_id\": \"NW-10231\"}"}}]}),
                "tool_calls",
            ),
            1 => completion(
                json!({"role": "assistant", "content": "The parcel is in transit."}),
                "stop",
            ),
            _ => completion(
                json!({"role": "assistant", "content": json!({
                    "severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."
                }).to_string()}),
                "stop",
            ),
        }
    }
}

async fn run_native(model: &str) -> (agent_core::AgentResult<Triage>, Vec<Value>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Script(AtomicUsize::new(0)))
        .mount(&server)
        .await;
    let base = format!("{}/v1", server.uri());
    let config = triage(model, &base)
        .output_mode(OutputMode::Native)
        .tool(Lookup)
        .build()
        .unwrap();
    let result = run_agent(&config, "Where is NW-10231?").await;
    (result, bodies(&server).await)
}

#[tokio::test]
async fn a_grammar_server_gets_the_schema_only_on_the_answering_turn() {
    let (result, bodies) = run_native("dispatch/qwen").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.tool_calls, 1);
    assert_eq!(bodies.len(), 3);
    // Turns that offer the tool: no grammar, so the model can call it.
    for body in &bodies[..2] {
        assert!(body.get("response_format").is_none(), "{body}");
        assert_eq!(body["tools"][0]["function"]["name"], "lookup_order");
        assert_eq!(body["tool_choice"], "auto");
    }
    // The text was not the answer: the correction forces the answer, with the schema.
    assert_eq!(bodies[2]["response_format"]["type"], "json_schema");
    assert_eq!(bodies[2]["tool_choice"], "none");
    // The tool's pattern in the form a grammar converter enforces.
    assert_eq!(
        bodies[0]["tools"][0]["function"]["parameters"]["properties"]["order_id"]["pattern"],
        "^NW-[0-9]{5}$"
    );
    // The schema is in the system prompt on every turn (the grammar shows it to no one).
    assert!(bodies.iter().all(|b| {
        b["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("severity")
    }));
}

#[tokio::test]
async fn openai_gets_the_schema_on_every_turn_and_the_pattern_as_written() {
    let (result, bodies) = run_native("gpt-4o").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert!(
        bodies
            .iter()
            .all(|b| b["response_format"]["type"] == "json_schema"),
        "{bodies:?}"
    );
    assert_eq!(
        bodies[0]["tools"][0]["function"]["parameters"]["properties"]["order_id"]["pattern"],
        "^NW-\\d{5}$"
    );
}

/// The same lookup twice (the same result), then the answer (JSON text).
struct Repeats(AtomicUsize);

impl Respond for Repeats {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let call = json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "lookup_order", "arguments": "{\"order_id\": \"NW-10231\"}"}}]});
        match self.0.fetch_add(1, Ordering::SeqCst) {
            0 | 1 => completion(call, "tool_calls"),
            _ => completion(
                json!({"role": "assistant", "content": json!({
                    "severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."
                }).to_string()}),
                "stop",
            ),
        }
    }
}

async fn run_repeats(model: &str) -> (agent_core::AgentResult<Triage>, Vec<Value>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Repeats(AtomicUsize::new(0)))
        .mount(&server)
        .await;
    let base = format!("{}/v1", server.uri());
    let config = triage(model, &base)
        .output_mode(OutputMode::Native)
        .tool(Lookup)
        .build()
        .unwrap();
    let result = run_agent(&config, "Where is NW-10231?").await;
    (result, bodies(&server).await)
}

#[tokio::test]
async fn a_repeated_lookup_on_a_grammar_server_gets_the_answering_turn() {
    let (result, bodies) = run_repeats("dispatch/qwen").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.tool_calls, 2);
    assert_eq!(result.usage.llm_calls, 3);
    assert_eq!(bodies.len(), 3);
    // The third turn: the correction, then the schema as a grammar and no tool call.
    let last = &bodies[2];
    assert_eq!(last["response_format"]["type"], "json_schema");
    assert_eq!(last["tool_choice"], "none");
    let messages = last["messages"].as_array().unwrap();
    let nudge = messages.last().unwrap();
    assert_eq!(nudge["role"], "user");
    assert!(
        nudge["content"]
            .as_str()
            .unwrap()
            .starts_with("lookup_order returned the same result again"),
        "{nudge}"
    );
    // Both calls were answered before the correction.
    let answered = messages.iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(answered, 2);
}

#[tokio::test]
async fn a_repeated_lookup_elsewhere_still_ends_stuck() {
    // OpenAI shows the schema on every turn: a repeat there is the model looping.
    let (result, bodies) = run_repeats("gpt-4o").await;
    assert_eq!(result.category(), Some("stuck"));
    assert_eq!(bodies.len(), 2);
}
