//! The providers' own tool search (`ToolSearch::prefer_native`) over wiremock: the
//! Anthropic request (the `tool_search_tool_bm25_20251119` tool, `defer_loading`, the
//! beta header) and the OpenAI Responses one (`tool_search`); a provider search that
//! reveals a tool the model then calls, the run's revealed set and trace event, the
//! search blocks sent back unchanged; the search counted as a tool call; a reference to
//! no tool of the config; a fallback to a wire without a native search, and a resume
//! on one, going on with the local search and the revealed set; other routes (a
//! compatible server, a Claude model before 4.5) using the local search.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use agent_core::config::ToolSearch;
use agent_core::durable::{Decisions, resume_agent_with};
use agent_core::observe::RunEvent;
use agent_core::providers::ProviderOptions;
use agent_core::store::{CheckpointStore, InMemoryCheckpoints, TraceEvent};
use agent_core::tool::{ToolDefinition, ToolFuture};
use agent_core::{AgentConfigBuilder, Ending, RunOptions, Tool, ToolContext, run_agent_with};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

use crate::tool_search::LastTrace;

const ANTHROPIC_PATH: &str = "/v1/messages";
const RESPONSES_PATH: &str = "/v1/responses";
const CHAT_PATH: &str = "/v1/chat/completions";

/// A shop tool that counts its runs.
#[derive(Clone)]
struct Shop {
    name: &'static str,
    description: &'static str,
    runs: Arc<AtomicU32>,
}

impl Shop {
    fn runs(&self) -> u32 {
        self.runs.load(Ordering::SeqCst)
    }
}

impl Tool for Shop {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name,
            self.description,
            json!({"type": "object", "properties": {"order_id": {"type": "string"}},
                   "required": ["order_id"]}),
        )
    }

    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            self.runs.fetch_add(1, Ordering::SeqCst);
            Ok(format!("{} done", self.name))
        })
    }
}

/// `lookup_order` (always-on in these tests), `refund_order`, `cancel_order`,
/// `get_weather`.
fn shop() -> Vec<Shop> {
    [
        ("lookup_order", "Look up an order by its id."),
        ("refund_order", "Refund an order, fully or in part."),
        ("cancel_order", "Cancel an order that has not shipped."),
        ("get_weather", "The weather forecast for a city."),
    ]
    .into_iter()
    .map(|(name, description)| Shop {
        name,
        description,
        runs: Arc::default(),
    })
    .collect()
}

fn with_shop(
    mut builder: AgentConfigBuilder<Triage>,
    tools: &[Shop],
) -> AgentConfigBuilder<Triage> {
    for tool in tools {
        builder = builder.tool(tool.clone());
    }
    builder.tool_search(
        ToolSearch::bm25()
            .always_on(["lookup_order"])
            .prefer_native(),
    )
}

/// A reveal: the LLM call, the tools.
type Reveal = (u32, Vec<String>);

/// The reveals the run's observer saw.
#[derive(Clone, Default)]
struct Reveals(Arc<Mutex<Vec<Reveal>>>);

impl Reveals {
    fn observer(&self) -> impl Fn(&RunEvent<'_>) + Send + Sync + 'static {
        let seen = Arc::clone(&self.0);
        move |event| {
            if let RunEvent::ToolsRevealed {
                llm_call, tools, ..
            } = event
            {
                seen.lock().unwrap().push((*llm_call, tools.to_vec()));
            }
        }
    }

    fn get(&self) -> Vec<Reveal> {
        self.0.lock().unwrap().clone()
    }
}

/// A server answering each request on `path` with the next of `replies` (the last one
/// repeats).
async fn serve(path: &str, replies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    let n = replies.len();
    for (i, reply) in replies.into_iter().enumerate() {
        mount_post(&server, path, reply, (i + 1 < n).then_some(1)).await;
    }
    server
}

/// The answer of [`expected_triage`], as the model sends it.
fn answer() -> Value {
    json!({"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."})
}

// ---- Anthropic ----------------------------------------------------------------------

fn anthropic(content: Value, stop: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_ts", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": content, "stop_reason": stop,
        "usage": {"input_tokens": 40, "output_tokens": 12}
    }))
}

