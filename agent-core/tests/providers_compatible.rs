//! OpenAI-compatible servers (`dispatch/`, `ollama/`) against wiremock: the quirks of
//! llama.cpp, Ollama and routers (C6, C7, C9, `<tool_call>` text, errors in 200 bodies).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::collections::HashSet;

use agent_core::providers::{OpenAiClient, ProviderOptions};
use agent_core::{
    AgentError, AgentOutput, Tool,
    llm::{LlmClient, LlmErrorKind, ToolChoice},
    run_agent,
};
use providers_support::*;
use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

const MODEL: &str = "dispatch/gemma";

fn base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

fn client(server: &MockServer) -> OpenAiClient {
    OpenAiClient::compatible(
        "dispatch",
        &ProviderOptions::default().with_base_url(base(server)),
    )
    .unwrap()
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, "/v1/chat/completions", response, None).await;
}

async fn mount_once(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, "/v1/chat/completions", response, Some(1)).await;
}

#[tokio::test]
async fn llama_cpp_text_without_key_uses_max_tokens_and_the_short_name() {
    let server = MockServer::start().await;
    mount(&server, json_fixture(200, "compatible/llama_cpp_text.json")).await;
    let c = client(&server);
    assert_eq!(c.provider(), "dispatch");
    let response = c.complete(&hello("gemma")).await.unwrap();
    assert_eq!(
        response.text,
        "Severity 2, shipping queue: the parcel is late."
    );
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (287, 13)
    );
    // No request-id header: the completion id stands in.
    assert_eq!(
        response.request_id.as_deref(),
        Some("chatcmpl-Xb1OqQ3m5ZpGkA7uYc2R9tLwE0dHfVnJ")
    );
    let sent = requests(&server).await;
    assert_eq!(header(&sent[0], "authorization"), None);

    // Through routing: dispatch/NAME sends NAME, with the optional key as a bearer.
    let config = triage(MODEL, &base(&server)).build().unwrap();
    assert_eq!(config.provider(), "dispatch");
    let _ = run_agent(&config.with_(|b| b.max_llm_calls(1)).unwrap(), "ticket").await;
    let sent = requests(&server).await;
    let body: serde_json::Value = serde_json::from_slice(&sent[1].body).unwrap();
    assert_eq!(body["model"], "gemma");
    assert_eq!(body["max_tokens"], 4096);
    assert!(body.get("max_completion_tokens").is_none());
    assert_eq!(
        header(&sent[1], "authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[tokio::test]
async fn ollama_route_posts_to_the_host_v1_endpoint() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(200, "compatible/c7_object_arguments.json"),
    )
    .await;
    // OLLAMA_HOST semantics: a host; /v1 is appended.
    let config = agent_core::AgentConfig::<Triage>::builder("t")
        .model("ollama/llama3.2")
        .output_mode(agent_core::OutputMode::Tool)
        .provider(ProviderOptions::default().with_base_url(server.uri()))
        .tools(agent_core::ToolRegistry::new().with(CountingTool::lookup_order()))
        .max_llm_calls(1)
        .build()
        .unwrap();
    assert_eq!(config.provider(), "ollama");
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.category(), Some("max_llm_calls"));
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["model"], "llama3.2");
}

// C9: tool calls without ids get unique synthesised ids, used for the results.
#[tokio::test]
async fn c9_missing_ids_are_synthesised_and_answered() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(200, "compatible/c9_tool_calls_without_ids.json"),
    )
    .await;
    let response = client(&server).complete(&hello("gemma")).await.unwrap();
    let ids: HashSet<_> = response.tool_calls.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|id| id.starts_with("call_") && id.len() > 5));

    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "compatible/c9_tool_calls_without_ids.json"),
    )
    .await;
    mount(
        &server,
        json_fixture(200, "compatible/tool_call_in_content.json"),
    )
    .await;
    let lookup = CountingTool::lookup_order();
    let config = triage(MODEL, &base(&server))
        .tools(agent_core::ToolRegistry::new().with(lookup.clone()))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.calls(), 2);
    let bodies = bodies(&server).await;
    let messages = bodies[1]["messages"].as_array().unwrap();
    let call_ids: Vec<_> = messages[2]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    let result_ids: Vec<_> = messages[3..5]
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(call_ids, result_ids);
    assert_ne!(call_ids[0], call_ids[1]);
    assert!(call_ids.iter().all(|id| !id.is_empty()));
}

