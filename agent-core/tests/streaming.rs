//! Streaming against wiremock: recorded SSE bodies of both wire formats (OpenAI Chat
//! Completions and compatible servers, Anthropic Messages) replayed through the
//! adapters and through whole streamed runs, including cut streams.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::providers::{AnthropicClient, OpenAiClient, ProviderOptions};
use agent_core::{
    AgentError, AgentResult,
    llm::{LlmClient, LlmErrorKind, LlmResponse, StopReason, StreamDelta},
    run_agent, run_agent_stream,
    stream::{RunStream, StreamEvent},
};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

const OPENAI: &str = "gpt-4.1";
const ANTHROPIC: &str = "claude-sonnet-4-5";

fn sse(path: &str) -> ResponseTemplate {
    raw_fixture(200, &format!("streaming/{path}"), "text/event-stream")
}

fn openai(server: &MockServer) -> OpenAiClient {
    OpenAiClient::openai(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(format!("{}/v1", server.uri())),
    )
    .unwrap()
}

fn anthropic(server: &MockServer) -> AnthropicClient {
    AnthropicClient::new(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(server.uri()),
    )
    .unwrap()
}

async fn mount_openai(server: &MockServer, response: ResponseTemplate, times: Option<u64>) {
    mount_post(server, "/v1/chat/completions", response, times).await;
}

async fn mount_anthropic(server: &MockServer, response: ResponseTemplate, times: Option<u64>) {
    mount_post(server, "/v1/messages", response, times).await;
}

/// One streamed round trip, with the deltas it produced written as text.
async fn stream_once(
    client: &dyn LlmClient,
    model: &str,
) -> (Result<LlmResponse, agent_core::llm::LlmError>, Vec<String>) {
    let mut deltas = Vec::new();
    let mut sink = |delta: StreamDelta<'_>| {
        deltas.push(match delta {
            StreamDelta::Text(t) => format!("text {t}"),
            StreamDelta::ToolCallStarted { index, id, name } => {
                format!("start {index} {id} {name}")
            }
            StreamDelta::ToolCallArguments { index, json } => format!("args {index} {json}"),
            _ => "other".to_owned(),
        });
    };
    let request = hello(model);
    let response = client.complete_streaming(&request, &mut sink).await;
    (response, deltas)
}

/// Every event of a streamed run, the result apart.
async fn collect<T>(mut stream: RunStream<'_, T>) -> (Vec<StreamEvent<T>>, AgentResult<T>) {
    let mut events = Vec::new();
    let mut result = None;
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::Finished(r) => {
                assert!(result.is_none(), "one Finished event");
                result = Some(*r);
            }
            other => {
                assert!(result.is_none(), "Finished is the last event");
                events.push(other);
            }
        }
    }
    (events, result.expect("a Finished event"))
}

fn partials<T>(events: &[StreamEvent<T>]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::PartialOutput { value, .. } => Some(value.clone()),
            _ => None,
        })
        .collect()
}

fn final_answer() -> Value {
    json!({"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."})
}

// ---- OpenAI wire format ----

#[tokio::test]
async fn openai_parallel_tool_calls_split_across_chunks_are_assembled_with_final_usage() {
    let server = MockServer::start().await;
    mount_openai(&server, sse("openai/parallel_tool_calls.sse"), None).await;
    let (response, deltas) = stream_once(&openai(&server), OPENAI).await;
    let response = response.unwrap();
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(response.tool_calls[0].id, "call_s1LookupA1001");
    assert_eq!(response.tool_calls[0].name, "lookup_order");
    assert_eq!(
        response.tool_calls[0].arguments,
        json!({"order_id": "A-1001"})
    );
    assert_eq!(response.tool_calls[1].name, "refund_status");
    assert_eq!(
        response.tool_calls[1].arguments,
        json!({"order_id": "B-2002", "include_history": true})
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    // Usage comes from the last chunk (no choices), as include_usage sends it.
    assert_eq!(response.usage.input_tokens, 131);
    assert_eq!(response.usage.output_tokens, 46);
    assert_eq!(response.model.as_deref(), Some("gpt-4.1-2025-04-14"));
    assert_eq!(
        deltas,
        [
            "start 0 call_s1LookupA1001 lookup_order",
            "args 0 {\"order",
            "args 0 _id\": \"A-10",
            "args 0 01\"}",
            "start 1 call_s2RefundB2002 refund_status",
            "args 1 {\"order_id\": \"B-2002\", ",
            "args 1 \"include_history\": true}",
        ]
    );
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["stream"], json!(true));
    assert_eq!(sent[0]["stream_options"], json!({"include_usage": true}));
    let accept = requests(&server).await;
    assert_eq!(header(&accept[0], "accept"), Some("text/event-stream"));
}

