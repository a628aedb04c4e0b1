//! Prompt caching: Anthropic `cache_control` breakpoints on the system prompt (else the
//! last tool), the `PromptCaching` setting, and cache tokens in usage and cost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::{ToolRegistry, output::PromptCaching, run_agent};
use providers_support::*;
use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

fn submit_with_cache_usage() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_cache", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "submit_output",
                     "input": {"severity": 2, "queue": "shipping",
                               "summary": "Parcel A-1001 is a week late."}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 100, "cache_creation_input_tokens": 2000,
                  "cache_read_input_tokens": 8000, "output_tokens": 50}
    }))
}

async fn first_body(caching: PromptCaching, system: bool) -> serde_json::Value {
    let server = MockServer::start().await;
    mount_post(&server, "/v1/messages", submit_with_cache_usage(), None).await;
    let mut builder = triage("claude-sonnet-4-5", &server.uri())
        .tools(ToolRegistry::new().with(CountingTool::lookup_order()))
        .prompt_caching(caching);
    if !system {
        builder = builder.system_prompt("");
    }
    let config = builder.build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    bodies(&server).await.remove(0)
}

#[tokio::test]
async fn on_marks_the_system_prompt_as_a_cache_breakpoint() {
    let body = first_body(PromptCaching::On, true).await;
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You triage support tickets.",
                "cache_control": {"type": "ephemeral"}}])
    );
    for tool in body["tools"].as_array().unwrap() {
        assert!(tool.get("cache_control").is_none(), "{tool}");
    }
}

#[tokio::test]
async fn without_a_system_prompt_the_last_tool_is_the_breakpoint() {
    let body = first_body(PromptCaching::On, false).await;
    assert!(body.get("system").is_none());
    let tools = body["tools"].as_array().unwrap();
    let marked: Vec<bool> = tools
        .iter()
        .map(|t| t.get("cache_control").is_some())
        .collect();
    assert_eq!(marked, [false, true]);
    assert_eq!(tools[1]["cache_control"], json!({"type": "ephemeral"}));
}

#[tokio::test]
async fn off_and_auto_on_a_short_prompt_send_no_breakpoint() {
    for caching in [PromptCaching::Off, PromptCaching::Auto] {
        let body = first_body(caching, true).await;
        assert_eq!(
            body["system"],
            json!("You triage support tickets."),
            "{caching:?}"
        );
    }
}

#[test]
fn auto_marks_a_prefix_of_about_1024_tokens_or_more() {
    let short = triage("claude-sonnet-4-5", "http://127.0.0.1:9")
        .build()
        .unwrap();
    assert!(!short.prompt_caching());
    let long = triage("claude-sonnet-4-5", "http://127.0.0.1:9")
        .system_prompt("Policy. ".repeat(600))
        .build()
        .unwrap();
    assert!(
        long.prompt_caching(),
        "4,800 bytes of system prompt is about 1,200 tokens"
    );
    assert!(
        !long
            .with_(|b| b.prompt_caching(PromptCaching::Off))
            .unwrap()
            .prompt_caching()
    );
}

#[tokio::test]
async fn cache_tokens_are_reported_and_priced_at_the_cache_rates() {
    let server = MockServer::start().await;
    mount_post(&server, "/v1/messages", submit_with_cache_usage(), None).await;
    let config = triage("claude-sonnet-4-5", &server.uri())
        .prompt_caching(PromptCaching::On)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(r.usage.input_tokens, 100 + 2000 + 8000);
    assert_eq!(r.usage.cache_write_tokens, 2000);
    assert_eq!(r.usage.cache_read_tokens, 8000);
    // Sonnet 4.5: $3 input, $3.75 cache write, $0.30 cache read, $15 output per million.
    let want = (100.0 * 3.0 + 2000.0 * 3.75 + 8000.0 * 0.30 + 50.0 * 15.0) / 1_000_000.0;
    let cost = r.usage.cost_usd.unwrap();
    assert!((cost - want).abs() < 1e-12, "{cost} vs {want}");
}

// ---- One setting on every wire: TTL, key, cache points; usage and cost read back ----

use agent_core::AgentConfigBuilder;
use agent_core::error::ConfigError;
use agent_core::output::PromptCacheTtl;
use agent_core::providers::ProviderOptions;

