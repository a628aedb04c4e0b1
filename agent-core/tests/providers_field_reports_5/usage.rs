//! C56 (every billed token class counted) and C57 (a blank id or model is no id or
//! model) on the wires beside Chat Completions.

use super::*;
use crate::providers_field_reports_4::{events, gemini_client, run, sse_body, stream_once, v1};

use agent_core::providers::{AnthropicClient, BedrockClient, OpenAiResponsesClient, VertexClient};
use agent_core::{
    AgentError, ToolRegistry,
    error::Budget,
    llm::{LlmClient, TokenUsage},
    pricing::ModelPrice,
};

/// A usage object with every token class the family reports apart, and what it is:
/// Anthropic and Bedrock count cache reads and writes apart from the uncached input;
/// Gemini counts thinking apart from the candidates and the tool-use prompt apart from
/// the prompt.
fn every_class(family: Family) -> (Value, TokenUsage) {
    match family {
        Family::Anthropic => (
            json!({"input_tokens": 100, "cache_creation_input_tokens": 200,
                   "cache_read_input_tokens": 300, "output_tokens": 10}),
            TokenUsage::new(600, 10).with_cache(300, 200),
        ),
        Family::Gemini => (
            json!({"promptTokenCount": 100, "toolUsePromptTokenCount": 50,
                   "candidatesTokenCount": 10, "thoughtsTokenCount": 300,
                   "cachedContentTokenCount": 40, "totalTokenCount": 460}),
            TokenUsage::new(150, 310).with_cache(40, 0),
        ),
        Family::Bedrock => (
            json!({"inputTokens": 100, "cacheReadInputTokens": 300,
                   "cacheWriteInputTokens": 200, "outputTokens": 10, "totalTokens": 610}),
            TokenUsage::new(600, 10).with_cache(300, 200),
        ),
    }
}

#[tokio::test]
async fn c56_every_billed_token_class_reaches_usage_cost_and_the_token_cap_on_every_wire() {
    let price = ModelPrice::new(1.0, 10.0);
    for route in routes() {
        for streamed in [false, true] {
            let label = format!("{} streamed={streamed}", route.label);
            let (usage, expected) = every_class(route.family);
            let submit = Turn::submit(route.family).with_usage(usage.clone());
            let (_server, config) = route
                .serve(streamed, vec![route.reply(&submit, streamed)])
                .await;
            let config = config.price(&route.model, price).build().unwrap();
            let (_, result) = run(&config, streamed).await;
            assert_eq!(result.outcome, Ok(expected_triage()), "{label}");
            assert_eq!(result.usage.input_tokens, expected.input_tokens, "{label}");
            assert_eq!(
                result.usage.output_tokens, expected.output_tokens,
                "{label}"
            );
            assert_eq!(
                result.usage.cache_read_tokens, expected.cache_read_tokens,
                "{label}"
            );
            assert_eq!(
                result.usage.cache_write_tokens, expected.cache_write_tokens,
                "{label}"
            );
            let cost = result.usage.cost_usd.unwrap();
            assert!(
                (cost - price.cost(&expected)).abs() < 1e-12,
                "{label}: {cost}"
            );
            // The token cap sees every class: one token short of the call's total ends
            // the run before the next request.
            let total = expected.input_tokens + expected.output_tokens;
            let lookup = Turn::lookup(route.family).with_usage(usage.clone());
            let (server, config) = route
                .serve(
                    streamed,
                    vec![
                        route.reply(&lookup, streamed),
                        route.reply(&submit, streamed),
                    ],
                )
                .await;
            let config = config
                .tools(ToolRegistry::new().with(CountingTool::lookup_order()))
                .max_total_tokens(total - 1)
                .build()
                .unwrap();
            let (_, result) = run(&config, streamed).await;
            assert_eq!(
                result.outcome,
                Err(AgentError::BudgetExhausted {
                    budget: Budget::TotalTokens {
                        limit: total - 1,
                        used: total
                    }
                }),
                "{label}"
            );
            assert_eq!(requests(&server).await.len(), 1, "{label}");
        }
    }
}

// ---- C57 -------------------------------------------------------------------------------

fn vertex_client(base: &str) -> VertexClient {
    VertexClient::new(
        &options(base)
            .with_gcp_project(PROJECT)
            .with_gcp_location(LOCATION)
            .with_bearer_token("ya29.kinds-test-token"),
    )
    .unwrap()
}

/// Asserts a response has neither a request id nor a model.
fn assert_no_identity(label: &str, response: &agent_core::llm::LlmResponse) {
    assert_eq!(response.request_id, None, "{label}");
    assert_eq!(response.model, None, "{label}");
}

