//! The AG-UI event stream of a run, validated against the official AG-UI types
//! (ag-ui-protocol 1.0.0's pydantic models), and the approvals a front end answers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Stdio;

use agent_core::AgentConfig;
use agent_core::testing::ScriptedModel;
use agent_interop::ag_ui::AgUiServer;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::common::{self, Triage, approving, serve};

/// POSTs `input` and reads the SSE events to the end.
async fn run(url: &str, input: &Value) -> Vec<Value> {
    let text = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .body(input.to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.split("\n\n")
        .filter_map(|block| block.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

fn input(thread: &str, run: &str, text: &str) -> Value {
    json!({
        "threadId": thread,
        "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": text}],
    })
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// Every event validates as the AG-UI `Event` union, with no member the schema lacks.
async fn validate(events: &[Value]) {
    let Some(python) = common::python() else {
        return;
    };
    let mut child = tokio::process::Command::new(python)
        .arg(common::script("ag_ui_validate.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines: String = events.iter().map(|e| format!("{e}\n")).collect();
    stdin.write_all(lines.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let verdicts: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(verdicts.len(), events.len());
    for (event, verdict) in events.iter().zip(&verdicts) {
        assert_eq!(verdict["ok"], event["type"], "{event}: {verdict}");
    }
}

/// A model that writes text (a malformed turn in tool mode: it is corrected), then
/// calls `lookup_order`, then submits.
fn chatty() -> AgentConfig<Triage> {
    let model = ScriptedModel::new()
        .text("Let me look that order up.")
        .tool_call("lookup_order", json!({"order_id": "NW-10231"}))
        .submit(json!({"queue": "shipping", "severity": 2}));
    AgentConfig::<Triage>::builder("triage")
        .llm(model)
        .tools(common::order_tools())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streams_valid_ag_ui_events() {
    let url = serve(AgUiServer::new(chatty()).router()).await;
    let events = run(&url, &input("t1", "r1", "Where is NW-10231?")).await;
    let kinds = types(&events);
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"));
    assert_eq!(events[0]["threadId"], "t1");
    assert_eq!(events[0]["runId"], "r1");
    assert_eq!(events[0]["protocolVersion"], "1.0");
    // The text, opened and closed around its content.
    let start = kinds
        .iter()
        .position(|k| *k == "TEXT_MESSAGE_START")
        .unwrap();
    assert_eq!(kinds[start + 1], "TEXT_MESSAGE_CONTENT");
    let id = &events[start]["messageId"];
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT" && e["messageId"] == *id)
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Let me look that order up.");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "TEXT_MESSAGE_END" && e["messageId"] == *id)
    );
    // The tool call: start, args, end, result, with one id.
    let call = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_START")
        .unwrap();
    assert_eq!(call["toolCallName"], "lookup_order");
    let call_id = &call["toolCallId"];
    let args = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_ARGS")
        .unwrap();
    assert_eq!(args["toolCallId"], *call_id);
    assert_eq!(
        serde_json::from_str::<Value>(args["delta"].as_str().unwrap()).unwrap(),
        json!({"order_id": "NW-10231"})
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "TOOL_CALL_END" && e["toolCallId"] == *call_id)
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT")
        .unwrap();
    assert_eq!(result["toolCallId"], *call_id);
    assert_eq!(result["content"], "NW-10231: shipped");
    // The typed output: snapshots, then the finish with the value.
    let snapshot = events
        .iter()
        .rev()
        .find(|e| e["type"] == "STATE_SNAPSHOT")
        .unwrap();
    assert_eq!(
        snapshot["snapshot"],
        json!({"queue": "shipping", "severity": 2})
    );
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED");
    assert_eq!(last["outcome"], json!({"type": "success"}));
    assert_eq!(last["result"], json!({"queue": "shipping", "severity": 2}));
    validate(&events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_an_interrupt_and_the_front_ends_answer_resumes_the_run() {
    let url = serve(AgUiServer::new(approving(None)).router()).await;
    let first = run(&url, &input("t2", "r1", "Refund NW-10231.")).await;
    let last = first.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED", "{first:?}");
    assert_eq!(last["outcome"]["type"], "interrupt");
    let interrupt = &last["outcome"]["interrupts"][0];
    assert_eq!(interrupt["reason"], "approval");
    assert_eq!(interrupt["metadata"]["tool"], "refund");
    assert_eq!(interrupt["toolCallId"], interrupt["id"]);
    let id = interrupt["id"].as_str().unwrap();

    let mut answer = input("t2", "r2", "");
    answer["resume"] =
        json!([{"interruptId": id, "status": "resolved", "payload": {"decision": "approve"}}]);
    let second = run(&url, &answer).await;
    assert_eq!(second[0]["type"], "RUN_STARTED");
    assert_eq!(second[0]["runId"], "r2");
    let result = second
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT")
        .unwrap();
    assert_eq!(result["content"], "refunded example");
    let last = second.last().unwrap();
    assert_eq!(last["outcome"], json!({"type": "success"}), "{second:?}");
    assert!(last["result"]["severity"].is_number());

    // The thread has no paused run any more: a resume is refused, typed.
    let response = reqwest::Client::new()
        .post(&url)
        .body(answer.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert!(response.text().await.unwrap().contains("has no paused run"));
    let mut all = first;
    all.extend(second);
    validate(&all).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_is_a_run_error_and_bad_input_is_refused() {
    let failing = AgentConfig::<Triage>::builder("triage")
        .llm(ScriptedModel::new().fail(agent_core::llm::LlmError::permanent("the model is gone")))
        .build()
        .unwrap();
    let url = serve(AgUiServer::new(failing).max_body_bytes(2048).router()).await;
    let events = run(&url, &input("t3", "r1", "hi")).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{events:?}");
    let code = last["code"].as_str().unwrap();
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{code}: "))
    );
    validate(&events).await;

    let client = reqwest::Client::new();
    let cases = [
        ("{not json".to_owned(), 400, "not a RunAgentInput"),
        (json!({"threadId": "t"}).to_string(), 400, "not a RunAgentInput"),
        (json!({"threadId": "t", "runId": "r", "messages": []}).to_string(), 400, "no user message"),
        (json!({"threadId": "t", "runId": "r", "messages": [], "resume": [{"interruptId": "x", "status": "resolved"}]}).to_string(), 400, "no paused run"),
        (format!("{{\"threadId\": \"{}\"}}", "x".repeat(3000)), 413, "larger than 2048 bytes"),
    ];
    for (body, status, says) in cases {
        let response = client.post(&url).body(body.clone()).send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{body:.60}");
        let text = response.text().await.unwrap();
        assert!(text.contains(says), "{body:.60}: {text}");
    }
    // Still serving.
    let again = run(&url, &input("t3", "r2", "hi")).await;
    assert_eq!(again[0]["type"], "RUN_STARTED");
}
