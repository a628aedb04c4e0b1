//! An MCP server's `elicitation/create` that no handler answers pauses the run (ending
//! `paused`, the question a pending call with the requested schema), and a resume with
//! `Decisions` makes the call again and answers the server at once; against the
//! official MCP Python SDK's server (`tests/python/asking_server.py`, stdio), with a new
//! server process for each resume (the MCP session of the pause is gone).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agent_core::durable::{
    DecisionProblem, Decisions, PauseReason, PendingCall, ResumeError, resume_agent_with,
};
use agent_core::store::InMemoryCheckpoints;
use agent_core::testing::ScriptedModel;
use agent_core::{AgentConfig, AgentError, AgentResult, RunOptions, run_agent_with};
use agent_mcp::{McpServer, McpTools};
use serde_json::{Value, json};

use crate::common::served::python;
use crate::common::{Answer, results_of};

/// A new Python server process (stdio), connected.
async fn connect(python: &std::path::Path) -> McpTools {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/asking_server.py");
    let mut command = tokio::process::Command::new(python);
    command.arg(script);
    // Bounded generously: the interpreter starts slowly on a loaded machine.
    McpServer::stdio(command)
        .connect_timeout(std::time::Duration::from_secs(120))
        .connect()
        .await
        .unwrap()
}

fn config(
    model: &ScriptedModel,
    tools: &McpTools,
    store: &Arc<InMemoryCheckpoints>,
) -> AgentConfig<Answer> {
    AgentConfig::builder("asking")
        .llm(model.clone())
        .tools(tools.registry())
        .checkpoints(Arc::clone(store))
        .build()
        .unwrap()
}

/// The run's pause: its id and pending calls.
fn paused(result: &AgentResult<Answer>) -> (String, Vec<PendingCall>) {
    match &result.outcome {
        Err(AgentError::Paused { run_id, pending }) => (run_id.clone(), pending.clone()),
        other => panic!("expected a pause, got {other:?}"),
    }
}

/// The JSON object the tool answered with, in the model's request `index`.
fn answered(model: &ScriptedModel, index: usize) -> Value {
    let results = results_of(&model.requests(), index);
    let structured: Value = serde_json::from_str(&results[0].content).unwrap();
    serde_json::from_str(structured["result"].as_str().unwrap()).unwrap()
}

/// A run whose model calls `tool` once, then submits.
async fn start(
    python: &std::path::Path,
    tool: &str,
    store: &Arc<InMemoryCheckpoints>,
) -> (ScriptedModel, String, Vec<PendingCall>) {
    let model = ScriptedModel::new()
        .tool_call(tool, json!({}))
        .submit(json!({"summary": "asked"}));
    let tools = connect(python).await;
    let result = run_agent_with(
        &config(&model, &tools, store),
        "book a table",
        RunOptions::new(),
    )
    .await;
    tools.close();
    let (run_id, pending) = paused(&result);
    (model, run_id, pending)
}

