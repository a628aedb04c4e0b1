//! Round-4 field reports on the wire (C54-C61, `docs/cases.md`): each adapter's
//! replies against wiremock (or a small server of the test's own where the body must
//! arrive in pieces), through the public run API and the `LlmClient` calls, plain and
//! streamed, on every wire the kind reaches.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::providers::{GeminiClient, OpenAiClient, ProviderOptions};
use agent_core::{
    AgentError, AgentResult, OutputMode, ToolRegistry,
    error::Budget,
    llm::{LlmClient, LlmRequest, LlmResponse, StopReason, StreamDelta},
    pricing::ModelPrice,
    run_agent, run_agent_stream,
    stream::{RunStream, StreamEvent},
};
use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

pub(crate) const ANSWER: &str =
    r#"{"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."}"#;

// ---- helpers ---------------------------------------------------------------------------

/// A response whose body is the given SSE text.
pub(crate) fn sse_body(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// A recorded SSE fixture.
pub(crate) fn sse(path: &str) -> ResponseTemplate {
    raw_fixture(200, &format!("streaming/{path}"), "text/event-stream")
}

/// Chat Completions chunks (each a `choices[0]` of its own, `None` for a chunk with
/// empty `choices` and `usage`) as events, without the `[DONE]` end marker.
pub(crate) fn chunk_events(choices: &[Value]) -> String {
    let mut out = String::new();
    for choice in choices {
        let chunk = if choice.get("usage").is_some() {
            json!({"id": "chatcmpl-f4", "object": "chat.completion.chunk", "model": "m",
                   "choices": [], "usage": choice["usage"]})
        } else {
            json!({"id": "chatcmpl-f4", "object": "chat.completion.chunk", "model": "m",
                   "choices": [choice]})
        };
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out
}

/// [`chunk_events`] ended by `[DONE]`.
pub(crate) fn chunks(choices: &[Value]) -> String {
    chunk_events(choices) + "data: [DONE]\n\n"
}

/// Anthropic events (`type` inside each) as an event stream.
pub(crate) fn events(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// A server answering each request with the next of `replies` (the last one repeats).
pub(crate) async fn serve(path: &str, replies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    let n = replies.len();
    for (i, reply) in replies.into_iter().enumerate() {
        mount_post(&server, path, reply, (i + 1 < n).then_some(1)).await;
    }
    server
}

pub(crate) fn v1(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

/// Every event of a streamed run, the result apart.
pub(crate) async fn collect<T>(
    mut stream: RunStream<'_, T>,
) -> (Vec<StreamEvent<T>>, AgentResult<T>) {
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

/// A run, streamed or not.
pub(crate) async fn run(
    config: &agent_core::AgentConfig<Triage>,
    streamed: bool,
) -> (Vec<StreamEvent<Triage>>, AgentResult<Triage>) {
    if streamed {
        collect(run_agent_stream(config, "ticket")).await
    } else {
        (Vec::new(), run_agent(config, "ticket").await)
    }
}

/// The names of the calls started and finished in a streamed run.
pub(crate) fn call_names<T>(events: &[StreamEvent<T>]) -> (Vec<String>, Vec<String>) {
    let mut started = Vec::new();
    let mut finished = Vec::new();
    for event in events {
        match event {
            StreamEvent::ToolCallStarted { name, .. } => started.push(name.clone()),
            StreamEvent::ToolCallFinished { name, .. } => finished.push(name.clone()),
            _ => {}
        }
    }
    (started, finished)
}

/// The partial answers of a streamed run.
pub(crate) fn partials<T>(events: &[StreamEvent<T>]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::PartialOutput { value, .. } => Some(value.clone()),
            _ => None,
        })
        .collect()
}

pub(crate) fn retries<T>(events: &[StreamEvent<T>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect()
}

pub(crate) fn answer() -> Value {
    serde_json::from_str(ANSWER).unwrap()
}

/// The Chat Completions routes that share the one chunk reader: (model, path, whether
/// the base URL ends in `/v1`).
pub(crate) const CHAT: [(&str, &str, bool); 4] = [
    ("gpt-4.1", "/v1/chat/completions", true),
    (
        "azure/prod-gpt-4o",
        "/openai/deployments/prod-gpt-4o/chat/completions",
        false,
    ),
    ("dispatch/qwen3", "/v1/chat/completions", true),
    ("ollama/qwen3", "/v1/chat/completions", false),
];

/// A server for one Chat Completions route, and its base URL.
pub(crate) async fn chat_server(
    route: (&str, &str, bool),
    replies: Vec<ResponseTemplate>,
) -> (MockServer, String) {
    let (_, path, with_v1) = route;
    let server = serve(path, replies).await;
    let base = if with_v1 { v1(&server) } else { server.uri() };
    (server, base)
}

/// One streamed round trip through a client, with the deltas it produced as text.
pub(crate) async fn stream_once(
    client: &dyn LlmClient,
    request: &LlmRequest,
) -> (Result<LlmResponse, agent_core::llm::LlmError>, Vec<String>) {
    let mut deltas = Vec::new();
    let mut sink = |delta: StreamDelta<'_>| {
        deltas.push(match delta {
            StreamDelta::Text(t) => format!("text {t}"),
            StreamDelta::ToolCallStarted { index, id, name } => {
                format!("start {index} {id} {name}")
            }
            StreamDelta::ToolCallArguments { index, json } => format!("args {index} {json}"),
            StreamDelta::Reasoning(r) => format!("reasoning {r}"),
            _ => "other".to_owned(),
        });
    };
    let response = client.complete_streaming(request, &mut sink).await;
    (response, deltas)
}

// ---- Bedrock event-stream frames -------------------------------------------------------

pub(crate) const BEDROCK_ROUTE: &str = "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0";
pub(crate) const BEDROCK_STREAM: &str =
    "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream";

/// One event-stream message named `name`, with a JSON payload.
pub(crate) fn frame(name: &str, payload: &Value) -> Vec<u8> {
    let string = |v: &str| HeaderValue::String(v.to_owned().into());
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(":message-type", string("event")))
        .add_header(Header::new(":event-type", string(name)))
        .add_header(Header::new(":content-type", string("application/json")));
    let mut out = Vec::new();
    write_message_to(&message, &mut out).unwrap();
    out
}

pub(crate) fn event_stream(frames: &[(&str, Value)]) -> ResponseTemplate {
    let body: Vec<u8> = frames.iter().flat_map(|(n, p)| frame(n, p)).collect();
    ResponseTemplate::new(200).set_body_raw(body, "application/vnd.amazon.eventstream")
}

// ---- C54: a streamed name in pieces ----------------------------------------------------

/// A call streamed with its name cut into `name` pieces (each piece its own fragment,
/// before the arguments), or, with `repeat`, the whole name (and id) in every fragment.
pub(crate) fn streamed_call(
    id: &str,
    name: &[&str],
    arguments: &[&str],
    repeat: bool,
) -> Vec<Value> {
    let whole: String = name.concat();
    let mut out = Vec::new();
    let pieces: Vec<&str> = if repeat { vec![&whole] } else { name.to_vec() };
    for (i, piece) in pieces.iter().enumerate() {
        let mut call = json!({"index": 0, "type": "function",
                              "function": {"name": piece, "arguments": ""}});
        if i == 0 || repeat {
            call["id"] = json!(id);
        }
        out.push(json!({"index": 0, "delta": {"tool_calls": [call]}}));
    }
    for piece in arguments {
        let mut call = json!({"index": 0, "function": {"arguments": piece}});
        if repeat {
            call["id"] = json!(id);
            call["function"]["name"] = json!(whole);
        }
        out.push(json!({"index": 0, "delta": {"tool_calls": [call]}}));
    }
    out.push(json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}));
    out
}

