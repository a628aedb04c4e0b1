//! Round-3 field reports (C34, C35, C39, C40, C41 and reasoning in answer text,
//! `docs/cases.md`) on the wire: each adapter's replies against wiremock (or a small
//! server of the test's own where the body must stall), through the public run API,
//! plain and streamed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::{
    AgentError, AgentResult, OutputMode, RunOptions, Tool, ToolContext, ToolRegistry,
    error::AttemptKind,
    run_agent, run_agent_stream, run_agent_with,
    stream::{RunStream, StreamEvent},
    tool::{ToolDefinition, ToolFuture},
};
use providers_support::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wiremock::{MockServer, ResponseTemplate};

const ANSWER: &str =
    r#"{"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."}"#;
const DRAFT: &str = r#"{"severity": 4, "queue": "billing", "summary": "Draft."}"#;

/// A response whose body is the given SSE text.
fn sse_body(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// A recorded SSE fixture.
fn sse(path: &str) -> ResponseTemplate {
    raw_fixture(200, &format!("streaming/{path}"), "text/event-stream")
}

/// Chat Completions chunks (each a `choices[0]` of its own) as an event stream, ended
/// by `[DONE]`.
fn chunks(choices: &[Value]) -> String {
    let mut out = String::new();
    for choice in choices {
        let chunk = json!({"id": "chatcmpl-f3", "object": "chat.completion.chunk",
                           "model": "m", "choices": [choice]});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// Anthropic events (`type` inside each) as an event stream.
fn events(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

fn openai_reply(message: Value, finish: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-f3", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 10}
    }))
}

fn openai_text(content: &str) -> ResponseTemplate {
    openai_reply(json!({"role": "assistant", "content": content}), "stop")
}

fn anthropic_reply(content: Value, stop: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_f3", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": content, "stop_reason": stop,
        "usage": {"input_tokens": 30, "output_tokens": 10}
    }))
}

fn anthropic_submit() -> ResponseTemplate {
    let answer: Value = serde_json::from_str(ANSWER).unwrap();
    anthropic_reply(
        json!([{"type": "tool_use", "id": "toolu_submit", "name": "submit_output", "input": answer}]),
        "tool_use",
    )
}

/// A server answering each request with the next of `replies` (the last one repeats).
async fn serve(path: &str, replies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    let n = replies.len();
    for (i, reply) in replies.into_iter().enumerate() {
        mount_post(&server, path, reply, (i + 1 < n).then_some(1)).await;
    }
    server
}

fn v1(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

/// Every event of a streamed run, the result apart.
async fn collect<T>(mut stream: RunStream<'_, T>) -> (Vec<StreamEvent<T>>, AgentResult<T>) {
    let mut events = Vec::new();
    let mut result = None;
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::Finished(r) => result = Some(*r),
            other => events.push(other),
        }
    }
    (events, result.expect("a Finished event"))
}

/// `read_file(path)`: answers with the path's "content", and records every path read.
#[derive(Clone, Default)]
struct ReadFile(Arc<Mutex<Vec<String>>>);

impl ReadFile {
    fn paths(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Tool for ReadFile {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "read_file",
            "Reads a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let path = arguments["path"].as_str().unwrap_or("?").to_owned();
            self.0.lock().unwrap().push(path.clone());
            Ok(format!("contents of {path}"))
        })
    }
}

/// The `tool` messages of a Chat Completions request: (call id, content).
fn tool_messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

// ---- C34: streamed call identity ------------------------------------------------------

