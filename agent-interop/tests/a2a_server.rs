//! The A2A server against the official A2A Python SDK (a2a-sdk 1.3.0) as its client,
//! and against bad input.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agent_interop::a2a::A2aServer;
use serde_json::{Value, json};

use crate::common::{self, Place, answering, approving, sdk_client, serve, waiting};

fn no_violations(line: &Value) {
    assert!(
        line.get("__violations").is_none(),
        "fields the specification requires are missing: {line}"
    );
    assert!(line.get("error").is_none(), "the SDK raised: {line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_reads_the_agent_card() {
    let Some(python) = common::python() else {
        return;
    };
    let url = serve(A2aServer::new(answering()).router()).await;
    let lines = sdk_client(&python, &url, &["card"]).await;
    let card = &lines[0];
    no_violations(card);
    assert_eq!(card["name"], "triage");
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["supportedInterfaces"][0]["url"], url);
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["defaultOutputModes"], json!(["application/json"]));
    assert_eq!(card["skills"][0]["id"], "triage");
    assert_eq!(
        card["skills"][0]["tags"],
        json!(["agent-core", "lookup_order"])
    );
    assert_eq!(
        card["skills"][0]["description"],
        "A support ticket's triage."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_sends_a_message_and_gets_the_completed_task() {
    let Some(python) = common::python() else {
        return;
    };
    let url = serve(A2aServer::new(answering()).router()).await;
    let lines = sdk_client(&python, &url, &["send", "Where is NW-10231?", "block"]).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    no_violations(&lines[0]);
    let task = &lines[0]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let value = &task["artifacts"][0]["parts"][0]["data"];
    assert_eq!(task["artifacts"][0]["artifactId"], "output");
    assert!(value["queue"].is_string(), "{value}");
    assert!(
        (1.0..=4.0).contains(&value["severity"].as_f64().unwrap()),
        "{value}"
    );
    assert_eq!(task["metadata"]["agentCore"]["ending"], "answered");
    assert_eq!(task["history"][0]["parts"][0]["text"], "Where is NW-10231?");
    let id = task["id"].as_str().unwrap();

    let got = sdk_client(&python, &url, &["get", id]).await;
    no_violations(&got[0]);
    assert_eq!(got[0]["id"], id);
    assert_eq!(got[0]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(got[0]["artifacts"][0]["parts"][0]["data"], *value);

    // A terminal task cannot be canceled: the SDK raises the A2A error.
    let cancel = sdk_client(&python, &url, &["cancel", id]).await;
    assert_eq!(cancel[0]["error"], "TaskNotCancelableError", "{cancel:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_streams_a_task_to_its_end() {
    let Some(python) = common::python() else {
        return;
    };
    let url = serve(A2aServer::new(answering()).router()).await;
    let lines = sdk_client(&python, &url, &["send", "My parcel is late.", "stream"]).await;
    for line in &lines {
        no_violations(line);
    }
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["task"]["status"]["state"], "TASK_STATE_WORKING");
    let id = lines[0]["task"]["id"].as_str().unwrap();
    assert_eq!(lines[1]["artifactUpdate"]["taskId"], id);
    assert_eq!(lines[1]["artifactUpdate"]["lastChunk"], true);
    assert!(lines[1]["artifactUpdate"]["artifact"]["parts"][0]["data"]["queue"].is_string());
    assert_eq!(
        lines[2]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(
        lines[2]["statusUpdate"]["metadata"]["agentCore"]["ending"],
        "answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_is_input_required_and_resumes_with_the_sdks_decisions() {
    let Some(python) = common::python() else {
        return;
    };
    let url = serve(A2aServer::new(approving(None)).router()).await;
    let lines = sdk_client(&python, &url, &["send", "Refund NW-10231.", "block"]).await;
    no_violations(&lines[0]);
    let task = &lines[0]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let pending = &task["status"]["message"]["parts"][1]["data"]["pending"];
    assert_eq!(pending[0]["tool"], "refund");
    assert_eq!(pending[0]["reason"]["kind"], "approval");
    let call = pending[0]["call_id"].as_str().unwrap();
    let id = task["id"].as_str().unwrap();

    // Decisions that do not fit: an InvalidParams error, and the task still waits.
    let wrong = json!({"nope": {"decision": "approve"}}).to_string();
    let refused = sdk_client(&python, &url, &["resume", id, &wrong, "block"]).await;
    assert_eq!(refused[0]["error"], "InvalidParamsError", "{refused:?}");
    let got = sdk_client(&python, &url, &["get", id]).await;
    assert_eq!(got[0]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");

    let decisions = json!({ call: {"decision": "approve"} }).to_string();
    let lines = sdk_client(&python, &url, &["resume", id, &decisions, "stream"]).await;
    for line in &lines {
        no_violations(line);
    }
    let last = lines.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{lines:?}"
    );
    let got = sdk_client(&python, &url, &["get", id]).await;
    assert_eq!(got[0]["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(got[0]["artifacts"][0]["parts"][0]["data"]["severity"].is_number());
    // The history: the request, the agent's question, the decisions.
    assert_eq!(got[0]["history"].as_array().unwrap().len(), 3, "{}", got[0]);

    // A finished task takes no more messages.
    let again = sdk_client(&python, &url, &["resume", id, &decisions, "block"]).await;
    assert_eq!(again[0]["error"], "UnsupportedOperationError", "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_required_task_can_be_canceled() {
    let Some(python) = common::python() else {
        return;
    };
    let url = serve(A2aServer::new(approving(None)).router()).await;
    let lines = sdk_client(&python, &url, &["send", "Refund NW-10231.", "block"]).await;
    let id = lines[0]["task"]["id"].as_str().unwrap();
    let canceled = sdk_client(&python, &url, &["cancel", id]).await;
    no_violations(&canceled[0]);
    assert_eq!(canceled[0]["status"]["state"], "TASK_STATE_CANCELED");
    let got = sdk_client(&python, &url, &["get", id]).await;
    assert_eq!(got[0]["status"]["state"], "TASK_STATE_CANCELED");
}

async fn post(url: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_rpc_errors_and_the_server_goes_on() {
    let url = serve(A2aServer::new(answering()).max_body_bytes(4096).router()).await;
    let cases: Vec<(String, u16, i64, &str)> = vec![
        ("{not json".into(), 200, -32700, "not JSON"),
        ("[1, 2]".into(), 200, -32600, "batches"),
        (json!({"jsonrpc": "2.0", "method": "GetTask"}).to_string(), 200, -32600, "no id"),
        (json!({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}).to_string(), 200, -32600, "2.0"),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "Nope"}).to_string(), 200, -32601, "no method Nope"),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}).to_string(), 200, -32601, "call SendMessage"),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 7}}).to_string(), 200, -32602, "invalid params"),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}}).to_string(), 200, -32602, "no parts"),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": "http://x/y.png"}]}}}).to_string(), 200, -32602, "not files"),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "missing"}}).to_string(), 200, -32001, "no task missing"),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "missing"}}).to_string(), 200, -32001, "no task missing"),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m", "taskId": "missing", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}).to_string(), 200, -32001, "no task missing"),
        (format!("{{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"GetTask\", \"params\": {{\"id\": \"{}\"}}}}", "x".repeat(5000)), 413, -32600, "larger than 4096 bytes"),
    ];
    for (body, status, code, says) in cases {
        let (got_status, reply) = post(&url, body.clone()).await;
        assert_eq!(got_status, status, "{body:.80}: {reply}");
        assert_eq!(reply["error"]["code"], code, "{body:.80}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body:.80}: {message}");
    }
    // An A2A-Version this server does not speak.
    let reply = reqwest::Client::new()
        .post(&url)
        .header("A2A-Version", "0.3")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})
                .to_string(),
        )
        .send()
        .await
        .unwrap()
        .json_value()
        .await;
    assert_eq!(reply["error"]["code"], -32009);
    // Still serving.
    let (status, reply) = post(
        &url,
        json!({"jsonrpc": "2.0", "id": "last", "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}).to_string(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(reply["id"], "last");
    assert_eq!(
        reply["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

trait JsonValue {
    async fn json_value(self) -> Value;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> Value {
        serde_json::from_str(&self.text().await.unwrap()).unwrap()
    }
}

/// A task and its paused run outlive the server: a new server on the same store (a new
/// store handle, as after a restart) serves `GetTask` and resumes the run.
async fn survives_a_restart(place: &Place) {
    let store = place.open().await;
    let first = serve(
        A2aServer::new(approving(Some(store.clone())))
            .tasks(store)
            .router(),
    )
    .await;
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Refund NW-10231."}]}}});
    let (_, reply) = post(&first, send.to_string()).await;
    let task = &reply["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{reply}"
    );
    let id = task["id"].as_str().unwrap().to_owned();
    let call = task["status"]["message"]["parts"][1]["data"]["pending"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let store = place.open().await;
    let second = serve(
        A2aServer::new(approving(Some(store.clone())))
            .tasks(store)
            .router(),
    )
    .await;
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id}});
    let (_, reply) = post(&second, get.to_string()).await;
    assert_eq!(
        reply["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{reply}"
    );
    let resume = json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": {"messageId": "m2", "taskId": id, "role": "ROLE_USER", "parts": [{"data": {"decisions": {call: {"decision": "approve"}}}}]}}});
    let (_, reply) = post(&second, resume.to_string()).await;
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    assert!(task["artifacts"][0]["parts"][0]["data"]["severity"].is_number());
    // The refund ran once, after the approval: its result is in the run's transcript,
    // and the stored task says so too.
    let (_, reply) = post(&first, get.to_string()).await;
    assert_eq!(
        reply["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_survives_a_restart_on_sqlite() {
    let place = Place::sqlite();
    survives_a_restart(&place).await;
    place.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_survives_a_restart_on_postgres() {
    let Some(place) = Place::postgres().await else {
        return;
    };
    survives_a_restart(&place).await;
    place.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_loses_nothing_and_cancel_task_stops_the_run() {
    let url = serve(A2aServer::new(waiting()).router()).await;
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Where is it?"}]}}});
    let mut response = reqwest::Client::new()
        .post(&url)
        .body(send.to_string())
        .send()
        .await
        .unwrap();
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = response.chunk().await.unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let first: Value =
        serde_json::from_str(text.lines().next().unwrap().strip_prefix("data: ").unwrap()).unwrap();
    let id = first["result"]["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        first["result"]["task"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    drop(response); // the client goes away mid-stream

    // The run goes on: the task is still working.
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id}});
    let (_, reply) = post(&url, get.to_string()).await;
    assert_eq!(
        reply["result"]["status"]["state"], "TASK_STATE_WORKING",
        "{reply}"
    );

    let cancel = json!({"jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": {"id": id}});
    let (_, reply) = post(&url, cancel.to_string()).await;
    assert_eq!(
        reply["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{reply}"
    );
    // The cancelled run's own end says canceled too, whichever is stored last.
    let (_, reply) = post(&url, get.to_string()).await;
    assert_eq!(
        reply["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{reply}"
    );
    let (_, reply) = post(&url, cancel.to_string()).await;
    assert_eq!(reply["error"]["code"], -32002, "{reply}");
}
