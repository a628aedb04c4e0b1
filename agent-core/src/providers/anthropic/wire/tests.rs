#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{Message, ToolResult};
use serde_json::json;

fn body(request: &LlmRequest) -> Value {
    serde_json::from_slice(&encode(request, &WireCache::default()).unwrap()).unwrap()
}

#[test]
fn tool_results_follow_their_turn_first_with_is_error() {
    let request = LlmRequest::new("claude-x")
        .with_message(Message::user("hi"))
        .with_message(Message::assistant(
            "  ",
            vec![
                ToolCall::new("toolu_1", "a", json!({"x": 1})),
                ToolCall::new("toolu_2", "b", json!("not an object")),
            ],
        ))
        .with_message(Message::tool_results(vec![
            ToolResult::ok("toolu_1", "a", "one"),
            ToolResult::error("toolu_2", "b", "boom"),
        ]))
        .with_message(Message::user("now submit"));
    let b = body(&request);
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "a", "input": {"x": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "b", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "one"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": true},
                {"type": "text", "text": "now submit"}
            ]}
        ])
    );
    assert!(b.get("tools").is_none() && b.get("tool_choice").is_none());
}

#[test]
fn empty_assistant_turn_is_rendered_safely() {
    let request = LlmRequest::new("claude-x")
        .with_message(Message::user("hi"))
        .with_message(Message::assistant("", vec![]))
        .with_message(Message::user("call the tool"));
    let b = body(&request);
    assert_eq!(
        b["messages"][1],
        json!({"role": "assistant", "content": [{"type": "text", "text": "(empty)"}]})
    );
}

#[test]
fn tool_choice_and_temperature_are_mapped() {
    let tools = vec![crate::tool::ToolDefinition::new(
        "submit_output",
        "Submit.",
        json!({"type": "object"}),
    )];
    let base = LlmRequest::new("m")
        .with_message(Message::user("x"))
        .with_tools(tools)
        .with_temperature(1.7);
    let cases = [
        (ToolChoice::Auto, json!({"type": "auto"})),
        (ToolChoice::Required, json!({"type": "any"})),
        (
            ToolChoice::Tool("submit_output".into()),
            json!({"type": "tool", "name": "submit_output"}),
        ),
        (ToolChoice::None, json!({"type": "none"})),
    ];
    for (choice, wire) in cases {
        let b = body(&base.clone().with_tool_choice(choice));
        assert_eq!(b["tool_choice"], wire);
        assert_eq!(b["temperature"], json!(1.0));
        assert_eq!(
            b["tools"],
            json!([{"name": "submit_output", "description": "Submit.", "input_schema": {"type": "object"}}])
        );
    }
}

#[test]
fn with_the_tool_search_tool_the_cache_breakpoint_is_on_the_last_loaded_entry() {
    use crate::llm::NativeToolSearch;
    use crate::tool::ToolDefinition;
    let tool = |name: &str| ToolDefinition::new(name, "", json!({"type": "object"}));
    let mut request = LlmRequest::new("claude-sonnet-4-5")
        .with_message(Message::user("hi"))
        .with_tools(vec![tool("a"), tool("b"), tool("c")]);
    request.prompt_cache = true;
    // `b` and `c` searchable; `c` revealed (no reference goes back): loaded.
    request.native_tool_search = Some(std::sync::Arc::new(NativeToolSearch::new(
        ["b".to_owned(), "c".to_owned()],
        ["c".to_owned()],
    )));
    let b = body(&request);
    let tools = b["tools"].as_array().unwrap();
    assert_eq!(
        tools[0],
        json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"})
    );
    let marks: Vec<(&str, bool, bool)> = tools[1..]
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t.get("defer_loading").is_some(),
                t.get("cache_control").is_some(),
            )
        })
        .collect();
    assert_eq!(
        marks,
        [("a", false, false), ("b", true, false), ("c", false, true)]
    );
    // Every tool deferred: the search tool takes the mark.
    request.native_tool_search = Some(std::sync::Arc::new(NativeToolSearch::new(
        ["a".to_owned(), "b".to_owned(), "c".to_owned()],
        [],
    )));
    let b = body(&request);
    assert_eq!(b["tools"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(
        b["tools"].to_string().matches("cache_control").count(),
        1,
        "{b}"
    );
}