#[tokio::test]
async fn openai_text_streams_in_deltas_with_cached_usage() {
    let server = MockServer::start().await;
    mount_openai(&server, sse("openai/text.sse"), None).await;
    let (response, deltas) = stream_once(&openai(&server), OPENAI).await;
    let response = response.unwrap();
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );
    assert_eq!(
        deltas,
        [
            "text The parcel is",
            "text  late; I would route it to shipping."
        ]
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.usage.input_tokens, 1219);
    assert_eq!(response.usage.cache_read_tokens, 1024);
    // A non-streamed request carries no stream fields.
    let _ = openai(&server).complete(&hello(OPENAI)).await;
    let sent = bodies(&server).await;
    assert_eq!(sent[1].get("stream"), None);
    assert_eq!(sent[1].get("stream_options"), None);
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_is_read_as_one_json_body() {
    let server = MockServer::start().await;
    mount_openai(&server, json_fixture(200, "openai/tool_call.json"), None).await;
    let (response, deltas) = stream_once(&openai(&server), OPENAI).await;
    let response = response.unwrap();
    assert_eq!(
        response.tool_calls[0].arguments,
        json!({"order_id": "A-1001"})
    );
    assert_eq!(response.usage.input_tokens, 82);
    assert_eq!(
        deltas,
        [
            "start 0 call_Xh0N8aWZm4ZJWeV1J4V9PnaQ lookup_order",
            "args 0 {\"order_id\":\"A-1001\"}",
        ]
    );
}

#[tokio::test]
async fn openai_stream_cut_before_done_is_transient() {
    let server = MockServer::start().await;
    mount_openai(&server, sse("openai/cut.sse"), None).await;
    let (response, deltas) = stream_once(&openai(&server), OPENAI).await;
    let error = response.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert!(error.message.contains("cut mid-way"), "{}", error.message);
    assert_eq!(deltas, ["text The parcel is"]);
}