/// Runs `config` once against `server` and returns the first request body and the
/// run's usage (input, cache read, cache write, output tokens) and cost.
async fn run_once(
    builder: AgentConfigBuilder<Triage>,
    server: &MockServer,
) -> (serde_json::Value, agent_core::usage::Usage) {
    let config = builder.build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    (bodies(server).await.remove(0), r.usage)
}

fn close(cost: Option<f64>, want: f64) {
    let cost = cost.unwrap();
    assert!((cost - want).abs() < 1e-12, "{cost} vs {want}");
}

#[tokio::test]
async fn anthropic_sends_the_ttl_and_prices_one_hour_writes_at_twice_input() {
    let server = MockServer::start().await;
    mount_post(&server, "/v1/messages", submit_with_cache_usage(), None).await;
    let (body, usage) = run_once(
        triage("claude-sonnet-4-5", &server.uri())
            .prompt_caching(PromptCaching::On)
            .prompt_cache_ttl(PromptCacheTtl::OneHour)
            .prompt_cache_key("ignored-by-anthropic"),
        &server,
    )
    .await;
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You triage support tickets.",
                "cache_control": {"type": "ephemeral", "ttl": "1h"}}])
    );
    assert!(body.get("prompt_cache_key").is_none(), "{body}");
    // Sonnet 4.5: $3 input, $6 one-hour cache write (2x), $0.30 read, $15 output.
    close(
        usage.cost_usd,
        (100.0 * 3.0 + 2000.0 * 6.0 + 8000.0 * 0.30 + 50.0 * 15.0) / 1e6,
    );
    // Without a system prompt the last tool carries the same breakpoint.
    let server = MockServer::start().await;
    mount_post(&server, "/v1/messages", submit_with_cache_usage(), None).await;
    let (body, _) = run_once(
        triage("claude-sonnet-4-5", &server.uri())
            .system_prompt("")
            .prompt_caching(PromptCaching::On)
            .prompt_cache_ttl(PromptCacheTtl::FiveMinutes),
        &server,
    )
    .await;
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(
        tools.last().unwrap()["cache_control"],
        json!({"type": "ephemeral", "ttl": "5m"})
    );
}

/// A Chat Completions `submit_output` reply with 1,024 of its 1,200 prompt tokens read
/// from the cache (the documented usage shape).
fn chat_submit_cached() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-cache", "object": "chat.completion", "created": 1_744_380_600,
        "model": "gpt-5-2025-08-07",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "submit_output",
                "arguments": "{\"severity\":2,\"queue\":\"shipping\",\"summary\":\"Parcel A-1001 is a week late.\"}"}}]}}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
                  "prompt_tokens_details": {"cached_tokens": 1024}}
    }))
}

#[tokio::test]
async fn openai_chat_sends_key_and_retention_only_while_caching_is_on() {
    let server = MockServer::start().await;
    mount_post(&server, "/v1/chat/completions", chat_submit_cached(), None).await;
    let base = format!("{}/v1", server.uri());
    let (on, usage) = run_once(
        triage("gpt-5", &base)
            .prompt_cache_key("triage-v1")
            .prompt_cache_ttl(PromptCacheTtl::TwentyFourHours)
            .prompt_caching(PromptCaching::On),
        &server,
    )
    .await;
    assert_eq!(on["prompt_cache_key"], "triage-v1");
    assert_eq!(on["prompt_cache_retention"], "24h");
    assert_eq!(usage.cache_read_tokens, 1024);
    assert_eq!(usage.cache_write_tokens, 0);
    // gpt-5: $1.25 input, $0.125 cached input, $10 output.
    close(
        usage.cost_usd,
        (176.0 * 1.25 + 1024.0 * 0.125 + 40.0 * 10.0) / 1e6,
    );

    // Off: exactly the request of a config without any cache setting.
    let server = MockServer::start().await;
    mount_post(&server, "/v1/chat/completions", chat_submit_cached(), None).await;
    let base = format!("{}/v1", server.uri());
    let (off, _) = run_once(
        triage("gpt-5", &base)
            .prompt_cache_key("triage-v1")
            .prompt_cache_ttl(PromptCacheTtl::TwentyFourHours)
            .prompt_caching(PromptCaching::Off),
        &server,
    )
    .await;
    let server_plain = MockServer::start().await;
    mount_post(
        &server_plain,
        "/v1/chat/completions",
        chat_submit_cached(),
        None,
    )
    .await;
    let base = format!("{}/v1", server_plain.uri());
    let (plain, _) = run_once(triage("gpt-5", &base), &server_plain).await;
    assert_eq!(off, plain);
    assert!(off.get("prompt_cache_key").is_none() && off.get("prompt_cache_retention").is_none());
    // On adds the two fields and nothing else.
    let mut without = on.as_object().unwrap().clone();
    without.remove("prompt_cache_key");
    without.remove("prompt_cache_retention");
    assert_eq!(serde_json::Value::Object(without), plain);
}

