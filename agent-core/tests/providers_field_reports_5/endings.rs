//! C55 (a final chunk, then no end marker) and C59 (a reply cut by its cap, with fields
//! missing) on every wire.

use super::*;
use crate::providers_field_reports_4::{
    collect, incomplete_without_output, retries, run, serve, sse_body,
};

use agent_core::{OutputMode, run_agent_stream};

/// The reply of `turn`, streamed, without the family's end marker (Anthropic's
/// `message_stop`, Bedrock's `metadata`; Gemini's stream has none).
fn without_end_marker(route: &Route, turn: &Turn) -> ResponseTemplate {
    match route.family {
        Family::Anthropic => {
            let whole = anthropic_stream(turn, route.label == "anthropic");
            let at = whole.find("event: message_stop").unwrap();
            sse_body(whole[..at].to_owned())
        }
        Family::Gemini => route.reply(turn, true),
        Family::Bedrock => {
            let mut frames = bedrock_frames_of(turn);
            assert_eq!(frames.pop().unwrap().0, "metadata");
            bedrock_stream(&frames)
        }
    }
}

#[tokio::test]
async fn c55_a_stream_closed_after_its_final_event_is_whole_on_every_wire() {
    for route in routes() {
        let (server, config) = route
            .serve(
                true,
                vec![without_end_marker(&route, &Turn::submit(route.family))],
            )
            .await;
        let config = config.build().unwrap();
        let (events, result) = collect(run_agent_stream(&config, "ticket")).await;
        assert_eq!(result.outcome, Ok(expected_triage()), "{}", route.label);
        assert!(retries(&events).is_empty(), "{}", route.label);
        assert_eq!(requests(&server).await.len(), 1, "{}", route.label);
        // The usage of `message_delta` / the last chunk counts; Bedrock's came in the
        // `metadata` event that never came (estimated).
        if route.family != Family::Bedrock {
            assert_eq!(result.usage.output_tokens, 30, "{}", route.label);
            assert_eq!(result.usage.estimated_llm_calls, 0, "{}", route.label);
        }
    }
}

#[tokio::test]
async fn c55_a_filtered_stream_without_its_end_marker_is_refused_after_one_request() {
    let mut cases: Vec<(Route, &str)> = Vec::new();
    for route in routes() {
        match route.family {
            Family::Anthropic => cases.push((route, "refusal")),
            Family::Gemini => {
                cases.push((route.clone(), "SAFETY"));
                cases.push((route, "PROHIBITED_CONTENT"));
            }
            Family::Bedrock => {
                cases.push((route.clone(), "guardrail_intervened"));
                cases.push((route, "content_filtered"));
            }
        }
    }
    for (route, stop) in cases {
        let turn = Turn::empty(route.family, stop);
        let (server, config) = route
            .serve(true, vec![without_end_marker(&route, &turn)])
            .await;
        let config = config.build().unwrap();
        let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
        let what = format!("{} {stop}", route.label);
        assert_eq!(
            result.category(),
            Some("refused"),
            "{what}: {:?}",
            result.outcome
        );
        assert_eq!(requests(&server).await.len(), 1, "{what}");
    }
    // The Responses API: `response.incomplete` for the content filter is its final
    // event; the body ends there.
    for route in &OPENAI[2..] {
        let event = json!({"type": "response.incomplete", "sequence_number": 1,
                           "response": incomplete_without_output("content_filter")});
        let body = format!("event: response.incomplete\ndata: {event}\n\n");
        let (server, config) = openai_route(*route, vec![sse_body(body)]).await;
        let config = config.build().unwrap();
        let (_, result) = collect(run_agent_stream(&config, "ticket")).await;
        assert_eq!(result.category(), Some("refused"), "{}", route.0);
        assert_eq!(requests(&server).await.len(), 1, "{}", route.0);
    }
}

// ---- C59 -------------------------------------------------------------------------------

/// The cap's stop reason in a family's spelling.
fn cap(family: Family) -> &'static str {
    match family {
        Family::Anthropic | Family::Bedrock => "max_tokens",
        Family::Gemini => "MAX_TOKENS",
    }
}

/// A thinking model that spent its whole cap thinking: 4096 output tokens, no content.
fn spent_usage(family: Family) -> Value {
    match family {
        Family::Anthropic => json!({"input_tokens": 236, "output_tokens": 4096}),
        Family::Gemini => json!({"promptTokenCount": 236, "thoughtsTokenCount": 4096,
                                 "totalTokenCount": 4332}),
        Family::Bedrock => json!({"inputTokens": 236, "outputTokens": 4096,
                                  "totalTokens": 4332}),
    }
}

/// The correction the runner sends after a turn cut by the cap.
const CUT: &str = "cut off at the output limit (max_tokens";

/// Asserts a run whose first reply was cut by the cap answered on its second turn,
/// with the correction naming the cap and no retry.
async fn assert_cut_then_answered(
    label: &str,
    server: &MockServer,
    result: &agent_core::AgentResult<Triage>,
    delays: &Delays,
    cut_output: u64,
) {
    assert_eq!(result.outcome, Ok(expected_triage()), "{label}");
    assert!(delays.get().is_empty(), "{label}: not transient");
    assert_eq!(result.usage.llm_calls, 2, "{label}");
    assert!(
        result.usage.output_tokens >= cut_output,
        "{label}: the cut call's usage counts ({})",
        result.usage.output_tokens
    );
    let sent = bodies(server).await;
    assert_eq!(sent.len(), 2, "{label}");
    assert!(sent[1].to_string().contains(CUT), "{label}: {}", sent[1]);
}