#[tokio::test]
async fn openai_error_chunk_mid_stream_is_classified() {
    let server = MockServer::start().await;
    mount_openai(&server, sse("openai/error_mid_stream.sse"), None).await;
    let (response, _) = stream_once(&openai(&server), OPENAI).await;
    let error = response.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert!(
        error.message.contains("server had an error"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn openai_http_errors_before_the_stream_are_classified_as_without_streaming() {
    let server = MockServer::start().await;
    mount_openai(
        &server,
        json_fixture(429, "openai/error_rate_limit.json"),
        None,
    )
    .await;
    let (response, deltas) = stream_once(&openai(&server), OPENAI).await;
    let error = response.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert_eq!(error.status, Some(429));
    assert!(deltas.is_empty());
}

#[tokio::test]
async fn a_streamed_openai_run_ends_with_the_validated_value() {
    let server = MockServer::start().await;
    mount_openai(&server, sse("openai/parallel_tool_calls.sse"), Some(1)).await;
    mount_openai(&server, sse("openai/submit.sse"), None).await;
    let (lookup, refund) = (CountingTool::lookup_order(), CountingTool::refund_status());
    let config = triage(OPENAI, &format!("{}/v1", server.uri()))
        .tools(
            agent_core::ToolRegistry::new()
                .with(lookup.clone())
                .with(refund.clone()),
        )
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!((lookup.calls(), refund.calls()), (1, 1));
    assert_eq!(result.usage.llm_calls, 2);
    assert_eq!(result.usage.input_tokens, 131 + 236);
    assert_eq!(result.usage.output_tokens, 46 + 31);

    let turns: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TurnStarted { llm_call } => Some(*llm_call),
            _ => None,
        })
        .collect();
    assert_eq!(turns, [1, 2]);
    let finished: Vec<(&str, &Value)> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallFinished { id, arguments, .. } => Some((id.as_str(), arguments)),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 3);
    assert_eq!(finished[2].0, "call_s3SubmitTriage");
    assert_eq!(
        finished[0],
        ("call_s1LookupA1001", &json!({"order_id": "A-1001"}))
    );
    let results: Vec<(&str, &str, bool)> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolResult {
                id,
                content,
                is_error,
                ..
            } => Some((id.as_str(), content.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            (
                "call_s1LookupA1001",
                "{\"order_id\":\"A-1001\",\"status\":\"in transit\"}",
                false
            ),
            (
                "call_s2RefundB2002",
                "{\"order_id\":\"B-2002\",\"status\":\"in transit\"}",
                false
            ),
        ]
    );
    // wiremock sends each body at once: its fragments are one batch, so the
    // submit_output arguments come as one partial value (see
    // `partial_output_follows_the_arguments_as_they_arrive` for a body in pieces).
    assert_eq!(partials(&events), [final_answer()]);
}

#[tokio::test]
async fn a_cut_stream_is_retried_and_the_run_ends_with_the_value() {
    let server = MockServer::start().await;
    mount_openai(&server, sse("openai/cut.sse"), Some(1)).await;
    mount_openai(&server, sse("openai/submit.sse"), None).await;
    let delays = Delays::default();
    let config = triage(OPENAI, &format!("{}/v1", server.uri()))
        .observer(delays.observer())
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.llm_calls, 2);
    // The cut call reported nothing, yet cost tokens (C40): the retried call's 236
    // input tokens, and the cut one's estimate (123, from the request), marked.
    assert_eq!(result.usage.input_tokens, 236 + 123);
    // 31 reported, and "The parcel is" (13 bytes, 4 tokens) that arrived before the cut.
    assert_eq!(result.usage.output_tokens, 31 + 4);
    assert_eq!(result.usage.estimated_llm_calls, 1);
    assert_eq!(delays.get().len(), 1);
    let retrying: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying {
                llm_call, error, ..
            } => {
                assert!(error.contains("cut mid-way"), "{error}");
                Some(*llm_call)
            }
            _ => None,
        })
        .collect();
    assert_eq!(retrying, [1]);
    // The transcript holds the retried turn only.
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn streams_cut_every_time_end_the_run_typed_after_the_retries() {
    let server = MockServer::start().await;
    mount_openai(&server, sse("openai/cut.sse"), None).await;
    let config = triage(OPENAI, &format!("{}/v1", server.uri()))
        .max_llm_retries(2)
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    match &result.outcome {
        Err(AgentError::MaxLlmRetries { failures }) => {
            assert_eq!(failures.len(), 2);
            assert!(failures.iter().all(|f| f.kind == LlmErrorKind::Transient));
        }
        other => panic!("expected max_llm_retries, got {other:?}"),
    }
    assert_eq!(bodies(&server).await.len(), 2);
    let retries = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Retrying { .. }))
        .count();
    assert_eq!(retries, 1);
}

// ---- compatible servers, native output ----

#[tokio::test]
async fn a_native_answer_streams_as_partial_output_from_a_compatible_server() {
    let server = MockServer::start().await;
    mount_openai(&server, sse("compatible/native_answer.sse"), None).await;
    let config = agent_core::AgentConfig::<Triage>::builder("triage")
        .model("dispatch/qwen")
        .provider(ProviderOptions::default().with_base_url(format!("{}/v1", server.uri())))
        .output_mode(agent_core::OutputMode::Native)
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.input_tokens, 301);
    // One batch (the body arrived at once): one partial value, the whole answer.
    assert_eq!(partials(&events), [final_answer()]);
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        final_answer()
    );
    assert_eq!(bodies(&server).await[0]["stream"], json!(true));
}

