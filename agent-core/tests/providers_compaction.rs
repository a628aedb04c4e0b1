//! Compacted histories on every wire: a run of many tool turns with a summarizing
//! compaction, against wiremock servers speaking the Anthropic Messages, OpenAI Chat
//! Completions and Gemini wires. On the request bodies the adapters sent: every call is
//! answered exactly once, right after the turn that made it, and no result answers a
//! call the body does not have. (The adapters also repair any history they are given;
//! the runner's own histories are checked strictly, before any adapter, in
//! `compaction.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::sync::atomic::{AtomicUsize, Ordering};

use agent_core::testing::{ScriptStep, ScriptedModel};
use agent_core::{
    config::Compaction,
    llm::{LlmResponse, TokenUsage},
    run_agent,
};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Tool turns before the submission.
const TURNS: usize = 16;

#[derive(Clone, Copy)]
enum Wire {
    Anthropic,
    OpenAi,
    Gemini,
}

/// Answers the `n`th request with a `lookup_order` call, and the last with the
/// submission, in the wire's shape.
struct Turns {
    wire: Wire,
    n: AtomicUsize,
}

impl Respond for Turns {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.n.fetch_add(1, Ordering::SeqCst);
        let (name, args) = if n < TURNS {
            ("lookup_order", json!({"order_id": format!("A-{n:04}")}))
        } else {
            (
                "submit_output",
                json!({"severity": 2, "queue": "shipping", "summary": "Parcel A-1001 is a week late."}),
            )
        };
        let body = match self.wire {
            Wire::Anthropic => json!({
                "id": format!("msg_{n}"), "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": args}],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 900 + 300 * n, "output_tokens": 20}
            }),
            Wire::OpenAi => json!({
                "id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": "gpt-4o",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": null,
                    "tool_calls": [{"id": format!("call_{n}"), "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}}]}}],
                "usage": {"prompt_tokens": 900 + 300 * n, "completion_tokens": 20, "total_tokens": 920 + 300 * n}
            }),
            Wire::Gemini => json!({
                "candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]},
                    "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 900 + 300 * n, "candidatesTokenCount": 20}
            }),
        };
        ResponseTemplate::new(200).set_body_json(body)
    }
}

/// The (call ids made, call ids answered) of each message of a request body, in order,
/// as the wire spells them; Gemini has no ids, so its calls and results are named by
/// tool and counted.
fn calls_and_results(wire: Wire, body: &Value) -> Vec<(Vec<String>, Vec<String>)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    match wire {
        Wire::Anthropic => body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let blocks = m["content"].as_array().cloned().unwrap_or_default();
                let of = |kind: &str, key: &str| -> Vec<String> {
                    blocks
                        .iter()
                        .filter(|b| b["type"] == kind)
                        .map(|b| s(&b[key]))
                        .collect()
                };
                (of("tool_use", "id"), of("tool_result", "tool_use_id"))
            })
            .collect(),
        Wire::OpenAi => {
            // Consecutive `tool` messages are one answer to the assistant message before.
            let mut out: Vec<(Vec<String>, Vec<String>)> = Vec::new();
            for m in body["messages"].as_array().unwrap() {
                if m["role"] == "tool" {
                    let id = s(&m["tool_call_id"]);
                    match out.last_mut() {
                        Some((calls, answered)) if calls.is_empty() && !answered.is_empty() => {
                            answered.push(id);
                        }
                        _ => out.push((Vec::new(), vec![id])),
                    }
                    continue;
                }
                let calls = m["tool_calls"]
                    .as_array()
                    .map(|c| c.iter().map(|c| s(&c["id"])).collect())
                    .unwrap_or_default();
                out.push((calls, Vec::new()));
            }
            out
        }
        Wire::Gemini => body["contents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let parts = c["parts"].as_array().cloned().unwrap_or_default();
                let of = |key: &str| -> Vec<String> {
                    parts
                        .iter()
                        .filter(|p| p.get(key).is_some())
                        .map(|p| s(&p[key]["name"]))
                        .collect()
                };
                (of("functionCall"), of("functionResponse"))
            })
            .collect(),
    }
}

/// Every call answered exactly once in the next message, every result answering the
/// message before it.
fn assert_paired(wire: Wire, body: &Value) {
    let turns = calls_and_results(wire, body);
    for (i, (calls, answered)) in turns.iter().enumerate() {
        if !calls.is_empty() {
            let next = turns.get(i + 1).map(|t| t.1.clone()).unwrap_or_default();
            assert_eq!(
                &next, calls,
                "message {i}: calls {calls:?} answered by {next:?}"
            );
        }
        if !answered.is_empty() {
            let before = i
                .checked_sub(1)
                .map(|j| turns[j].0.clone())
                .unwrap_or_default();
            assert_eq!(
                &before, answered,
                "message {i}: results {answered:?} after calls {before:?}"
            );
        }
    }
}

async fn compacted_run_on(wire: Wire, model: &str) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Turns {
            wire,
            n: AtomicUsize::new(0),
        })
        .mount(&server)
        .await;
    let writer = ScriptedModel::from_steps((0..TURNS).map(|_| {
        ScriptStep::Respond(
            LlmResponse::text("Orders A-0000 onward are in transit.")
                .with_usage(TokenUsage::new(80, 12)),
        )
    }));
    let tool = CountingTool::lookup_order();
    let config = triage(model, &server.uri())
        .tool(tool.clone())
        .max_llm_calls(TURNS as u32 + 2)
        .max_tool_calls(TURNS as u32 + 2)
        .repeated_call_limit(u32::MAX)
        .no_progress_turns(u32::MAX)
        .compaction(
            Compaction::summarize_with(writer.clone(), "summarizer")
                .max_history_tokens(2_000)
                .keep_recent_turns(2),
        )
        .build()
        .unwrap();
    let result = run_agent(&config, "Where are my parcels?").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(tool.calls(), TURNS as u32);
    // The reported input grows by 300 tokens a turn past a 2,000 budget: compacted
    // from the fourth call on, once per call.
    assert!(
        result.usage.compactions >= 10,
        "{}",
        result.usage.compactions
    );
    assert_eq!(writer.request_count() as u32, result.usage.compactions);
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), TURNS + 1);
    for body in &bodies {
        assert_paired(wire, body);
    }
    // The last request holds the summary and the two newest turns, not all sixteen.
    let last = bodies.last().unwrap().to_string();
    assert!(
        last.contains("Summary of the earlier turns of this run"),
        "{last}"
    );
    assert!(
        !last.contains("A-0003"),
        "an old turn is still there: {last}"
    );
}

#[tokio::test]
async fn anthropic_requests_stay_paired_after_compaction() {
    compacted_run_on(Wire::Anthropic, "claude-sonnet-4-5").await;
}

#[tokio::test]
async fn openai_requests_stay_paired_after_compaction() {
    compacted_run_on(Wire::OpenAi, "gpt-4o").await;
}

#[tokio::test]
async fn gemini_requests_stay_paired_after_compaction() {
    compacted_run_on(Wire::Gemini, "gemini-2.5-flash").await;
}