#[tokio::test]
async fn c54_a_streamed_name_in_pieces_is_joined_on_every_wire() {
    for route in CHAT {
        for repeat in [false, true] {
            let lookup = chunks(&streamed_call(
                "call_n1",
                &["look", "up_", "order"],
                &["{\"order_id\":", "\"A-1001\"}"],
                repeat,
            ));
            let submit = chunks(&streamed_call(
                "call_n2",
                &["sub", "mit_out", "put"],
                &[
                    "{\"severity\": 2, \"queue\": \"ship",
                    "ping\", \"summary\": \"Parcel A-1001 is a week late.\"}",
                ],
                repeat,
            ));
            let (server, base) = chat_server(route, vec![sse_body(lookup), sse_body(submit)]).await;
            let tool = CountingTool::lookup_order();
            let config = triage(route.0, &base)
                .tools(ToolRegistry::new().with(tool.clone()))
                .build()
                .unwrap();
            let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
            let what = format!("{} repeat={repeat}", route.0);
            assert_eq!(result.outcome, Ok(expected_triage()), "{what}");
            assert_eq!(tool.seen(), [json!({"order_id": "A-1001"})], "{what}");
            let (started, finished) = call_names(&events);
            assert_eq!(started, ["lookup_order", "submit_output"], "{what}");
            assert_eq!(finished, ["lookup_order", "submit_output"], "{what}");
            // The answer was previewed: the runner saw `submit_output` by its name.
            assert_eq!(partials(&events).last(), Some(&answer()), "{what}");
            let sent = bodies(&server).await;
            let echoed = &sent[1]["messages"][2]["tool_calls"][0]["function"]["name"];
            assert_eq!(echoed, "lookup_order", "{what}");
        }
    }
}

// ---- C55: a final chunk, then no end marker --------------------------------------------

pub(crate) fn anthropic_submit_events_without_stop() -> String {
    let whole = fixture("streaming/anthropic/submit.sse");
    let at = whole.find("event: message_stop").unwrap();
    whole[..at].to_owned()
}