#[tokio::test]
async fn c59_a_reply_cut_by_its_cap_with_no_content_is_a_cut_turn_on_every_wire() {
    for route in routes() {
        for streamed in [false, true] {
            let cut =
                Turn::empty(route.family, cap(route.family)).with_usage(spent_usage(route.family));
            let mut replies = vec![route.reply(&cut, streamed)];
            replies.push(route.reply(&Turn::submit(route.family), streamed));
            let (server, config) = route.serve(streamed, replies).await;
            let delays = Delays::default();
            let config = config.observer(delays.observer()).build().unwrap();
            let (_, result) = run(&config, streamed).await;
            let label = format!("{} streamed={streamed}", route.label);
            assert_cut_then_answered(&label, &server, &result, &delays, 4096).await;
        }
    }
}

#[tokio::test]
async fn c59_a_cut_reply_missing_its_content_fields_is_a_cut_turn() {
    let submit_chat = ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-k59", "object": "chat.completion", "model": "gpt-4.1",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "call_k59",
            "type": "function", "function": {"name": "submit_output", "arguments": ANSWER}}]}}],
        "usage": {"prompt_tokens": 236, "completion_tokens": 31}}));
    let usage = json!({"prompt_tokens": 236, "completion_tokens": 4096, "total_tokens": 4332});
    let mut cases: Vec<(String, &str, bool, Vec<ResponseTemplate>, &str)> = Vec::new();
    for route in &OPENAI[..2] {
        // A message with neither content nor calls; then no message at all.
        for choice in [
            json!({"index": 0, "finish_reason": "length", "message": {"role": "assistant"}}),
            json!({"index": 0, "finish_reason": "length"}),
        ] {
            let cut = json!({"id": "chatcmpl-k59c", "object": "chat.completion",
                "model": "gpt-4.1", "choices": [choice], "usage": usage});
            cases.push((
                format!("{} {choice}", route.0),
                route.1,
                route.3,
                vec![
                    ResponseTemplate::new(200).set_body_json(cut),
                    submit_chat.clone(),
                ],
                route.2,
            ));
        }
    }
    for (label, model, with_v1, replies, path) in cases {
        let server = serve(path, replies).await;
        let base = if with_v1 { v1(&server) } else { server.uri() };
        let delays = Delays::default();
        let config = triage(model, &base)
            .observer(delays.observer())
            .build()
            .unwrap();
        let (_, result) = run(&config, false).await;
        assert_cut_then_answered(&label, &server, &result, &delays, 4096).await;
    }
    // Streamed: a role chunk, then the `length` finish with no content.
    for route in &OPENAI[..2] {
        let body = crate::providers_field_reports_4::chunks(&[
            json!({"index": 0, "delta": {"role": "assistant"}}),
            json!({"index": 0, "delta": {}, "finish_reason": "length"}),
            json!({"usage": usage}),
        ]);
        let submit = crate::providers_field_reports_4::chunks(
            &crate::providers_field_reports_4::streamed_call(
                "call_k59s",
                &["submit_output"],
                &[ANSWER],
                false,
            ),
        );
        let (server, config) = openai_route(*route, vec![sse_body(body), sse_body(submit)]).await;
        let delays = Delays::default();
        let config = config.observer(delays.observer()).build().unwrap();
        let (_, result) = run(&config, true).await;
        assert_cut_then_answered(route.0, &server, &result, &delays, 4096).await;
    }
    // Anthropic without `content`; Bedrock without `output`; Gemini without the
    // candidate's `content` (above) and its `index`.
    let anthropic = ResponseTemplate::new(200).set_body_json(json!({"id": "msg_k59",
        "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "stop_reason": "max_tokens", "usage": {"input_tokens": 236, "output_tokens": 4096}}));
    let bedrock = ResponseTemplate::new(200).set_body_json(json!({"stopReason": "max_tokens",
        "usage": {"inputTokens": 236, "outputTokens": 4096, "totalTokens": 4332}}));
    let gemini = ResponseTemplate::new(200).set_body_json(json!({"candidates":
        [{"finishReason": "MAX_TOKENS"}], "usageMetadata": spent_usage(Family::Gemini)}));
    for route in routes() {
        let cut = match route.family {
            Family::Anthropic => anthropic.clone(),
            Family::Bedrock => bedrock.clone(),
            Family::Gemini => gemini.clone(),
        };
        let submit = route.reply(&Turn::submit(route.family), false);
        let (server, config) = route.serve(false, vec![cut, submit]).await;
        let delays = Delays::default();
        let config = config.observer(delays.observer()).build().unwrap();
        let (_, result) = run(&config, false).await;
        assert_cut_then_answered(route.label, &server, &result, &delays, 4096).await;
    }
    // The same in native output mode: the cut turn is fed back, the answer comes next.
    let route = &routes()[2];
    let native = gemini_response(&Turn {
        text: ANSWER.to_owned(),
        stop: "STOP".into(),
        usage: plain_usage(Family::Gemini),
        ..Turn::default()
    });
    let (server, config) = route
        .serve(
            false,
            vec![
                gemini.clone(),
                ResponseTemplate::new(200).set_body_json(native),
            ],
        )
        .await;
    let config = config.output_mode(OutputMode::Native).build().unwrap();
    let (_, result) = run(&config, false).await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(requests(&server).await.len(), 2);
}