#[tokio::test]
async fn c34_two_streamed_calls_at_index_0_with_different_ids_are_two_calls() {
    let calls = chunks(&[
        json!({"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0,
            "id": "call_a", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]}}),
        json!({"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_b",
            "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"b\"}"}}]}}),
        json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}),
    ]);
    let server = serve(
        "/v1/chat/completions",
        vec![sse_body(calls), sse("openai/submit.sse")],
    )
    .await;
    let read = ReadFile::default();
    let config = triage("dispatch/qwen", &v1(&server))
        .tools(ToolRegistry::new().with(read.clone()))
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(read.paths(), ["a", "b"]);
    let finished: Vec<(String, Value)> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallFinished { id, arguments, .. } => {
                Some((id.clone(), arguments.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        finished[..2],
        [
            ("call_a".to_owned(), json!({"path": "a"})),
            ("call_b".to_owned(), json!({"path": "b"})),
        ]
    );
    // The next request answers each id once, and echoes two calls, never one with
    // `{"path":"a"}{"path":"b"}`.
    let sent = bodies(&server).await;
    assert_eq!(
        tool_messages(&sent[1]),
        [
            ("call_a".to_owned(), "contents of a".to_owned()),
            ("call_b".to_owned(), "contents of b".to_owned()),
        ]
    );
    let echoed: Vec<&str> = sent[1]["messages"][2]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(echoed, [r#"{"path":"a"}"#, r#"{"path":"b"}"#]);
}

// ---- C35: in-stream errors by type ----------------------------------------------------

/// An Anthropic stream that starts a `lookup_order` call, sends part of its JSON, then
/// an error event of `kind`.
fn anthropic_stream_failing_with(kind: &str) -> ResponseTemplate {
    sse_body(events(&[
        json!({"type": "message_start", "message": {"id": "msg_e", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
            "usage": {"input_tokens": 120, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use",
            "id": "toolu_part", "name": "lookup_order", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
            "partial_json": "{\"order_id\": \"A-1"}}),
        json!({"type": "error", "error": {"type": kind, "message": format!("{kind} happened")}}),
    ]))
}

#[tokio::test]
async fn c35_an_invalid_request_error_event_in_a_200_stream_is_permanent_after_one_request() {
    for kind in ["invalid_request_error", "authentication_error"] {
        let server = serve("/v1/messages", vec![anthropic_stream_failing_with(kind)]).await;
        let lookup = CountingTool::lookup_order();
        let config = triage("claude-sonnet-4-5", &server.uri())
            .tools(ToolRegistry::new().with(lookup.clone()))
            .build()
            .unwrap();
        let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
        assert_eq!(result.category(), Some("llm_permanent_error"), "{kind}");
        let Err(AgentError::LlmPermanent { error }) = &result.outcome else {
            panic!("{:?}", result.outcome)
        };
        assert!(error.message.contains(kind), "{}", error.message);
        assert_eq!(error.status, Some(200));
        assert_eq!(requests(&server).await.len(), 1, "{kind}: not retried");
        assert_eq!(lookup.calls(), 0);
    }
}

#[tokio::test]
async fn c35_overloaded_and_api_error_events_are_retried_and_the_partial_call_never_runs() {
    let server = serve(
        "/v1/messages",
        vec![
            anthropic_stream_failing_with("overloaded_error"),
            anthropic_stream_failing_with("api_error"),
            sse("anthropic/submit.sse"),
        ],
    )
    .await;
    let lookup = CountingTool::lookup_order();
    let config = triage("claude-sonnet-4-5", &server.uri())
        .tools(ToolRegistry::new().with(lookup.clone()))
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.calls(), 0, "partial tool JSON never runs");
    assert_eq!(result.usage.llm_calls, 3);
    let retries: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 2);
    assert!(retries[0].contains("overloaded_error"), "{}", retries[0]);
    assert!(retries[1].contains("api_error"), "{}", retries[1]);
    // The whole turn is retried: the same request each time.
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["messages"], sent[2]["messages"]);
}

#[tokio::test]
async fn c35_error_chunks_and_200_error_bodies_on_the_other_wires_are_classified_by_type() {
    // A Chat Completions stream's error chunk, and a 200 whose whole body is an error.
    let chunk = json!({"error": {"type": "invalid_request_error", "message": "bad tools"}});
    let stream = format!("data: {chunk}\n\n");
    let body = json!({"type": "error", "error": {"type": "authentication_error",
                                                 "message": "invalid x-api-key"}});
    for (path, reply, base, model, streamed) in [
        (
            "/v1/chat/completions",
            sse_body(stream),
            "v1",
            "gpt-4.1",
            true,
        ),
        (
            "/v1/messages",
            ResponseTemplate::new(200).set_body_json(body),
            "",
            "claude-sonnet-4-5",
            false,
        ),
    ] {
        let server = serve(path, vec![reply]).await;
        let url = if base.is_empty() {
            server.uri()
        } else {
            v1(&server)
        };
        let config = triage(model, &url).build().unwrap();
        let result = if streamed {
            collect(run_agent_stream(&config, "ticket")).await.1
        } else {
            run_agent(&config, "ticket").await
        };
        assert_eq!(result.category(), Some("llm_permanent_error"), "{path}");
        assert_eq!(requests(&server).await.len(), 1);
    }
}

// ---- C39: a 200 that is an error ------------------------------------------------------

#[tokio::test]
async fn c39_finish_reason_error_is_a_provider_failure_under_the_retry_rules() {
    let error = openai_reply(json!({"role": "assistant", "content": ""}), "error");
    let server = serve("/v1/chat/completions", vec![error]).await;
    let config = triage("dispatch/router", &v1(&server))
        .max_llm_retries(3)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::MaxLlmRetries { failures }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(failures.len(), 3);
    assert!(
        failures[0]
            .message
            .contains("the provider reported an error"),
        "{}",
        failures[0].message
    );
    assert!(failures[0].is_transient());
    // Never a nudge: every request is the first one again.
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3);
    assert!(sent.iter().all(|b| b["messages"] == sent[0]["messages"]));
    // The calls' reported usage counts (30 in, 10 out each).
    assert_eq!(result.usage.input_tokens, 90);
    assert_eq!(result.usage.output_tokens, 30);
    assert_eq!(result.usage.estimated_llm_calls, 0);
    assert_eq!(result.output, "", "never Ok(\"\")");
}

