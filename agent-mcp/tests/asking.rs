//! A server that asks the client during a tool call: sampling (`sampling/createMessage`)
//! and elicitation (`elicitation/create`), against the official MCP Python SDK's server
//! (`tests/python/asking_server.py`, stdio), driven by runs on scripted models.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use agent_core::llm::{LlmResponse, Message, TokenUsage};
use agent_core::testing::ScriptedModel;
use agent_core::{AgentConfig, run_agent};
use agent_mcp::{Elicitation, McpSampling, McpServer, McpTools};
use serde_json::{Value, json};

use crate::common::served::python;
use crate::common::{Answer, results_of};

fn server(python: &std::path::Path) -> McpServer {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/asking_server.py");
    let mut command = tokio::process::Command::new(python);
    command.arg(script);
    McpServer::stdio(command)
}

/// A scripted turn with these tokens.
fn turn(response: LlmResponse, input: u64, output: u64) -> LlmResponse {
    response.with_usage(TokenUsage::new(input, output))
}

/// The JSON object the tool answered call `index` (0-based turn) with: the SDK sends
/// a `str` result as `structuredContent` `{"result": "..."}`, and the tool's text is
/// that JSON.
fn answered(model: &ScriptedModel, index: usize) -> (Value, bool) {
    let results = results_of(&model.requests(), index + 1);
    let result = &results[0];
    let structured: Value = serde_json::from_str(&result.content).unwrap();
    let text = structured["result"].as_str().unwrap();
    (serde_json::from_str(text).unwrap(), result.is_error)
}

fn config(model: &ScriptedModel, tools: &McpTools) -> AgentConfig<Answer> {
    AgentConfig::builder("asking")
        .llm(model.clone())
        .tools(tools.registry())
        .build()
        .unwrap()
}

/// What the client declared at the handshake, as the server saw it.
async fn declared(tools: &McpTools) -> Value {
    let model = ScriptedModel::new()
        .tool_call("capabilities", json!({}))
        .submit(json!({"summary": "seen"}));
    let result = run_agent(&config(&model, tools), "capabilities").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "seen");
    answered(&model, 0).0
}

/// The main model calls `summarize` once, then submits; each turn 100 in, 10 out.
fn summarizing_model() -> ScriptedModel {
    let model = ScriptedModel::new();
    let call = model.call("summarize", json!({"text": "A long story about a cat."}));
    let submit = model.call("submit_output", json!({"summary": "done"}));
    model
        .respond(turn(LlmResponse::tool_calls(vec![call]), 100, 10))
        .respond(turn(LlmResponse::tool_calls(vec![submit]), 100, 10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_is_answered_by_the_allowed_model_and_counted_in_the_run() {
    let Some(python) = python() else { return };
    let sampler =
        ScriptedModel::new().respond(turn(LlmResponse::text("A cat's long story."), 30, 7));
    let tools = server(&python)
        .sampling(McpSampling::model("sampler-1").llm(sampler.clone()))
        .connect()
        .await
        .unwrap();
    assert_eq!(
        declared(&tools).await,
        json!({"sampling": {}, "elicitation": {"form": {}}, "protocol_version": "2026-07-28"})
    );
    let model = summarizing_model();
    let result = run_agent(&config(&model, &tools), "summarize").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "done");
    let (answer, is_error) = answered(&model, 0);
    assert!(!is_error);
    assert_eq!(
        answer,
        json!({"role": "assistant", "model": "sampler-1", "stop_reason": "endTurn",
            "text": "A cat's long story."})
    );
    // What the sampling model was sent: the system prompt, the earlier turns as a
    // transcript, the last message as the input, the request's max tokens.
    let sent = sampler.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].max_tokens, 64);
    assert_eq!(sent[0].model, "sampler-1");
    assert_eq!(
        sent[0].system.as_deref().unwrap_or_default(),
        "Summarize in five words.\n\nThe conversation so far:\nuser: Earlier question\n\
         assistant: Earlier answer"
    );
    match &sent[0].messages[0] {
        Message::User { content, .. } => assert_eq!(content, "A long story about a cat."),
        other => panic!("expected the user's text, got {other:?}"),
    }
    // Its usage is the run's: two turns of 100/10 and the sampling call's 30/7.
    let usage = &result.usage;
    assert_eq!(usage.children.len(), 1);
    let child = &usage.children[0];
    assert_eq!(child.tool, "mcp_sampling");
    assert_eq!(child.agent, "mcp-sampling");
    assert_eq!(child.call_id, "call_1");
    assert_eq!(child.ending, "answered");
    assert_eq!(
        (child.usage.input_tokens, child.usage.output_tokens),
        (30, 7)
    );
    assert_eq!((usage.input_tokens, usage.output_tokens), (230, 27));
    tools.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_is_refused_by_default() {
    let Some(python) = python() else { return };
    let tools = server(&python).connect().await.unwrap();
    assert_eq!(
        declared(&tools).await,
        json!({"sampling": null, "elicitation": {"form": {}}, "protocol_version": "2026-07-28"})
    );
    let model = summarizing_model();
    let result = run_agent(&config(&model, &tools), "summarize").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "done");
    let (answer, _) = answered(&model, 0);
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("sampling is not allowed by this client"),
        "{answer}"
    );
    assert!(result.usage.children.is_empty());
    assert_eq!(result.usage.input_tokens, 200);
    tools.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_answers_are_sent_after_the_schema_check() {
    let Some(python) = python() else { return };
    let answers = Arc::new(Mutex::new(VecDeque::from([
        Elicitation::Accept(json!({"date": "2026-12-24", "guests": 4})),
        Elicitation::Decline,
        Elicitation::Cancel,
        // `guests` must be at least 1, and a number: sent as a decline.
        Elicitation::Accept(json!({"date": "2026-12-24", "guests": "four"})),
    ])));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (queue, seen) = (Arc::clone(&answers), Arc::clone(&asked));
    let tools = server(&python)
        .elicitation(move |message: String, schema: Value| {
            seen.lock().unwrap().push((message, schema));
            let answer = queue
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Elicitation::Cancel);
            async move { answer }
        })
        .connect()
        .await
        .unwrap();
    assert_eq!(
        declared(&tools).await,
        json!({"sampling": null, "elicitation": {"form": {}}, "protocol_version": "2026-07-28"})
    );
    let model = ScriptedModel::new();
    let mut script = model.clone();
    for _ in 0..4 {
        script = script.tool_call("book", json!({}));
    }
    let model = script.submit(json!({"summary": "booked"}));
    let result = run_agent(&config(&model, &tools), "book a table").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "booked");
    let got: Vec<Value> = (0..4).map(|i| answered(&model, i).0).collect();
    assert_eq!(
        got,
        [
            json!({"action": "accept", "data": {"date": "2026-12-24", "guests": 4}}),
            json!({"action": "decline"}),
            json!({"action": "cancel"}),
            json!({"action": "decline"}),
        ]
    );
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 4);
    let (message, schema) = &asked[0];
    assert_eq!(message, "Which day, and for how many?");
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["guests"]["type"], "integer");
    assert_eq!(schema["properties"]["guests"]["minimum"], 1);
    tools.close();
}

