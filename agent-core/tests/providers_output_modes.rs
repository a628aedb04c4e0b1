//! Output modes on the wire, per provider against wiremock: the exact request of each
//! mode (`response_format`, `output_config`, the prompted system text) and the parse
//! path of each kind of reply (bare JSON, fenced JSON, JSON with text around it, a
//! truncated object, prose).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::{
    AgentConfig, AgentError, OutputMode, ToolRegistry, error::AttemptKind, run_agent,
};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

const ANSWER: &str =
    r#"{"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."}"#;

fn openai_reply(content: &str, finish: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-native",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "finish_reason": finish,
                     "message": {"role": "assistant", "content": content, "refusal": null}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20}
    }))
}

fn anthropic_reply(text: &str, stop: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_native",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop,
        "usage": {"input_tokens": 50, "output_tokens": 20}
    }))
}

/// A server answering each request with the next of `replies` (the last one repeats).
async fn server_with(path: &str, replies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    let n = replies.len();
    for (i, reply) in replies.into_iter().enumerate() {
        let times = if i + 1 == n { None } else { Some(1) };
        mount_post(&server, path, reply, times).await;
    }
    server
}

fn openai_config(server: &MockServer, model: &str, mode: OutputMode) -> AgentConfig<Triage> {
    triage(model, &format!("{}/v1", server.uri()))
        .output_mode(mode)
        .build()
        .unwrap()
}

// ---- OpenAI ------------------------------------------------------------------------

#[tokio::test]
async fn openai_native_sends_a_strict_response_format_and_no_submit_tool() {
    let server = server_with("/v1/chat/completions", vec![openai_reply(ANSWER, "stop")]).await;
    let config = triage("gpt-4.1", &format!("{}/v1", server.uri()))
        .output_mode(OutputMode::Native)
        .tools(ToolRegistry::new().with(CountingTool::lookup_order()))
        .build()
        .unwrap();
    assert_eq!(config.output_mode(), OutputMode::Native);
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.output, ANSWER, "the raw answer text");
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {
            "name": "output",
            "description": "Triage decision for one support ticket.",
            "strict": true,
            "schema": {
                "type": "object",
                "properties": {
                    "severity": {"type": "integer", "minimum": 1, "maximum": 4,
                                 "description": "Severity from 1 (lowest) to 4 (critical)."},
                    "queue": {"type": "string", "enum": ["billing", "shipping", "technical", "account"],
                              "description": "Where the ticket goes."},
                    "summary": {"type": "string", "description": "One sentence. (minLength: 1)"}
                },
                "required": ["severity", "queue", "summary"],
                "additionalProperties": false
            }
        }})
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["lookup_order"], "no submit_output in native mode");
    assert_eq!(body["tool_choice"], "auto");
}

#[tokio::test]
async fn openai_tool_mode_sends_no_response_format() {
    let server = server_with(
        "/v1/chat/completions",
        vec![json_fixture(200, "openai/tool_call.json")],
    )
    .await;
    let config = openai_config(&server, "gpt-4.1", OutputMode::Tool);
    let _ = run_agent(&config.with_(|b| b.max_llm_calls(1)).unwrap(), "ticket").await;
    let body = &bodies(&server).await[0];
    assert!(body.get("response_format").is_none());
    assert!(
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "submit_output")
    );
}

#[tokio::test]
async fn openai_native_feeds_back_a_rejected_answer_as_a_user_message() {
    let bad = r#"{"severity": 9, "queue": "shipping", "summary": "x"}"#;
    let server = server_with(
        "/v1/chat/completions",
        vec![openai_reply(bad, "stop"), openai_reply(ANSWER, "stop")],
    )
    .await;
    let config = openai_config(&server, "gpt-4.1", OutputMode::Native);
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let second = &bodies(&server).await[1];
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages[2], json!({"role": "assistant", "content": bad}));
    assert_eq!(
        messages[3],
        json!({"role": "user", "content": "Your answer was rejected:\n- /severity: 9 is greater than the maximum of 4\nReply again with only the corrected JSON object, and no other text."})
    );
    assert_eq!(
        second["tool_choice"],
        Value::Null,
        "no tools, no tool_choice"
    );
}

// ---- Anthropic ---------------------------------------------------------------------

#[tokio::test]
async fn anthropic_native_sends_output_config_with_constraints_moved_to_descriptions() {
    let server = server_with("/v1/messages", vec![anthropic_reply(ANSWER, "end_turn")]).await;
    let config = triage("claude-sonnet-4-5", &server.uri())
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let sent = requests(&server).await;
    assert_eq!(
        header(&sent[0], "anthropic-beta"),
        None,
        "GA shape, no beta header"
    );
    let body = &bodies(&server).await[0];
    assert!(body.get("tools").is_none());
    assert_eq!(
        body["output_config"],
        json!({"format": {"type": "json_schema", "schema": {
            "type": "object",
            "properties": {
                "severity": {"type": "integer",
                             "description": "Severity from 1 (lowest) to 4 (critical). (minimum: 1, maximum: 4)"},
                "queue": {"type": "string", "enum": ["billing", "shipping", "technical", "account"],
                          "description": "Where the ticket goes."},
                "summary": {"type": "string", "description": "One sentence. (minLength: 1)"}
            },
            "required": ["severity", "queue", "summary"],
            "additionalProperties": false
        }}})
    );
}

