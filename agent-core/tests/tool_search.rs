//! Tool search (`ToolSearch`, deferred tool loading) against an OpenAI-compatible fake
//! server: the first request offers only `search_tools` and the always-on tools; a
//! search reveals its matches for every later request; a resumed run keeps them; the
//! trace records each reveal; a search that finds nothing, a call to a tool not
//! revealed and bad configs each have their answer. And the measurement of the docs:
//! input tokens per call with 200 MCP-like tools, with and without tool search.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use agent_core::config::{Backoff, SEARCH_TOOLS, ToolSearch};
use agent_core::durable::{Decisions, resume_agent_with};
use agent_core::providers::ProviderOptions;
use agent_core::store::{InMemoryCheckpoints, StoreFuture, TraceEvent, TraceRecord, TraceStore};
use agent_core::tool::{ToolDefinition, ToolFuture};
use agent_core::{
    AgentConfig, AgentConfigBuilder, ConfigError, Ending, OutputMode, RunOptions, Tool,
    ToolContext, run_agent, run_agent_with,
};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::common::{Triage, valid};

/// A tool as an MCP server lists them: a name, a sentence or two, a few described
/// parameters. Counts its executions.
#[derive(Clone)]
struct McpLike {
    definition: ToolDefinition,
    calls: Arc<AtomicU32>,
}

impl McpLike {
    fn new(name: &str, description: &str, params: &[(&str, &str)]) -> Self {
        let properties: serde_json::Map<String, Value> = params
            .iter()
            .map(|(p, d)| ((*p).to_owned(), json!({"type": "string", "description": d})))
            .collect();
        let required: Vec<&str> = params.iter().take(1).map(|(p, _)| *p).collect();
        Self {
            definition: ToolDefinition::new(
                name,
                description,
                json!({"type": "object", "properties": properties, "required": required}),
            ),
            calls: Arc::default(),
        }
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Tool for McpLike {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(format!("{} done", self.definition.name))
        })
    }
}

/// A shop's tools: `lookup_order` (kept always-on in most tests), `refund_order`,
/// `create_issue`, `get_weather`.
fn shop() -> Vec<McpLike> {
    vec![
        McpLike::new(
            "lookup_order",
            "Look up an order by its id.",
            &[("order_id", "Like NW-10231.")],
        ),
        McpLike::new(
            "refund_order",
            "Refund an order, fully or in part.",
            &[("order_id", "The order."), ("amount", "USD.")],
        ),
        McpLike::new(
            "create_issue",
            "Create an issue in a repository.",
            &[("repo", "owner/name"), ("title", "The title.")],
        ),
        McpLike::new(
            "get_weather",
            "The weather forecast for a city.",
            &[("city", "The city.")],
        ),
    ]
}

/// 200 tools as 20 MCP servers of 10 tools each list them (GitHub-, Slack-, Jira-like):
/// a name, a description of one or two sentences and four described parameters.
fn two_hundred() -> Vec<McpLike> {
    const SERVERS: [&str; 20] = [
        "github",
        "slack",
        "jira",
        "sentry",
        "grafana",
        "linear",
        "notion",
        "stripe",
        "shopify",
        "zendesk",
        "salesforce",
        "hubspot",
        "gdrive",
        "gmail",
        "calendar",
        "postgres",
        "s3",
        "datadog",
        "pagerduty",
        "confluence",
    ];
    const ACTIONS: [(&str, &str); 10] = [
        (
            "create",
            "Create a new {o} in {s}. Returns the created {o} with its id and URL.",
        ),
        (
            "get",
            "Get one {o} from {s} by its id, with every field and its current state.",
        ),
        (
            "list",
            "List the {o}s in {s} that match the filters, newest first, one page at a time.",
        ),
        (
            "update",
            "Update the fields of an existing {o} in {s}; fields left out are unchanged.",
        ),
        (
            "delete",
            "Delete a {o} from {s}. This cannot be undone; prefer archiving when you can.",
        ),
        (
            "search",
            "Search the {o}s in {s} by free text over their titles and bodies.",
        ),
        (
            "comment",
            "Add a comment to a {o} in {s}, as the connected account.",
        ),
        (
            "assign",
            "Assign a {o} in {s} to a person of the workspace, by user id or email.",
        ),
        (
            "archive",
            "Archive a {o} in {s}: hidden from lists, kept for audits.",
        ),
        (
            "export",
            "Export the {o}s of {s} matching the filters as CSV or JSON.",
        ),
    ];
    let mut tools = Vec::new();
    for s in SERVERS {
        for (verb, text) in ACTIONS {
            let object = "record";
            let description = text.replace("{o}", object).replace("{s}", s);
            tools.push(McpLike::new(
                &format!("{s}_{verb}_{object}"),
                &description,
                &[
                    ("id", "The record's id, as the server returns it."),
                    (
                        "workspace",
                        "The workspace or organization the record belongs to.",
                    ),
                    (
                        "fields",
                        "The fields to set or return, as a JSON object of name to value.",
                    ),
                    (
                        "page_token",
                        "The token of the page to read, from the previous call.",
                    ),
                ],
            ));
        }
    }
    tools
}

