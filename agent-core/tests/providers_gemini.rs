//! The Gemini adapter against wiremock: request bodies, headers and endpoints, responses,
//! every finish-reason class, errors, and whole runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::time::Duration;

use agent_core::providers::{GeminiClient, ProviderOptions};
use agent_core::{
    AgentError, OutputMode, ToolRegistry,
    llm::{LlmClient, LlmErrorKind, StopReason},
    run_agent,
};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

const MODEL: &str = "gemini-3-pro-preview";
const PATH: &str = "/v1beta/models/gemini-3-pro-preview:generateContent";

fn client(server: &MockServer) -> GeminiClient {
    GeminiClient::new(
        &ProviderOptions::default()
            .with_api_key(KEY)
            .with_base_url(server.uri()),
    )
    .unwrap()
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, PATH, response, None).await;
}

async fn mount_once(server: &MockServer, response: ResponseTemplate) {
    mount_post(server, PATH, response, Some(1)).await;
}

fn lookup_definition() -> agent_core::tool::ToolDefinition {
    use agent_core::Tool;
    CountingTool::lookup_order().definition()
}

#[tokio::test]
async fn text_response_request_body_and_the_key_only_in_a_header() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        "/v1beta/models/gemini-2.5-flash:generateContent",
        json_fixture(200, "gemini/text.json"),
        None,
    )
    .await;
    let response = client(&server)
        .complete(&hello("gemini-2.5-flash").with_temperature(0.3))
        .await
        .unwrap();
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (21, 14)
    );
    assert_eq!(response.model.as_deref(), Some("gemini-2.5-flash"));
    assert_eq!(
        response.request_id.as_deref(),
        Some("mD9pZ7WbLq2z7M8Pq4ySgQc")
    );

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(header(&sent[0], "x-goog-api-key"), Some(KEY));
    assert_eq!(header(&sent[0], "authorization"), None);
    assert_eq!(header(&sent[0], "content-type"), Some("application/json"));
    assert_eq!(sent[0].url.query(), None, "never ?key=: {}", sent[0].url);
    assert!(!sent[0].url.as_str().contains(KEY));
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "systemInstruction": {"parts": [{"text": "You triage support tickets."}]},
            "contents": [{"role": "user", "parts": [{"text": "My parcel A-1001 is a week late."}]}],
            "generationConfig": {"maxOutputTokens": 4096, "temperature": 0.3}
        })
    );
}