async fn resume(
    python: &std::path::Path,
    model: &ScriptedModel,
    store: &Arc<InMemoryCheckpoints>,
    run_id: &str,
    decisions: Decisions,
) -> Result<AgentResult<Answer>, ResumeError> {
    let tools = connect(python).await;
    let config = config(model, &tools, store);
    let result = resume_agent_with(&config, run_id, RunOptions::new().decisions(decisions)).await;
    tools.close();
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_question_pauses_the_run_and_the_checked_answer_resumes_it() {
    let Some(python) = python() else { return };
    let store = Arc::new(InMemoryCheckpoints::new());
    let (model, run_id, pending) = start(&python, "book", &store).await;
    assert_eq!(pending.len(), 1);
    let asked = &pending[0];
    assert!(
        asked.call_id.starts_with("call_1/elicit-1-"),
        "{}",
        asked.call_id
    );
    assert_eq!(asked.tool, "elicitation");
    assert_eq!(
        asked.reason,
        PauseReason::Input {
            message: "Which day, and for how many?".into()
        }
    );
    assert_eq!(
        asked.arguments,
        json!({"message": "Which day, and for how many?"})
    );
    let schema = asked.parameters.clone().unwrap();
    assert_eq!(schema["properties"]["guests"]["type"], "integer");
    assert_eq!(schema["properties"]["guests"]["minimum"], 1);
    assert_eq!(asked.via.len(), 1);
    assert_eq!(asked.via[0].call_id, "call_1");
    assert_eq!(asked.via[0].tool, "book");
    assert_eq!(asked.via[0].agent, "python");
    assert!(asked.via[0].run_id.starts_with("mcp-"));
    // Only the first LLM call: the run paused before the model saw a result.
    assert_eq!(model.requests().len(), 1);

    // An answer that does not match the schema: a typed error naming the field, never
    // the value; nothing ran and the run still waits.
    let wrong = Decisions::new().result(
        &asked.call_id,
        json!({"date": "2026-12-24", "guests": "s3cr3t"}),
    );
    let refused = resume(&python, &model, &store, &run_id, wrong).await;
    let Err(ResumeError::Decisions { problems, .. }) = refused else {
        panic!("expected the answer refused, got {refused:?}");
    };
    let [DecisionProblem::InvalidAnswer { call_id, errors }] = problems.as_slice() else {
        panic!("expected one invalid answer, got {problems:?}");
    };
    assert_eq!(call_id, &asked.call_id);
    assert!(errors.contains("/guests"), "{errors}");
    assert!(!errors.contains("s3cr3t"), "{errors}");
    assert_eq!(model.requests().len(), 1);
    // A decision of another kind is refused too.
    let approve = Decisions::new().approve(&asked.call_id);
    let refused = resume(&python, &model, &store, &run_id, approve).await;
    assert!(
        matches!(&refused, Err(ResumeError::Decisions { problems, .. })
            if matches!(problems.as_slice(), [DecisionProblem::WrongKind { waits_for, .. }] if waits_for == "input")),
        "{refused:?}"
    );

    // The answer: the call is made again (a new server process) and the server gets it.
    let answer = json!({"date": "2026-12-24", "guests": 4});
    let decisions = Decisions::new().result(&asked.call_id, answer.clone());
    let result = resume(&python, &model, &store, &run_id, decisions)
        .await
        .unwrap();
    assert_eq!(result.outcome.as_ref().unwrap().summary, "asked");
    assert_eq!(
        answered(&model, 1),
        json!({"action": "accept", "data": answer})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_is_the_servers_decline_and_dismiss_its_cancel() {
    let Some(python) = python() else { return };
    let store = Arc::new(InMemoryCheckpoints::new());
    for (decide, action) in [
        (
            Box::new(|id: &str| Decisions::new().deny(id, "not now"))
                as Box<dyn Fn(&str) -> Decisions>,
            "decline",
        ),
        (Box::new(|id: &str| Decisions::new().dismiss(id)), "cancel"),
    ] {
        let (model, run_id, pending) = start(&python, "book", &store).await;
        let decisions = decide(&pending[0].call_id);
        let result = resume(&python, &model, &store, &run_id, decisions)
            .await
            .unwrap();
        assert_eq!(result.outcome.as_ref().unwrap().summary, "asked");
        assert_eq!(answered(&model, 1), json!({"action": action}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_question_pauses_again_and_the_first_answer_is_given_again() {
    let Some(python) = python() else { return };
    let store = Arc::new(InMemoryCheckpoints::new());
    let (model, run_id, pending) = start(&python, "plan", &store).await;
    let first = &pending[0];
    assert!(first.call_id.starts_with("call_1/elicit-1-"));
    assert_eq!(
        first.reason,
        PauseReason::Input {
            message: "Which day?".into()
        }
    );
    let decisions = Decisions::new().result(&first.call_id, json!({"date": "2027-01-02"}));
    let again = resume(&python, &model, &store, &run_id, decisions)
        .await
        .unwrap();
    let (same_run, pending) = paused(&again);
    assert_eq!(same_run, run_id);
    let [second] = pending.as_slice() else {
        panic!("expected one question, got {pending:?}");
    };
    assert!(
        second.call_id.starts_with("call_1/elicit-2-"),
        "{}",
        second.call_id
    );
    assert_eq!(
        second.reason,
        PauseReason::Input {
            message: "For how many?".into()
        }
    );
    // Still no result seen by the model.
    assert_eq!(model.requests().len(), 1);
    let decisions = Decisions::new().result(&second.call_id, json!({"guests": 3}));
    let result = resume(&python, &model, &store, &run_id, decisions)
        .await
        .unwrap();
    assert_eq!(result.outcome.as_ref().unwrap().summary, "asked");
    assert_eq!(
        answered(&model, 1),
        json!({"action": "accept", "answers": {"date": "2027-01-02", "guests": 3}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_checkpoint_store_the_question_is_a_tool_error_the_model_sees() {
    let Some(python) = python() else { return };
    let model = ScriptedModel::new()
        .tool_call("book", json!({}))
        .submit(json!({"summary": "no booking"}));
    let tools = connect(&python).await;
    let config: AgentConfig<Answer> = AgentConfig::builder("asking")
        .llm(model.clone())
        .tools(tools.registry())
        .build()
        .unwrap();
    let result = run_agent_with(&config, "book a table", RunOptions::new()).await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "no booking");
    let results = results_of(&model.requests(), 1);
    assert!(results[0].is_error);
    assert!(
        results[0].content.contains("this run cannot wait"),
        "{}",
        results[0].content
    );
    tools.close();
}
