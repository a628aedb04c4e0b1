//! The run's state as one value, across a crash: a run resumed after a handoff goes on
//! with the agent it was handed to, one resumed after a fallback switch goes on with
//! the model it had switched to (case C63), each ending exactly as the run that was
//! never interrupted; and checkpoints written before `RunState` (format 1, recorded from
//! the previous version in `fixtures/checkpoints/`) still list and resume.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;
use crate::common::by_turn::ByTurn;

use agent_core::conformance::CrashAt;
use agent_core::store::{CheckpointRecord, CheckpointStore, InMemoryCheckpoints, LedgerEntry};
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentResult, OutputMode, RunOptions,
    config::Backoff,
    durable::{Decisions, PauseReason, paused_runs, resume_agent_with},
    llm::{LlmResponse, Message, TokenUsage, ToolCall},
    resume_agent, run_agent_with,
};
use common::{Behaviour, TestTool, Triage, valid};
use serde_json::{Value, json};

/// What a crash must not change about a result.
fn shape(result: &AgentResult<Triage>) -> Value {
    json!({
        "agent": result.agent,
        "outcome": format!("{:?}", result.outcome),
        "llm_calls": result.usage.llm_calls,
        "tool_calls": result.usage.tool_calls,
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "by_model": result.usage.by_model.iter()
            .map(|m| json!([m.model, m.llm_calls])).collect::<Vec<_>>(),
        "transcript": serde_json::to_value(&result.transcript).unwrap(),
    })
}

/// Runs `make(store)`'s config on the ticket with the store's write `crash_at` hanging,
/// drops the run there, and resumes it with `make(store)` again (a new process's config
/// over the same store).
async fn crash_and_resume(
    crash_at: u64,
    make: impl Fn(CrashAt<InMemoryCheckpoints>) -> AgentConfig<Triage>,
) -> AgentResult<Triage> {
    let memory = InMemoryCheckpoints::new();
    let crashing = CrashAt::new(memory.clone(), crash_at);
    let config = make(crashing.clone());
    let options = RunOptions::new().run_id("r1");
    let run = run_agent_with(&config, "My parcel A-1 is late", options);
    tokio::select! {
        result = run => panic!("the run ended before write {crash_at}: {:?}", result.outcome),
        () = crashing.reached().notified() => {}
    }
    let fresh = CrashAt::new(memory, u64::MAX);
    resume_agent(&make(fresh), "r1").await.unwrap()
}

fn lookup_then_answer() -> Vec<LlmResponse> {
    vec![
        LlmResponse::tool_calls(vec![ToolCall::new(
            "c1",
            "lookup",
            json!({"order_id": "A-1"}),
        )])
        .with_usage(TokenUsage::new(100, 10)),
        LlmResponse::tool_calls(vec![ToolCall::new("c2", "submit_output", valid())])
            .with_usage(TokenUsage::new(120, 12)),
    ]
}

// C63: a run handed from `triage` to `billing` crashes after the handoff, at each write
// of billing's part; resumed, billing goes on (its own model and tools), and the result
// is the uninterrupted run's: the same agent, transcript and usage. Before the state
// kept the handoff, the resumed run went back to `triage`.
#[tokio::test]
async fn c63_a_run_resumed_after_a_handoff_goes_on_with_the_agent_it_was_handed_to() {
    let triage_model = ByTurn::named(
        "triage-model",
        vec![
            LlmResponse::tool_calls(vec![ToolCall::new("t1", "transfer_to_billing", json!({}))])
                .with_usage(TokenUsage::new(50, 5)),
        ],
    );
    // Billing sees the transfer turn first: its steps start at the second assistant turn.
    let mut billing_steps = vec![LlmResponse::text("unused")];
    billing_steps.extend(lookup_then_answer());
    let billing_model = ByTurn::named("billing-model", billing_steps);
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let make = |store: CrashAt<InMemoryCheckpoints>| -> AgentConfig<Triage> {
        let billing = AgentConfig::<Triage>::builder("billing")
            .llm(billing_model.clone())
            .tool(lookup.clone())
            .backoff(Backoff::none())
            .build()
            .unwrap();
        AgentConfig::<Triage>::builder("triage")
            .llm(triage_model.clone())
            .handoff(billing)
            .backoff(Backoff::none())
            .checkpoints(store)
            .build()
            .unwrap()
    };
    let whole = {
        let config = make(CrashAt::new(InMemoryCheckpoints::new(), u64::MAX));
        run_agent_with(
            &config,
            "My parcel A-1 is late",
            RunOptions::new().run_id("r0"),
        )
        .await
    };
    assert_eq!(whole.agent, "billing");
    assert!(whole.outcome.is_ok(), "{:?}", whole.outcome);
    let triage_calls = triage_model.requests();
    assert_eq!(triage_calls, 1);
    // Writes: 1 before the first call, 2 before billing's first (after the handoff),
    // 3 the turn's checkpoint with lookup's `started`, 4 before billing's answer.
    for crash_at in [3, 4] {
        let before = triage_model.requests();
        let resumed = crash_and_resume(crash_at, make).await;
        assert_eq!(
            shape(&resumed),
            shape(&whole),
            "crash at write {crash_at}: {:?}",
            resumed.outcome
        );
        // The run asked triage once, before the crash; never after it.
        assert_eq!(
            triage_model.requests() - before,
            1,
            "crash at write {crash_at}"
        );
    }
}

