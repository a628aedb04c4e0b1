//! C54 (a streamed call's name given more than once) and C60 (a call's arguments only
//! in a whole, final event) on the wires beside the ones first pinned.

use super::*;
use crate::providers_field_reports_4::{
    call_names, chunks, collect, events, partials, sse, sse_body,
};

use agent_core::{ToolRegistry, run_agent_stream, stream::StreamEvent};

/// The arguments of the calls a streamed run finished.
fn finished_arguments<T>(events: &[StreamEvent<T>]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallFinished { arguments, .. } => Some(arguments.clone()),
            _ => None,
        })
        .collect()
}

/// An Anthropic stream whose one `tool_use` block has its whole input in
/// `content_block_start` and no `input_json_delta` (what Anthropic-compatible servers
/// and proxies send).
fn anthropic_whole_input(name: &str, input: &Value) -> String {
    events(&[
        json!({"type": "message_start", "message": {"id": "msg_k60", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
            "usage": {"input_tokens": 120, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block":
            {"type": "tool_use", "id": format!("toolu_{name}"), "name": name, "input": input}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
               "usage": {"output_tokens": 30}}),
        json!({"type": "message_stop"}),
    ])
}

#[tokio::test]
async fn c60_arguments_only_in_a_calls_whole_start_or_final_chunk_reach_the_preview_and_the_call() {
    let answer: Value = serde_json::from_str(ANSWER).unwrap();
    let lookup = json!({"order_id": "A-1001"});
    let mut cases: Vec<(String, MockServer, AgentConfigBuilder<Triage>)> = Vec::new();
    for route in routes()
        .into_iter()
        .filter(|r| r.family == Family::Anthropic)
    {
        let (server, config) = route
            .serve(
                true,
                vec![
                    sse_body(anthropic_whole_input("lookup_order", &lookup)),
                    sse_body(anthropic_whole_input("submit_output", &answer)),
                ],
            )
            .await;
        cases.push((route.label.to_owned(), server, config));
    }
    // Chat Completions: the call's id and name first, its whole arguments only in the
    // chunk with the finish reason.
    let only_in_finish = |id: &str, name: &str, arguments: &Value| {
        sse_body(chunks(&[
            json!({"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0,
                "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}}),
            json!({"index": 0, "delta": {"tool_calls": [{"index": 0,
                "function": {"arguments": arguments.to_string()}}]},
                "finish_reason": "tool_calls"}),
        ]))
    };
    for route in &OPENAI[..2] {
        let (server, config) = openai_route(
            *route,
            vec![
                only_in_finish("call_k60a", "lookup_order", &lookup),
                only_in_finish("call_k60b", "submit_output", &answer),
            ],
        )
        .await;
        cases.push((route.0.to_owned(), server, config));
    }
    for (label, server, config) in cases {
        let tool = CountingTool::lookup_order();
        let config = config
            .tools(ToolRegistry::new().with(tool.clone()))
            .build()
            .unwrap();
        let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
        assert_eq!(result.outcome, Ok(expected_triage()), "{label}");
        assert_eq!(tool.seen(), std::slice::from_ref(&lookup), "{label}");
        assert_eq!(
            finished_arguments(&events),
            [lookup.clone(), answer.clone()],
            "{label}"
        );
        assert_eq!(
            partials(&events).last(),
            Some(&answer),
            "{label}: previewed"
        );
        assert_eq!(requests(&server).await.len(), 2, "{label}");
    }
}

/// A Responses stream of one `lookup_order` call whose name comes in
/// `output_item.added`, again in `function_call_arguments.done` and in
/// `output_item.done`, and in the completed response's `output`.
fn responses_name_repeated() -> String {
    let done = json!({"id": "fc_k54", "type": "function_call", "status": "completed",
        "arguments": "{\"order_id\":\"A-1001\"}", "call_id": "call_k54", "name": "lookup_order"});
    let mut added = done.clone();
    added["status"] = json!("in_progress");
    added["arguments"] = json!("");
    events(&[
        json!({"type": "response.created", "sequence_number": 0, "response":
            {"id": "resp_k54", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
               "item": added}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 2,
               "item_id": "fc_k54", "output_index": 0, "delta": "{\"order_id\":"}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 3,
               "item_id": "fc_k54", "output_index": 0, "delta": "\"A-1001\"}"}),
        json!({"type": "response.function_call_arguments.done", "sequence_number": 4,
               "item_id": "fc_k54", "output_index": 0, "name": "lookup_order",
               "arguments": "{\"order_id\":\"A-1001\"}"}),
        json!({"type": "response.output_item.done", "sequence_number": 5, "output_index": 0,
               "item": done}),
        json!({"type": "response.completed", "sequence_number": 6, "response":
            {"id": "resp_k54", "status": "completed", "model": "gpt-5-mini-2025-08-07",
             "output": [done], "usage": {"input_tokens": 200, "output_tokens": 20}}}),
    ])
}

#[tokio::test]
async fn c54_a_responses_call_name_sent_in_several_events_is_the_name_once() {
    for route in &OPENAI[2..] {
        let (server, config) = openai_route(
            *route,
            vec![
                sse_body(responses_name_repeated()),
                sse("responses/submit.sse"),
            ],
        )
        .await;
        let tool = CountingTool::lookup_order();
        let config = config
            .tools(ToolRegistry::new().with(tool.clone()))
            .build()
            .unwrap();
        let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
        assert_eq!(result.outcome, Ok(expected_triage()), "{}", route.0);
        assert_eq!(tool.seen(), [json!({"order_id": "A-1001"})], "{}", route.0);
        let (started, finished) = call_names(&events);
        assert_eq!(started, ["lookup_order", "submit_output"], "{}", route.0);
        assert_eq!(finished, ["lookup_order", "submit_output"], "{}", route.0);
        let sent = bodies(&server).await;
        let echoed: Vec<&Value> = sent[1]["input"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "function_call")
            .map(|i| &i["name"])
            .collect();
        assert_eq!(echoed, [&json!("lookup_order")], "{}", route.0);
    }
}
