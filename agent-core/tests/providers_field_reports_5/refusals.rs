//! C58 (a refusal's structured reason) on every wire: OpenAI's `refusal` text (Chat
//! Completions and the Responses API, plain and streamed), Anthropic's `stop_details`
//! beside text, Gemini's candidate filters without ratings and blocked prompts with
//! their ratings, and Bedrock's guardrail and content filter.

use super::*;
use crate::providers_field_reports_4::{chunks, events, gemini_stream_of, run, sse_body};

const SORRY: &str = "I'm sorry, I can't help with that request.";

/// One refusal case: its label, the server and config, whether streamed, and the
/// reason expected (category, explanation) and a text the error must hold.
struct Case {
    label: String,
    server: MockServer,
    config: AgentConfigBuilder<Triage>,
    streamed: bool,
    category: Option<&'static str>,
    explanation: Option<&'static str>,
    says: &'static str,
}

async fn check(case: Case) {
    let Case {
        label,
        server,
        config,
        streamed,
        category,
        explanation,
        says,
    } = case;
    let config = config.build().unwrap();
    let (_, result) = run(&config, streamed).await;
    let error = result.outcome.as_ref().unwrap_err();
    assert_eq!(error.category(), "refused", "{label}: {error:?}");
    let text = error.to_string();
    assert!(text.contains(says), "{label}: {text}");
    let reason = error.refusal_reason().expect(&label);
    assert_eq!(reason.category.as_deref(), category, "{label}");
    assert_eq!(reason.explanation.as_deref(), explanation, "{label}");
    assert_eq!(requests(&server).await.len(), 1, "{label}");
}