#[tokio::test]
async fn c57_a_blank_id_or_model_is_none_and_a_stream_keeps_the_first_non_empty_on_every_wire() {
    // Plain replies whose id and model are blank (a proxy's placeholders).
    let mut claude = anthropic_message(&Turn::submit(Family::Anthropic));
    claude["id"] = json!("");
    claude["model"] = json!("");
    let mut gemini = gemini_response(&Turn::submit(Family::Gemini));
    gemini["responseId"] = json!("");
    gemini["modelVersion"] = json!("");
    let mut responses: Value = serde_json::from_str(&fixture("responses/submit.json")).unwrap();
    responses["id"] = json!("");
    responses["model"] = json!("");
    let server = MockServer::start().await;
    for (path, body) in [
        ("/v1/messages", &claude),
        ("/v1beta/models/gemini-2.5-flash:generateContent", &gemini),
        ("/v1/responses", &responses),
    ] {
        let reply = ResponseTemplate::new(200).set_body_json(body);
        mount_post(&server, path, reply, None).await;
    }
    let anthropic = AnthropicClient::new(&options(&server.uri())).unwrap();
    let response = anthropic
        .complete(&hello("claude-sonnet-4-5"))
        .await
        .unwrap();
    assert_eq!(response.tool_calls[0].name, "submit_output");
    assert_no_identity("anthropic", &response);
    let response = gemini_client(&server.uri())
        .complete(&hello("gemini-2.5-flash"))
        .await
        .unwrap();
    assert_eq!(response.tool_calls[0].name, "submit_output");
    assert_no_identity("gemini", &response);
    let client = OpenAiResponsesClient::openai(&options(&v1(&server))).unwrap();
    let response = client.complete(&hello("gpt-5-mini")).await.unwrap();
    assert_eq!(response.tool_calls[0].name, "submit_output");
    assert_no_identity("responses", &response);
    // A blank request-id header is none too: the body's id is taken, and Bedrock (whose
    // only id is its header) has none.
    let server = MockServer::start().await;
    let claude = anthropic_message(&Turn::submit(Family::Anthropic));
    let reply = ResponseTemplate::new(200)
        .set_body_json(claude)
        .insert_header("request-id", "");
    mount_post(&server, "/v1/messages", reply, None).await;
    let bedrock = ResponseTemplate::new(200)
        .set_body_json(bedrock_response(&Turn::submit(Family::Bedrock)))
        .insert_header("x-amzn-requestid", " ");
    let path = "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse";
    mount_post(&server, path, bedrock, None).await;
    let anthropic = AnthropicClient::new(&options(&server.uri())).unwrap();
    let response = anthropic
        .complete(&hello("claude-sonnet-4-5"))
        .await
        .unwrap();
    assert_eq!(response.request_id.as_deref(), Some("msg_kinds"));
    let bedrock = BedrockClient::new(
        &options(&server.uri())
            .with_aws_region("us-east-1")
            .with_bearer_token(KEY),
    )
    .unwrap();
    let response = bedrock
        .complete(&hello("anthropic.claude-sonnet-4-5-20250929-v1:0"))
        .await
        .unwrap();
    assert_eq!(response.tool_calls[0].name, "submit_output");
    assert_eq!(response.request_id, None);

    // Streamed: Anthropic's `message_start` with a blank id and model.
    let stream = anthropic_stream(&Turn::submit(Family::Anthropic), true)
        .replacen("\"id\":\"msg_kinds\"", "\"id\":\"\"", 1)
        .replacen(
            "\"model\":\"claude-sonnet-4-5-20250929\"",
            "\"model\":\"\"",
            1,
        );
    let server = MockServer::start().await;
    mount_post(&server, "/v1/messages", sse_body(stream), None).await;
    let client = AnthropicClient::new(&options(&server.uri())).unwrap();
    let (response, _) = stream_once(&client, &hello("claude-sonnet-4-5")).await;
    assert_no_identity("anthropic streamed", &response.unwrap());

    // Gemini on Vertex: a first chunk with blank ids, the real ones after.
    let model = "gemini-2.5-flash";
    let blank = json!({"candidates": [{"content": {"parts": [{"text": "The parcel "}],
        "role": "model"}, "index": 0}], "modelVersion": "", "responseId": ""});
    let last = json!({"candidates": [{"content": {"parts": [{"text": "is late."}],
        "role": "model"}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5},
        "modelVersion": "gemini-2.5-flash-002", "responseId": "vtx57Resp"});
    let body = format!("data: {blank}\r\n\r\ndata: {last}\r\n\r\n");
    let server = MockServer::start().await;
    let path = format!(
        "/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/{model}:streamGenerateContent"
    );
    mount_post(&server, &path, sse_body(body), None).await;
    let (response, _) = stream_once(&vertex_client(&server.uri()), &hello(model)).await;
    let response = response.unwrap();
    assert_eq!(response.text, "The parcel is late.");
    assert_eq!(response.request_id.as_deref(), Some("vtx57Resp"));
    assert_eq!(response.model.as_deref(), Some("gemini-2.5-flash-002"));

    // The Responses API: `response.created` with a blank id and model, the completed
    // response with the real ones.
    let completed = {
        let mut r: Value = serde_json::from_str(&fixture("responses/text.json")).unwrap();
        r["id"] = json!("resp_k57");
        r
    };
    let stream = events(&[
        json!({"type": "response.created", "sequence_number": 0,
               "response": {"id": "", "model": "", "status": "in_progress", "output": []}}),
        json!({"type": "response.completed", "sequence_number": 1, "response": completed}),
    ]);
    let server = MockServer::start().await;
    mount_post(&server, "/v1/responses", sse_body(stream), None).await;
    let client = OpenAiResponsesClient::openai(&options(&v1(&server))).unwrap();
    let (response, _) = stream_once(&client, &hello("gpt-5-mini")).await;
    let response = response.unwrap();
    assert_eq!(response.request_id.as_deref(), Some("resp_k57"));
    assert_eq!(
        response.model,
        completed["model"].as_str().map(str::to_owned)
    );
}
