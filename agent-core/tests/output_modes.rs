//! The output modes through the loop with a scripted model: native and prompted answers
//! keep the contract of tool mode (one validator, the same feedback with JSON paths, one
//! parse budget, the same categories, the wrap-up turn, escalation, other tools).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use agent_core::testing::{ScriptedModel, TestModel};
use agent_core::{
    AgentConfig, AgentError, Ending, OutputMode,
    error::AttemptKind,
    llm::{LlmResponse, Message, StopReason, ToolChoice},
    run_agent,
};
use common::*;
use serde_json::json;

fn native(model: &ScriptedModel, tools: &[&TestTool]) -> agent_core::AgentConfigBuilder<Triage> {
    builder(model, tools).output_mode(OutputMode::Native)
}

fn answer() -> String {
    valid().to_string()
}

#[tokio::test]
async fn auto_is_tool_mode_for_a_hand_written_client_and_kept_by_with() {
    let model = ScriptedModel::new();
    let config = builder(&model, &[]).build().unwrap();
    assert_eq!(config.output_mode(), OutputMode::Tool);
    let native = config.with_(|b| b.output_mode(OutputMode::Native)).unwrap();
    assert_eq!(native.output_mode(), OutputMode::Native);
    let still = native.with_(|b| b.max_llm_calls(9)).unwrap();
    assert_eq!(
        still.output_mode(),
        OutputMode::Native,
        "with_ keeps the mode"
    );
    let text: AgentConfig<String> = AgentConfig::builder("t")
        .llm(ScriptedModel::new())
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    assert_eq!(
        text.output_mode(),
        OutputMode::Tool,
        "plain text has no schema"
    );
}

#[tokio::test]
async fn native_answer_in_one_turn_keeps_the_raw_text() {
    let model = ScriptedModel::new().text(answer());
    let config = native(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        r.outcome,
        Ok(Triage {
            severity: 2,
            summary: "parcel late".into()
        })
    );
    assert_eq!(r.output, answer());
    let request = &model.requests()[0];
    let spec = request.output.as_deref().unwrap();
    assert_eq!(spec.mode, OutputMode::Native);
    assert_eq!(spec.schema, triage_schema());
    assert!(request.tools.is_empty(), "no submit_output in native mode");
    assert_eq!(request.tool_choice, ToolChoice::Auto);
}

#[tokio::test]
async fn native_runs_other_tools_then_takes_the_json_answer() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A-1"))
        .text(answer());
    let config = native(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 1));
    assert_eq!(lookup.runs(), 1);
    let names: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["lookup"]);
    assert_requests_well_formed(&model.requests());
}

#[tokio::test]
async fn native_malformed_turns_share_one_parse_budget_and_list_every_attempt() {
    // Prose, an invalid value, then an empty reply, with max_parse_retries = 2.
    let model = ScriptedModel::new()
        .text("The parcel is late.")
        .text(invalid().to_string())
        .text("");
    let config = native(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let Err(AgentError::SchemaNotCalled { attempts }) = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    let kinds: Vec<AttemptKind> = attempts.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            AttemptKind::SchemaValidation,
            AttemptKind::SchemaValidation,
            AttemptKind::SchemaNotCalled
        ]
    );
    assert_eq!(attempts[0].message, "/: the reply is not a JSON object");
    assert_eq!(
        attempts[1].message,
        "/severity: 9 is greater than the maximum of 4"
    );
    assert_eq!(r.ending(), Ending::Exhausted);
    // After each malformed turn: a user message with the problems, and the next request
    // forbids tool calls (the answer must come as text).
    let requests = model.requests();
    assert_eq!(
        requests[2].messages.last(),
        Some(&Message::user(
            "Your answer was rejected:\n- /severity: 9 is greater than the maximum of 4\nReply \
             again with only the corrected JSON object, and no other text."
        ))
    );
    assert_eq!(requests[1].tool_choice, ToolChoice::None);
    assert_eq!(
        r.output,
        invalid().to_string(),
        "the last non-empty assistant text"
    );
}

#[tokio::test]
async fn native_wrap_up_turn_forbids_tools_and_runs_none() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A-1"))
        .tool_call("lookup", order("A-2"))
        .text(answer());
    let config = native(&model, &[&lookup])
        .max_llm_calls(2)
        .wrap_up(true)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("max_llm_calls"));
    assert_eq!(lookup.runs(), 1, "the wrap-up turn runs no tool");
    let requests = model.requests();
    assert_eq!(requests[0].tool_choice, ToolChoice::Auto);
    assert_eq!(requests[1].tool_choice, ToolChoice::None);
    let last = r.transcript.last().unwrap();
    match last {
        Message::Tool { results } => {
            assert!(results[0].is_error);
            assert_eq!(
                results[0].content,
                "Not executed: this was the last LLM call, and no tool could run. Reply now \
                 with only your answer as a JSON object."
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn native_escalation_still_ends_escalated() {
    let model = ScriptedModel::new().tool_call(
        "escalate_to_human",
        json!({"reason": "legal threat", "summary": "customer threatens to sue"}),
    );
    let config = native(&model, &[]).escalation(true).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.ending(), Ending::Escalated);
    let names: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["escalate_to_human"]);
}

#[tokio::test]
async fn a_submit_output_call_in_native_mode_is_an_unknown_tool() {
    let model = ScriptedModel::new().submit(valid()).text(answer());
    let config = native(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    let results = last_results(&model.requests()[1]);
    assert!(results[0].is_error);
    assert!(
        results[0]
            .content
            .starts_with("Unknown tool \"submit_output\""),
        "{}",
        results[0].content
    );
}

#[tokio::test]
async fn prompted_mode_reads_json_out_of_prose_and_nudges_on_prose_alone() {
    let model = ScriptedModel::new().text("Let me look at this.").respond(
        LlmResponse::text(format!("Sure. ```json\n{}\n``` Done.", answer()))
            .with_stop_reason(StopReason::EndTurn),
    );
    let config = builder(&model, &[])
        .system_prompt("You triage.")
        .output_mode(OutputMode::Prompted)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    let requests = model.requests();
    let system = requests[0].system.as_deref().unwrap();
    assert!(
        system.starts_with("You triage.\n\nWhen you have the answer"),
        "{system}"
    );
    assert!(system.contains("\"maximum\": 4"), "{system}");
    assert_eq!(
        requests[0].output.as_deref().unwrap().mode,
        OutputMode::Prompted
    );
    assert_eq!(
        requests[1].messages.last(),
        Some(&Message::user(
            "Your answer was rejected:\n- /: plain text without a JSON answer\nReply again \
             with only the corrected JSON object, and no other text."
        ))
    );
}

#[tokio::test]
async fn the_test_model_answers_in_every_mode() {
    for mode in [OutputMode::Tool, OutputMode::Native, OutputMode::Prompted] {
        let config = AgentConfig::<Triage>::builder("t")
            .llm(TestModel::new())
            .output_mode(mode)
            .build()
            .unwrap();
        let r = run_agent(&config, "ticket").await;
        assert!(r.is_ok(), "{mode}: {:?}", r.outcome);
        assert_eq!(r.usage.llm_calls, 1, "{mode}");
    }
}

#[tokio::test]
async fn output_modes_parse_from_their_names() {
    for mode in [
        OutputMode::Auto,
        OutputMode::Tool,
        OutputMode::Native,
        OutputMode::Prompted,
    ] {
        assert_eq!(mode.as_str().parse::<OutputMode>(), Ok(mode));
    }
    assert!(
        "json"
            .parse::<OutputMode>()
            .unwrap_err()
            .contains("auto, tool, native or prompted")
    );
}