/// The model's search (as the docs show it) and its result, referencing `names`.
fn search_blocks(names: &[&str]) -> Vec<Value> {
    let references: Vec<Value> = names
        .iter()
        .map(|n| json!({"type": "tool_reference", "tool_name": n}))
        .collect();
    vec![
        json!({"type": "server_tool_use", "id": "srvtoolu_01", "name": "tool_search_tool_bm25",
               "input": {"query": "refund an order"}}),
        json!({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_01",
               "content": {"type": "tool_search_tool_search_result",
                           "tool_references": references}}),
    ]
}

/// A turn that searches (revealing `names`), then calls `refund_order`.
fn anthropic_search_then_refund(names: &[&str]) -> ResponseTemplate {
    let mut content = vec![json!({"type": "text", "text": "Let me find a tool."})];
    content.extend(search_blocks(names));
    content.push(
        json!({"type": "tool_use", "id": "toolu_refund", "name": "refund_order",
                        "input": {"order_id": "A-1"}}),
    );
    anthropic(Value::Array(content), "tool_use")
}

fn anthropic_submit() -> ResponseTemplate {
    anthropic(
        json!([{"type": "tool_use", "id": "toolu_submit", "name": "submit_output",
                "input": answer()}]),
        "tool_use",
    )
}

/// `(name, deferred)` of each entry of a request's `tools` but the first.
fn deferral(body: &Value) -> Vec<(String, bool)> {
    body["tools"].as_array().unwrap()[1..]
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t.get("defer_loading") == Some(&json!(true)),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, bool)]) -> Vec<(String, bool)> {
    expected
        .iter()
        .map(|(n, d)| ((*n).to_owned(), *d))
        .collect()
}

#[tokio::test]
async fn anthropic_search_reveals_a_tool_the_model_calls_and_its_blocks_go_back_unchanged() {
    let server = serve(
        ANTHROPIC_PATH,
        vec![
            anthropic_search_then_refund(&["refund_order"]),
            anthropic_submit(),
        ],
    )
    .await;
    let tools = shop();
    let reveals = Reveals::default();
    let traces = LastTrace::default();
    let config = with_shop(triage("claude-sonnet-4-5", &server.uri()), &tools)
        .observer(reveals.observer())
        .trace_store(traces.clone())
        .build()
        .unwrap();
    let result = run_agent_with(&config, "Refund A-1", RunOptions::new()).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(tools[1].runs(), 1, "refund_order ran");
    // The provider's search and the refund: two tool calls (the answer is none).
    assert_eq!(result.usage.tool_calls, 2);
    assert_eq!(result.usage.llm_calls, 2);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    for request in &sent {
        assert_eq!(
            header(request, "anthropic-beta"),
            Some("advanced-tool-use-2025-11-20")
        );
    }
    let bodies = bodies(&server).await;
    // The search tool first, every tool after it: the searchable ones deferred, the
    // always-on one and submit_output not; no local `search_tools`.
    assert_eq!(
        bodies[0]["tools"][0],
        json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"})
    );
    let first = pairs(&[
        ("lookup_order", false),
        ("refund_order", true),
        ("cancel_order", true),
        ("get_weather", true),
        ("submit_output", false),
    ]);
    assert_eq!(deferral(&bodies[0]), first);
    assert_eq!(
        bodies[0]["tools"][2],
        json!({"name": "refund_order", "description": "Refund an order, fully or in part.",
               "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}},
                                "required": ["order_id"]},
               "defer_loading": true})
    );
    assert!(!bodies[0].to_string().contains("search_tools"));
    // The second request: refund_order still deferred (the reference sent back loads
    // it), and the turn's blocks back unchanged, after its text... before the call.
    assert_eq!(deferral(&bodies[1]), first);
    let mut turn = search_blocks(&["refund_order"]);
    turn.push(json!({"type": "text", "text": "Let me find a tool."}));
    turn.push(
        json!({"type": "tool_use", "id": "toolu_refund", "name": "refund_order",
                     "input": {"order_id": "A-1"}}),
    );
    assert_eq!(
        bodies[1]["messages"][1],
        json!({"role": "assistant", "content": turn})
    );
    assert_eq!(
        bodies[1]["messages"][2]["content"][0]["tool_use_id"],
        "toolu_refund"
    );

    // The revealed set: the event and the trace's event, as the local search's.
    assert_eq!(reveals.get(), [(1, vec!["refund_order".to_owned()])]);
    assert_eq!(
        trace_reveals(&traces),
        [(1, vec!["refund_order".to_owned()])]
    );
}