/// An OpenAI-compatible server's reply: the `n`-th step of lookup-then-answer, `n` the
/// number of assistant messages in the request.
struct ByTurnServer;

impl wiremock::Respond for ByTurnServer {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let turn = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        let (id, name, arguments) = match turn {
            0 => ("c1", "lookup", json!({"order_id": "A-1"})),
            _ => ("c2", "submit_output", valid()),
        };
        wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "id": format!("chatcmpl-{turn}"),
            "object": "chat.completion",
            "model": "b",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function", "function": {
                    "name": name, "arguments": arguments.to_string()}}]}}],
            "usage": {"prompt_tokens": 100 + turn, "completion_tokens": 10, "total_tokens": 110 + turn}
        }))
    }
}

// C63: a run whose primary model was not found switches to its fallback, and crashes
// there; resumed, it goes on with the fallback (the primary is not asked again), with the
// uninterrupted run's result and usage per model.
#[tokio::test]
async fn c63_a_run_resumed_after_a_fallback_switch_goes_on_with_the_model_it_switched_to() {
    use agent_core::providers::ProviderOptions;
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let primary = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({"error": {
            "message": "The model `a` does not exist", "type": "invalid_request_error",
            "code": "model_not_found"}})))
        .mount(&primary)
        .await;
    let fallback = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ByTurnServer)
        .mount(&fallback)
        .await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let primary_url = format!("{}/v1", primary.uri());
    let fallback_url = format!("{}/v1", fallback.uri());
    let make = |store: CrashAt<InMemoryCheckpoints>| -> AgentConfig<Triage> {
        AgentConfig::<Triage>::builder("triage")
            .model("dispatch/a")
            .provider(
                ProviderOptions::default()
                    .with_base_url(primary_url.clone())
                    .with_api_key("sk-test"),
            )
            .fallback_model_with(
                "dispatch/b",
                ProviderOptions::default()
                    .with_api_key("sk-test")
                    .with_base_url(fallback_url.clone()),
            )
            .tool(lookup.clone())
            .output_mode(OutputMode::Tool)
            .backoff(Backoff::none())
            .checkpoints(store)
            .build()
            .unwrap()
    };
    let whole = {
        let config = make(CrashAt::new(InMemoryCheckpoints::new(), u64::MAX));
        run_agent_with(
            &config,
            "My parcel A-1 is late",
            RunOptions::new().run_id("r0"),
        )
        .await
    };
    assert!(whole.outcome.is_ok(), "{:?}", whole.outcome);
    let by_model: Vec<(String, u32)> = whole
        .usage
        .by_model
        .iter()
        .map(|m| (m.model.clone(), m.llm_calls))
        .collect();
    assert_eq!(
        by_model,
        [("dispatch/a".to_owned(), 1), ("dispatch/b".to_owned(), 2)]
    );
    // Writes: 1 before the first call (to a), 2 before the call to b, 3 the turn's
    // checkpoint with lookup's `started`, 4 before b's answer.
    for crash_at in [3, 4] {
        let asked = primary.received_requests().await.unwrap().len();
        let resumed = crash_and_resume(crash_at, make).await;
        assert_eq!(
            shape(&resumed),
            shape(&whole),
            "crash at write {crash_at}: {:?}",
            resumed.outcome
        );
        let asked_now = primary.received_requests().await.unwrap().len();
        assert_eq!(
            asked_now - asked,
            1,
            "crash at write {crash_at}: the primary is asked once"
        );
    }
}