// C6: "", null, "{}" and {} are all the empty object; the tool runs each time.
#[tokio::test]
async fn c6_every_empty_argument_spelling_runs_the_tool() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "compatible/c6_empty_argument_spellings.json"),
    )
    .await;
    mount(
        &server,
        json_fixture(200, "compatible/tool_call_in_content.json"),
    )
    .await;
    let response = client(&server).complete(&hello("m")).await.unwrap();
    assert_eq!(response.tool_calls.len(), 4);
    for call in &response.tool_calls {
        assert_eq!(call.arguments, json!({}), "{}", call.id);
        assert_eq!(call.arguments_error, None, "{}", call.id);
    }

    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "compatible/c6_empty_argument_spellings.json"),
    )
    .await;
    mount(
        &server,
        json_fixture(200, "compatible/tool_call_in_content.json"),
    )
    .await;
    let ping = CountingTool::ping();
    let config = triage(MODEL, &base(&server))
        .tools(agent_core::ToolRegistry::new().with(ping.clone()))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(ping.calls(), 4);
    let bodies = bodies(&server).await;
    for call in bodies[1]["messages"][2]["tool_calls"].as_array().unwrap() {
        assert_eq!(call["function"]["arguments"], "{}");
    }
}

// C7: arguments as a JSON object are accepted, and re-sent as a JSON string.
#[tokio::test]
async fn c7_object_arguments_are_accepted_and_resent_as_strings() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "compatible/c7_object_arguments.json"),
    )
    .await;
    mount(
        &server,
        json_fixture(200, "compatible/tool_call_in_content.json"),
    )
    .await;
    let lookup = CountingTool::lookup_order();
    let config = triage(MODEL, &base(&server))
        .tools(agent_core::ToolRegistry::new().with(lookup.clone()))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.seen(), [json!({"order_id": "A-1001"})]);
    let bodies = bodies(&server).await;
    let call = &bodies[1]["messages"][2]["tool_calls"][0];
    assert_eq!(call["id"], "call_w3pl5r6t");
    assert_eq!(call["function"]["arguments"], "{\"order_id\":\"A-1001\"}");
}

// A <tool_call> block in the text, with tool_calls [] and finish_reason stop, is a call.
#[tokio::test]
async fn tool_calls_written_as_text_are_recovered() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(200, "compatible/tool_call_in_content.json"),
    )
    .await;
    let response = client(&server).complete(&hello("gemma")).await.unwrap();
    assert_eq!(response.text, "I will submit the triage.");
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].name, "submit_output");
    assert!(!response.tool_calls[0].id.is_empty());
    let config = triage(MODEL, &base(&server)).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.llm_calls, 1, "recovered on the first turn");

    // OpenAI proper never writes calls as text: there the block stays text.
    let openai = OpenAiClient::openai(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(base(&server)),
    )
    .unwrap();
    let response = openai.complete(&hello("gpt-4.1")).await.unwrap();
    assert!(response.tool_calls.is_empty());
    assert!(response.text.contains("<tool_call>"));
}

