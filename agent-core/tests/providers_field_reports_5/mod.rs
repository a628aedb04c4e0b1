//! The round-4 kinds (C54-C61, `docs/cases.md`) on the wires their first tests did not
//! reach: each kind tried on every wire where it can occur (Anthropic, Vertex AI's
//! Claude and Gemini, Gemini, Bedrock, Chat Completions, the Responses API), plain and
//! streamed, against wiremock (or a server of the test's own where the body must arrive
//! in pieces). One file per kind family: the shapes of one turn on every wire are here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

pub mod arguments;
pub mod endings;
pub mod refusals;
pub mod split;
pub mod usage;

use crate::providers_field_reports_4::{
    ANSWER, BEDROCK_ROUTE, events, gemini_stream_of, serve, sse_body, v1,
};
use crate::providers_support::*;

use agent_core::AgentConfigBuilder;
use agent_core::providers::ProviderOptions;
use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

pub(crate) const PROJECT: &str = "kinds-project";
pub(crate) const LOCATION: &str = "us-central1";

/// Which body family a route speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// The Messages API (Anthropic, Claude on Vertex AI).
    Anthropic,
    /// `generateContent` (Gemini, Gemini on Vertex AI).
    Gemini,
    /// Converse (Bedrock).
    Bedrock,
}

/// A route of the run API: its model, the paths of its plain and streamed calls, and
/// its provider options.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    pub(crate) label: &'static str,
    pub(crate) family: Family,
    pub(crate) model: String,
    plain: String,
    streamed: String,
    vertex: bool,
    bedrock: bool,
}

fn vertex_path(model: &str, method: &str) -> String {
    let publisher = if model.starts_with("claude-") {
        "anthropic"
    } else {
        "google"
    };
    format!(
        "/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/{publisher}/models/{model}:{method}"
    )
}

/// The routes of the three families beside the OpenAI wires.
pub(crate) fn routes() -> Vec<Route> {
    let claude = "claude-sonnet-4-5@20250929";
    let gemini = "gemini-2.5-flash";
    vec![
        Route {
            label: "anthropic",
            family: Family::Anthropic,
            model: "claude-sonnet-4-5".into(),
            plain: "/v1/messages".into(),
            streamed: "/v1/messages".into(),
            vertex: false,
            bedrock: false,
        },
        Route {
            label: "vertex claude",
            family: Family::Anthropic,
            model: format!("vertex/{claude}"),
            plain: vertex_path(claude, "rawPredict"),
            streamed: vertex_path(claude, "streamRawPredict"),
            vertex: true,
            bedrock: false,
        },
        Route {
            label: "gemini",
            family: Family::Gemini,
            model: gemini.into(),
            plain: format!("/v1beta/models/{gemini}:generateContent"),
            streamed: format!("/v1beta/models/{gemini}:streamGenerateContent"),
            vertex: false,
            bedrock: false,
        },
        Route {
            label: "vertex gemini",
            family: Family::Gemini,
            model: format!("vertex/{gemini}"),
            plain: vertex_path(gemini, "generateContent"),
            streamed: vertex_path(gemini, "streamGenerateContent"),
            vertex: true,
            bedrock: false,
        },
        Route {
            label: "bedrock",
            family: Family::Bedrock,
            model: BEDROCK_ROUTE.into(),
            plain: "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse".into(),
            streamed: "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream".into(),
            vertex: false,
            bedrock: true,
        },
    ]
}

impl Route {
    /// A server answering this route's plain or streamed path with `replies` in turn,
    /// and a triage config for it.
    pub(crate) async fn serve(
        &self,
        streamed: bool,
        replies: Vec<ResponseTemplate>,
    ) -> (MockServer, AgentConfigBuilder<Triage>) {
        let path = if streamed {
            &self.streamed
        } else {
            &self.plain
        };
        let server = serve(path, replies).await;
        let config = self.config(&server.uri());
        (server, config)
    }

    /// A triage config for this route at `base`.
    pub(crate) fn config(&self, base: &str) -> AgentConfigBuilder<Triage> {
        let (vertex, bedrock) = (self.vertex, self.bedrock);
        triage_with(&self.model, base, move |o| {
            if vertex {
                o.with_gcp_project(PROJECT)
                    .with_gcp_location(LOCATION)
                    .with_bearer_token("ya29.kinds-test-token")
            } else if bedrock {
                o.with_aws_region("us-east-1")
            } else {
                o
            }
        })
    }

    /// The reply of one turn in this route's family, plain or streamed.
    pub(crate) fn reply(&self, turn: &Turn, streamed: bool) -> ResponseTemplate {
        match (self.family, streamed) {
            (Family::Anthropic, false) => {
                ResponseTemplate::new(200).set_body_json(anthropic_message(turn))
            }
            (Family::Anthropic, true) => sse_body(anthropic_stream(turn, self.vertex)),
            (Family::Gemini, false) => {
                ResponseTemplate::new(200).set_body_json(gemini_response(turn))
            }
            (Family::Gemini, true) => sse_body(gemini_stream_of(&gemini_response(turn), 7)),
            (Family::Bedrock, false) => {
                ResponseTemplate::new(200).set_body_json(bedrock_response(turn))
            }
            (Family::Bedrock, true) => bedrock_stream(&bedrock_frames_of(turn)),
        }
    }
}

