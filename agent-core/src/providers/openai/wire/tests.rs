#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::ToolResult;
use serde_json::json;

fn body(request: &LlmRequest, compatible: bool) -> Value {
    serde_json::from_slice(&encode(request, compatible, &WireCache::default()).unwrap()).unwrap()
}

fn submit_only() -> Vec<ToolDefinition> {
    vec![ToolDefinition::new(
        "submit_output",
        "",
        json!({"type": "object"}),
    )]
}

#[test]
fn history_is_echoed_with_string_arguments_and_tool_messages() {
    let request = LlmRequest::new("gpt-x")
        .with_system("sys")
        .with_message(Message::user("hi"))
        .with_message(Message::assistant(
            "",
            vec![
                ToolCall::new("c1", "a", json!({"x": 1})),
                ToolCall::with_invalid_arguments("c2", "b", "truncated"),
            ],
        ))
        .with_message(Message::tool_results(vec![
            ToolResult::ok("c1", "a", "one"),
            ToolResult::error("c2", "b", "bad args"),
        ]));
    let b = body(&request, false);
    assert_eq!(
        b["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{\"x\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "Error: bad args"}
        ])
    );
    assert_eq!(b["max_completion_tokens"], json!(4096));
    assert!(b.get("max_tokens").is_none());
    assert!(b.get("tools").is_none() && b.get("tool_choice").is_none());
    let compat = body(&request, true);
    assert_eq!(compat["max_tokens"], json!(4096));
    assert!(compat.get("max_completion_tokens").is_none());
}

#[test]
fn temperature_is_left_out_for_openai_reasoning_models_only() {
    let sent = |model: &str, compatible: bool| {
        body(&LlmRequest::new(model).with_temperature(0.0), compatible)
            .get("temperature")
            .cloned()
    };
    assert_eq!(sent("gpt-4.1", false), Some(json!(0.0)));
    assert_eq!(sent("gpt-5-chat-latest", false), Some(json!(0.0)));
    for model in ["gpt-5", "gpt-5-mini", "o3", "o4-mini", "o1-2024-12-17"] {
        assert_eq!(sent(model, false), None, "{model}");
    }
    assert_eq!(
        sent("o3", true),
        Some(json!(0.0)),
        "compatible servers get it as set"
    );
}

#[test]
fn tool_choice_is_mapped_per_flavor() {
    let named = ToolChoice::Tool("submit_output".into());
    let request = LlmRequest::new("m")
        .with_tools(submit_only())
        .with_tool_choice(named.clone());
    assert_eq!(
        body(&request, false)["tool_choice"],
        json!({"type": "function", "function": {"name": "submit_output"}})
    );
    assert_eq!(body(&request, true)["tool_choice"], json!("required"));
    let mut two = submit_only();
    two.push(ToolDefinition::new("other", "", json!({"type": "object"})));
    let request = LlmRequest::new("m").with_tools(two).with_tool_choice(named);
    assert_eq!(
        body(&request, true)["tool_choice"],
        json!({"type": "function", "function": {"name": "submit_output"}})
    );
    for (choice, wire) in [
        (ToolChoice::Auto, "auto"),
        (ToolChoice::Required, "required"),
        (ToolChoice::None, "none"),
    ] {
        let request = LlmRequest::new("m")
            .with_tools(submit_only())
            .with_tool_choice(choice);
        assert_eq!(body(&request, false)["tool_choice"], json!(wire));
    }
}