#[tokio::test]
async fn c39_a_streamed_finish_reason_error_then_a_success_is_retried_once() {
    let error = chunks(&[
        json!({"index": 0, "delta": {"role": "assistant", "content": ""}}),
        json!({"index": 0, "delta": {}, "finish_reason": "error"}),
    ]);
    let server = serve(
        "/v1/chat/completions",
        vec![sse_body(error), sse("openai/submit.sse")],
    )
    .await;
    let config = triage("dispatch/router", &v1(&server)).build().unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.llm_calls, 2);
    assert!(events.iter().any(|e| matches!(e,
        StreamEvent::Retrying { error, .. } if error.contains("the provider reported an error"))));
    // Native mode too: an empty 200 "error" is not an empty answer to correct.
    let error = openai_reply(json!({"role": "assistant", "content": ""}), "error");
    let server = serve("/v1/chat/completions", vec![error, openai_text(ANSWER)]).await;
    let config = triage("dispatch/router", &v1(&server))
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(
        bodies(&server).await[1]["messages"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

// ---- C40: usage of cut and cancelled streams -----------------------------------------

/// A one-shot server that answers with `head` (Chat Completions chunks) and then keeps
/// the stream open without sending more; returns its base URL.
async fn stalling_server(head: String) -> String {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await;
        let status =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        socket.write_all(status.as_bytes()).await.unwrap();
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.flush().await.unwrap();
        // Stall: the body never ends.
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
    format!("http://{addr}/v1")
}

/// Eight `reasoning_content` deltas of 100 bytes each (800 bytes: 200 tokens), with
/// `include_usage` asked for but no usage chunk ever sent.
fn reasoning_deltas() -> String {
    let piece = "x".repeat(100);
    let mut out = String::new();
    for _ in 0..8 {
        let chunk = json!({"id": "chatcmpl-r", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {"reasoning_content": piece}}], "usage": null});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out
}

#[tokio::test]
async fn c40_a_cancelled_or_deadline_cut_stream_counts_its_tokens_estimated() {
    let mut inputs = Vec::new();
    for cut_by_deadline in [false, true] {
        let url = stalling_server(reasoning_deltas()).await;
        let config = triage("dispatch/qwq", &url).build().unwrap();
        let token = CancellationToken::new();
        let options = if cut_by_deadline {
            RunOptions::new().deadline(Duration::from_millis(800))
        } else {
            let cancel = token.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(800)).await;
                cancel.cancel();
            });
            RunOptions::new().cancellation(token)
        };
        let stream = agent_core::stream::run_agent_stream_with(&config, "ticket", options);
        let (_, result) = collect(stream).await;
        let expected = if cut_by_deadline {
            "deadline_exceeded"
        } else {
            "cancelled"
        };
        assert_eq!(result.category(), Some(expected));
        assert_eq!(result.usage.llm_calls, 1);
        // The 800 bytes of reasoning that arrived (200 tokens), and the request's
        // estimate; marked as estimated.
        assert_eq!(result.usage.output_tokens, 200, "{expected}");
        assert!(result.usage.input_tokens > 0);
        assert_eq!(result.usage.estimated_llm_calls, 1);
        assert!(result.usage.is_estimated());
        inputs.push(result.usage.input_tokens);
    }
    assert_eq!(inputs[0], inputs[1], "the same request, the same estimate");
}