#[tokio::test]
async fn a_function_call_keeps_its_id_signature_thoughts_and_usage() {
    let server = MockServer::start().await;
    mount(&server, json_fixture(200, "gemini/function_call.json")).await;
    let response = client(&server).complete(&hello(MODEL)).await.unwrap();
    assert_eq!(response.text, "I'll look up that order first.");
    assert_eq!(
        response.reasoning,
        "**Checking the order**\nThe user wants the parcel status."
    );
    assert_eq!(response.tool_calls.len(), 1);
    let call = &response.tool_calls[0];
    assert_eq!(call.id, "fc_8d1c2a7e");
    assert_eq!(call.name, "lookup_order");
    assert_eq!(call.arguments, json!({"order_id": "A-1001"}));
    assert_eq!(
        call.thought_signature.as_deref(),
        Some("CiQBVKhc7qL3l5nZ8k0Y4ms6dTqC2x1JcXnUe0H8yY6o2cKk1Q==")
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    // Input includes the cached tokens; output includes the thinking tokens.
    assert_eq!(response.usage.input_tokens, 2520);
    assert_eq!(response.usage.cache_read_tokens, 2048);
    assert_eq!(response.usage.output_tokens, 61 + 93);
}

#[tokio::test]
async fn a_run_answers_parallel_calls_in_one_user_content_with_the_signature_echoed() {
    let server = MockServer::start().await;
    mount_once(&server, json_fixture(200, "gemini/parallel_calls.json")).await;
    mount(&server, json_fixture(200, "gemini/submit.json")).await;
    let lookup = CountingTool::lookup_order();
    let ping = CountingTool::ping();
    let config = triage(MODEL, &server.uri())
        .tools(ToolRegistry::new().with(lookup.clone()).with(ping))
        .build()
        .unwrap();
    let result = run_agent(&config, "Parcels A-1001 and B-2002 are late.").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.calls(), 2);
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);

    // One declarations entry: parameters through for_gemini, none for ping, submit last.
    let declarations = bodies[0]["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap();
    let names: Vec<_> = declarations
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lookup_order", "ping", "submit_output"]);
    assert_eq!(
        declarations[0]["parameters"],
        agent_core::schema::for_gemini(&lookup_definition().parameters)
    );
    assert!(
        declarations[1].get("parameters").is_none(),
        "{declarations:?}"
    );
    assert_eq!(
        declarations[2]["parameters"],
        agent_core::schema::for_gemini(&triage_schema())
    );
    assert!(agent_core::schema::gemini_violations(&declarations[2]["parameters"]).is_empty());
    assert_eq!(
        bodies[0]["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );

    let contents = bodies[1]["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3);
    // The model turn as the model sent it: the signature on the first call only, and
    // the ids the runner gave the id-less calls.
    let parts = contents[1]["parts"].as_array().unwrap();
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(parts.len(), 2);
    assert_eq!(
        parts[0]["thoughtSignature"],
        "EoYCCoMCAdHtim9Qk1x3Xy7hT0bXvB9y2m5tqS1nZ0k4w8Yd6uI="
    );
    assert!(parts[1].get("thoughtSignature").is_none());
    let ids: Vec<&str> = parts
        .iter()
        .map(|p| p["functionCall"]["id"].as_str().unwrap())
        .collect();
    assert!(ids.iter().all(|id| !id.is_empty()) && ids[0] != ids[1]);
    assert_eq!(
        parts[1]["functionCall"]["args"],
        json!({"order_id": "B-2002"})
    );
    // Every call answered once, in call order, by id and name, in one user content.
    assert_eq!(contents[2]["role"], "user");
    let responses = contents[2]["parts"].as_array().unwrap();
    assert_eq!(responses.len(), 2);
    for (response, id) in responses.iter().zip(&ids) {
        let response = &response["functionResponse"];
        assert_eq!(response["id"], *id);
        assert_eq!(response["name"], "lookup_order");
        assert!(
            response["response"]["output"]
                .as_str()
                .unwrap()
                .contains("in transit"),
            "{response}"
        );
    }
}

#[tokio::test]
async fn a_rejected_submission_goes_back_as_an_error_response() {
    let server = MockServer::start().await;
    let invalid = fixture("gemini/submit.json").replace("\"severity\": 2", "\"severity\": 9");
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_raw(invalid, "application/json"),
    )
    .await;
    mount(&server, json_fixture(200, "gemini/submit.json")).await;
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    let last = bodies[1]["contents"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    let response = &last["parts"][0]["functionResponse"];
    assert_eq!(response["name"], "submit_output");
    assert!(response["response"].get("output").is_none(), "{response}");
    assert!(
        response["response"]["error"]
            .as_str()
            .unwrap()
            .contains("/severity"),
        "{response}"
    );
}

#[tokio::test]
async fn a_plain_text_turn_is_nudged_with_mode_any() {
    let server = MockServer::start().await;
    mount_once(&server, json_fixture(200, "gemini/text.json")).await;
    mount(&server, json_fixture(200, "gemini/submit.json")).await;
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[1]["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
}

#[tokio::test]
async fn native_output_sends_a_response_schema_and_reads_the_json_text() {
    let server = MockServer::start().await;
    mount(&server, json_fixture(200, "gemini/native.json")).await;
    let config = triage(MODEL, &server.uri())
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 1);
    let generation = &bodies[0]["generationConfig"];
    assert_eq!(generation["responseMimeType"], "application/json");
    assert_eq!(
        generation["responseSchema"],
        agent_core::schema::for_gemini(&triage_schema())
    );
    assert!(agent_core::schema::gemini_violations(&generation["responseSchema"]).is_empty());
    assert!(
        bodies[0].get("tools").is_none(),
        "no submit_output in native mode"
    );
}

#[tokio::test]
async fn before_gemini_3_native_output_never_sends_a_schema_with_tools() {
    let server = MockServer::start().await;
    let path = "/v1beta/models/gemini-2.5-flash:generateContent";
    let text = fixture("gemini/text.json");
    mount_post(
        &server,
        path,
        ResponseTemplate::new(200).set_body_raw(text, "application/json"),
        Some(1),
    )
    .await;
    mount_post(&server, path, json_fixture(200, "gemini/native.json"), None).await;
    let config = triage("gemini-2.5-flash", &server.uri())
        .output_mode(OutputMode::Native)
        .tools(ToolRegistry::new().with(CountingTool::lookup_order()))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    // A turn that may call tools: the tools, no schema; the model sees the schema in
    // the system prompt instead.
    assert!(bodies[0]["tools"].is_array());
    assert!(
        bodies[0]["generationConfig"]
            .get("responseSchema")
            .is_none()
    );
    let system = bodies[0]["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(system.contains("\"severity\""), "{system}");
    // The forced answer (no tool may be called): the schema, no tools.
    assert!(bodies[1].get("tools").is_none(), "{}", bodies[1]);
    assert_eq!(
        bodies[1]["generationConfig"]["responseMimeType"],
        "application/json"
    );
}

#[tokio::test]
async fn every_finish_reason_class_is_mapped() {
    let cases: [(&str, StopReason); 5] = [
        ("gemini/blocked_prompt.json", StopReason::ContentFilter),
        ("gemini/safety.json", StopReason::ContentFilter),
        ("gemini/max_tokens.json", StopReason::MaxTokens),
        (
            "gemini/malformed_function_call.json",
            StopReason::Other("malformed_function_call".into()),
        ),
        ("gemini/text.json", StopReason::EndTurn),
    ];
    for (file, expected) in cases {
        let server = MockServer::start().await;
        mount(&server, json_fixture(200, file)).await;
        let response = client(&server).complete(&hello(MODEL)).await.unwrap();
        assert_eq!(response.stop_reason, expected, "{file}");
    }
    // Each filter of a candidate is a content filter.
    for reason in [
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "LANGUAGE",
    ] {
        let server = MockServer::start().await;
        let body = fixture("gemini/safety.json").replace("\"SAFETY\"", &format!("\"{reason}\""));
        mount(
            &server,
            ResponseTemplate::new(200).set_body_raw(body, "application/json"),
        )
        .await;
        let response = client(&server).complete(&hello(MODEL)).await.unwrap();
        assert_eq!(response.stop_reason, StopReason::ContentFilter, "{reason}");
        assert!(response.text.contains(reason), "{}", response.text);
    }
}

#[tokio::test]
async fn a_blocked_prompt_ends_the_run_refused_after_one_request() {
    for file in ["gemini/blocked_prompt.json", "gemini/safety.json"] {
        let server = MockServer::start().await;
        mount(&server, json_fixture(200, file)).await;
        let config = triage(MODEL, &server.uri()).build().unwrap();
        let result = run_agent(&config, "ticket").await;
        let Err(AgentError::Refused {
            stop_reason,
            message,
            ..
        }) = &result.outcome
        else {
            panic!("{file}: {:?}", result.outcome)
        };
        assert_eq!(*stop_reason, StopReason::ContentFilter);
        assert!(
            message.contains("PROHIBITED_CONTENT") || message.contains("SAFETY"),
            "{message}"
        );
        assert_eq!(requests(&server).await.len(), 1, "{file}: no retry");
    }
}

#[tokio::test]
async fn a_malformed_function_call_is_a_malformed_turn_that_is_nudged() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        json_fixture(200, "gemini/malformed_function_call.json"),
    )
    .await;
    mount(&server, json_fixture(200, "gemini/submit.json")).await;
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(result.usage.llm_calls, 2);
    let bodies = bodies(&server).await;
    // The empty model turn is sent as "(empty)", never as a content without parts.
    let contents = bodies[1]["contents"].as_array().unwrap();
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [{"text": "(empty)"}]})
    );
}