/// An OpenAI-compatible server whose reply is the script's step for the number of
/// assistant messages in the request (each step: the turn's tool calls), with no usage
/// (so the runner counts the library's own estimate of each request).
struct Script(Vec<Vec<(&'static str, &'static str, Value)>>);

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let turn = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        let calls: Vec<Value> = self.0[turn.min(self.0.len() - 1)]
            .iter()
            .map(|(id, name, arguments)| {
                json!({"id": id, "type": "function", "function": {
                    "name": name, "arguments": arguments.to_string()}})
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({
            "id": format!("chatcmpl-{turn}"),
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null, "tool_calls": calls}}]
        }))
    }
}

async fn server(script: Vec<Vec<(&'static str, &'static str, Value)>>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Script(script))
        .mount(&server)
        .await;
    server
}

fn config(server: &MockServer, tools: &[McpLike]) -> AgentConfigBuilder<Triage> {
    let mut builder = AgentConfig::<Triage>::builder("shop")
        .model("dispatch/m")
        .provider(
            ProviderOptions::default()
                .with_base_url(format!("{}/v1", server.uri()))
                .with_api_key("sk-test"),
        )
        .output_mode(OutputMode::Tool)
        .backoff(Backoff::none());
    for tool in tools {
        builder = builder.tool(tool.clone());
    }
    builder
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// The tool names a captured request offered, in order.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The content of the tool result answering `call_id` in a captured request.
fn tool_result(body: &Value, call_id: &str) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no result for {call_id}: {body}"))
}

fn search(id: &'static str, query: &str) -> (&'static str, &'static str, Value) {
    (id, SEARCH_TOOLS, json!({ "query": query }))
}

#[tokio::test]
async fn only_the_search_tool_and_always_on_tools_are_offered_until_a_search_reveals_more() {
    let server = server(vec![
        vec![search("s1", "refund an order")],
        vec![("c1", "refund_order", json!({"order_id": "A-1"}))],
        vec![("c2", "submit_output", valid())],
    ])
    .await;
    let tools = shop();
    let config = config(&server, &tools)
        .tool_search(
            ToolSearch::bm25()
                .max_results(1)
                .always_on(["lookup_order"]),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "Refund order A-1").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    assert_eq!(
        offered(&bodies[0]),
        ["lookup_order", "search_tools", "submit_output"]
    );
    // Revealed by the search: offered in every later call, in the config's order.
    let after = [
        "lookup_order",
        "refund_order",
        "search_tools",
        "submit_output",
    ];
    assert_eq!(offered(&bodies[1]), after);
    assert_eq!(offered(&bodies[2]), after);
    assert_eq!(
        tool_result(&bodies[1], "s1"),
        "Found 1 tools for \"refund an order\"; you can call them from now on:\n\
         - refund_order: Refund an order, fully or in part."
    );
    assert_eq!(tools[1].calls(), 1);
    // The search counts as a tool call, as the refund does.
    assert_eq!(result.usage.tool_calls, 2);
}

#[tokio::test]
async fn a_search_that_matches_nothing_answers_with_a_note_and_the_run_goes_on() {
    let server = server(vec![
        vec![search("s1", "quantum teleportation")],
        vec![("c2", "submit_output", valid())],
    ])
    .await;
    let config = config(&server, &shop())
        .tool_search(ToolSearch::bm25())
        .build()
        .unwrap();
    let result = run_agent(&config, "Teleport me").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let bodies = bodies(&server).await;
    assert_eq!(
        tool_result(&bodies[1], "s1"),
        "No tool matches \"quantum teleportation\". Search again with other words: what \
         the tool does, or what it works on. 4 tools can be found; some of them: \
         lookup_order, refund_order, create_issue, get_weather."
    );
    let message = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert!(!message.to_string().contains("error"), "{message}");
    assert_eq!(offered(&bodies[1]), ["search_tools", "submit_output"]);
}