#[tokio::test]
async fn c40_a_cut_stream_counts_against_the_token_cap_before_the_retry() {
    // The cut call's estimate (the request, and the text that arrived) is what the cap
    // sees: with room for less, the retry is never sent.
    let server = serve(
        "/v1/chat/completions",
        vec![sse("openai/cut.sse"), sse("openai/submit.sse")],
    )
    .await;
    let config = triage("gpt-4.1", &v1(&server))
        .max_total_tokens(100)
        .build()
        .unwrap();
    let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
    let Err(AgentError::BudgetExhausted { budget }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(
        budget,
        &agent_core::error::Budget::TotalTokens {
            limit: 100,
            used: 123 + 4
        }
    );
    assert_eq!(requests(&server).await.len(), 1);
    assert_eq!(result.usage.estimated_llm_calls, 1);
}

#[tokio::test]
async fn c40_a_plain_call_cut_by_the_deadline_counts_its_request() {
    let slow = openai_text(ANSWER).set_delay(Duration::from_secs(30));
    let server = serve("/v1/chat/completions", vec![slow]).await;
    let config = triage("gpt-4.1", &v1(&server)).build().unwrap();
    let options = RunOptions::new().deadline(Duration::from_millis(300));
    let result = run_agent_with(&config, "ticket", options).await;
    assert_eq!(result.category(), Some("deadline_exceeded"));
    // Nothing arrived: the request's estimate, the same as a cut stream's.
    assert_eq!(result.usage.input_tokens, 123);
    assert_eq!(result.usage.output_tokens, 0);
    assert_eq!(result.usage.estimated_llm_calls, 1);
}

// ---- C41: pause_turn ------------------------------------------------------------------

fn paused_content() -> Value {
    json!([
        {"type": "text", "text": "Let me search."},
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
         "input": {"query": "parcel A-1001 carrier delays"}}
    ])
}

#[tokio::test]
async fn c41_a_paused_turn_goes_back_unchanged_and_the_turn_goes_on() {
    let server = serve(
        "/v1/messages",
        vec![
            anthropic_reply(paused_content(), "pause_turn"),
            anthropic_submit(),
        ],
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.llm_calls, 2, "the paused turn is an LLM call");
    let sent = bodies(&server).await;
    let messages = sent[1]["messages"].as_array().unwrap();
    // The user's ticket, then the paused content exactly as it came, and nothing else:
    // no nudge, no tool result.
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": paused_content()})
    );
    assert!(matches!(
        &result.transcript[1],
        agent_core::llm::Message::Paused { text, content }
            if text == "Let me search." && *content == paused_content()
    ));
}