#[tokio::test]
async fn openai_five_minutes_is_in_memory_and_compatible_servers_get_nothing() {
    let server = MockServer::start().await;
    mount_post(&server, "/v1/chat/completions", chat_submit_cached(), None).await;
    let base = format!("{}/v1", server.uri());
    let (body, _) = run_once(
        triage("gpt-5", &base)
            .prompt_caching(PromptCaching::On)
            .prompt_cache_ttl(PromptCacheTtl::FiveMinutes),
        &server,
    )
    .await;
    assert_eq!(body["prompt_cache_retention"], "in_memory");
    assert!(
        body.get("prompt_cache_key").is_none(),
        "no key set: none sent"
    );
    // A compatible server: caching on with a key changes nothing in the request.
    let server = MockServer::start().await;
    mount_post(&server, "/v1/chat/completions", chat_submit_cached(), None).await;
    let base = format!("{}/v1", server.uri());
    let (body, _) = run_once(
        triage("dispatch/qwen", &base)
            .prompt_caching(PromptCaching::On)
            .prompt_cache_key("triage-v1"),
        &server,
    )
    .await;
    assert!(body.get("prompt_cache_key").is_none(), "{body}");
}

#[tokio::test]
async fn azure_chat_sends_key_and_retention_while_caching_is_on() {
    let server = MockServer::start().await;
    let path = "/openai/deployments/prod-gpt-4o/chat/completions";
    mount_post(&server, path, chat_submit_cached(), None).await;
    let (body, usage) = run_once(
        triage("azure/prod-gpt-4o", &server.uri())
            .prompt_caching(PromptCaching::On)
            .prompt_cache_key("triage-v1")
            .prompt_cache_ttl(PromptCacheTtl::TwentyFourHours),
        &server,
    )
    .await;
    assert_eq!(body["prompt_cache_key"], "triage-v1");
    assert_eq!(body["prompt_cache_retention"], "24h");
    assert_eq!(usage.cache_read_tokens, 1024);
}

#[tokio::test]
async fn openai_responses_sends_key_and_retention_and_prices_cached_input() {
    let server = MockServer::start().await;
    let submit = fixture("responses/submit.json");
    mount_post(
        &server,
        "/v1/responses",
        ResponseTemplate::new(200).set_body_raw(submit, "application/json"),
        None,
    )
    .await;
    let base = format!("{}/v1", server.uri());
    let (body, usage) = run_once(
        triage("openai-responses/gpt-5-mini", &base)
            .prompt_caching(PromptCaching::On)
            .prompt_cache_key("triage-v1")
            .prompt_cache_ttl(PromptCacheTtl::TwentyFourHours),
        &server,
    )
    .await;
    assert_eq!(body["prompt_cache_key"], "triage-v1");
    assert_eq!(body["prompt_cache_retention"], "24h");
    // The fixture: 236 input tokens of which 128 cached, 58 output.
    assert_eq!(usage.cache_read_tokens, 128);
    // gpt-5-mini: $0.25 input, $0.025 cached input, $2 output.
    close(
        usage.cost_usd,
        (108.0 * 0.25 + 128.0 * 0.025 + 58.0 * 2.0) / 1e6,
    );
}