#[tokio::test]
async fn a_call_to_a_tool_not_revealed_or_to_no_tool_is_answered_as_unknown_and_never_runs() {
    let server = server(vec![
        vec![
            ("c1", "refund_order", json!({"order_id": "A-1"})),
            ("c2", "teleport", json!({})),
        ],
        vec![("c3", "submit_output", valid())],
    ])
    .await;
    let tools = shop();
    let config = config(&server, &tools)
        .tool_search(ToolSearch::bm25())
        .build()
        .unwrap();
    let result = run_agent(&config, "Refund order A-1").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(
        tools[1].calls(),
        0,
        "a deferred tool never runs before a search"
    );
    let bodies = bodies(&server).await;
    let hint = " Other tools are listed only once search_tools finds them: call it with \
                words for what you need, then call the tool it lists.";
    assert_eq!(
        tool_result(&bodies[1], "c1"),
        format!(
            "Error: Unknown tool \"refund_order\". The available tools are: search_tools, \
             submit_output.{hint}"
        )
    );
    assert_eq!(
        tool_result(&bodies[1], "c2"),
        format!(
            "Error: Unknown tool \"teleport\". The available tools are: search_tools, \
             submit_output.{hint}"
        )
    );
}

/// A trace store that keeps the last trace (`tool_search_native` uses it too).
#[derive(Clone, Default)]
pub(crate) struct LastTrace(pub(crate) Arc<Mutex<Option<TraceRecord>>>);

impl TraceStore for LastTrace {
    fn record_trace<'a>(&'a self, trace: &'a TraceRecord) -> StoreFuture<'a, ()> {
        *self.0.lock().unwrap() = Some(trace.clone());
        Box::pin(async { Ok(()) })
    }

    fn trace<'a>(&'a self, _trace_id: &'a str) -> StoreFuture<'a, Option<TraceRecord>> {
        let trace = self.0.lock().unwrap().clone();
        Box::pin(async move { Ok(trace) })
    }

    fn flush(&self) -> StoreFuture<'_, u64> {
        Box::pin(async { Ok(0) })
    }
}

// A run pauses for approval of a revealed tool; resumed by another "process" (a new
// config over the same checkpoint store), its next request still offers the revealed
// tool. The trace holds the reveal.
#[tokio::test]
async fn a_resumed_run_keeps_the_revealed_tools_and_the_trace_has_the_reveal() {
    let server = server(vec![
        vec![search("s1", "refund order")],
        vec![("c2", "refund_order", json!({"order_id": "A-1"}))],
        vec![("c3", "submit_output", valid())],
    ])
    .await;
    let tools = shop();
    let store = InMemoryCheckpoints::new();
    let traces = LastTrace::default();
    let make = || {
        config(&server, &tools)
            .tool_search(
                ToolSearch::bm25()
                    .max_results(2)
                    .always_on(["lookup_order"]),
            )
            .approval(|call, _| call.name == "refund_order")
            .checkpoints(store.clone())
            .trace_store(traces.clone())
            .build()
            .unwrap()
    };
    let paused = run_agent_with(&make(), "Refund A-1", RunOptions::new().run_id("r1")).await;
    assert_eq!(paused.ending(), Ending::Paused, "{:?}", paused.outcome);
    let trace = traces.0.lock().unwrap().clone().unwrap();
    let reveals: Vec<(u32, Vec<String>)> = trace
        .events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::ToolsRevealed {
                llm_call, tools, ..
            } => Some((*llm_call, tools.clone())),
            _ => None,
        })
        .collect();
    // "refund order": refund_order first; list-like order tools next (lookup_order is
    // always-on, so not searchable).
    assert_eq!(reveals, [(1, vec!["refund_order".to_owned()])]);
    assert_eq!(tools[1].calls(), 0);
    let resumed = resume_agent_with(&make(), "r1", Decisions::new().approve("c2"))
        .await
        .unwrap();
    assert!(resumed.outcome.is_ok(), "{:?}", resumed.outcome);
    assert_eq!(tools[1].calls(), 1);
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 3, "two calls before the pause, one after");
    assert_eq!(
        offered(&bodies[2]),
        [
            "lookup_order",
            "refund_order",
            "search_tools",
            "submit_output"
        ]
    );
}