#[tokio::test]
async fn c58_openai_refusal_text_is_the_refusals_explanation_plain_and_streamed() {
    let chat_plain = json_fixture(200, "openai/refusal.json");
    let (a, b) = SORRY.split_at(11);
    let chat_streamed = sse_body(chunks(&[
        json!({"index": 0, "delta": {"role": "assistant", "content": null, "refusal": ""}}),
        json!({"index": 0, "delta": {"refusal": a}}),
        json!({"index": 0, "delta": {"refusal": b}}),
        json!({"index": 0, "delta": {}, "finish_reason": "stop"}),
    ]));
    // The Responses stream: the refusal part's deltas and `.done`, its item done, and a
    // completed response whose `output` is empty (the items stand in for it).
    let item = json!({"id": "msg_k58", "type": "message", "status": "completed",
        "role": "assistant", "content": [{"type": "refusal", "refusal": SORRY}]});
    let mut completed: Value = serde_json::from_str(&fixture("responses/refusal.json")).unwrap();
    completed["output"] = json!([]);
    let responses_streamed = sse_body(events(&[
        json!({"type": "response.created", "sequence_number": 0, "response":
            {"id": "resp_k58", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
               "item": {"id": "msg_k58", "type": "message", "status": "in_progress",
                        "role": "assistant", "content": []}}),
        json!({"type": "response.content_part.added", "sequence_number": 2,
               "item_id": "msg_k58", "output_index": 0, "content_index": 0,
               "part": {"type": "refusal", "refusal": ""}}),
        json!({"type": "response.refusal.delta", "sequence_number": 3, "item_id": "msg_k58",
               "output_index": 0, "content_index": 0, "delta": a}),
        json!({"type": "response.refusal.delta", "sequence_number": 4, "item_id": "msg_k58",
               "output_index": 0, "content_index": 0, "delta": b}),
        json!({"type": "response.refusal.done", "sequence_number": 5, "item_id": "msg_k58",
               "output_index": 0, "content_index": 0, "refusal": SORRY}),
        json!({"type": "response.output_item.done", "sequence_number": 6, "output_index": 0,
               "item": item}),
        json!({"type": "response.completed", "sequence_number": 7, "response": completed}),
    ]));
    for route in OPENAI {
        let chat = route.0.contains("chat");
        for streamed in [false, true] {
            let reply = match (chat, streamed) {
                (true, false) => chat_plain.clone(),
                (true, true) => chat_streamed.clone(),
                (false, false) => json_fixture(200, "responses/refusal.json"),
                (false, true) => responses_streamed.clone(),
            };
            let (server, config) = openai_route(route, vec![reply]).await;
            check(Case {
                label: format!("{} streamed={streamed}", route.0),
                server,
                config,
                streamed,
                category: None,
                explanation: Some(SORRY),
                says: SORRY,
            })
            .await;
        }
    }
}

const CLAUDE_EXPLANATION: &str =
    "This request was declined because it conflicts with Anthropic's Usage Policy.";

#[tokio::test]
async fn c58_a_refusals_reason_on_the_anthropic_gemini_and_bedrock_families() {
    let mut cases = Vec::new();
    for route in routes() {
        for streamed in [false, true] {
            let label = format!("{} streamed={streamed}", route.label);
            match route.family {
                Family::Anthropic => {
                    // With text: the text is the message, the reason still carried.
                    let details = json!({"stop_details": {"type": "refusal",
                        "category": "cyber", "explanation": CLAUDE_EXPLANATION}});
                    let turn = Turn::empty(Family::Anthropic, "refusal")
                        .with_text("I can't help with that.")
                        .with_extra(details);
                    let (server, config) = route
                        .serve(streamed, vec![route.reply(&turn, streamed)])
                        .await;
                    cases.push(Case {
                        label,
                        server,
                        config,
                        streamed,
                        category: Some("cyber"),
                        explanation: Some(CLAUDE_EXPLANATION),
                        says: "I can't help with that.",
                    });
                }
                Family::Gemini => {
                    // A candidate stopped for prohibited content, no rating, no content.
                    let turn = Turn::empty(Family::Gemini, "PROHIBITED_CONTENT");
                    let (server, config) = route
                        .serve(streamed, vec![route.reply(&turn, streamed)])
                        .await;
                    cases.push(Case {
                        label: format!("{label} PROHIBITED_CONTENT"),
                        server,
                        config,
                        streamed,
                        category: Some("PROHIBITED_CONTENT"),
                        explanation: None,
                        says: "PROHIBITED_CONTENT",
                    });
                    // A candidate stopped for safety whose ratings mark none `blocked`:
                    // the one rated most probable names the harm.
                    let ratings = json!({"safetyRatings": [
                        {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
                        {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "MEDIUM"},
                        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]});
                    let turn = Turn::empty(Family::Gemini, "SAFETY").with_extra(ratings);
                    let (server, config) = route
                        .serve(streamed, vec![route.reply(&turn, streamed)])
                        .await;
                    cases.push(Case {
                        label: format!("{label} SAFETY unmarked"),
                        server,
                        config,
                        streamed,
                        category: Some("HARM_CATEGORY_DANGEROUS_CONTENT"),
                        explanation: None,
                        says: "SAFETY",
                    });
                    // A prompt blocked for safety: the blocked rating names the harm.
                    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY",
                        "safetyRatings": [
                            {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
                            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                             "probability": "HIGH", "blocked": true}]},
                        "usageMetadata": {"promptTokenCount": 17, "totalTokenCount": 17},
                        "modelVersion": "gemini-2.5-flash"});
                    let reply = if streamed {
                        sse_body(gemini_stream_of(&blocked, 8))
                    } else {
                        ResponseTemplate::new(200).set_body_json(&blocked)
                    };
                    let (server, config) = route.serve(streamed, vec![reply]).await;
                    cases.push(Case {
                        label: format!("{label} blocked prompt"),
                        server,
                        config,
                        streamed,
                        category: Some("HARM_CATEGORY_DANGEROUS_CONTENT"),
                        explanation: None,
                        says: "SAFETY",
                    });
                }
                Family::Bedrock => {
                    // The guardrail's blocked message is the text; the stop reason is
                    // the category when the reply names no other.
                    let blocked = "Sorry, the model cannot answer this question.";
                    for stop in ["guardrail_intervened", "content_filtered"] {
                        let turn = Turn::empty(Family::Bedrock, stop).with_text(blocked);
                        let (server, config) = route
                            .serve(streamed, vec![route.reply(&turn, streamed)])
                            .await;
                        cases.push(Case {
                            label: format!("{label} {stop}"),
                            server,
                            config,
                            streamed,
                            category: Some(stop),
                            explanation: None,
                            says: blocked,
                        });
                    }
                }
            }
        }
    }
    for case in cases {
        check(case).await;
    }
}