/// One model turn, wire-neutral: its text, its calls (name, arguments), the stop
/// reason in the family's own spelling, and the family's usage object.
#[derive(Clone, Debug, Default)]
pub(crate) struct Turn {
    pub(crate) text: String,
    pub(crate) calls: Vec<(String, Value)>,
    pub(crate) stop: String,
    pub(crate) usage: Value,
    /// Extra fields of the family's message (Anthropic `stop_details`, Gemini
    /// `finishMessage` / `safetyRatings`).
    pub(crate) extra: Value,
}

impl Turn {
    /// A `submit_output` call with the triage answer.
    pub(crate) fn submit(family: Family) -> Self {
        Self::call(
            family,
            "submit_output",
            serde_json::from_str(ANSWER).unwrap(),
        )
    }

    /// A `lookup_order` call for A-1001.
    pub(crate) fn lookup(family: Family) -> Self {
        Self::call(family, "lookup_order", json!({"order_id": "A-1001"}))
    }

    fn call(family: Family, name: &str, arguments: Value) -> Self {
        let stop = match family {
            Family::Anthropic | Family::Bedrock => "tool_use",
            Family::Gemini => "STOP",
        };
        Self {
            calls: vec![(name.to_owned(), arguments)],
            stop: stop.to_owned(),
            usage: plain_usage(family),
            ..Self::default()
        }
    }

    /// No content at all, stopped by `stop`.
    pub(crate) fn empty(family: Family, stop: &str) -> Self {
        Self {
            stop: stop.to_owned(),
            usage: plain_usage(family),
            ..Self::default()
        }
    }

    pub(crate) fn with_usage(mut self, usage: Value) -> Self {
        self.usage = usage;
        self
    }

    pub(crate) fn with_text(mut self, text: &str) -> Self {
        self.text = text.to_owned();
        self
    }

    pub(crate) fn with_extra(mut self, extra: Value) -> Self {
        self.extra = extra;
        self
    }
}

/// A usage of 120 input and 30 output tokens in the family's spelling.
pub(crate) fn plain_usage(family: Family) -> Value {
    match family {
        Family::Anthropic => json!({"input_tokens": 120, "output_tokens": 30}),
        Family::Gemini => json!({"promptTokenCount": 120, "candidatesTokenCount": 30,
                                 "totalTokenCount": 150}),
        Family::Bedrock => json!({"inputTokens": 120, "outputTokens": 30, "totalTokens": 150}),
    }
}