pub(crate) fn bedrock_frames(stop: &str, calls: bool) -> Vec<(&'static str, Value)> {
    let mut frames = vec![("messageStart", json!({"role": "assistant"}))];
    if calls {
        frames.push((
            "contentBlockStart",
            json!({"contentBlockIndex": 0, "start": {"toolUse":
                {"toolUseId": "tooluse_c55", "name": "submit_output"}}}),
        ));
        frames.push((
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": ANSWER}}}),
        ));
        frames.push(("contentBlockStop", json!({"contentBlockIndex": 0})));
    }
    frames.push(("messageStop", json!({"stopReason": stop})));
    frames
}

#[tokio::test]
async fn c55_a_stream_closed_after_its_final_chunk_without_the_end_marker_is_complete() {
    // Chat Completions: the finish chunk and the usage chunk, no `[DONE]`.
    for route in CHAT {
        let mut submit = streamed_call("call_c55", &["submit_output"], &[ANSWER], false);
        submit.push(json!({"usage": {"prompt_tokens": 236, "completion_tokens": 31}}));
        let (server, base) = chat_server(route, vec![sse_body(chunk_events(&submit))]).await;
        let config = triage(route.0, &base).build().unwrap();
        let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
        assert_eq!(result.outcome, Ok(expected_triage()), "{}", route.0);
        assert!(
            retries(&events).is_empty(),
            "{}: {:?}",
            route.0,
            retries(&events)
        );
        assert_eq!(requests(&server).await.len(), 1);
        assert_eq!(result.usage.input_tokens, 236);
        assert_eq!(result.usage.estimated_llm_calls, 0);
    }
    // The same in native and prompted output modes: the answer as text.
    for mode in [OutputMode::Native, OutputMode::Prompted] {
        for route in CHAT {
            let pieces: Vec<Value> = ANSWER
                .as_bytes()
                .chunks(20)
                .map(|c| json!({"index": 0, "delta": {"content": String::from_utf8_lossy(c)}}))
                .chain([json!({"index": 0, "delta": {}, "finish_reason": "stop"})])
                .collect();
            let (server, base) = chat_server(route, vec![sse_body(chunk_events(&pieces))]).await;
            let config = triage(route.0, &base).output_mode(mode).build().unwrap();
            let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
            assert_eq!(result.outcome, Ok(expected_triage()), "{mode} {}", route.0);
            assert!(retries(&events).is_empty(), "{mode} {}", route.0);
            assert_eq!(requests(&server).await.len(), 1);
        }
    }
    // Anthropic: `message_delta` with the stop reason, no `message_stop`.
    let server = serve(
        "/v1/messages",
        vec![sse_body(anthropic_submit_events_without_stop())],
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server.uri()).build().unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert!(retries(&events).is_empty(), "{:?}", retries(&events));
    assert_eq!(requests(&server).await.len(), 1);
    assert_eq!(result.usage.output_tokens, 48);
    // Bedrock: `messageStop` with the stop reason, no `metadata`.
    let server = serve(
        BEDROCK_STREAM,
        vec![event_stream(&bedrock_frames("tool_use", true))],
    )
    .await;
    let config = triage_with(BEDROCK_ROUTE, &server.uri(), |o| {
        o.with_aws_region("us-east-1")
    })
    .build()
    .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert!(retries(&events).is_empty(), "{:?}", retries(&events));
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn c55_a_content_filter_finish_without_the_end_marker_is_refused_after_one_request() {
    for route in CHAT {
        let filtered = chunk_events(&[
            json!({"index": 0, "delta": {"role": "assistant", "content": ""}}),
            json!({"index": 0, "delta": {}, "finish_reason": "content_filter"}),
        ]);
        let (server, base) = chat_server(route, vec![sse_body(filtered)]).await;
        let config = triage(route.0, &base).build().unwrap();
        let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
        assert_eq!(
            result.category(),
            Some("refused"),
            "{}: {:?}",
            route.0,
            result.outcome
        );
        assert_eq!(requests(&server).await.len(), 1, "{}", route.0);
    }
    let refused = events(&[
        json!({"type": "message_start", "message": {"id": "msg_r", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
            "usage": {"input_tokens": 120, "output_tokens": 1}}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "refusal"},
               "usage": {"output_tokens": 3}}),
    ]);
    let server = serve("/v1/messages", vec![sse_body(refused)]).await;
    let config = triage("claude-sonnet-4-5", &server.uri()).build().unwrap();
    let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.category(), Some("refused"), "{:?}", result.outcome);
    assert_eq!(requests(&server).await.len(), 1);
    let server = serve(
        BEDROCK_STREAM,
        vec![event_stream(&bedrock_frames("content_filtered", false))],
    )
    .await;
    let config = triage_with(BEDROCK_ROUTE, &server.uri(), |o| {
        o.with_aws_region("us-east-1")
    })
    .build()
    .unwrap();
    let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.category(), Some("refused"), "{:?}", result.outcome);
    assert_eq!(requests(&server).await.len(), 1);
}

