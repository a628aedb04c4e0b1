//! Streamed runs on the scripted model: a client without its own streaming answers in
//! one piece, the streamed run is the same run as `run_agent` (outcome, usage,
//! transcript, requests), and dropping the stream stops the run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentResult, Tool, ToolContext,
    llm::LlmError,
    run_agent, run_agent_stream,
    stream::{RunStream, StreamEvent},
    tool::{ToolDefinition, ToolFuture},
};
use common::*;
use serde_json::json;

async fn collect<T>(mut stream: RunStream<'_, T>) -> (Vec<StreamEvent<T>>, AgentResult<T>) {
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::Finished(result) => {
                assert!(stream.next().await.is_none(), "Finished is the last event");
                return (events, *result);
            }
            other => events.push(other),
        }
    }
    panic!("the stream ended without Finished");
}

/// An event as short text, for comparing sequences.
fn label<T>(event: &StreamEvent<T>) -> String {
    match event {
        StreamEvent::TurnStarted { llm_call } => format!("turn {llm_call}"),
        StreamEvent::TextDelta { text, .. } => format!("text {text}"),
        StreamEvent::ToolCallStarted { name, .. } => format!("start {name}"),
        StreamEvent::ToolCallFinished { name, .. } => format!("end {name}"),
        StreamEvent::ToolResult { name, is_error, .. } => format!("result {name} {is_error}"),
        StreamEvent::PartialOutput { value, .. } => format!("partial {value}"),
        StreamEvent::Retrying { llm_call, .. } => format!("retry {llm_call}"),
        _ => "other".to_owned(),
    }
}

#[tokio::test]
async fn a_client_without_streaming_answers_each_turn_in_one_piece() {
    let lookup = TestTool::new("lookup_order", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup_order", order("A-1"))
        .text("thinking")
        .submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
    assert!(result.is_ok(), "{:?}", result.outcome);
    let labels: Vec<String> = events.iter().map(label).collect();
    assert_eq!(
        labels,
        [
            "turn 1",
            "start lookup_order",
            "end lookup_order",
            "result lookup_order false",
            "turn 2",
            "text thinking",
            "turn 3",
            "start submit_output",
            &format!("partial {}", valid()),
            "end submit_output",
        ]
    );
}

#[tokio::test]
async fn streamed_runs_are_the_runs_of_run_agent() {
    // Scripts covering the transitions: tools, malformed answers, transient failures,
    // the call cap, a permanent failure.
    type Script = fn() -> ScriptedModel;
    let scripts: Vec<(&str, Script, u32)> = vec![
        (
            "tool then answer",
            || {
                ScriptedModel::new()
                    .tool_call("lookup_order", order("A-1"))
                    .submit(valid())
            },
            8,
        ),
        (
            "invalid then valid",
            || ScriptedModel::new().submit(invalid()).submit(valid()),
            8,
        ),
        (
            "plain text nudged",
            || ScriptedModel::new().text("hm").submit(valid()),
            8,
        ),
        (
            "transient failure retried",
            || {
                ScriptedModel::new()
                    .fail(LlmError::transient("503"))
                    .submit(valid())
            },
            8,
        ),
        (
            "permanent failure",
            || ScriptedModel::new().fail(LlmError::permanent("400")),
            8,
        ),
        (
            "call cap",
            || {
                ScriptedModel::new()
                    .tool_call("lookup_order", order("A-1"))
                    .tool_call("lookup_order", order("A-2"))
                    .tool_call("lookup_order", order("A-3"))
            },
            2,
        ),
    ];
    for (name, script, max_calls) in scripts {
        let lookup = TestTool::new("lookup_order", Behaviour::Echo);
        let plain_model = script();
        let plain_config = builder(&plain_model, &[&lookup])
            .max_llm_calls(max_calls)
            .build()
            .unwrap();
        let plain = run_agent(&plain_config, "ticket").await;
        let streamed_model = script();
        let streamed_config = builder(&streamed_model, &[&lookup])
            .max_llm_calls(max_calls)
            .build()
            .unwrap();
        let (events, streamed) = collect(run_agent_stream(&streamed_config, "ticket")).await;
        assert_eq!(
            format!("{:?}", streamed.outcome),
            format!("{:?}", plain.outcome),
            "{name}"
        );
        assert_eq!(streamed.usage, plain.usage, "{name}");
        assert_eq!(streamed.transcript, plain.transcript, "{name}");
        assert_eq!(streamed.output, plain.output, "{name}");
        assert_eq!(
            streamed_model.requests(),
            plain_model.requests(),
            "{name}: the same requests"
        );
        let turns = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::TurnStarted { .. }))
            .count();
        assert_eq!(turns as u32, plain.usage.llm_calls, "{name}");
        assert_well_formed(&streamed.transcript);
    }
}

/// A tool that never finishes and records when its future is dropped.
#[derive(Clone, Default)]
struct Hang {
    started: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Tool for Hang {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new("hang", "Never answers.", json!({"type": "object"}))
    }

    fn call<'a>(&'a self, _arguments: serde_json::Value, _context: ToolContext) -> ToolFuture<'a> {
        let guard = SetOnDrop(Arc::clone(&self.dropped));
        self.started.store(true, Ordering::SeqCst);
        Box::pin(async move {
            let _guard = guard;
            std::future::pending().await
        })
    }
}

#[tokio::test]
async fn dropping_the_stream_stops_the_run_and_its_tool_calls() {
    let hang = Hang::default();
    let model = ScriptedModel::new()
        .tool_call("hang", json!({}))
        .submit(valid());
    let config = agent_core::AgentConfig::<Triage>::builder("test-agent")
        .llm(model.clone())
        .tool(hang.clone())
        .build()
        .unwrap();
    let mut stream = run_agent_stream(&config, "ticket");
    // Up to the end of the call; the next poll runs the tool, which never answers.
    loop {
        match stream.next().await {
            Some(StreamEvent::ToolCallFinished { name, .. }) if name == "hang" => break,
            Some(_) => {}
            None => panic!("the run ended"),
        }
    }
    assert!(futures::poll!(stream.next()).is_pending());
    assert!(hang.started.load(Ordering::SeqCst));
    assert!(!hang.dropped.load(Ordering::SeqCst));
    drop(stream);
    assert!(hang.dropped.load(Ordering::SeqCst));
    assert_eq!(model.request_count(), 1);
}