fn merge(target: &mut Value, extra: &Value) {
    if let (Some(target), Some(extra)) = (target.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
}

/// The Messages API reply of a turn.
pub(crate) fn anthropic_message(turn: &Turn) -> Value {
    let mut content = Vec::new();
    if !turn.text.is_empty() {
        content.push(json!({"type": "text", "text": turn.text}));
    }
    for (i, (name, input)) in turn.calls.iter().enumerate() {
        content.push(
            json!({"type": "tool_use", "id": format!("toolu_k{i}"), "name": name,
                            "input": input}),
        );
    }
    let mut message = json!({"id": "msg_kinds", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": content,
        "stop_reason": turn.stop, "stop_sequence": null, "usage": turn.usage});
    merge(&mut message, &turn.extra);
    message
}

/// The same turn as Messages API events: the input counts on `message_start`, the
/// output count on `message_delta` (only it when `short_delta`, else every count
/// again, cumulative, as the API now sends them), the text in two deltas, each call's
/// input in two JSON pieces.
pub(crate) fn anthropic_stream(turn: &Turn, short_delta: bool) -> String {
    let mut start_usage = turn.usage.clone();
    start_usage["output_tokens"] = json!(1);
    let delta_usage = if short_delta {
        json!({"output_tokens": turn.usage["output_tokens"]})
    } else {
        turn.usage.clone()
    };
    let mut out = vec![
        json!({"type": "message_start", "message": {"id": "msg_kinds",
        "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [], "stop_reason": null, "usage": start_usage}}),
    ];
    let mut index = 0;
    if !turn.text.is_empty() {
        out.push(json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}}));
        let (a, b) = turn.text.split_at(turn.text.len() / 2);
        for piece in [a, b] {
            out.push(json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": piece}}));
        }
        out.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for (name, input) in &turn.calls {
        out.push(
            json!({"type": "content_block_start", "index": index, "content_block":
            {"type": "tool_use", "id": format!("toolu_k{index}"), "name": name, "input": {}}}),
        );
        let text = input.to_string();
        let (a, b) = text.split_at(text.len() / 2);
        for piece in [a, b] {
            out.push(json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        out.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let mut delta = json!({"stop_reason": turn.stop, "stop_sequence": null});
    merge(&mut delta, &turn.extra);
    out.push(json!({"type": "message_delta", "delta": delta, "usage": delta_usage}));
    out.push(json!({"type": "message_stop"}));
    events(&out)
}

/// The `generateContent` reply of a turn (no `content` at all when it has none).
pub(crate) fn gemini_response(turn: &Turn) -> Value {
    let mut parts = Vec::new();
    if !turn.text.is_empty() {
        parts.push(json!({"text": turn.text}));
    }
    for (name, args) in &turn.calls {
        parts.push(json!({"functionCall": {"name": name, "args": args}}));
    }
    let mut candidate = json!({"finishReason": turn.stop, "index": 0});
    if !parts.is_empty() {
        candidate["content"] = json!({"parts": parts, "role": "model"});
    }
    merge(&mut candidate, &turn.extra);
    json!({"candidates": [candidate], "usageMetadata": turn.usage,
           "modelVersion": "gemini-2.5-flash", "responseId": "kindsResp01"})
}

/// The Converse reply of a turn.
pub(crate) fn bedrock_response(turn: &Turn) -> Value {
    let mut content = Vec::new();
    if !turn.text.is_empty() {
        content.push(json!({"text": turn.text}));
    }
    for (i, (name, input)) in turn.calls.iter().enumerate() {
        content.push(
            json!({"toolUse": {"toolUseId": format!("tooluse_k{i}"), "name": name,
                                        "input": input}}),
        );
    }
    json!({"output": {"message": {"role": "assistant", "content": content}},
           "stopReason": turn.stop, "usage": turn.usage, "metrics": {"latencyMs": 412}})
}

/// The same turn as ConverseStream events, `metadata` (the usage) last.
pub(crate) fn bedrock_frames_of(turn: &Turn) -> Vec<(String, Value)> {
    let mut frames = vec![("messageStart".to_owned(), json!({"role": "assistant"}))];
    let mut index = 0;
    if !turn.text.is_empty() {
        frames.push((
            "contentBlockDelta".into(),
            json!({"contentBlockIndex": index, "delta": {"text": turn.text}}),
        ));
        frames.push((
            "contentBlockStop".into(),
            json!({"contentBlockIndex": index}),
        ));
        index += 1;
    }
    for (name, input) in &turn.calls {
        frames.push((
            "contentBlockStart".into(),
            json!({"contentBlockIndex": index, "start": {"toolUse":
                {"toolUseId": format!("tooluse_k{index}"), "name": name}}}),
        ));
        frames.push((
            "contentBlockDelta".into(),
            json!({"contentBlockIndex": index, "delta": {"toolUse": {"input": input.to_string()}}}),
        ));
        frames.push((
            "contentBlockStop".into(),
            json!({"contentBlockIndex": index}),
        ));
        index += 1;
    }
    frames.push(("messageStop".into(), json!({"stopReason": turn.stop})));
    frames.push((
        "metadata".into(),
        json!({"usage": turn.usage, "metrics": {"latencyMs": 412}}),
    ));
    frames
}

/// Event-stream frames as bytes.
pub(crate) fn bedrock_bytes(frames: &[(String, Value)]) -> Vec<u8> {
    let string = |v: &str| HeaderValue::String(v.to_owned().into());
    let mut out = Vec::new();
    for (name, payload) in frames {
        let message = Message::new(payload.to_string().into_bytes())
            .add_header(Header::new(":message-type", string("event")))
            .add_header(Header::new(":event-type", string(name)))
            .add_header(Header::new(":content-type", string("application/json")));
        write_message_to(&message, &mut out).unwrap();
    }
    out
}

pub(crate) fn bedrock_stream(frames: &[(String, Value)]) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_raw(bedrock_bytes(frames), "application/vnd.amazon.eventstream")
}

/// The OpenAI routes of the run API: (label, model, path, whether the base ends in `/v1`).
pub(crate) const OPENAI: [(&str, &str, &str, bool); 4] = [
    ("chat", "gpt-4.1", "/v1/chat/completions", true),
    (
        "azure chat",
        "azure/prod-gpt-4o",
        "/openai/deployments/prod-gpt-4o/chat/completions",
        false,
    ),
    (
        "responses",
        "openai-responses/gpt-5-mini",
        "/v1/responses",
        true,
    ),
    (
        "azure responses",
        "azure-responses/prod-gpt-5",
        "/openai/v1/responses",
        false,
    ),
];

/// A server for one of [`OPENAI`], and a triage config for it.
pub(crate) async fn openai_route(
    route: (&str, &str, &str, bool),
    replies: Vec<ResponseTemplate>,
) -> (MockServer, AgentConfigBuilder<Triage>) {
    let (_, model, path, with_v1) = route;
    let server = serve(path, replies).await;
    let base = if with_v1 { v1(&server) } else { server.uri() };
    let config = triage(model, &base);
    (server, config)
}

/// Options for a client of its own at `base`.
pub(crate) fn options(base: &str) -> ProviderOptions {
    ProviderOptions::default()
        .with_api_key(KEY)
        .with_base_url(base)
}