/// The `ToolsRevealed` events of the last trace: (llm call, tools).
fn trace_reveals(traces: &LastTrace) -> Vec<Reveal> {
    let trace = traces.0.lock().unwrap().clone().unwrap();
    trace
        .events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::ToolsRevealed {
                llm_call, tools, ..
            } => Some((*llm_call, tools.clone())),
            _ => None,
        })
        .collect()
}

/// The run's revealed set in its (paused) checkpoint.
async fn checkpointed_reveals(store: &InMemoryCheckpoints, run_id: &str) -> Value {
    let saved = store.load(run_id).await.unwrap().unwrap();
    let saved: Value = serde_json::from_str(&saved.state).unwrap();
    saved["state"]["revealed"].clone()
}

#[tokio::test]
async fn a_streamed_anthropic_search_is_read_as_a_plain_one() {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_s", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
            "usage": {"input_tokens": 30, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {
            "type": "server_tool_use", "id": "srvtoolu_01", "name": "tool_search_tool_bm25",
            "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
               "partial_json": "{\"query\": \"refund an order\"}"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": search_blocks(&["refund_order"])[1]}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {
            "type": "tool_use", "id": "toolu_refund", "name": "refund_order", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta",
               "partial_json": "{\"order_id\": \"A-1\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
               "usage": {"output_tokens": 20}}),
        json!({"type": "message_stop"}),
    ];
    let body: String = events
        .drain(..)
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    let streamed = ResponseTemplate::new(200).set_body_raw(body, "text/event-stream");
    let server = serve(ANTHROPIC_PATH, vec![streamed, anthropic_submit()]).await;
    let tools = shop();
    let reveals = Reveals::default();
    let config = with_shop(triage("claude-sonnet-4-5", &server.uri()), &tools)
        .observer(reveals.observer())
        .build()
        .unwrap();
    let mut stream = agent_core::run_agent_stream(&config, "Refund A-1");
    let mut result = None;
    while let Some(event) = stream.next().await {
        if let agent_core::stream::StreamEvent::Finished(r) = event {
            result = Some(*r);
        }
    }
    let result = result.unwrap();
    assert_eq!(tools[1].runs(), 1, "{:?}", result.outcome);
    assert_eq!(reveals.get(), [(1, vec!["refund_order".to_owned()])]);
    let bodies = bodies(&server).await;
    assert_eq!(
        bodies[1]["messages"][1]["content"],
        json!([search_blocks(&["refund_order"])[0], search_blocks(&["refund_order"])[1],
               {"type": "tool_use", "id": "toolu_refund", "name": "refund_order",
                "input": {"order_id": "A-1"}}])
    );
}

#[tokio::test]
async fn a_provider_search_counts_toward_max_tool_calls() {
    let server = serve(
        ANTHROPIC_PATH,
        vec![
            anthropic_search_then_refund(&["refund_order"]),
            anthropic_submit(),
        ],
    )
    .await;
    let tools = shop();
    let config = with_shop(triage("claude-sonnet-4-5", &server.uri()), &tools)
        .max_tool_calls(1)
        .build()
        .unwrap();
    let result = run_agent_with(&config, "Refund A-1", RunOptions::new()).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    // The search took the one tool call: the refund in its turn is refused.
    assert_eq!(tools[1].runs(), 0);
    assert_eq!(result.usage.tool_calls, 1);
    let bodies = bodies(&server).await;
    let refused = &bodies[1]["messages"][2]["content"][0];
    assert_eq!(refused["tool_use_id"], "toolu_refund");
    assert_eq!(refused["is_error"], true);
    assert!(
        refused["content"]
            .as_str()
            .unwrap()
            .starts_with("Not executed: the tool call limit (1) is reached."),
        "{refused}"
    );
}

