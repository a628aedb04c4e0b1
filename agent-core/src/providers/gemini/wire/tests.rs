#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::ToolResult;
use crate::providers::gemini::*;
use serde_json::json;

fn body(request: &LlmRequest) -> Value {
    serde_json::from_slice(&encode(request, &WireCache::default()).unwrap()).unwrap()
}

fn client(base: Option<&str>) -> GeminiClient {
    let mut options = ProviderOptions::default().with_api_key("k-123456");
    if let Some(base) = base {
        options = options.with_base_url(base);
    }
    GeminiClient::new(&options).unwrap()
}

#[test]
fn endpoints_take_the_model_and_never_the_key() {
    let c = client(None);
    assert_eq!(
        c.endpoint("gemini-2.5-flash").unwrap().as_str(),
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(
        c.endpoint("models/gemini-3-pro-preview").unwrap().as_str(),
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-3-pro-preview:generateContent"
    );
    // A slash or a query in the name cannot change the path.
    let odd = c.endpoint("gemini-x/../../v1/y?key=1").unwrap();
    assert!(odd.query().is_none(), "{odd}");
    assert!(
        odd.path().starts_with("/v1beta/models/gemini-x%2F"),
        "{odd}"
    );
    assert!(c.endpoint(" ").is_err());
    let v1 = client(Some("http://127.0.0.1:9/v1/"));
    assert_eq!(
        v1.endpoint("gemini-2.0-flash").unwrap().as_str(),
        "http://127.0.0.1:9/v1/models/gemini-2.0-flash:generateContent"
    );
}

#[test]
fn versions_decide_schema_with_tools() {
    assert_eq!(major_version("gemini-2.5-flash"), Some(2));
    assert_eq!(major_version("models/gemini-3-pro-preview"), Some(3));
    assert_eq!(major_version("gemini-flash-latest"), None);
    assert!(!schema_with_tools("gemini-2.5-pro"));
    assert!(!schema_with_tools("gemini-1.5-flash"));
    assert!(schema_with_tools("gemini-3.1-flash"));
    assert!(schema_with_tools("gemini-flash-latest"));
}

#[test]
fn history_is_contents_with_signed_calls_and_responses_first() {
    let request = LlmRequest::new("gemini-3-pro-preview")
        .with_system("sys")
        .with_message(Message::user("hi"))
        .with_message(Message::assistant(
            "checking",
            vec![
                ToolCall::new("fc_1", "a", json!({"x": 1})).with_thought_signature("c2lnMQ=="),
                ToolCall::new("fc_2", "b", json!("not an object")),
            ],
        ))
        .with_message(Message::tool_results(vec![
            ToolResult::error("fc_2", "b", "boom"),
            ToolResult::ok("fc_1", "a", "one"),
        ]))
        .with_message(Message::user("now submit"))
        .with_message(Message::assistant(
            "",
            vec![ToolCall::new("fc_3", "a", json!({}))],
        ))
        .with_message(Message::tool_results(vec![ToolResult::ok(
            "fc_3", "a", "two",
        )]))
        .with_message(Message::assistant("", vec![]));
    let b = body(&request);
    assert_eq!(b["systemInstruction"], json!({"parts": [{"text": "sys"}]}));
    assert_eq!(
        b["contents"],
        json!([
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [
                {"text": "checking"},
                {"functionCall": {"id": "fc_1", "name": "a", "args": {"x": 1}}, "thoughtSignature": "c2lnMQ=="},
                {"functionCall": {"id": "fc_2", "name": "b", "args": {}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "fc_1", "name": "a", "response": {"output": "one"}}},
                {"functionResponse": {"id": "fc_2", "name": "b", "response": {"error": "boom"}}},
                {"text": "now submit"}
            ]},
            {"role": "model", "parts": [
                {"functionCall": {"id": "fc_3", "name": "a", "args": {}}, "thoughtSignature": UNSIGNED_CALL}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "fc_3", "name": "a", "response": {"output": "two"}}}
            ]},
            {"role": "model", "parts": [{"text": "(empty)"}]}
        ])
    );
    assert!(b.get("tools").is_none() && b.get("toolConfig").is_none());
    assert_eq!(b["generationConfig"], json!({"maxOutputTokens": 4096}));
}

#[test]
fn tool_config_declarations_and_temperature_are_mapped() {
    let tools = vec![
        ToolDefinition::new(
            "lookup",
            "Look up.",
            json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false}),
        ),
        ToolDefinition::new("ping", "", json!({"type": "object", "properties": {}})),
    ];
    let base = LlmRequest::new("gemini-2.5-flash")
        .with_message(Message::user("x"))
        .with_tools(tools)
        .with_temperature(2.7);
    let cases = [
        (ToolChoice::Auto, json!({"mode": "AUTO"})),
        (ToolChoice::Required, json!({"mode": "ANY"})),
        (
            ToolChoice::Tool("lookup".into()),
            json!({"mode": "ANY", "allowedFunctionNames": ["lookup"]}),
        ),
        (ToolChoice::None, json!({"mode": "NONE"})),
    ];
    for (choice, wire) in cases {
        let b = body(&base.clone().with_tool_choice(choice));
        assert_eq!(b["toolConfig"], json!({"functionCallingConfig": wire}));
        assert_eq!(b["generationConfig"]["temperature"], json!(2.0));
        assert_eq!(
            b["tools"],
            json!([{"functionDeclarations": [
                {"name": "lookup", "description": "Look up.", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
                {"name": "ping"}
            ]}])
        );
    }
}