#[tokio::test]
async fn a_cut_turn_names_the_cap() {
    let server = MockServer::start().await;
    mount_once(&server, json_fixture(200, "gemini/max_tokens.json")).await;
    mount(&server, json_fixture(200, "gemini/submit.json")).await;
    let config = triage(MODEL, &server.uri()).max_tokens(64).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    let bodies = bodies(&server).await;
    assert_eq!(bodies[0]["generationConfig"]["maxOutputTokens"], 64);
    let nudge = bodies[1]["contents"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(nudge.contains("64"), "{nudge}");
}

/// Status, body fixture, expected kind, expected server delay.
type ErrorCase = (u16, &'static str, LlmErrorKind, Option<Duration>);

#[tokio::test]
async fn every_error_status_is_classified() {
    let cases: [ErrorCase; 8] = [
        (
            400,
            "gemini/error_invalid_argument.json",
            LlmErrorKind::Permanent,
            None,
        ),
        (
            403,
            "gemini/error_permission_denied.json",
            LlmErrorKind::Permanent,
            None,
        ),
        (
            404,
            "gemini/error_not_found.json",
            LlmErrorKind::Permanent,
            None,
        ),
        (
            429,
            "gemini/error_rate_limit.json",
            LlmErrorKind::Transient,
            Some(Duration::from_secs(37)),
        ),
        (
            429,
            "gemini/error_quota_daily.json",
            LlmErrorKind::Permanent,
            Some(Duration::from_secs(51842)),
        ),
        (
            500,
            "gemini/error_internal.json",
            LlmErrorKind::Transient,
            None,
        ),
        (
            503,
            "gemini/error_unavailable.json",
            LlmErrorKind::Transient,
            None,
        ),
        (
            504,
            "gemini/error_deadline.json",
            LlmErrorKind::Transient,
            None,
        ),
    ];
    for (status, file, kind, delay) in cases {
        let server = MockServer::start().await;
        mount(&server, json_fixture(status, file)).await;
        let error = client(&server).complete(&hello(MODEL)).await.unwrap_err();
        assert_eq!(error.kind, kind, "{status} {file}: {error}");
        assert_eq!(error.status, Some(status));
        assert_eq!(error.retry_after, delay, "{file}");
        assert!(error.message.contains(&format!("HTTP {status}")), "{error}");
        let google_status =
            serde_json::from_str::<Value>(&fixture(file)).unwrap()["error"]["status"]
                .as_str()
                .unwrap()
                .to_owned();
        assert!(error.message.contains(&google_status), "{error}");
        assert_eq!(
            requests(&server).await.len(),
            1,
            "the adapter never retries"
        );
    }
}

#[tokio::test]
async fn a_rate_limit_is_retried_after_the_servers_delay_then_succeeds() {
    let server = MockServer::start().await;
    let limited = fixture("gemini/error_rate_limit.json").replace("\"37s\"", "\"0.02s\"");
    mount_once(
        &server,
        ResponseTemplate::new(429).set_body_raw(limited, "application/json"),
    )
    .await;
    mount(&server, json_fixture(200, "gemini/submit.json")).await;
    let delays = Delays::default();
    let config = triage(MODEL, &server.uri())
        .observer(delays.observer())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(delays.get(), [Duration::from_millis(20)]);
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0], bodies[1], "the retry re-sends the same request");
}