// ---- C56: reasoning tokens outside the completion count --------------------------------

/// xAI's documented usage: `completion_tokens` counts the visible output only, the
/// reasoning tokens are counted apart and in `total_tokens`.
fn outside_usage() -> Value {
    json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 410,
           "completion_tokens_details": {"reasoning_tokens": 300}})
}

fn chat_reply(message: Value, finish: &str, usage: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-f4", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": usage
    }))
}

fn chat_call(name: &str, arguments: &str, usage: Value) -> ResponseTemplate {
    chat_reply(
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_u1",
            "type": "function", "function": {"name": name, "arguments": arguments}}]}),
        "tool_calls",
        usage,
    )
}

/// The same call streamed, its usage in the last chunk.
fn chat_call_streamed(name: &str, arguments: &str, usage: Value) -> ResponseTemplate {
    let mut chunks_ = streamed_call("call_u1", &[name], &[arguments], false);
    chunks_.push(json!({"usage": usage}));
    sse_body(chunks(&chunks_))
}

#[tokio::test]
async fn c56_reasoning_tokens_outside_the_completion_count_reach_usage_cost_and_the_token_cap() {
    for streamed in [false, true] {
        let reply = |name: &str, arguments: &str, usage: Value| {
            if streamed {
                chat_call_streamed(name, arguments, usage)
            } else {
                chat_call(name, arguments, usage)
            }
        };
        // Output, cost: every billed token, at the output rate.
        let server = serve(
            "/v1/chat/completions",
            vec![reply("submit_output", ANSWER, outside_usage())],
        )
        .await;
        let config = triage("dispatch/grok-4", &v1(&server))
            .price("dispatch/grok-4", ModelPrice::new(1.0, 10.0))
            .build()
            .unwrap();
        let (_, result) = run(&config, streamed).await;
        assert_eq!(result.outcome, Ok(expected_triage()));
        assert_eq!(result.usage.input_tokens, 100);
        assert_eq!(result.usage.output_tokens, 310, "streamed={streamed}");
        let cost = result.usage.cost_usd.unwrap();
        assert!((cost - (100.0 + 3100.0) / 1e6).abs() < 1e-12, "{cost}");
        // The token cap sees them: 410 used of 400 before the next call.
        let server = serve(
            "/v1/chat/completions",
            vec![
                reply("lookup_order", r#"{"order_id":"A-1001"}"#, outside_usage()),
                reply("submit_output", ANSWER, outside_usage()),
            ],
        )
        .await;
        let config = triage("dispatch/grok-4", &v1(&server))
            .tools(ToolRegistry::new().with(CountingTool::lookup_order()))
            .max_total_tokens(400)
            .build()
            .unwrap();
        let (_, result) = run(&config, streamed).await;
        assert_eq!(
            result.outcome,
            Err(AgentError::BudgetExhausted {
                budget: Budget::TotalTokens {
                    limit: 400,
                    used: 410
                }
            }),
            "streamed={streamed}"
        );
        assert_eq!(requests(&server).await.len(), 1);
    }
    // OpenAI's own usage counts reasoning inside `completion_tokens`: never twice. A
    // server that sends no total but more reasoning than completion counts it apart.
    for (usage, output) in [
        (
            json!({"prompt_tokens": 100, "completion_tokens": 310, "total_tokens": 410,
                   "completion_tokens_details": {"reasoning_tokens": 300}}),
            310,
        ),
        (
            json!({"prompt_tokens": 100, "completion_tokens": 10,
                   "completion_tokens_details": {"reasoning_tokens": 300}}),
            310,
        ),
    ] {
        let server = serve(
            "/v1/chat/completions",
            vec![chat_call("submit_output", ANSWER, usage.clone())],
        )
        .await;
        let config = triage("gpt-4.1", &v1(&server)).build().unwrap();
        let result = run_agent(&config, "ticket").await;
        assert_eq!(result.usage.output_tokens, output, "{usage}");
    }
}

// ---- C57: the first non-empty id and model ---------------------------------------------

#[tokio::test]
async fn c57_a_filter_results_chunk_with_an_empty_id_and_model_is_not_the_responses() {
    let filter = json!({"choices": [], "created": 0, "id": "", "model": "", "object": "",
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {
            "hate": {"filtered": false, "severity": "safe"}}}]});
    let mut body = format!("data: {filter}\n\n");
    for (i, piece) in ["The parcel ", "is late."].iter().enumerate() {
        let chunk = json!({"id": "chatcmpl-Az57", "object": "chat.completion.chunk",
            "created": 1744380900, "model": "gpt-4o-2024-11-20",
            "choices": [{"index": 0, "delta": {"content": piece},
                         "finish_reason": (i == 1).then_some("stop")}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    for route in CHAT {
        let (server, base) = chat_server(route, vec![sse_body(body.clone())]).await;
        let options = ProviderOptions::default().with_api_key(KEY);
        let client = match route.0 {
            "azure/prod-gpt-4o" => {
                OpenAiClient::azure("prod-gpt-4o", &options.with_base_url(base)).unwrap()
            }
            "gpt-4.1" => OpenAiClient::openai(&options.with_base_url(base)).unwrap(),
            // `compatible` takes the API root (the `ollama/` route appends `/v1`).
            _ => OpenAiClient::compatible("dispatch", &options.with_base_url(v1(&server))).unwrap(),
        };
        let (response, _) = stream_once(&client, &hello("gpt-4o")).await;
        let response = response.unwrap();
        assert_eq!(response.text, "The parcel is late.");
        assert_eq!(
            response.request_id.as_deref(),
            Some("chatcmpl-Az57"),
            "{}",
            route.0
        );
        assert_eq!(
            response.model.as_deref(),
            Some("gpt-4o-2024-11-20"),
            "{}",
            route.0
        );
    }
}

// ---- C58: a refusal's structured reason -----------------------------------------------

/// A refusal case: (label, path, model, reply, streamed, category, explanation).
type RefusalCase<'a> = (
    &'a str,
    &'a str,
    &'a str,
    ResponseTemplate,
    bool,
    &'a str,
    Option<&'a str>,
);

const EXPLANATION: &str =
    "This request was declined because it conflicts with Anthropic's Usage Policy.";

#[tokio::test]
async fn c58_a_refusal_without_text_carries_its_structured_reason_on_every_wire() {
    let details = json!({"type": "refusal", "category": "cyber", "explanation": EXPLANATION});
    let mut cases: Vec<RefusalCase<'_>> = Vec::new();
    cases.push((
        "anthropic",
        "/v1/messages",
        "claude-sonnet-4-5",
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_r58", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": "refusal",
            "stop_details": details, "usage": {"input_tokens": 30, "output_tokens": 2}})),
        false,
        "cyber",
        Some(EXPLANATION),
    ));
    cases.push((
        "anthropic streamed",
        "/v1/messages",
        "claude-sonnet-4-5",
        sse_body(events(&[
            json!({"type": "message_start", "message": {"id": "msg_r58s", "type": "message",
                "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
                "usage": {"input_tokens": 30, "output_tokens": 1}}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "refusal",
                "stop_sequence": null, "stop_details": details},
                "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ])),
        true,
        "cyber",
        Some(EXPLANATION),
    ));
    let azure_filtered = json_fixture(200, "azure/content_filter_finish.json");
    cases.push((
        "azure",
        "/openai/deployments/prod-gpt-4o/chat/completions",
        "azure/prod-gpt-4o",
        azure_filtered,
        false,
        "violence",
        None,
    ));
    let azure_streamed = chunks(&[
        json!({"index": 0, "delta": {"role": "assistant", "content": ""}}),
        json!({"index": 0, "delta": {}, "finish_reason": "content_filter",
               "content_filter_results": {"hate": {"filtered": false, "severity": "safe"},
                                          "violence": {"filtered": true, "severity": "high"}}}),
    ]);
    cases.push((
        "azure streamed",
        "/openai/deployments/prod-gpt-4o/chat/completions",
        "azure/prod-gpt-4o",
        sse_body(azure_streamed),
        true,
        "violence",
        None,
    ));
    cases.push((
        "azure 400",
        "/openai/deployments/prod-gpt-4o/chat/completions",
        "azure/prod-gpt-4o",
        json_fixture(400, "azure/content_filter_prompt.json"),
        false,
        "violence",
        None,
    ));
    cases.push((
        "gemini safety",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        "gemini-2.5-flash",
        json_fixture(200, "gemini/safety.json"),
        false,
        "HARM_CATEGORY_HARASSMENT",
        None,
    ));
    let blocked = json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT",
        "blockReasonMessage": "The prompt was blocked for prohibited content.",
        "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]},
        "usageMetadata": {"promptTokenCount": 17, "totalTokenCount": 17},
        "modelVersion": "gemini-2.5-flash", "responseId": "eT9pZ0a2Dq"});
    cases.push((
        "gemini blocked prompt",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        "gemini-2.5-flash",
        ResponseTemplate::new(200).set_body_json(blocked),
        false,
        "PROHIBITED_CONTENT",
        Some("The prompt was blocked for prohibited content."),
    ));
    let safety: Value = serde_json::from_str(&fixture("gemini/safety.json")).unwrap();
    cases.push((
        "gemini safety streamed",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        "gemini-2.5-flash",
        sse_body(gemini_stream_of(&safety, 8)),
        true,
        "HARM_CATEGORY_HARASSMENT",
        None,
    ));
    for (label, path, model, reply, streamed, category, explanation) in cases {
        let server = serve(path, vec![reply]).await;
        let config = triage(model, &server.uri()).build().unwrap();
        let (_, result) = run(&config, streamed).await;
        let error = result.outcome.as_ref().unwrap_err();
        assert_eq!(error.category(), "refused", "{label}: {error:?}");
        let text = error.to_string();
        assert!(text.contains(category), "{label}: {text}");
        if label.starts_with("anthropic") {
            // No text: the explanation is the message, said once.
            assert_eq!(
                text,
                format!("the provider refused to answer (refusal, category cyber): {EXPLANATION}")
            );
        }
        if let Some(explanation) = explanation {
            assert!(text.contains(explanation), "{label}: {text}");
        }
        // The reason itself, structured.
        let reason = error.refusal_reason().expect(label);
        assert_eq!(reason.category.as_deref(), Some(category), "{label}");
        assert_eq!(reason.explanation.as_deref(), explanation, "{label}");
        assert_eq!(requests(&server).await.len(), 1, "{label}");
    }
}

// ---- C59: an incomplete Responses reply without `output` -------------------------------

pub(crate) fn incomplete_without_output(reason: &str) -> Value {
    json!({"id": "resp_c59", "object": "response", "created_at": 1756315657,
           "status": "incomplete", "incomplete_details": {"reason": reason},
           "model": "gpt-5-mini-2025-08-07", "error": null,
           "usage": {"input_tokens": 236, "output_tokens": 4096,
                     "output_tokens_details": {"reasoning_tokens": 4096}, "total_tokens": 4332}})
}

#[tokio::test]
async fn c59_an_incomplete_responses_reply_without_output_is_a_cut_turn_named_by_its_cap() {
    for streamed in [false, true] {
        let cut = if streamed {
            let event = json!({"type": "response.incomplete", "sequence_number": 1,
                               "response": incomplete_without_output("max_output_tokens")});
            sse_body(format!("event: response.incomplete\ndata: {event}\n\n"))
        } else {
            ResponseTemplate::new(200).set_body_json(incomplete_without_output("max_output_tokens"))
        };
        let submit = if streamed {
            sse("responses/submit.sse")
        } else {
            json_fixture(200, "responses/submit.json")
        };
        let server = serve("/v1/responses", vec![cut, submit]).await;
        let delays = Delays::default();
        let config = triage("openai-responses/gpt-5-mini", &v1(&server))
            .observer(delays.observer())
            .build()
            .unwrap();
        let (_, result) = run(&config, streamed).await;
        assert_eq!(result.outcome, Ok(expected_triage()), "streamed={streamed}");
        assert!(
            delays.get().is_empty(),
            "not a transient failure: {:?}",
            delays.get()
        );
        assert_eq!(result.usage.llm_calls, 2);
        // The cut call's usage counts.
        assert_eq!(result.usage.output_tokens, 4096 + 58);
        // The next request tells the model its reply was cut at the cap.
        let sent = bodies(&server).await;
        let input = sent[1]["input"].to_string();
        assert!(input.contains("max_tokens"), "streamed={streamed}: {input}");
    }
    // Cut by the content filter: refused, after that one request.
    let server = serve(
        "/v1/responses",
        vec![ResponseTemplate::new(200).set_body_json(incomplete_without_output("content_filter"))],
    )
    .await;
    let config = triage("openai-responses/gpt-5-mini", &v1(&server))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.category(), Some("refused"), "{:?}", result.outcome);
    assert_eq!(requests(&server).await.len(), 1);
}