/// A checkpoint store holding a record (and its ledger) read from a fixture that the
/// version before `RunState` wrote.
async fn store_with(fixture: &str) -> (InMemoryCheckpoints, String) {
    let path = format!(
        "{}/tests/fixtures/checkpoints/{fixture}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let record: CheckpointRecord = serde_json::from_value(text["record"].clone()).unwrap();
    let ledger: Vec<LedgerEntry> = serde_json::from_value(text["ledger"].clone()).unwrap();
    assert!(
        record.state.starts_with("{\"format\":1,"),
        "a format-1 fixture"
    );
    let store = InMemoryCheckpoints::new();
    store.save(&record).await.unwrap();
    for entry in &ledger {
        store.record_tool(entry).await.unwrap();
    }
    (store, record.run_id)
}

/// The config the fixtures were recorded with: `lookup` and `refund`, the refund needing
/// approval.
fn legacy_config(
    model: &ScriptedModel,
    store: InMemoryCheckpoints,
    lookup: &TestTool,
    refund: &TestTool,
) -> AgentConfig<Triage> {
    AgentConfig::builder("legacy")
        .llm(model.clone())
        .tool(lookup.clone())
        .tool(refund.clone())
        .approval(|call, _| call.name == "refund")
        .checkpoints(store)
        .build()
        .unwrap()
}

// A run paused on an approval under the previous version: it is listed with its pending
// call, and approved, it runs the refund (once) and answers; the lookup done before the
// pause is not run again, and the counts go on from the stored ones.
#[tokio::test]
async fn a_paused_run_checkpointed_in_format_1_is_listed_and_resumes() {
    let (store, run_id) = store_with("format1_paused.json").await;
    let paused = paused_runs(&store, 10).await.unwrap();
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0].run_id, run_id);
    assert_eq!(paused[0].pending.len(), 1);
    assert_eq!(paused[0].pending[0].tool, "refund");
    assert_eq!(paused[0].pending[0].arguments, json!({"order_id": "A-1"}));
    assert_eq!(paused[0].pending[0].reason, PauseReason::Approval);
    let model = ScriptedModel::new().respond(
        LlmResponse::tool_calls(vec![ToolCall::new("c3", "submit_output", valid())])
            .with_usage(TokenUsage::new(140, 14)),
    );
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let refund = TestTool::new("refund", Behaviour::Fixed("refunded"));
    let config = legacy_config(&model, store, &lookup, &refund);
    let result = resume_agent_with(&config, &run_id, Decisions::new().approve("c2"))
        .await
        .unwrap();
    assert_eq!(
        result.outcome,
        Ok(Triage {
            severity: 2,
            summary: "parcel late".into()
        })
    );
    assert_eq!((lookup.runs(), refund.runs()), (0, 1));
    assert_eq!(result.usage.llm_calls, 3);
    assert_eq!(result.usage.tool_calls, 2);
    assert_eq!(result.usage.input_tokens, 100 + 120 + 140);
    assert_eq!(model.requests().len(), 1);
    let results: Vec<(String, String)> = result
        .transcript
        .iter()
        .flat_map(|m| match m {
            Message::Tool { results } => results.clone(),
            _ => Vec::new(),
        })
        .map(|r| (r.call_id, r.content))
        .collect();
    assert_eq!(results[0].0, "c1");
    assert_eq!(results[1], ("c2".to_owned(), "refunded".to_owned()));
}

// A run checkpointed before an LLM call under the previous version resumes from there:
// one more call answers, nothing runs again.
#[tokio::test]
async fn a_run_checkpointed_in_format_1_before_a_call_resumes_from_it() {
    let (store, run_id) = store_with("format1_before_call.json").await;
    let model = ScriptedModel::new().submit(valid());
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = AgentConfig::<Triage>::builder("legacy")
        .llm(model.clone())
        .tool(lookup.clone())
        .checkpoints(store)
        .build()
        .unwrap();
    let result = resume_agent(&config, &run_id).await.unwrap();
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(lookup.runs(), 0);
    assert_eq!(result.usage.llm_calls, 2);
    assert_eq!(result.usage.tool_calls, 1);
    // The request the resumed run sent holds the stored turns.
    let sent = &model.requests()[0];
    assert_eq!(sent.messages.len(), 3);
    assert_eq!(sent.messages[0], Message::user("My parcel A-1 is late"));
}

// A resumed run streams: approved, the paused run's rest comes as events (the approved
// call's result, the next turn), then `Finished` with its answer; a finished run's
// stream holds its stored result alone.
#[tokio::test]
async fn a_resumed_run_streams_its_events() {
    use agent_core::stream::{StreamEvent, resume_agent_stream, resume_agent_stream_with};
    let (store, run_id) = store_with("format1_paused.json").await;
    let model = ScriptedModel::new().submit(valid());
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let refund = TestTool::new("refund", Behaviour::Fixed("refunded"));
    let config = legacy_config(&model, store, &lookup, &refund);
    let mut stream = resume_agent_stream_with(&config, &run_id, Decisions::new().approve("c2"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut finished = None;
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::ToolResult { id, content, .. } => seen.push(format!("{id}: {content}")),
            StreamEvent::TurnStarted { llm_call } => seen.push(format!("turn {llm_call}")),
            StreamEvent::Finished(result) => finished = Some(result),
            _ => {}
        }
    }
    assert_eq!(seen, ["c2: refunded", "turn 3"]);
    let result = finished.unwrap();
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(refund.runs(), 1);
    // Streamed, the model got the turn through its streaming call.
    assert_eq!(model.requests().len(), 1);
    let mut again = resume_agent_stream(&config, &run_id).await.unwrap();
    let only: Vec<bool> = {
        let mut kinds = Vec::new();
        while let Some(event) = again.next().await {
            kinds.push(matches!(event, StreamEvent::Finished(_)));
        }
        kinds
    };
    assert_eq!(only, [true]);
}