#[tokio::test]
async fn a_daily_quota_ends_the_run_at_once() {
    let server = MockServer::start().await;
    mount(&server, json_fixture(429, "gemini/error_quota_daily.json")).await;
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::LlmPermanent { error }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert!(error.message.contains("RESOURCE_EXHAUSTED"), "{error}");
    assert_eq!(requests(&server).await.len(), 1);
}

// C20: a garbled 200 body is transient, and retried.
#[tokio::test]
async fn c20_a_body_without_candidates_is_transient() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_raw(
            r#"{"usageMetadata": {"promptTokenCount": 3}}"#,
            "application/json",
        ),
    )
    .await;
    mount(&server, json_fixture(200, "gemini/submit.json")).await;
    let error = client(&server).complete(&hello(MODEL)).await.unwrap_err();
    assert!(error.is_transient(), "{error}");
    assert!(error.message.contains("candidates"), "{error}");
    let config = triage(MODEL, &server.uri()).build().unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
}

#[tokio::test]
async fn the_route_reads_gemini_api_key_and_base_url() {
    let server = MockServer::start().await;
    mount(&server, json_fixture(200, "gemini/submit.json")).await;
    let config = agent_core::AgentConfig::<Triage>::builder("triage")
        .model(MODEL)
        .provider(
            ProviderOptions::default()
                .with_api_key(KEY)
                .with_base_url(format!("{}/v1beta", server.uri())),
        )
        .build()
        .unwrap();
    assert_eq!(config.provider(), "gemini");
    assert_eq!(config.output_mode(), OutputMode::Tool, "Auto is tool mode");
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(requests(&server).await[0].url.path(), PATH);
}