// ---- Anthropic wire format ----

#[tokio::test]
async fn anthropic_parallel_tool_use_with_input_json_deltas_is_assembled() {
    let server = MockServer::start().await;
    mount_anthropic(&server, sse("anthropic/parallel_tool_use.sse"), None).await;
    let (response, deltas) = stream_once(&anthropic(&server), ANTHROPIC).await;
    let response = response.unwrap();
    assert_eq!(response.text, "Let me check both orders.");
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(response.tool_calls[0].id, "toolu_01StrmLookupA1001");
    assert_eq!(
        response.tool_calls[0].arguments,
        json!({"order_id": "A-1001"})
    );
    assert_eq!(
        response.tool_calls[1].arguments,
        json!({"order_id": "B-2002", "include_history": true})
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    // Input tokens from message_start (uncached + cache reads), output tokens from the
    // cumulative count of message_delta.
    assert_eq!(response.usage.input_tokens, 412 + 1024);
    assert_eq!(response.usage.cache_read_tokens, 1024);
    assert_eq!(response.usage.output_tokens, 89);
    assert_eq!(
        response.request_id.as_deref(),
        Some("msg_01StrmParallel7Qx")
    );
    assert_eq!(
        deltas,
        [
            "text Let me check ",
            "text both orders.",
            "start 0 toolu_01StrmLookupA1001 lookup_order",
            "args 0 {\"order_id\": \"A-",
            "args 0 1001\"}",
            "start 1 toolu_01StrmRefundB2002 refund_status",
            "args 1 {\"order_id\": \"B-2002\",",
            "args 1  \"include_history\": true}",
        ]
    );
    assert_eq!(bodies(&server).await[0]["stream"], json!(true));
}

#[tokio::test]
async fn anthropic_stream_cut_before_message_stop_is_transient() {
    let server = MockServer::start().await;
    mount_anthropic(&server, sse("anthropic/cut.sse"), None).await;
    let (response, deltas) = stream_once(&anthropic(&server), ANTHROPIC).await;
    let error = response.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert!(error.message.contains("cut mid-way"), "{}", error.message);
    assert_eq!(deltas.len(), 2);
}

#[tokio::test]
async fn anthropic_error_event_is_classified_as_the_error_body() {
    let server = MockServer::start().await;
    mount_anthropic(&server, sse("anthropic/error_overloaded.sse"), None).await;
    let (response, _) = stream_once(&anthropic(&server), ANTHROPIC).await;
    let error = response.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert!(error.message.contains("Overloaded"), "{}", error.message);
}

#[tokio::test]
async fn a_streamed_anthropic_run_survives_a_cut_and_ends_with_the_value() {
    let server = MockServer::start().await;
    mount_anthropic(&server, sse("anthropic/parallel_tool_use.sse"), Some(1)).await;
    mount_anthropic(&server, sse("anthropic/cut.sse"), Some(1)).await;
    mount_anthropic(&server, sse("anthropic/submit.sse"), None).await;
    let lookup = CountingTool::lookup_order();
    let config = triage(ANTHROPIC, &server.uri())
        .tools(agent_core::ToolRegistry::new().with(lookup.clone()))
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.calls(), 1);
    assert_eq!(result.usage.llm_calls, 3);
    // The cut call counts too (C40): its input as `message_start` reported it (655),
    // its output estimated from what arrived.
    assert_eq!(result.usage.input_tokens, 412 + 1024 + 655 + 655);
    // The cut call's `submit_output` and 30 bytes of arguments: 43 bytes, 11 tokens.
    assert_eq!(result.usage.output_tokens, 89 + 48 + 11);
    assert_eq!(result.usage.estimated_llm_calls, 1);
    // Every call id answered: the unknown tool gets an error result.
    let results: Vec<(&str, bool)> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolResult { id, is_error, .. } => Some((id.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            ("toolu_01StrmLookupA1001", false),
            ("toolu_01StrmRefundB2002", true)
        ]
    );
    // The cut turn's partial answer (what arrived before the cut) comes first, then
    // the retried one's.
    let partials = partials(&events);
    assert_eq!(
        partials.first(),
        Some(&json!({"severity": 2, "queue": "ship"}))
    );
    assert_eq!(partials.last(), Some(&final_answer()));
    let retry_at = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Retrying { llm_call: 2, .. }))
        .unwrap();
    let last_turn = events
        .iter()
        .position(|e| matches!(e, StreamEvent::TurnStarted { llm_call: 3 }))
        .unwrap();
    assert!(retry_at < last_turn);
}

