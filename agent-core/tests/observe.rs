//! Observability: the observer hook's typed events.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::testing::ScriptedModel;
use agent_core::{llm::LlmError, observe::RunEvent, run_agent};
use common::*;

#[tokio::test]
async fn the_observer_receives_typed_events_in_order() {
    let events: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = Arc::clone(&events);
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .fail(
            LlmError::transient("rate limited")
                .with_status(429)
                .with_retry_after(Duration::from_millis(20)),
        )
        .tool_call("lookup", order("A1"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .observer(move |e: &RunEvent<'_>| {
            let line = match e {
                RunEvent::RunStarted { agent, .. } => format!("started {agent}"),
                RunEvent::TurnStarted { llm_call, .. } => format!("turn {llm_call}"),
                RunEvent::RetryScheduled {
                    llm_call,
                    delay,
                    error,
                    ..
                } => {
                    format!(
                        "retry after call {llm_call} in {} ms ({:?})",
                        delay.as_millis(),
                        error.status
                    )
                }
                RunEvent::ToolFinished {
                    tool,
                    call_id,
                    is_error,
                    ..
                } => format!("tool {tool} {call_id} error={is_error}"),
                RunEvent::RunEnded {
                    ending,
                    category,
                    usage,
                    ..
                } => {
                    format!("ended {ending} {category:?} calls={}", usage.llm_calls)
                }
                _ => "other".to_owned(),
            };
            sink.lock().unwrap().push(line);
        })
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(
        *events.lock().unwrap(),
        [
            "started test-agent",
            "turn 1",
            "retry after call 1 in 20 ms (Some(429))",
            "turn 2",
            "tool lookup call_1 error=false",
            "turn 3",
            "ended answered None calls=3",
        ]
    );
}

#[tokio::test]
async fn a_panicking_observer_never_changes_a_run() {
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[])
        .observer(|_: &RunEvent<'_>| panic!("observer bug"))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
}