/// A Converse `submit_output` reply whose usage has cache reads and writes (the
/// Converse `TokenUsage` shape: `inputTokens` counts the uncached input only).
fn bedrock_submit_cached() -> ResponseTemplate {
    let mut reply: serde_json::Value =
        serde_json::from_str(&fixture("bedrock/submit.json")).unwrap();
    reply["usage"] = json!({"inputTokens": 30, "outputTokens": 58,
        "cacheReadInputTokens": 4000, "cacheWriteInputTokens": 1000, "totalTokens": 5088});
    ResponseTemplate::new(200).set_body_json(reply)
}

async fn bedrock_body(
    model_id: &str,
    f: impl FnOnce(AgentConfigBuilder<Triage>) -> AgentConfigBuilder<Triage>,
) -> (serde_json::Value, agent_core::usage::Usage) {
    let server = MockServer::start().await;
    let path = format!("/model/{}/converse", model_id.replace(':', "%3A"));
    mount_post(&server, &path, bedrock_submit_cached(), None).await;
    let builder = triage_with(&format!("bedrock/{model_id}"), &server.uri(), |o| {
        o.with_aws_region("us-east-1")
    })
    .tools(ToolRegistry::new().with(CountingTool::lookup_order()));
    run_once(f(builder), &server).await
}

#[tokio::test]
async fn bedrock_puts_a_cache_point_after_the_system_prompt_with_its_ttl() {
    let model = "global.anthropic.claude-sonnet-4-5-20250929-v1:0";
    let (body, usage) = bedrock_body(model, |b| {
        b.prompt_caching(PromptCaching::On)
            .prompt_cache_ttl(PromptCacheTtl::OneHour)
    })
    .await;
    assert_eq!(
        body["system"],
        json!([{"text": "You triage support tickets."},
               {"cachePoint": {"type": "default", "ttl": "1h"}}])
    );
    let tools = body["toolConfig"]["tools"].as_array().unwrap();
    assert!(
        tools.iter().all(|t| t.get("toolSpec").is_some()),
        "{tools:?}"
    );
    assert_eq!(usage.input_tokens, 30 + 4000 + 1000);
    assert_eq!(usage.cache_read_tokens, 4000);
    assert_eq!(usage.cache_write_tokens, 1000);
    // Priced as Claude Sonnet 4.5: $3 input, $6 one-hour write, $0.30 read, $15 output.
    close(
        usage.cost_usd,
        (30.0 * 3.0 + 1000.0 * 6.0 + 4000.0 * 0.30 + 58.0 * 15.0) / 1e6,
    );
    // Off: no cache point anywhere, the system prompt as it was.
    let (off, _) = bedrock_body(model, |b| b.prompt_caching(PromptCaching::Off)).await;
    assert_eq!(
        off["system"],
        json!([{"text": "You triage support tickets."}])
    );
    assert!(!off.to_string().contains("cachePoint"), "{off}");
}

#[tokio::test]
async fn bedrock_marks_the_tools_without_a_system_prompt_and_skips_models_without_caching() {
    let claude = "anthropic.claude-3-7-sonnet-20250219-v1:0";
    let (body, _) = bedrock_body(claude, |b| {
        b.system_prompt("").prompt_caching(PromptCaching::On)
    })
    .await;
    let tools = body["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!(
        tools.last().unwrap(),
        &json!({"cachePoint": {"type": "default"}})
    );
    assert_eq!(
        tools.len(),
        3,
        "lookup_order, submit_output, the cache point"
    );
    // Nova caches no tools: the point goes after the system prompt only.
    let (nova, _) = bedrock_body("amazon.nova-pro-v1:0", |b| {
        b.system_prompt("").prompt_caching(PromptCaching::On)
    })
    .await;
    assert!(!nova.to_string().contains("cachePoint"), "{nova}");
    // Llama rejects cache points: none is sent.
    let (llama, _) = bedrock_body("meta.llama3-3-70b-instruct-v1:0", |b| {
        b.prompt_caching(PromptCaching::On)
    })
    .await;
    assert!(!llama.to_string().contains("cachePoint"), "{llama}");
}

