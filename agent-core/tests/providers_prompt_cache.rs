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
