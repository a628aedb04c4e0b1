#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use super::*;
use crate::message::{Message, ToolResult};

fn body(request: &LlmRequest, store: bool) -> Value {
    let bytes = encode_body(request, store, &WireCache::default(), false).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn reply(body: &Value) -> Reply {
    Reply {
        status: 200,
        headers: reqwest::header::HeaderMap::new(),
        body: serde_json::to_vec(body).unwrap(),
    }
}

#[test]
fn reasoning_goes_back_ahead_of_its_call_and_trailing_reasoning_is_dropped() {
    let decoded = decode(
        &reply(&json!({
            "id": "resp_1", "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E1"},
                {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "f", "arguments": "{\"x\":1}"},
                {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "hm"}], "encrypted_content": "E2"},
                {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "g", "arguments": ""},
                {"type": "reasoning", "id": "rs_3", "summary": [], "encrypted_content": "E3"}
            ]
        })),
        "openai",
        None,
    )
    .unwrap();
    assert_eq!(decoded.stop_reason, StopReason::ToolUse);
    assert_eq!(decoded.reasoning, "hm");
    let calls = &decoded.tool_calls;
    assert_eq!(
        calls[0].provider_data.as_ref().unwrap()["response_id"],
        "resp_1"
    );
    assert_eq!(
        calls[1].provider_data.as_ref().unwrap()["reasoning"][0]["id"],
        "rs_2"
    );
    assert!(
        calls[1]
            .provider_data
            .as_ref()
            .unwrap()
            .get("response_id")
            .is_none()
    );
    let request = LlmRequest::new("gpt-5")
        .with_message(Message::user("go"))
        .with_message(Message::assistant("on it", calls.clone()))
        .with_message(Message::tool_results(vec![ToolResult::ok(
            "call_b", "g", "B",
        )]));
    let sent = body(&request, false);
    let kinds: Vec<String> = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}:{}",
                i["type"].as_str().unwrap(),
                i["id"].as_str().or(i["call_id"].as_str()).unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message:",
            "reasoning:rs_1",
            "message:",
            "function_call:call_a",
            "reasoning:rs_2",
            "function_call:call_b",
            "function_call_output:call_a",
            "function_call_output:call_b",
        ]
    );
    assert_eq!(sent["input"][1]["encrypted_content"], "E1");
    // The unanswered call is answered as an error.
    assert!(
        sent["input"][6]["output"]
            .as_str()
            .unwrap()
            .starts_with("Error: ")
    );
    assert_eq!(sent["store"], false);
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
    assert!(sent.get("previous_response_id").is_none());
}

#[test]
fn stored_mode_chains_from_the_last_turn_with_a_response_id() {
    let call = ToolCall::new("call_a", "f", json!({}))
        .with_provider_data(json!({"response_id": "resp_9"}));
    let request = LlmRequest::new("gpt-5")
        .with_system("sys")
        .with_message(Message::user("go"))
        .with_message(Message::assistant("", vec![call]))
        .with_message(Message::tool_results(vec![ToolResult::ok(
            "call_a", "f", "A",
        )]));
    let sent = body(&request, true);
    assert_eq!(sent["store"], true);
    assert!(sent.get("include").is_none());
    assert_eq!(sent["previous_response_id"], "resp_9");
    assert_eq!(sent["instructions"], "sys");
    assert_eq!(
        sent["input"],
        json!([{"type": "function_call_output", "call_id": "call_a", "output": "A"}])
    );
    // Stateless, the whole conversation goes.
    let sent = body(&request, false);
    assert_eq!(sent["input"].as_array().unwrap().len(), 3);
}

#[test]
fn failed_and_error_bodies_are_classified() {
    let failed = json!({"id": "resp_1", "status": "failed", "output": [],
        "error": {"code": "server_error", "message": "boom"}});
    let error = decode(&reply(&failed), "openai", None).unwrap_err();
    assert!(error.is_transient(), "{error}");
    assert!(error.message.contains("boom"), "{error}");
    let invalid = json!({"error": {"code": "invalid_api_key", "message": "bad key"}});
    assert!(
        !decode(&reply(&invalid), "openai", None)
            .unwrap_err()
            .is_transient()
    );
    let nothing = json!({"id": "resp_1"});
    assert!(
        decode(&reply(&nothing), "openai", None)
            .unwrap_err()
            .is_transient()
    );
}