/// The Python server over streamable HTTP, killed on drop.
struct HttpServer(std::process::Child);

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the Python server on a free port and connects to it with `configure` applied,
/// retrying while it starts (bounded at 30 s).
async fn over_http(
    python: &std::path::Path,
    configure: impl Fn(McpServer) -> McpServer,
) -> (HttpServer, McpTools) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/asking_server.py");
    let child = std::process::Command::new(python)
        .arg(script)
        .args(["--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let guard = HttpServer(child);
    let url = format!("http://127.0.0.1:{port}/mcp");
    for _ in 0..300 {
        match configure(McpServer::http(&url)).connect().await {
            Ok(tools) => return (guard, tools),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
    panic!("the Python MCP server did not start at {url}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_and_elicitation_over_streamable_http() {
    let Some(python) = python() else { return };
    let sampler = ScriptedModel::new().respond(turn(LlmResponse::text("Short."), 30, 7));
    let handle = sampler.clone();
    let (_server, tools) = over_http(&python, move |server| {
        server
            .sampling(McpSampling::model("sampler-1").llm(handle.clone()))
            .elicitation(|_, _| async {
                Elicitation::Accept(json!({"date": "2027-01-01", "guests": 2}))
            })
    })
    .await;
    let model = ScriptedModel::new();
    let calls = [
        model.call("summarize", json!({"text": "A long story about a cat."})),
        model.call("book", json!({})),
        model.call("submit_output", json!({"summary": "done"})),
    ];
    let [summarize, book, submit] = calls;
    let model = model
        .respond(turn(LlmResponse::tool_calls(vec![summarize]), 100, 10))
        .respond(turn(LlmResponse::tool_calls(vec![book]), 100, 10))
        .respond(turn(LlmResponse::tool_calls(vec![submit]), 100, 10));
    let result = run_agent(&config(&model, &tools), "summarize and book").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "done");
    assert_eq!(
        answered(&model, 0).0,
        json!({"role": "assistant", "model": "sampler-1", "stop_reason": "endTurn",
            "text": "Short."})
    );
    assert_eq!(
        answered(&model, 1).0,
        json!({"action": "accept", "data": {"date": "2027-01-01", "guests": 2}})
    );
    assert_eq!(result.usage.children.len(), 1);
    assert_eq!(
        (result.usage.input_tokens, result.usage.output_tokens),
        (330, 37)
    );
    tools.close();
}
