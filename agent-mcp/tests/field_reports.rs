//! Field reports about MCP servers (docs/cases.md, round 3): a server whose tool list
//! changes during a run (C36), and a slow tool that reports progress (C37). The tests'
//! MCP server (`common::TestServer`) is served over streamable HTTP in-process on
//! 127.0.0.1:0.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::store::InMemoryCheckpoints;
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentError, RunOptions, ToolContext, ToolRegistry,
    llm::LlmRequest,
    resume_agent, run_agent, run_agent_with,
    tool::{StateMap, ToolSource},
};
use agent_mcp::{McpServer, McpTools};
use common::{Answer, Changes, TestServer, results_of};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Serves `server` (one clone per session) on 127.0.0.1:0 until `cancel`; its URL.
async fn serve(server: TestServer, cancel: &CancellationToken) -> String {
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(None)
        .with_cancellation_token(cancel.child_token());
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let shutdown = cancel.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
            .await;
    });
    url
}

/// A server whose `swap` changes its tools; the pause lets the notification, which
/// streamable HTTP sends on the session's GET stream, arrive before the call's result
/// (stdio.rs has the same case with no pause: there both share one stream).
fn changing() -> (TestServer, Arc<Changes>) {
    let changes = Arc::new(Changes {
        settle: Duration::from_millis(300),
        ..Changes::default()
    });
    let server = TestServer {
        page_size: 3,
        exit_tool: false,
        changes: Some(Arc::clone(&changes)),
    };
    (server, changes)
}

fn offered(request: &LlmRequest) -> Vec<String> {
    request.tools.iter().map(|d| d.name.clone()).collect()
}

fn config(model: &ScriptedModel, tools: ToolRegistry) -> AgentConfig<Answer> {
    AgentConfig::builder("mcp-field-reports")
        .llm(model.clone())
        .tools(tools)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c36_a_changed_tool_list_is_offered_from_the_next_llm_call_and_a_removed_tool_is_unknown() {
    let cancel = CancellationToken::new();
    let (server, changes) = changing();
    let url = serve(server, &cancel).await;
    let mcp = McpServer::http(&url)
        .prefix("live")
        .connect()
        .await
        .unwrap();
    let names: Vec<String> = mcp.names().collect();
    assert!(names.contains(&"live_old_tool".to_owned()), "{names:?}");
    assert!(!names.contains(&"live_new_tool".to_owned()), "{names:?}");
    let model = ScriptedModel::new()
        .tool_call("live_swap", json!({}))
        .tool_call("live_old_tool", json!({}))
        .tool_call("live_new_tool", json!({}))
        .submit(json!({"summary": "swapped"}));
    let config = config(&model, mcp.registry());
    let result = run_agent(&config, "swap the tools").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "swapped");
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    let first = offered(&requests[0]);
    assert!(first.contains(&"live_old_tool".to_owned()), "{first:?}");
    assert!(!first.contains(&"live_new_tool".to_owned()), "{first:?}");
    // Every LLM call after the swap offers the new list: new_tool, not old_tool.
    let after = offered(&requests[1]);
    let mut expected = first.clone();
    let at = expected.iter().position(|n| n == "live_old_tool").unwrap();
    expected[at] = "live_new_tool".to_owned();
    assert_eq!(after, expected);
    assert_eq!(offered(&requests[2]), expected);
    assert_eq!(offered(&requests[3]), expected);
    assert_eq!(results_of(&requests, 1)[0].content, "swapped");
    // The removed tool is answered by the runner as unknown, never sent to the server.
    let removed = &results_of(&requests, 2)[0];
    assert!(removed.is_error);
    assert_eq!(
        removed.content,
        format!(
            "Unknown tool \"live_old_tool\". The available tools are: {}.",
            after.join(", ")
        )
    );
    let added = &results_of(&requests, 3)[0];
    assert_eq!(
        (added.content.as_str(), added.is_error),
        ("new_tool ran", false)
    );
    assert_eq!(changes.calls(), ["swap", "new_tool"]);
    // The handle shows the list as last read; the config's frozen view is build time's.
    assert!(mcp.names().any(|n| n == "live_new_tool"));
    assert!(
        config
            .tool_definitions()
            .iter()
            .any(|d| d.name == "live_old_tool")
    );
    // A second run of the same config starts with the new list.
    let again = ScriptedModel::new().submit(json!({"summary": "again"}));
    let second = config.with_(|b| b.llm(again.clone())).unwrap();
    let result = run_agent(&second, "again").await;
    assert_eq!(result.outcome.unwrap().summary, "again");
    assert_eq!(offered(&again.requests()[0]), expected);
    mcp.close();
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c36_a_durable_run_whose_mcp_tools_changed_resumes_without_a_config_mismatch() {
    let cancel = CancellationToken::new();
    let (server, changes) = changing();
    let url = serve(server, &cancel).await;
    let store = InMemoryCheckpoints::new();
    let build = |model: &ScriptedModel, mcp: &McpTools| -> AgentConfig<Answer> {
        AgentConfig::builder("mcp-durable")
            .llm(model.clone())
            .tools(mcp.registry())
            .checkpoints(store.clone())
            .build()
            .unwrap()
    };
    let mcp = McpServer::http(&url)
        .prefix("live")
        .connect()
        .await
        .unwrap();
    let model = ScriptedModel::new()
        .tool_call("live_swap", json!({}))
        .submit(json!({"summary": "swapped"}));
    let options = RunOptions::new().run_id("c36-durable");
    let result = run_agent_with(&build(&model, &mcp), "swap", options).await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "swapped");
    assert_eq!(changes.calls(), ["swap"]);
    // Another process connects after the change: its config lists new_tool, not
    // old_tool. The checkpoint records plain tools only, so the resume is no mismatch.
    let later = McpServer::http(&url)
        .prefix("live")
        .connect()
        .await
        .unwrap();
    assert!(later.names().any(|n| n == "live_new_tool"));
    let unused = ScriptedModel::new();
    let resumed = resume_agent(&build(&unused, &later), "c36-durable")
        .await
        .unwrap();
    assert_eq!(resumed.outcome.unwrap().summary, "swapped");
    assert!(unused.requests().is_empty());
    mcp.close();
    later.close();
    cancel.cancel();
}