#[tokio::test]
async fn a_reference_to_no_tool_of_the_config_is_ignored() {
    let server = serve(
        ANTHROPIC_PATH,
        vec![
            anthropic_search_then_refund(&["delete_everything", "refund_order"]),
            anthropic_submit(),
        ],
    )
    .await;
    let tools = shop();
    let reveals = Reveals::default();
    let traces = LastTrace::default();
    let config = with_shop(triage("claude-sonnet-4-5", &server.uri()), &tools)
        .observer(reveals.observer())
        .trace_store(traces.clone())
        .build()
        .unwrap();
    let result = run_agent_with(&config, "Refund A-1", RunOptions::new()).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(tools[1].runs(), 1);
    assert_eq!(reveals.get(), [(1, vec!["refund_order".to_owned()])]);
    assert_eq!(
        trace_reveals(&traces),
        [(1, vec!["refund_order".to_owned()])]
    );
    // The blocks still go back as they came, the unknown name included.
    let bodies = bodies(&server).await;
    assert_eq!(
        bodies[1]["messages"][1]["content"][1],
        search_blocks(&["delete_everything", "refund_order"])[1]
    );
}

// ---- fallback and resume --------------------------------------------------------------

fn chat_submit() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "backup",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "c_submit",
            "type": "function", "function": {"name": "submit_output",
            "arguments": answer().to_string()}}]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
    }))
}