// ---- C60: Responses call arguments only in `.done` events ------------------------------

/// The recorded submit stream without its `function_call_arguments.delta` events.
fn submit_without_deltas() -> String {
    fixture("streaming/responses/submit.sse")
        .split("\n\n")
        .filter(|e| !e.trim().is_empty() && !e.contains("response.function_call_arguments.delta"))
        .map(|e| format!("{e}\n\n"))
        .collect()
}

/// A stream that opens a `lookup_order` call, sends its arguments only in
/// `function_call_arguments.done`, and completes with an empty `output` and no
/// `output_item.done`.
fn lookup_only_in_arguments_done() -> String {
    let item = json!({"id": "fc_c60", "type": "function_call", "status": "in_progress",
                      "arguments": "", "call_id": "call_c60", "name": "lookup_order"});
    let events_ = [
        json!({"type": "response.created", "sequence_number": 0, "response":
            {"id": "resp_c60", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
               "item": item}),
        json!({"type": "response.function_call_arguments.done", "sequence_number": 2,
               "item_id": "fc_c60", "output_index": 0, "arguments": "{\"order_id\":\"A-1001\"}"}),
        json!({"type": "response.completed", "sequence_number": 3, "response":
            {"id": "resp_c60", "status": "completed", "model": "gpt-5-mini-2025-08-07",
             "output": [], "usage": {"input_tokens": 200, "output_tokens": 20}}}),
    ];
    events_
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

#[tokio::test]
async fn c60_responses_call_arguments_sent_only_in_done_events_reach_the_preview_and_the_call() {
    // The answer's arguments only in `.done`: previewed all the same.
    let server = serve("/v1/responses", vec![sse_body(submit_without_deltas())]).await;
    let config = triage("openai-responses/gpt-5-mini", &v1(&server))
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(partials(&events).last(), Some(&answer()));
    // A call whose arguments come only in `function_call_arguments.done`, completed
    // with an empty `output`: the call is built from the stream, with its arguments.
    let server = serve(
        "/v1/responses",
        vec![
            sse_body(lookup_only_in_arguments_done()),
            sse("responses/submit.sse"),
        ],
    )
    .await;
    let tool = CountingTool::lookup_order();
    let config = triage("openai-responses/gpt-5-mini", &v1(&server))
        .tools(ToolRegistry::new().with(tool.clone()))
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(tool.seen(), [json!({"order_id": "A-1001"})]);
    let finished: Vec<Value> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallFinished { arguments, .. } => Some(arguments.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(finished[0], json!({"order_id": "A-1001"}));
}

// ---- C61: Gemini streamed --------------------------------------------------------------

pub(crate) const GEMINI: &str = "gemini-3-pro-preview";
pub(crate) const GEMINI_STREAM: &str = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent";

/// A plain `generateContent` reply as the `streamGenerateContent` events that make it:
/// every text part cut into pieces of `piece` characters, each piece a chunk of its own;
/// the function calls whole, in the last chunk with the finish reason and the usage (the
/// earlier chunks carry the prompt's count only); the model version and response id on
/// every chunk.
pub(crate) fn gemini_stream_of(plain: &Value, piece: usize) -> String {
    let mut chunks_: Vec<Value> = Vec::new();
    let meta = |mut chunk: Value| {
        for key in ["modelVersion", "responseId"] {
            if let Some(v) = plain.get(key) {
                chunk[key] = v.clone();
            }
        }
        chunk
    };
    let prompt = plain
        .pointer("/usageMetadata/promptTokenCount")
        .cloned()
        .unwrap_or(json!(0));
    let candidate = &plain["candidates"][0];
    let parts = candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut calls = Vec::new();
    for part in parts {
        match part.get("text").and_then(Value::as_str) {
            Some(text) if part.get("functionCall").is_none() => {
                let chars: Vec<char> = text.chars().collect();
                for piece in chars.chunks(piece) {
                    let mut p = part.clone();
                    p["text"] = json!(piece.iter().collect::<String>());
                    chunks_.push(meta(json!({"candidates": [{"content": {"parts": [p],
                        "role": "model"}, "index": 0}],
                        "usageMetadata": {"promptTokenCount": prompt}})));
                }
            }
            _ => calls.push(part),
        }
    }
    let mut last = json!({"usageMetadata": plain["usageMetadata"]});
    if let Some(feedback) = plain.get("promptFeedback") {
        last["promptFeedback"] = feedback.clone();
    }
    if !candidate.is_null() {
        let mut c = candidate.clone();
        c["content"] = json!({"parts": calls, "role": "model"});
        last["candidates"] = json!([c]);
    }
    chunks_.push(meta(last));
    chunks_
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

pub(crate) fn gemini_client(base: &str) -> GeminiClient {
    GeminiClient::new(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(base),
    )
    .unwrap()
}

/// Responses compared as turns: synthesised call ids (`call_` + random hex) blanked.
pub(crate) fn turn(mut response: LlmResponse) -> LlmResponse {
    for call in &mut response.tool_calls {
        if call.id.starts_with("call_") {
            call.id.clear();
        }
    }
    response
}

#[tokio::test]
async fn c61_a_gemini_stream_split_at_any_byte_is_the_same_turn_as_the_plain_call() {
    for file in [
        "text.json",
        "function_call.json",
        "parallel_calls.json",
        "submit.json",
        "max_tokens.json",
        "malformed_function_call.json",
        "safety.json",
        "blocked_prompt.json",
    ] {
        let plain_body: Value = serde_json::from_str(&fixture(&format!("gemini/{file}"))).unwrap();
        let model = plain_body["modelVersion"]
            .as_str()
            .unwrap_or(GEMINI)
            .to_owned();
        let request = hello(&model);
        let path = format!("/v1beta/models/{model}:generateContent");
        let server = serve(
            &path,
            vec![ResponseTemplate::new(200).set_body_json(&plain_body)],
        )
        .await;
        let plain = turn(
            gemini_client(&server.uri())
                .complete(&request)
                .await
                .unwrap(),
        );
        for (piece, bytes) in [(4, 1), (7, 3), (1000, 64)] {
            let body = gemini_stream_of(&plain_body, piece);
            let base = trickle_server(body.into_bytes(), "text/event-stream", bytes).await;
            let (streamed, deltas) = stream_once(&gemini_client(&base), &request).await;
            let streamed = turn(streamed.unwrap_or_else(|e| panic!("{file}: {e}")));
            assert_eq!(streamed, plain, "{file}, split every {bytes} bytes");
            // The pieces went to the sink as on the other wires.
            let text: String = deltas
                .iter()
                .filter_map(|d| d.strip_prefix("text "))
                .collect();
            // (A filtered turn's text is the adapter's note, never streamed.)
            let sent: String = plain_body
                .pointer("/candidates/0/content/parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|p| p.get("thought").is_none())
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            assert_eq!(text, sent, "{file}");
            let started = deltas.iter().filter(|d| d.starts_with("start ")).count();
            assert_eq!(started, plain.tool_calls.len(), "{file}");
        }
    }
}

#[tokio::test]
async fn c61_gemini_streams_a_tool_loop_with_signatures_usage_and_events() {
    let first: Value = serde_json::from_str(&fixture("gemini/function_call.json")).unwrap();
    let second: Value = serde_json::from_str(&fixture("gemini/submit.json")).unwrap();
    let server = serve(
        GEMINI_STREAM,
        vec![
            sse_body(gemini_stream_of(&first, 9)),
            sse_body(gemini_stream_of(&second, 9)),
        ],
    )
    .await;
    let tool = CountingTool::lookup_order();
    let config = triage(GEMINI, &server.uri())
        .tools(ToolRegistry::new().with(tool.clone()))
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(tool.seen(), [json!({"order_id": "A-1001"})]);
    assert_eq!(result.usage.input_tokens, 2520 + 611);
    assert_eq!(result.usage.output_tokens, 61 + 93 + 72);
    assert_eq!(result.usage.cache_read_tokens, 2048);
    let (started, finished) = call_names(&events);
    assert_eq!(started, ["lookup_order", "submit_output"]);
    assert_eq!(finished, ["lookup_order", "submit_output"]);
    assert_eq!(partials(&events).last(), Some(&answer()));
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "I'll look up that order first.");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::ReasoningDelta { .. }))
    );
    // Both requests asked for the event stream; the second sends the call back with its
    // thought signature.
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    for request in &sent {
        assert_eq!(request.url.query(), Some("alt=sse"));
        assert_eq!(header(request, "accept"), Some("text/event-stream"));
    }
    let body: Value = serde_json::from_slice(&sent[1].body).unwrap();
    let call = &body["contents"][1]["parts"][1];
    assert_eq!(call["functionCall"]["name"], "lookup_order");
    assert_eq!(
        call["thoughtSignature"],
        "CiQBVKhc7qL3l5nZ8k0Y4ms6dTqC2x1JcXnUe0H8yY6o2cKk1Q=="
    );
}

#[tokio::test]
async fn c61_gemini_streams_native_answers_blocks_cuts_and_errors_as_typed_outcomes() {
    // Native output mode: the JSON answer streamed as text, previewed.
    let native: Value = serde_json::from_str(&fixture("gemini/native.json")).unwrap();
    let server = serve(GEMINI_STREAM, vec![sse_body(gemini_stream_of(&native, 11))]).await;
    let config = triage(GEMINI, &server.uri())
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(partials(&events).last(), Some(&answer()));
    // A safety stop and a blocked prompt: refused after one request.
    for file in ["safety.json", "blocked_prompt.json"] {
        let body: Value = serde_json::from_str(&fixture(&format!("gemini/{file}"))).unwrap();
        let server = serve(GEMINI_STREAM, vec![sse_body(gemini_stream_of(&body, 5))]).await;
        let config = triage(GEMINI, &server.uri()).build().unwrap();
        let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
        assert_eq!(result.category(), Some("refused"), "{file}");
        let error = result.outcome.unwrap_err();
        assert!(
            matches!(
                &error,
                AgentError::Refused {
                    stop_reason: StopReason::ContentFilter,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(requests(&server).await.len(), 1);
    }
    // A stream cut before its finish reason, and an error chunk: transient, retried.
    let whole = gemini_stream_of(&native, 11);
    let cut = whole[..whole.rfind("data:").unwrap()].to_owned();
    let overloaded = "data: {\"error\": {\"code\": 503, \"message\": \"The model is overloaded.\", \"status\": \"UNAVAILABLE\"}}\r\n\r\n";
    let server = serve(
        GEMINI_STREAM,
        vec![
            sse_body(cut),
            sse_body(overloaded.to_owned()),
            sse_body(whole),
        ],
    )
    .await;
    let config = triage(GEMINI, &server.uri())
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let retried = retries(&events);
    assert_eq!(retried.len(), 2, "{retried:?}");
    assert!(retried[0].contains("cut mid-way"), "{}", retried[0]);
    assert!(retried[1].contains("UNAVAILABLE"), "{}", retried[1]);
    // A permanent error chunk is not retried.
    let invalid = "data: {\"error\": {\"code\": 400, \"message\": \"Invalid JSON payload.\", \"status\": \"INVALID_ARGUMENT\"}}\r\n\r\n";
    let server = serve(GEMINI_STREAM, vec![sse_body(invalid.to_owned())]).await;
    let config = triage(GEMINI, &server.uri()).build().unwrap();
    let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert_eq!(result.category(), Some("llm_permanent_error"));
    assert_eq!(requests(&server).await.len(), 1);
}