#[tokio::test]
async fn anthropic_native_is_refused_at_build_for_models_before_4_5() {
    for model in [
        "claude-3-5-haiku-20241022",
        "claude-sonnet-4-20250514",
        "claude-opus-4-1",
    ] {
        let err = triage(model, "http://127.0.0.1:9")
            .output_mode(OutputMode::Native)
            .build()
            .unwrap_err();
        assert!(
            matches!(err, agent_core::ConfigError::UnsupportedOutputMode { .. }),
            "{model}: {err}"
        );
    }
    for model in [
        "claude-haiku-4-5",
        "claude-opus-4-6",
        "claude-sonnet-4-5-20250929",
    ] {
        assert!(
            triage(model, "http://127.0.0.1:9")
                .output_mode(OutputMode::Native)
                .build()
                .is_ok(),
            "{model}"
        );
    }
}

#[tokio::test]
async fn anthropic_native_cut_off_at_max_tokens_names_the_cap() {
    let cut = r#"{"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a"#;
    let server = server_with(
        "/v1/messages",
        vec![
            anthropic_reply(cut, "max_tokens"),
            anthropic_reply(ANSWER, "end_turn"),
        ],
    )
    .await;
    let config = triage("claude-sonnet-4-5", &server.uri())
        .output_mode(OutputMode::Native)
        .max_tokens(64)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let second = &bodies(&server).await[1];
    let feedback = second["messages"][2]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(
        feedback,
        "Your answer was rejected:\n- /: the JSON object was cut off before its end\nYour reply \
         was cut off at the output limit (max_tokens, 64 tokens): keep every string short.\n\
         Reply again with only the corrected JSON object, and no other text."
    );
}

// ---- OpenAI-compatible servers -------------------------------------------------------

#[tokio::test]
async fn compatible_auto_is_native_with_the_full_schema_for_the_grammar() {
    let server = server_with("/v1/chat/completions", vec![openai_reply(ANSWER, "stop")]).await;
    let config = openai_config(&server, "dispatch/gemma", OutputMode::Auto);
    assert_eq!(config.output_mode(), OutputMode::Native);
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let body = &bodies(&server).await[0];
    // The canonical schema as is (minLength kept: llama.cpp builds its grammar from it),
    // and no strict flag.
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {
            "name": "output",
            "description": "Triage decision for one support ticket.",
            "schema": triage_schema()
        }})
    );
    // A grammar-based server never shows that schema to the model: it is in the system
    // prompt too, as in prompted mode.
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You triage support tickets.\n\nWhen you have the answer, reply"),
        "{system}"
    );
    assert!(system.contains("\"Where the ticket goes.\""), "{system}");
    // OpenAI shows the schema to the model itself: the system prompt stays as set.
    let server = server_with("/v1/chat/completions", vec![openai_reply(ANSWER, "stop")]).await;
    let config = openai_config(&server, "gpt-4.1", OutputMode::Native);
    assert_eq!(
        config.effective_system_prompt(),
        Some("You triage support tickets.")
    );
}

#[tokio::test]
async fn compatible_native_parses_fenced_json_and_json_with_trailing_text() {
    for reply in [
        format!("```json\n{ANSWER}\n```"),
        format!("{ANSWER}\n\nLet me know if you need anything else."),
        format!("Here is the triage: {ANSWER}"),
    ] {
        let server = server_with("/v1/chat/completions", vec![openai_reply(&reply, "stop")]).await;
        let config = openai_config(&server, "dispatch/gemma", OutputMode::Native);
        let result = run_agent(&config, "ticket").await;
        assert_eq!(result.outcome, Ok(expected_triage()), "{reply}");
        assert_eq!(result.output, reply);
        assert_eq!(result.usage.llm_calls, 1);
    }
}

#[tokio::test]
async fn compatible_native_truncated_and_prose_replies_end_typed() {
    let cut = r#"{"severity": 2, "queue": "shipping", "summary": "   "#;
    let server = server_with("/v1/chat/completions", vec![openai_reply(cut, "length")]).await;
    let config = openai_config(&server, "dispatch/gemma", OutputMode::Native);
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::SchemaValidation { attempts }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(attempts.len(), 3);
    assert!(
        attempts
            .iter()
            .all(|a| a.kind == AttemptKind::SchemaValidation)
    );
    assert_eq!(
        attempts[0].message,
        "/: the JSON object was cut off before its end (the reply hit max_tokens, 4096 tokens)"
    );

    let server = server_with(
        "/v1/chat/completions",
        vec![openai_reply("The parcel is late.", "stop")],
    )
    .await;
    let config = openai_config(&server, "dispatch/gemma", OutputMode::Native);
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.category(), Some("schema_validation_failed"));
    assert_eq!(
        result.outcome.unwrap_err().attempts()[0].message,
        "/: the reply is not a JSON object"
    );
}

#[tokio::test]
async fn compatible_prompted_puts_the_schema_in_the_system_prompt_only() {
    let server = server_with(
        "/v1/chat/completions",
        vec![
            openai_reply("Let me think about this ticket.", "stop"),
            openai_reply(&format!("```json\n{ANSWER}\n```"), "stop"),
        ],
    )
    .await;
    let config = openai_config(&server, "dispatch/gemma", OutputMode::Prompted);
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    let body = &bodies[0];
    assert!(body.get("response_format").is_none());
    assert!(body.get("tools").is_none());
    let system = body["messages"][0]["content"].as_str().unwrap();
    let schema = serde_json::to_string_pretty(&triage_schema()).unwrap();
    assert_eq!(
        system,
        format!(
            "You triage support tickets.\n\nWhen you have the answer, reply with only a JSON \
             object, and no other text: Triage decision for one support ticket.\nThe object \
             must match this JSON Schema:\n```json\n{schema}\n```"
        )
    );
    assert_eq!(
        config.effective_system_prompt(),
        Some(system),
        "what the config says it sends"
    );
    // Prose first: a plain-text turn (schema_not_called), nudged in a user message.
    let second = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(second[3]["role"], "user");
    assert!(
        second[3]["content"]
            .as_str()
            .unwrap()
            .contains("plain text without a JSON answer")
    );
}