/// The function names a chat completions request offered, in order.
fn chat_offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_fallback_to_a_wire_without_native_search_goes_on_locally_with_the_revealed_set() {
    let claude = MockServer::start().await;
    mount_post(
        &claude,
        ANTHROPIC_PATH,
        anthropic_search_then_refund(&["refund_order"]),
        Some(1),
    )
    .await;
    let overloaded = ResponseTemplate::new(529).set_body_json(json!({"type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}}));
    mount_post(&claude, ANTHROPIC_PATH, overloaded, None).await;
    let backup = serve(CHAT_PATH, vec![chat_submit()]).await;
    let tools = shop();
    let reveals = Reveals::default();
    let config = with_shop(triage("claude-sonnet-4-5", &claude.uri()), &tools)
        .observer(reveals.observer())
        .fallback_model_with(
            "dispatch/backup",
            ProviderOptions::default()
                .with_api_key(KEY)
                .with_base_url(format!("{}/v1", backup.uri())),
        )
        .build()
        .unwrap();
    let result = run_agent_with(&config, "Refund A-1", RunOptions::new()).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(tools[1].runs(), 1);
    let sent = bodies(&backup).await;
    assert_eq!(sent.len(), 1);
    // The local search: the always-on and revealed tools, search_tools, the answer.
    assert_eq!(
        chat_offered(&sent[0]),
        [
            "lookup_order",
            "refund_order",
            "search_tools",
            "submit_output"
        ]
    );
    let text = sent[0].to_string();
    assert!(!text.contains("defer_loading"), "{text}");
    assert!(!text.contains("tool_search_tool"), "{text}");
    assert!(!text.contains("srvtoolu_01"), "{text}");
    // Claude's first call, then its three tries of the second (max_llm_retries 3).
    assert_eq!(requests(&claude).await.len(), 4);
    assert_eq!(reveals.get(), [(1, vec!["refund_order".to_owned()])]);
}

// A fallback from Claude to another Claude model: the first model's search blocks are
// dropped at the switch, so the tool they revealed goes loaded (not deferred) and the
// model can call it without searching again; the others stay deferred.
#[tokio::test]
async fn after_a_switch_the_revealed_tool_goes_loaded_to_a_native_fallback() {
    let sonnet = MockServer::start().await;
    mount_post(
        &sonnet,
        ANTHROPIC_PATH,
        anthropic_search_then_refund(&["refund_order"]),
        Some(1),
    )
    .await;
    let overloaded = ResponseTemplate::new(529).set_body_json(json!({"type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}}));
    mount_post(&sonnet, ANTHROPIC_PATH, overloaded, None).await;
    let opus = serve(ANTHROPIC_PATH, vec![anthropic_submit()]).await;
    let tools = shop();
    let config = with_shop(triage("claude-sonnet-4-5", &sonnet.uri()), &tools)
        .fallback_model_with(
            "claude-opus-4-5",
            ProviderOptions::default()
                .with_api_key(KEY)
                .with_base_url(opus.uri()),
        )
        .build()
        .unwrap();
    let result = run_agent_with(&config, "Refund A-1", RunOptions::new()).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let sent = bodies(&opus).await;
    assert_eq!(
        sent[0]["tools"][0]["type"],
        "tool_search_tool_bm25_20251119"
    );
    assert_eq!(
        deferral(&sent[0]),
        pairs(&[
            ("lookup_order", false),
            ("refund_order", false),
            ("cancel_order", true),
            ("get_weather", true),
            ("submit_output", false),
        ])
    );
    let text = sent[0]["messages"].to_string();
    assert!(!text.contains("srvtoolu_01"), "{text}");
    assert!(text.contains("toolu_refund"), "{text}");
}

// A run on Claude pauses for approval of the tool its provider search revealed; it is
// resumed by a config on a compatible server: the provider's blocks stay out of that
// wire's requests, and the local search offers the revealed tool.
#[tokio::test]
async fn a_run_resumed_on_a_wire_without_native_search_keeps_the_revealed_set() {
    let claude = serve(
        ANTHROPIC_PATH,
        vec![anthropic_search_then_refund(&["refund_order"])],
    )
    .await;
    let backup = serve(CHAT_PATH, vec![chat_submit()]).await;
    let tools = shop();
    let store = InMemoryCheckpoints::new();
    let make = |model: &str, base: String| {
        with_shop(triage(model, &base), &tools)
            .approval(|call, _| call.name == "refund_order")
            .checkpoints(store.clone())
            .build()
            .unwrap()
    };
    let paused = run_agent_with(
        &make("claude-sonnet-4-5", claude.uri()),
        "Refund A-1",
        RunOptions::new().run_id("p1"),
    )
    .await;
    assert_eq!(paused.ending(), Ending::Paused, "{:?}", paused.outcome);
    // The run's state holds the tool the provider's search revealed.
    assert_eq!(
        checkpointed_reveals(&store, "p1").await,
        json!(["refund_order"])
    );
    let resumed = resume_agent_with(
        &make("dispatch/backup", format!("{}/v1", backup.uri())),
        "p1",
        Decisions::new().approve("toolu_refund"),
    )
    .await
    .unwrap();
    assert_eq!(resumed.outcome, Ok(expected_triage()));
    assert_eq!(tools[1].runs(), 1);
    let sent = bodies(&backup).await;
    assert_eq!(
        chat_offered(&sent[0]),
        [
            "lookup_order",
            "refund_order",
            "search_tools",
            "submit_output"
        ]
    );
    let text = sent[0].to_string();
    assert!(!text.contains("tool_search_tool"), "{text}");
    assert!(!text.contains("defer_loading"), "{text}");
}

// ---- OpenAI Responses -----------------------------------------------------------------

fn responses(output: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "resp_ts", "object": "response", "status": "completed", "model": "gpt-5.4",
        "output": output,
        "usage": {"input_tokens": 60, "output_tokens": 15, "total_tokens": 75}
    }))
}

/// The model's search and its output (as the guide shows them), loading refund_order.
fn responses_search_items() -> Vec<Value> {
    vec![
        json!({"id": "tsc_01", "type": "tool_search_call", "status": "completed",
               "arguments": {"query": "refund an order"}, "call_id": null,
               "execution": "server"}),
        json!({"id": "tso_01", "type": "tool_search_output", "status": "completed",
               "call_id": null, "execution": "server", "tools": [{"type": "function",
               "name": "refund_order", "description": "Refund an order, fully or in part.",
               "defer_loading": true, "strict": false, "parameters": {"type": "object",
               "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}]}),
    ]
}

fn function_call(call_id: &str, name: &str, arguments: &Value) -> Value {
    json!({"id": format!("fc_{call_id}"), "type": "function_call", "status": "completed",
           "call_id": call_id, "name": name, "arguments": arguments.to_string()})
}

#[tokio::test]
async fn openai_responses_search_reveals_a_tool_and_its_items_go_back_unchanged() {
    let mut first = responses_search_items();
    first.push(function_call(
        "call_refund",
        "refund_order",
        &json!({"order_id": "A-1"}),
    ));
    let server = serve(
        RESPONSES_PATH,
        vec![
            responses(Value::Array(first)),
            responses(json!([function_call(
                "call_submit",
                "submit_output",
                &answer()
            )])),
        ],
    )
    .await;
    let tools = shop();
    let reveals = Reveals::default();
    let config = with_shop(
        triage("openai-responses/gpt-5.4", &format!("{}/v1", server.uri())),
        &tools,
    )
    .observer(reveals.observer())
    .build()
    .unwrap();
    let result = run_agent_with(&config, "Refund A-1", RunOptions::new()).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(tools[1].runs(), 1);
    assert_eq!(result.usage.tool_calls, 2);
    assert_eq!(reveals.get(), [(1, vec!["refund_order".to_owned()])]);
    let bodies = bodies(&server).await;
    assert_eq!(bodies[0]["tools"][0], json!({"type": "tool_search"}));
    let first = pairs(&[
        ("lookup_order", false),
        ("refund_order", true),
        ("cancel_order", true),
        ("get_weather", true),
        ("submit_output", false),
    ]);
    assert_eq!(deferral(&bodies[0]), first);
    assert_eq!(
        bodies[0]["tools"][2],
        json!({"type": "function", "name": "refund_order",
               "description": "Refund an order, fully or in part.",
               "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                              "required": ["order_id"]},
               "strict": false, "defer_loading": true})
    );
    assert!(!bodies[0].to_string().contains("search_tools"));
    assert_eq!(deferral(&bodies[1]), first);
    // The input: the user's message, the two search items as they came, the call and
    // its output.
    let input = bodies[1]["input"].as_array().unwrap();
    let items = responses_search_items();
    assert_eq!(input[1], items[0]);
    assert_eq!(input[2], items[1]);
    assert_eq!(input[3]["type"], "function_call");
    assert_eq!(input[3]["call_id"], "call_refund");
    assert_eq!(input[4]["type"], "function_call_output");
    assert_eq!(input.len(), 5);
}

// ---- routes without a native search ----------------------------------------------------

#[tokio::test]
async fn routes_without_a_native_search_use_the_local_one() {
    // A compatible server, and a Claude model older than 4.5 on the Anthropic wire.
    let compatible = serve(CHAT_PATH, vec![chat_submit()]).await;
    let tools = shop();
    let config = with_shop(
        triage("dispatch/m", &format!("{}/v1", compatible.uri())),
        &tools,
    )
    .build()
    .unwrap();
    let result = run_agent_with(&config, "Refund A-1", RunOptions::new()).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let sent = bodies(&compatible).await;
    assert_eq!(
        chat_offered(&sent[0]),
        ["lookup_order", "search_tools", "submit_output"]
    );
    assert!(!sent[0].to_string().contains("defer_loading"));

    let old = serve(ANTHROPIC_PATH, vec![anthropic_submit()]).await;
    let config = with_shop(triage("claude-sonnet-4-20250514", &old.uri()), &tools)
        .build()
        .unwrap();
    let result = run_agent_with(&config, "Refund A-1", RunOptions::new()).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let sent = requests(&old).await;
    assert_eq!(header(&sent[0], "anthropic-beta"), None);
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lookup_order", "search_tools", "submit_output"]);
    assert!(!body.to_string().contains("defer_loading"));
}
