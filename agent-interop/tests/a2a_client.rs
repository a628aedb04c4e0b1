//! Remote A2A agents as tools: against the official A2A Python SDK (a2a-sdk 1.3.0) as
//! the server, against this crate's own server, and against servers that never answer
//! or answer garbage.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Stdio;
use std::time::Duration;

use agent_core::durable::{Decisions, InMemoryCheckpoints, resume_agent_with};
use agent_core::testing::TestModel;
use agent_core::tool::StateMap;
use agent_core::{AgentConfig, AgentError, RunOptions, Tool, ToolContext, run_agent_with};
use agent_interop::a2a::{A2aAgent, A2aServer};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{self, Triage, approving, serve};

/// The SDK's test server in `mode`; kills it on drop.
struct SdkServer {
    child: tokio::process::Child,
    url: String,
}

impl SdkServer {
    async fn start(python: &str, mode: &str) -> SdkServer {
        let mut child = tokio::process::Command::new(python)
            .arg(common::script("a2a_server.py"))
            .arg(mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the SDK server did not start in a minute")
            .unwrap()
            .unwrap();
        let port = line.strip_prefix("PORT ").unwrap().trim().to_owned();
        let url = format!("http://127.0.0.1:{port}/");
        // Listening once the card answers.
        for _ in 0..100 {
            let card = reqwest::get(format!("{url}.well-known/agent-card.json")).await;
            if card.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        SdkServer { child, url }
    }
}

impl Drop for SdkServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn context() -> ToolContext {
    ToolContext::for_test("remote", StateMap::new())
}

/// A parent agent on the test model that calls `tool` once, then answers.
fn parent(tool: impl Tool) -> AgentConfig<Triage> {
    AgentConfig::<Triage>::builder("dispatch")
        .llm(TestModel::new().calling_tools_first())
        .tool(tool)
        .checkpoints(InMemoryCheckpoints::new())
        .build()
        .unwrap()
}

fn tool_result(result: &agent_core::AgentResult<Triage>, tool: &str) -> String {
    result
        .transcript
        .iter()
        .filter_map(|m| match m {
            agent_core::llm::Message::Tool { results } => Some(results),
            _ => None,
        })
        .flatten()
        .filter(|r| r.name == tool)
        .map(|r| r.content.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sdk_agent_answers_as_a_tool() {
    let Some(python) = common::python() else {
        return;
    };
    let server = SdkServer::start(&python, "answer").await;
    let tool = A2aAgent::new(&server.url)
        .name("echo")
        .as_tool("remote", "Echoes.");
    let out = tool
        .call(json!({"input": "Where is NW-10231?"}), context())
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"echo": "Where is NW-10231?"})
    );

    let config = parent(A2aAgent::new(&server.url).as_tool("remote", "Echoes."));
    let result = run_agent_with(&config, "ticket", RunOptions::new()).await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let seen: Value = serde_json::from_str(&tool_result(&result, "remote")).unwrap();
    assert!(seen["echo"].is_string(), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sdk_agents_question_pauses_the_run_and_the_reply_resumes_it() {
    let Some(python) = common::python() else {
        return;
    };
    let server = SdkServer::start(&python, "input").await;
    let config = parent(
        A2aAgent::new(&server.url)
            .name("orders")
            .as_tool("remote", "Asks."),
    );
    let paused = run_agent_with(&config, "ticket", RunOptions::new().run_id("parent-1")).await;
    let Err(AgentError::Paused { pending, .. }) = &paused.outcome else {
        panic!("not paused: {:?}", paused.outcome);
    };
    assert_eq!(pending.len(), 1);
    let call = &pending[0];
    assert!(call.call_id.ends_with("/reply"), "{call:?}");
    assert_eq!(call.arguments, json!({"question": "Which order?"}));
    assert_eq!(call.via[0].agent, "orders");
    assert_eq!(call.via[0].tool, "remote");

    let decisions = Decisions::new().result(&call.call_id, json!("NW-10231"));
    let resumed = resume_agent_with(&config, "parent-1", decisions)
        .await
        .unwrap();
    assert!(resumed.outcome.is_ok(), "{:?}", resumed.outcome);
    assert_eq!(tool_result(&resumed, "remote"), "got: NW-10231");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_inside_a_remote_agent_core_agent_pauses_and_resumes_the_caller() {
    let remote = serve(A2aServer::new(approving(None)).router()).await;
    let config = parent(
        A2aAgent::new(&remote)
            .name("refunds")
            .as_tool("refunds", "Refunds."),
    );
    let paused = run_agent_with(&config, "ticket", RunOptions::new().run_id("parent-2")).await;
    let Err(AgentError::Paused { pending, .. }) = &paused.outcome else {
        panic!("not paused: {:?}", paused.outcome);
    };
    // The remote run's own pending call, under this run's call id.
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool, "refund");
    assert_eq!(pending[0].via[0].agent, "refunds");
    assert!(pending[0].call_id.contains('/'), "{:?}", pending[0]);

    let decisions = Decisions::new().approve(&pending[0].call_id);
    let resumed = resume_agent_with(&config, "parent-2", decisions)
        .await
        .unwrap();
    assert!(resumed.outcome.is_ok(), "{:?}", resumed.outcome);
    let value: Value = serde_json::from_str(&tool_result(&resumed, "refunds")).unwrap();
    assert!(value["severity"].is_number(), "{value}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_agent_that_never_answers_is_bounded_by_the_deadline() {
    let Some(python) = common::python() else {
        return;
    };
    let server = SdkServer::start(&python, "hang").await;
    let agent = A2aAgent::new(&server.url).name("slow");
    let tool = agent.as_tool("remote", "Never answers.");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let error = tool
        .call(json!({"input": "hello"}), context().with_deadline(deadline))
        .await
        .unwrap_err();
    let message = error.message();
    assert!(
        message.contains("the remote agent slow could not be reached: no answer within"),
        "{message}"
    );
    let ms: u64 = message
        .rsplit("within ")
        .next()
        .unwrap()
        .trim_end_matches(" ms")
        .parse()
        .unwrap();
    assert!(ms <= 1800, "{message}");
}

/// A server that answers every POST with `body` (content type `kind`, HTTP `status`).
async fn garbage(status: u16, kind: &'static str, body: &'static str) -> String {
    let router = axum::Router::new().route(
        "/",
        post(move || async move {
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                [(axum::http::header::CONTENT_TYPE, kind)],
                body,
            )
        }),
    );
    serve(router).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_answers_are_tool_errors() {
    let cases = [
        (200, "application/json", "hello", "not JSON"),
        (
            200,
            "application/json",
            "{\"jsonrpc\": \"2.0\", \"id\": 1}",
            "without a result",
        ),
        (
            200,
            "application/json",
            "{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {}}",
            "an empty stream event",
        ),
        (
            200,
            "application/json",
            "{\"jsonrpc\": \"2.0\", \"id\": 1, \"error\": {\"code\": -32601, \"message\": \"no\"}}",
            "JSON-RPC error -32601",
        ),
        (
            200,
            "text/event-stream",
            "data: {\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {\"statusUpdate\": {\"taskId\": \"t\", \"status\": {\"state\": \"BOGUS\"}}}}\n\n",
            "not a stream event",
        ),
        (200, "text/event-stream", "data: [1, 2\n\n", "not JSON"),
        (
            200,
            "text/event-stream",
            "data: {\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {\"task\": {\"id\": 5}}}\n\n",
            "not a stream event",
        ),
        (
            200,
            "text/event-stream",
            ": nothing\n\n",
            "the stream ended without a task",
        ),
        (500, "text/plain", "boom", "HTTP 500"),
    ];
    for (status, kind, body, says) in cases {
        let url = garbage(status, kind, body).await;
        let tool = A2aAgent::new(&url)
            .name("bad")
            .as_tool("remote", "Garbage.");
        let error = tool
            .call(json!({"input": "hi"}), context())
            .await
            .unwrap_err();
        assert!(
            error.message().contains(says),
            "{body}: {}",
            error.message()
        );
        assert!(!error.is_fatal());
    }
    // Nothing listening.
    let tool = A2aAgent::new("http://127.0.0.1:9/").as_tool("remote", "Gone.");
    let error = tool
        .call(json!({"input": "hi"}), context())
        .await
        .unwrap_err();
    assert!(
        error.message().contains("the request failed"),
        "{}",
        error.message()
    );
}
