//! The `serve_a2a` example: the triage agent answers an A2A `SendMessage` with a
//! completed task whose data part is a triage.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde_json::{Value, json};

// Its `main` is the example binary's; here only `app` is called.
#[allow(dead_code)]
#[path = "../serve_a2a.rs"]
pub mod example;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_triage_agent_answers_over_a2a() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let app = example::app(None).await.unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::new();
    let card: Value = serde_json::from_str(
        &client
            .get(format!("{url}.well-known/agent-card.json"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(card["name"], "ticket-triage");
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "My parcel NW-10231 never came."}]}}});
    let reply: Value = serde_json::from_str(
        &client
            .post(&url)
            .header("content-type", "application/json")
            .body(request.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    let triage = &task["artifacts"][0]["parts"][0]["data"];
    assert!(
        triage["queue"].is_string() && triage["severity"].is_number(),
        "{triage}"
    );
}
