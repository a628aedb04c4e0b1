//! The one-idea examples (`examples/*.rs` beside triage, indexed in
//! `examples/README.md`), each run on the built-in test model: each example's file is a
//! module here, and the test calls its `run`, the function whose result its `main`
//! prints, and checks that result.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_core::{AgentError, Ending};

// Each `main` is its binary's; here only `run` is called.
#[allow(dead_code)]
#[path = "../agents_as_tools.rs"]
pub mod agents_as_tools;
#[allow(dead_code)]
#[path = "../approval.rs"]
pub mod approval;
#[allow(dead_code)]
#[path = "../fallback.rs"]
pub mod fallback;
#[allow(dead_code)]
#[path = "../hello.rs"]
pub mod hello;
#[allow(dead_code)]
#[path = "../images.rs"]
pub mod images;
#[allow(dead_code)]
#[path = "../streaming.rs"]
pub mod streaming;
#[allow(dead_code)]
#[path = "../sweep_small.rs"]
pub mod sweep_small;
#[allow(dead_code)]
#[path = "../tools.rs"]
pub mod tools;

#[tokio::test]
async fn hello_answers_with_the_typed_value_in_one_call() {
    let result = hello::run("test").await.unwrap();
    let capital = result.outcome.unwrap();
    // The test model fills each string with "example".
    assert_eq!(
        capital,
        hello::Capital {
            country: "example".into(),
            city: "example".into()
        }
    );
    assert_eq!(result.usage.llm_calls, 1);
}

#[tokio::test]
async fn tools_calls_the_tool_which_reads_and_counts_in_the_shared_state() {
    let stock = Arc::new(tools::Stock {
        units: HashMap::from([("water bottle".into(), 3)]),
        ..tools::Stock::default()
    });
    let result = tools::run("test", stock.clone()).await.unwrap();
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(result.usage.tool_calls, 1);
    assert_eq!(stock.lookups.load(Ordering::Relaxed), 1);
    // The test model asked for the item "example": the tool's error went back to it.
    let transcript = format!("{:?}", result.transcript);
    assert!(
        transcript.contains(r#"no item named \"example\""#),
        "{transcript}"
    );
}

#[tokio::test]
async fn streaming_shows_the_answer_as_it_arrives_and_ends_with_the_result() {
    let mut lines = Vec::new();
    let result = streaming::run("test", |line| lines.push(line))
        .await
        .unwrap()
        .unwrap();
    let blurb = result.outcome.unwrap();
    assert_eq!(
        (blurb.headline.as_str(), blurb.body.as_str()),
        ("example", "example")
    );
    assert!(lines.iter().any(|l| l.starts_with("so far: ")), "{lines:?}");
}

#[tokio::test]
async fn images_sends_the_photo_which_the_test_model_says_it_saw() {
    let result = images::run("test").await.unwrap();
    let damage = result.outcome.unwrap();
    assert_eq!(damage.description, "example (saw image/png)");
    assert!(damage.damaged);
}

#[tokio::test]
async fn approval_pauses_on_the_refund_and_the_approved_call_runs_on_resume() {
    let (paused, resumed) = approval::run("test").await.unwrap();
    assert_eq!(paused.ending(), Ending::Paused);
    let Err(AgentError::Paused { run_id, pending }) = &paused.outcome else {
        panic!("{:?}", paused.outcome);
    };
    assert_eq!(run_id, "ticket-7");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool, "refund");
    assert_eq!(paused.usage.tool_calls, 0);
    assert_eq!(resumed.ending(), Ending::Answered, "{:?}", resumed.outcome);
    assert_eq!(resumed.outcome.unwrap().reply, "example");
    assert_eq!(resumed.usage.tool_calls, 1);
    let transcript = format!("{:?}", resumed.transcript);
    assert!(
        transcript.contains("refunded 0.00 USD on example"),
        "{transcript}"
    );
}

#[tokio::test]
async fn fallback_moves_from_the_unreachable_server_to_the_test_model() {
    let result = fallback::run("test").await.unwrap();
    assert_eq!(result.ending(), Ending::Answered, "{:?}", result.outcome);
    assert_eq!(result.outcome.unwrap().text, "example");
    let models: Vec<(&str, u32)> = result
        .usage
        .by_model
        .iter()
        .map(|m| (m.model.as_str(), m.llm_calls))
        .collect();
    // The failed attempt at the primary is counted, with no tokens.
    assert_eq!(models, [("dispatch/qwen", 1), ("test", 1)]);
    assert_eq!(result.usage.by_model[0].input_tokens, 0);
}

#[tokio::test]
async fn agents_as_tools_runs_the_refunds_agent_once_inside_the_support_run() {
    let result = agents_as_tools::run("test").await.unwrap();
    assert_eq!(result.ending(), Ending::Answered, "{:?}", result.outcome);
    let [child] = &result.usage.children[..] else {
        panic!("{:?}", result.usage.children);
    };
    assert_eq!(
        (child.tool.as_str(), child.agent.as_str()),
        ("ask_refunds", "refunds")
    );
    assert_eq!(child.ending, "answered");
    assert!(result.usage.total_tokens() > child.usage.total_tokens());
}

#[tokio::test]
async fn sweep_small_grades_both_variants_against_the_labels() {
    let comparison = sweep_small::run("test").await.unwrap();
    assert_eq!(comparison.samples, 4);
    for name in ["auto", "prompted"] {
        let variant = comparison.variant(name).unwrap();
        assert_eq!(variant.runs, 4);
        assert_eq!(variant.endings.get(&Ending::Answered), Some(&4));
        // The test model always answers the first label, "positive": 3 of 4 match.
        assert_eq!(variant.score.as_ref().unwrap().mean, 0.75, "{name}");
    }
    let table = comparison.to_string();
    assert!(table.contains("prompted"), "{table}");
}