// The wrap-up turn names submit_output; llama.cpp reads tool_choice only as a string,
// so a compatible server gets "required" when submit_output is the only tool offered.
#[tokio::test]
async fn a_named_tool_choice_is_sent_as_required_when_it_is_the_only_tool() {
    let server = MockServer::start().await;
    mount(
        &server,
        json_fixture(200, "compatible/tool_call_in_content.json"),
    )
    .await;
    let config = triage(MODEL, &base(&server))
        .tools(agent_core::ToolRegistry::new().with(CountingTool::lookup_order()))
        .max_llm_calls(1)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    assert_eq!(bodies[0]["tool_choice"], "required");
    let tools = bodies[0]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["function"]["name"], "submit_output");

    // With other tools offered, the named form is kept.
    let request = hello("gemma")
        .with_tools(vec![
            CountingTool::lookup_order().definition(),
            Triage::output_tool().unwrap(),
        ])
        .with_tool_choice(ToolChoice::Tool("submit_output".into()));
    let _ = client(&server).complete(&request).await.unwrap();
    let bodies = providers_support::bodies(&server).await;
    assert_eq!(
        bodies[1]["tool_choice"],
        json!({"type": "function", "function": {"name": "submit_output"}})
    );
}

#[tokio::test]
async fn server_errors_of_compatible_servers_are_classified() {
    let cases: [(u16, &str, LlmErrorKind); 4] = [
        (
            503,
            "compatible/error_loading_model.json",
            LlmErrorKind::Transient,
        ),
        (
            404,
            "compatible/ollama_model_not_found.json",
            LlmErrorKind::Permanent,
        ),
        // A router's error inside a 200: classified by its numeric code (502).
        (
            200,
            "compatible/error_in_200_body.json",
            LlmErrorKind::Transient,
        ),
        (
            400,
            "compatible/error_loading_model.json",
            LlmErrorKind::Permanent,
        ),
    ];
    for (status, file, kind) in cases {
        let server = MockServer::start().await;
        mount(&server, json_fixture(status, file)).await;
        let error = client(&server).complete(&hello("m")).await.unwrap_err();
        assert_eq!(error.kind, kind, "{status} {file}: {error}");
        assert_eq!(error.status, Some(status));
    }
    // An embedded 4xx code is permanent.
    let server = MockServer::start().await;
    let body = json!({"error": {"message": "invalid model", "code": 400}});
    mount(&server, ResponseTemplate::new(200).set_body_json(body)).await;
    let error = client(&server).complete(&hello("m")).await.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Permanent, "{error}");
    assert!(error.message.contains("invalid model"), "{error}");
}

// C20: a 200 whose body is cut off, or not JSON, is a transient decode error.
#[tokio::test]
async fn c20_cut_off_or_non_json_200_is_transient_and_retried() {
    for (file, content_type, what) in [
        (
            "compatible/c20_cut_off.json",
            "application/json",
            "is cut off",
        ),
        ("compatible/c20_not_json.html", "text/html", "is not JSON"),
    ] {
        let server = MockServer::start().await;
        mount_once(&server, raw_fixture(200, file, content_type)).await;
        mount(
            &server,
            json_fixture(200, "compatible/tool_call_in_content.json"),
        )
        .await;
        let error = client(&server).complete(&hello("m")).await.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Transient, "{error}");
        assert_eq!(error.status, Some(200));
        assert!(error.message.contains(what), "{error}");

        let server = MockServer::start().await;
        mount_once(&server, raw_fixture(200, file, content_type)).await;
        mount(
            &server,
            json_fixture(200, "compatible/tool_call_in_content.json"),
        )
        .await;
        let config = triage(MODEL, &base(&server)).build().unwrap();
        let result = run_agent(&config, "ticket").await;
        assert_eq!(result.outcome, Ok(expected_triage()), "{file}");
        assert_eq!(requests(&server).await.len(), 2);
    }
}

#[tokio::test]
async fn a_missing_choices_list_is_transient_not_an_empty_turn() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200).set_body_json(json!({"id": "x", "object": "chat.completion"})),
    )
    .await;
    let error = client(&server).complete(&hello("m")).await.unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Transient);
    assert!(error.message.contains("expected shape"), "{error}");
    let config = triage(MODEL, &base(&server))
        .max_llm_retries(2)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::MaxLlmRetries { failures }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(failures.len(), 2);
}