#[tokio::test]
async fn streamed_and_plain_runs_of_the_same_replies_agree() {
    let server = MockServer::start().await;
    mount_anthropic(&server, sse("anthropic/parallel_tool_use.sse"), Some(1)).await;
    mount_anthropic(&server, sse("anthropic/submit.sse"), Some(1)).await;
    // The plain run gets the same turns as JSON.
    mount_anthropic(
        &server,
        json_fixture(200, "anthropic/parallel_tool_use.json"),
        Some(1),
    )
    .await;
    mount_anthropic(&server, json_fixture(200, "anthropic/submit.json"), None).await;
    let config = triage(ANTHROPIC, &server.uri())
        .tools(agent_core::ToolRegistry::new().with(CountingTool::lookup_order()))
        .build()
        .unwrap();
    let (_, streamed) = collect(run_agent_stream(&config, "ticket")).await;
    let plain = run_agent(&config, "ticket").await;
    assert_eq!(streamed.outcome, plain.outcome);
    assert_eq!(streamed.usage.llm_calls, plain.usage.llm_calls);
    assert_eq!(streamed.transcript.len(), plain.transcript.len());
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 4);
    // The same conversation was sent in both second calls; only the stream flag differs.
    assert_eq!(sent[1]["messages"].as_array().unwrap().len(), 3);
    assert_eq!(sent[3]["messages"].as_array().unwrap().len(), 3);
    assert_eq!(
        (sent[1].get("stream"), sent[3].get("stream")),
        (Some(&json!(true)), None)
    );
}

// ---- a body that arrives in pieces ----

/// A one-shot HTTP server that answers the first request with `events` as an event
/// stream, one event at a time with a pause between them (`Connection: close`, no
/// length: the body ends when the connection does); returns its base URL.
async fn trickling_server(events: Vec<String>) -> String {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        assert!(
            read_request(&mut socket).await,
            "the client closed before its request was complete"
        );
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        for event in events {
            socket.write_all(event.as_bytes()).await.unwrap();
            socket.flush().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(40)).await;
        }
    });
    format!("http://{addr}/v1")
}

#[tokio::test]
async fn partial_output_follows_the_arguments_as_they_arrive() {
    let body = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/streaming/openai/submit.sse"
    ))
    .unwrap();
    // One event per write, with pauses: every argument fragment is its own batch.
    let events: Vec<String> = body
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| format!("{e}\n\n"))
        .collect();
    let url = trickling_server(events).await;
    let config = triage(OPENAI, &url).build().unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    // The submit_output arguments as they arrived, fragment by fragment, then whole.
    assert_eq!(
        partials(&events),
        [
            json!({"severity": 2}),
            json!({"severity": 2, "queue": "shipping", "summary": "Parcel A-1001"}),
            final_answer(),
        ]
    );
    // Each partial value comes before the call is finished.
    let last_partial = events
        .iter()
        .rposition(|e| matches!(e, StreamEvent::PartialOutput { .. }))
        .unwrap();
    let finished = events
        .iter()
        .position(|e| matches!(e, StreamEvent::ToolCallFinished { .. }))
        .unwrap();
    assert!(last_partial < finished);
}