#[tokio::test]
async fn c41_a_streamed_paused_turn_with_its_server_tool_blocks_goes_back_unchanged() {
    let search_result = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
        "content": [{"type": "web_search_result", "url": "https://example.com/a",
                     "title": "Delays", "encrypted_content": "EqgfCioIARgBIiQ3"}]});
    let paused = sse_body(events(&[
        json!({"type": "message_start", "message": {"id": "msg_p", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
            "usage": {"input_tokens": 300, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "Let me search."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {
            "type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
               "partial_json": "{\"query\": \"parcel A-1001 "}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
               "partial_json": "carrier delays\"}"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": search_result}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "pause_turn"},
               "usage": {"output_tokens": 40}}),
        json!({"type": "message_stop"}),
    ]));
    let server = serve("/v1/messages", vec![paused, sse("anthropic/submit.sse")]).await;
    let config = triage("claude-sonnet-4-5", &server.uri()).build().unwrap();
    let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let sent = bodies(&server).await;
    let mut expected = paused_content();
    expected.as_array_mut().unwrap().push(search_result);
    assert_eq!(sent[1]["messages"][1]["content"], expected);
    assert_eq!(sent[1]["messages"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn c41_pauses_without_end_are_bounded_by_the_budgets() {
    let server = serve(
        "/v1/messages",
        vec![anthropic_reply(paused_content(), "pause_turn")],
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server.uri())
        .max_llm_calls(3)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.category(), Some("max_llm_calls"));
    assert_eq!(requests(&server).await.len(), 3);
    // Each continuation sends every paused turn back, joined into one assistant turn.
    let sent = bodies(&server).await;
    let last = sent[2]["messages"].as_array().unwrap();
    assert_eq!(last.len(), 2);
    assert_eq!(last[1]["content"].as_array().unwrap().len(), 4);
}

// ---- reasoning in the answer text ----------------------------------------------------

#[tokio::test]
async fn think_blocks_and_their_drafts_are_never_the_answer_on_compatible_servers() {
    for reply in [
        format!("<think>First draft: {DRAFT}. No, shipping.</think>\n{ANSWER}"),
        format!("<think>\n```json\n{DRAFT}\n```\n</think>\n```json\n{ANSWER}\n```"),
        format!("{ANSWER}\n<thinking>Was it {DRAFT}? No.</thinking>"),
        // The template opened the block in the prompt: only its end is in the reply.
        format!("Draft: {DRAFT}\n</think>\n\n{ANSWER}"),
        format!("<Reasoning kind=\"draft\">{DRAFT}</Reasoning> Here it is: {ANSWER}"),
        format!("```thinking\n{DRAFT}\n```\n{ANSWER}"),
    ] {
        for mode in [OutputMode::Native, OutputMode::Prompted] {
            let server = serve("/v1/chat/completions", vec![openai_text(&reply)]).await;
            let config = triage("dispatch/qwen3", &v1(&server))
                .output_mode(mode)
                .build()
                .unwrap();
            let result = run_agent(&config, "ticket").await;
            assert_eq!(result.outcome, Ok(expected_triage()), "{mode}: {reply}");
            assert_eq!(result.usage.llm_calls, 1);
        }
    }
}

#[tokio::test]
async fn a_reply_with_two_different_answers_is_corrected_not_resolved() {
    for reply in [
        format!("```json\n{DRAFT}\n```\nor rather\n```json\n{ANSWER}\n```"),
        format!("Either {DRAFT} or {ANSWER}."),
        // A think block never closed: its draft is no answer either.
        format!("<think>Maybe {DRAFT}"),
    ] {
        let server = serve(
            "/v1/chat/completions",
            vec![openai_text(&reply), openai_text(ANSWER)],
        )
        .await;
        let config = triage("dispatch/qwen3", &v1(&server))
            .output_mode(OutputMode::Prompted)
            .build()
            .unwrap();
        let result = run_agent(&config, "ticket").await;
        assert_eq!(result.outcome, Ok(expected_triage()), "{reply}");
        assert_eq!(result.usage.llm_calls, 2, "{reply}");
        let sent = bodies(&server).await;
        let correction = sent[1]["messages"][3]["content"].as_str().unwrap();
        if reply.starts_with("<think>") {
            assert!(correction.contains("without a JSON answer"), "{correction}");
        } else {
            assert!(
                correction.contains("2 different JSON objects"),
                "{correction}"
            );
        }
    }
    // Twice the same object is one answer.
    let server = serve(
        "/v1/chat/completions",
        vec![openai_text(&format!("{ANSWER}\n```json\n{ANSWER}\n```"))],
    )
    .await;
    let config = triage("dispatch/qwen3", &v1(&server))
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    assert_eq!(
        run_agent(&config, "ticket").await.outcome,
        Ok(expected_triage())
    );
}

#[tokio::test]
async fn two_candidate_answers_end_the_run_as_ambiguous_when_corrections_run_out() {
    let reply = format!("{DRAFT}\n{ANSWER}");
    let server = serve("/v1/chat/completions", vec![openai_text(&reply)]).await;
    let config = triage("dispatch/qwen3", &v1(&server))
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.category(), Some("ambiguous_tool_turn"));
    let attempts = result.outcome.unwrap_err().attempts().to_vec();
    assert!(
        attempts
            .iter()
            .all(|a| a.kind == AttemptKind::AmbiguousTurn)
    );
}

#[tokio::test]
async fn anthropic_prompted_and_streamed_replies_keep_thinking_text_out_of_the_answer() {
    let reply = format!("<thinking>{DRAFT}</thinking>\n{ANSWER}");
    let server = serve(
        "/v1/messages",
        vec![anthropic_reply(
            json!([{"type": "text", "text": reply}]),
            "end_turn",
        )],
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server.uri())
        .output_mode(OutputMode::Prompted)
        .build()
        .unwrap();
    assert_eq!(
        run_agent(&config, "ticket").await.outcome,
        Ok(expected_triage())
    );
    // Streamed: no partial answer is ever taken from the think block's draft.
    let text = format!("<think>{DRAFT}</think>{ANSWER}");
    let pieces: Vec<Value> = text
        .as_bytes()
        .chunks(16)
        .map(|c| json!({"index": 0, "delta": {"content": String::from_utf8_lossy(c)}}))
        .chain([json!({"index": 0, "delta": {}, "finish_reason": "stop"})])
        .collect();
    let server = serve("/v1/chat/completions", vec![sse_body(chunks(&pieces))]).await;
    let config = triage("dispatch/qwen3", &v1(&server))
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let partials: Vec<Value> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::PartialOutput { value, .. } => Some(value.clone()),
            _ => None,
        })
        .collect();
    assert!(!partials.is_empty());
    assert!(
        partials
            .iter()
            .all(|p| p.get("severity") != Some(&json!(4))
                && p.get("queue") != Some(&json!("billing"))),
        "{partials:?}"
    );
}
