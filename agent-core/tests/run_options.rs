//! `run_agent_with` and `RunOptions`: per-run state, cancellation, deadline, observer,
//! metadata and earlier messages, without a `with_` variant per request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::testing::{ScriptStep, ScriptedModel};
use agent_core::{
    AgentConfig, CancellationToken, Ending, RunOptions, Tool, ToolContext,
    llm::Message,
    observe::RunEvent,
    run_agent, run_agent_with,
    tool::{ToolDefinition, ToolFuture},
};
use common::*;
use serde_json::{Value, json};

/// The request-scoped state a server would hold: the signed-in user.
struct Session {
    user: &'static str,
}

/// A tool that reads the run's `Session`.
struct WhoAmI;

impl Tool for WhoAmI {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "whoami",
            "The signed-in user.",
            json!({"type": "object", "properties": {}}),
        )
    }

    fn call<'a>(&'a self, _arguments: Value, context: ToolContext) -> ToolFuture<'a> {
        let user = context.state::<Session>().map(|s| s.user);
        Box::pin(async move { Ok(user.unwrap_or("nobody").to_owned()) })
    }

    fn required_state(&self) -> Vec<agent_core::tool::StateRequirement> {
        vec![agent_core::tool::StateRequirement::of::<Session>()]
    }
}

fn session_config(model: &ScriptedModel) -> AgentConfig<Triage> {
    builder(model, &[])
        .tool(WhoAmI)
        .expects_state::<Session>()
        .build()
        .unwrap()
}

#[tokio::test]
async fn per_run_state_reaches_the_tools_of_that_run_only() {
    let model = ScriptedModel::new()
        .tool_call("whoami", json!({}))
        .submit(valid())
        .tool_call("whoami", json!({}))
        .submit(valid());
    let config = session_config(&model);
    let ada = run_agent_with(
        &config,
        "t1",
        RunOptions::new().state(Session { user: "ada" }),
    )
    .await;
    let bob = run_agent_with(
        &config,
        "t2",
        RunOptions::new().state(Session { user: "bob" }),
    )
    .await;
    assert!(ada.is_ok() && bob.is_ok());
    let requests = model.requests();
    assert_eq!(last_results(&requests[1])[0].content, "ada");
    assert_eq!(last_results(&requests[3])[0].content, "bob");
}

#[tokio::test]
async fn a_tool_needing_state_without_a_declaration_is_a_config_error() {
    let model = ScriptedModel::new();
    let err = builder(&model, &[]).tool(WhoAmI).build().unwrap_err();
    assert!(err.to_string().contains("Session"), "{err}");
}

#[tokio::test]
async fn expected_state_missing_at_run_time_ends_before_any_request() {
    let model = ScriptedModel::new().submit(valid());
    let config = session_config(&model);
    let r = run_agent(&config, "t").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "invalid_run");
    assert_eq!(err.ending(), Ending::Failed);
    assert!(err.to_string().contains("run_options::Session"), "{err}");
    assert_eq!(model.request_count(), 0);
    assert_eq!(r.usage.llm_calls, 0);
}

#[tokio::test]
async fn per_run_state_replaces_config_state_of_the_same_type() {
    let model = ScriptedModel::new()
        .tool_call("whoami", json!({}))
        .submit(valid());
    let config = builder(&model, &[])
        .tool(WhoAmI)
        .state(Session { user: "default" })
        .build()
        .unwrap();
    let r = run_agent_with(
        &config,
        "t",
        RunOptions::new().state(Session { user: "override" }),
    )
    .await;
    assert!(r.is_ok());
    assert_eq!(last_results(&model.requests()[1])[0].content, "override");
}

#[tokio::test(start_paused = true)]
async fn the_shorter_of_the_config_and_run_deadlines_applies() {
    let model = ScriptedModel::from_steps([ScriptStep::Hang, ScriptStep::Hang]);
    let config = builder(&model, &[])
        .deadline(Duration::from_secs(60))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let r = run_agent_with(
        &config,
        "t",
        RunOptions::new().deadline(Duration::from_secs(2)),
    )
    .await;
    assert_eq!(r.category(), Some("deadline_exceeded"));
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    match r.outcome.unwrap_err() {
        agent_core::AgentError::DeadlineExceeded { limit } => {
            assert_eq!(limit, Duration::from_secs(2));
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn a_zero_run_deadline_ends_before_any_request() {
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent_with(&config, "t", RunOptions::new().deadline(Duration::ZERO)).await;
    assert_eq!(r.category(), Some("deadline_exceeded"));
    assert_eq!(model.request_count(), 0);
}

#[tokio::test]
async fn either_cancellation_token_ends_the_run() {
    let config_token = CancellationToken::new();
    let run_token = CancellationToken::new();
    let model = ScriptedModel::from_steps([ScriptStep::Hang]);
    let config = builder(&model, &[])
        .cancellation(config_token.clone())
        .build()
        .unwrap();
    let cancel = run_token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        cancel.cancel();
    });
    let r = run_agent_with(&config, "t", RunOptions::new().cancellation(run_token)).await;
    assert_eq!(r.category(), Some("cancelled"));
    assert!(
        !config_token.is_cancelled(),
        "the config's token is untouched"
    );

    // An already-cancelled run token: no request at all.
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let token = CancellationToken::new();
    token.cancel();
    let r = run_agent_with(&config, "t", RunOptions::new().cancellation(token)).await;
    assert_eq!(r.category(), Some("cancelled"));
    assert_eq!(model.request_count(), 0);
}

#[tokio::test]
async fn run_and_config_observers_both_see_every_event_in_order() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (a, b) = (Arc::clone(&seen), Arc::clone(&seen));
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[])
        .observer(move |e: &RunEvent<'_>| a.lock().unwrap().push(format!("config {}", name(e))))
        .build()
        .unwrap();
    let options = RunOptions::new()
        .observer(move |e: &RunEvent<'_>| b.lock().unwrap().push(format!("run {}", name(e))));
    let r = run_agent_with(&config, "t", options).await;
    assert!(r.is_ok());
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "config started",
            "run started",
            "config turn",
            "run turn",
            "config ended",
            "run ended"
        ]
    );
}

fn name(event: &RunEvent<'_>) -> &'static str {
    match event {
        RunEvent::RunStarted { .. } => "started",
        RunEvent::TurnStarted { .. } => "turn",
        RunEvent::RunEnded { .. } => "ended",
        _ => "other",
    }
}

#[tokio::test]
async fn history_comes_before_the_input_and_stays_in_the_transcript() {
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let history = vec![
        Message::user("My order is A-1."),
        Message::assistant("Noted: A-1.", vec![]),
    ];
    let options = RunOptions::new()
        .history(history.clone())
        .metadata("request_id", "r-42");
    assert_eq!(options.metadata_map()["request_id"], "r-42");
    let r = run_agent_with(&config, "Where is it?", options).await;
    assert!(r.is_ok());
    let sent = &model.requests()[0].messages;
    assert_eq!(
        sent,
        &[
            history[0].clone(),
            history[1].clone(),
            Message::user("Where is it?")
        ]
    );
    assert_eq!(&r.transcript[..3], sent.as_slice());
}