/// A connection whose calls wait at most 2 s without progress.
async fn slow_server(cancel: &CancellationToken) -> McpTools {
    let server = TestServer {
        page_size: 10,
        exit_tool: false,
        changes: None,
    };
    let url = serve(server, cancel).await;
    McpServer::http(url)
        .prefix("p")
        .call_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_progress_every_half_second_keeps_a_4s_call_alive_under_a_2s_call_timeout() {
    let cancel = CancellationToken::new();
    let mcp = slow_server(&cancel).await;
    let model = ScriptedModel::new()
        .tool_call("p_slow", json!({"ms": 4000, "every_ms": 500}))
        .submit(json!({"summary": "done"}));
    let started = Instant::now();
    let result = run_agent(&config(&model, mcp.registry()), "wait").await;
    let took = started.elapsed();
    assert_eq!(result.outcome.as_ref().unwrap().summary, "done");
    let answered = &results_of(&model.requests(), 1)[0];
    assert_eq!(
        (answered.content.as_str(), answered.is_error),
        ("done after 7 progress notifications", false)
    );
    assert!(took >= Duration::from_secs(4), "{took:?}");
    mcp.close();
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_a_call_that_sends_no_progress_still_times_out_at_the_call_timeout() {
    let cancel = CancellationToken::new();
    let mcp = slow_server(&cancel).await;
    let model = ScriptedModel::new()
        .tool_call("p_slow", json!({"ms": 4000, "every_ms": 0}))
        .submit(json!({"summary": "gave up"}));
    let started = Instant::now();
    let result = run_agent(&config(&model, mcp.registry()), "wait").await;
    let took = started.elapsed();
    assert_eq!(result.outcome.as_ref().unwrap().summary, "gave up");
    let answered = &results_of(&model.requests(), 1)[0];
    assert!(answered.is_error);
    assert!(
        answered
            .content
            .contains("did not answer within 2000 ms (and sent no progress for that long)"),
        "{}",
        answered.content
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_millis(3900),
        "{took:?}"
    );
    mcp.close();
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_progress_cannot_extend_a_call_past_the_run_deadline() {
    let cancel = CancellationToken::new();
    let mcp = slow_server(&cancel).await;
    // The tool itself: its context's deadline (3 s) ends the wait that progress keeps
    // extending past the 2 s call timeout, a second before the tool would finish.
    let snapshot = mcp.snapshot();
    let slow = snapshot
        .tools
        .iter()
        .find(|t| t.definition().name == "p_slow")
        .unwrap();
    let started = Instant::now();
    let context = ToolContext::for_test("p_slow", StateMap::new())
        .with_deadline(tokio::time::Instant::now() + Duration::from_secs(3));
    let error = slow
        .call(json!({"ms": 4000, "every_ms": 500}), context)
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        error
            .message()
            .ends_with("did not answer before the run's deadline"),
        "{}",
        error.message()
    );
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_millis(3900),
        "{took:?}"
    );
    // A run with a 3 s deadline ends with deadline_exceeded, not with the 4 s result.
    let model = ScriptedModel::new()
        .tool_call("p_slow", json!({"ms": 4000, "every_ms": 500}))
        .submit(json!({"summary": "too late"}));
    let config = config(&model, mcp.registry())
        .with_(|b| b.deadline(Duration::from_secs(3)))
        .unwrap();
    let started = Instant::now();
    let result = run_agent(&config, "wait").await;
    let took = started.elapsed();
    assert!(
        matches!(result.outcome, Err(AgentError::DeadlineExceeded { .. })),
        "{:?}",
        result.outcome
    );
    assert!(took < Duration::from_millis(3900), "{took:?}");
    assert_eq!(model.requests().len(), 1);
    mcp.close();
    cancel.cancel();
}