#[tokio::test]
async fn gemini_caches_implicitly_the_request_is_unchanged_and_cached_tokens_are_priced() {
    let mut reply: serde_json::Value =
        serde_json::from_str(&fixture("gemini/submit.json")).unwrap();
    reply["usageMetadata"] = json!({"promptTokenCount": 3000, "cachedContentTokenCount": 2048,
        "candidatesTokenCount": 72, "totalTokenCount": 3072});
    let path = "/v1beta/models/gemini-2.5-flash:generateContent";
    let mut seen = Vec::new();
    for caching in [PromptCaching::On, PromptCaching::Off] {
        let server = MockServer::start().await;
        mount_post(
            &server,
            path,
            ResponseTemplate::new(200).set_body_json(reply.clone()),
            None,
        )
        .await;
        let (body, usage) = run_once(
            triage("gemini-2.5-flash", &server.uri())
                .prompt_caching(caching)
                .prompt_cache_key("ignored-by-gemini"),
            &server,
        )
        .await;
        assert_eq!(usage.cache_read_tokens, 2048);
        // Gemini 2.5 Flash: $0.30 input, $0.03 cached input, $2.50 output.
        close(
            usage.cost_usd,
            (952.0 * 0.30 + 2048.0 * 0.03 + 72.0 * 2.50) / 1e6,
        );
        seen.push(body);
    }
    assert_eq!(seen[0], seen[1], "caching on sends the same request as off");
}

fn ttl_error(model: &str, ttl: PromptCacheTtl) -> ConfigError {
    triage_with(model, "http://127.0.0.1:9", |o| {
        o.with_aws_region("us-east-1")
    })
    .prompt_cache_ttl(ttl)
    .build()
    .unwrap_err()
}

#[test]
fn an_unsupported_ttl_is_a_config_error_naming_the_provider_and_the_allowed_values() {
    let cases = [
        (
            "claude-sonnet-4-5",
            PromptCacheTtl::TwentyFourHours,
            "anthropic",
            "5m, 1h",
        ),
        ("gpt-5", PromptCacheTtl::OneHour, "openai", "5m, 24h"),
        (
            "gemini-2.5-flash",
            PromptCacheTtl::FiveMinutes,
            "gemini",
            "none (this provider takes no TTL; leave prompt_cache_ttl unset)",
        ),
        (
            "bedrock/anthropic.claude-3-7-sonnet-20250219-v1:0",
            PromptCacheTtl::OneHour,
            "aws.bedrock",
            "5m",
        ),
    ];
    for (model, ttl, provider, allowed) in cases {
        match ttl_error(model, ttl) {
            ConfigError::UnsupportedCacheTtl {
                provider: p,
                model: m,
                ttl: t,
                allowed: a,
            } => {
                assert_eq!(
                    (p.as_str(), m.as_str(), t.as_str(), a.as_str()),
                    (provider, model, ttl.as_str(), allowed)
                );
            }
            other => panic!("{model}: {other:?}"),
        }
    }
    // Every model of the chain is checked: a fallback that takes no TTL fails the build.
    let err = triage("claude-sonnet-4-5", "http://127.0.0.1:9")
        .fallback_model_with(
            "gemini-2.5-flash",
            ProviderOptions::default().with_api_key("gemini-test-key"),
        )
        .prompt_cache_ttl(PromptCacheTtl::OneHour)
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnsupportedCacheTtl { model, .. } if model == "gemini-2.5-flash"),
        "{err:?}"
    );
    // The message names the provider and the values it takes.
    let message = ttl_error("gpt-5", PromptCacheTtl::OneHour).to_string();
    assert!(
        message.contains("openai") && message.contains("5m, 24h"),
        "{message}"
    );
    // An empty key is rejected too.
    let err = triage("gpt-5", "http://127.0.0.1:9")
        .prompt_cache_key(" ")
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::InvalidSetting {
                setting: "prompt_cache_key",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn the_ttl_and_key_are_part_of_the_fingerprint_only_when_set() {
    let plain = triage("gpt-5", "http://127.0.0.1:9").build().unwrap();
    let with_ttl = plain
        .with_(|b| b.prompt_cache_ttl(PromptCacheTtl::TwentyFourHours))
        .unwrap();
    let with_key = plain.with_(|b| b.prompt_cache_key("triage-v1")).unwrap();
    assert_ne!(plain.fingerprint(), with_ttl.fingerprint());
    assert_ne!(plain.fingerprint(), with_key.fingerprint());
    assert_ne!(with_ttl.fingerprint(), with_key.fingerprint());
}