#[test]
fn tool_search_without_tools_to_find_or_with_bad_settings_is_a_config_error() {
    let build = |tools: Vec<McpLike>, search: ToolSearch| {
        let mut builder = AgentConfig::<Triage>::builder("shop")
            .model("dispatch/m")
            .provider(
                ProviderOptions::default()
                    .with_base_url("http://127.0.0.1:9/v1")
                    .with_api_key("sk-test"),
            )
            .tool_search(search);
        for tool in tools {
            builder = builder.tool(tool);
        }
        builder.build().map(|_| ()).unwrap_err()
    };
    let setting = |e: ConfigError| match e {
        ConfigError::InvalidSetting { setting, value, .. } => (setting, value),
        other => panic!("{other:?}"),
    };
    // No tool at all, and every tool always-on: nothing to find.
    assert_eq!(
        setting(build(Vec::new(), ToolSearch::bm25())),
        ("tool_search", "0 tools, all always-on".to_owned())
    );
    let one = || shop().into_iter().take(1).collect::<Vec<_>>();
    assert_eq!(
        setting(build(one(), ToolSearch::bm25().always_on(["lookup_order"]))),
        ("tool_search", "1 tools, all always-on".to_owned())
    );
    assert_eq!(
        setting(build(shop(), ToolSearch::bm25().always_on(["lookup"]))),
        ("tool_search", "always_on(\"lookup\")".to_owned())
    );
    assert_eq!(
        setting(build(shop(), ToolSearch::bm25().max_results(0))),
        ("tool_search", "max_results(0)".to_owned())
    );
    let mut taken = shop();
    taken.push(McpLike::new(SEARCH_TOOLS, "Mine.", &[("q", "query")]));
    assert!(matches!(
        build(taken, ToolSearch::bm25()),
        ConfigError::ReservedToolName { name } if name == SEARCH_TOOLS
    ));
}

/// The search tool counts toward `max_tool_calls`: past the cap it is answered with the
/// limit's correction and reveals nothing.
#[tokio::test]
async fn searches_count_toward_max_tool_calls() {
    let server = server(vec![
        vec![search("s1", "refund order"), search("s2", "weather")],
        vec![("c3", "submit_output", valid())],
    ])
    .await;
    let config = config(&server, &shop())
        .tool_search(ToolSearch::bm25().max_results(1))
        .max_tool_calls(1)
        .build()
        .unwrap();
    let result = run_agent(&config, "Refund A-1").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let bodies = bodies(&server).await;
    assert!(
        tool_result(&bodies[1], "s2").starts_with("Error: Not executed: the tool call limit (1)"),
        "{}",
        tool_result(&bodies[1], "s2")
    );
    assert_eq!(
        offered(&bodies[1]),
        ["refund_order", "search_tools", "submit_output"]
    );
    assert_eq!(result.usage.tool_calls, 1);
}

/// One run of `tools` on the script, with or without tool search: the library's own
/// estimate of each request's input tokens (the server reports no usage, so the runner
/// counts its estimate, `LlmRequest::estimated_input_tokens`), and the request bytes.
async fn measure(
    tools: &[McpLike],
    search: bool,
    script: Vec<Vec<(&'static str, &'static str, Value)>>,
) -> (u64, u32, Vec<usize>) {
    let server = server(script).await;
    let mut builder = config(&server, tools);
    if search {
        builder = builder.tool_search(ToolSearch::bm25());
    }
    let result = run_agent(
        &builder.build().unwrap(),
        "Comment on Jira record PRJ-7: done",
    )
    .await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(result.usage.estimated_llm_calls, result.usage.llm_calls);
    let sizes = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body.len())
        .collect();
    (result.usage.input_tokens, result.usage.llm_calls, sizes)
}

// The numbers of docs/loop.md ("Tool search") and the README:
// cargo test -p agent-core --test integration tool_search::measured -- --nocapture
#[tokio::test]
async fn measured_input_tokens_per_call_with_200_mcp_like_tools() {
    let tools = two_hundred();
    let call = ("c1", "jira_comment_record", json!({"id": "PRJ-7"}));
    let answer = ("c2", "submit_output", valid());
    let (plain, plain_calls, plain_bytes) = measure(
        &tools,
        false,
        vec![vec![call.clone()], vec![answer.clone()]],
    )
    .await;
    let (searched, searched_calls, searched_bytes) = measure(
        &tools,
        true,
        vec![
            vec![search("s1", "comment on a jira record")],
            vec![call],
            vec![answer],
        ],
    )
    .await;
    println!(
        "200 MCP-like tools, OpenAI-compatible wire, library estimate (bytes / 4):\n\
         without tool search: {plain} input tokens in {plain_calls} calls ({} per call), \
         request bytes {plain_bytes:?}\n\
         with tool search:    {searched} input tokens in {searched_calls} calls ({} per call), \
         request bytes {searched_bytes:?}",
        plain / u64::from(plain_calls),
        searched / u64::from(searched_calls),
    );
    assert_eq!((plain_calls, searched_calls), (2, 3));
    // The search found the tool: it ran in both runs.
    assert_eq!(tools[26].definition.name, "jira_comment_record");
    assert_eq!(tools[26].calls(), 2);
    // The search costs one more call and still sends far fewer tokens in all.
    assert!(searched * 10 < plain, "{searched} vs {plain}");
    assert!(searched_bytes[0] * 20 < plain_bytes[0]);
}
