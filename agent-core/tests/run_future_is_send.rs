//! `run_agent`'s future is `Send`: runs can be spawned on a multi-thread runtime
//! (a server spawning one run per request does this). Found by the peer benchmarks.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agent_core::testing::ScriptedModel;
use agent_core::{AgentConfig, run_agent};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_agent_can_be_spawned_on_a_multi_thread_runtime() {
    let model = ScriptedModel::new()
        .tool_call("no_such_tool", json!({}))
        .text("done");
    let config: AgentConfig<String> = AgentConfig::builder("spawned").llm(model).build().unwrap();
    let result = tokio::spawn(async move { run_agent(&config, "hi").await })
        .await
        .unwrap();
    assert_eq!(result.outcome.as_deref(), Ok("done"));
    assert_eq!(result.usage.llm_calls, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_batch_can_be_spawned_on_a_multi_thread_runtime() {
    let config: AgentConfig<String> = AgentConfig::builder("spawned")
        .model("test")
        .build()
        .unwrap();
    let batch =
        tokio::spawn(async move { agent_core::eval::run_batch(&config, ["a", "b", "c"], 2).await })
            .await
            .unwrap();
    assert_eq!(batch.receipt.runs, 3);
    assert_eq!(batch.receipt.count(agent_core::Ending::Answered), 3);
}
