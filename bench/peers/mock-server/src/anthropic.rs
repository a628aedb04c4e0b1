//! The Anthropic Messages API face of the mock: `POST .../messages`.
//!
//! The same two turns as the Chat Completions face (a `lookup_order` call until the
//! request holds a `tool_result` block, then the output tool's call), as a Messages API
//! `message` with one `tool_use` block and `stop_reason: "tool_use"`; with
//! `"stream": true` as the Messages API's server-sent events, sent at once:
//! `message_start` (usage with the input tokens), `ping`, `content_block_start` of the
//! `tool_use` block (`input: {}`), its input in `STREAM_FRAGMENTS` `input_json_delta`
//! pieces, `content_block_stop`, `message_delta` (`stop_reason`, output tokens),
//! `message_stop`.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use serde::Deserialize;

use crate::{Reply, Server, pick_tool};

#[derive(Deserialize)]
struct MessagesRequest<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    messages: Vec<MessageIn<'a>>,
    #[serde(borrow, default)]
    tools: Option<Vec<ToolIn<'a>>>,
    #[serde(default)]
    stream: Option<bool>,
}

#[derive(Deserialize)]
struct MessageIn<'a> {
    #[serde(borrow)]
    content: Content<'a>,
}

/// A message's content: content blocks (only their type is read), or anything else (a
/// string).
#[derive(Deserialize)]
#[serde(untagged)]
enum Content<'a> {
    Blocks(#[serde(borrow)] Vec<BlockIn<'a>>),
    Text(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct BlockIn<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ToolIn<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

/// One SSE event: its name and its data.
fn event(out: &mut String, name: &str, data: &str) {
    // Writing to a `String` cannot fail.
    let _ = write!(out, "event: {name}\ndata: {data}\n\n");
}

impl Server {
    /// The Messages API reply to one request body.
    pub(crate) fn message(&self, body: &[u8]) -> Result<Reply, String> {
        let request: MessagesRequest<'_> =
            serde_json::from_slice(body).map_err(|e| format!("invalid JSON body: {e}"))?;
        let names: Vec<&str> = request
            .tools
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|t| t.name.as_ref())
            .collect();
        if names.is_empty() {
            return Err("the request offers no tools".to_owned());
        }
        let has_tool_result = request.messages.iter().any(|m| match &m.content {
            Content::Blocks(blocks) => blocks.iter().any(|b| b.kind == "tool_result"),
            Content::Text(_) => false,
        });
        let (name, output) = pick_tool(&names, has_tool_result)?;
        let (arguments, pieces) = self.arguments(output);
        let input = if output {
            crate::OUTPUT_ARGS
        } else {
            crate::TOOL_ARGS
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let model = serde_json::to_string(request.model.as_deref().unwrap_or("claude-mock"))
            .map_err(|e| e.to_string())?;
        let name = serde_json::to_string(name).map_err(|e| e.to_string())?;
        let input_tokens = body.len() / 4;
        let output_tokens = 24;
        if request.stream != Some(true) {
            // `arguments` (the input as a JSON string) is for the streamed pieces only.
            let _ = arguments;
            return Ok(Reply::Json(format!(
                concat!(
                    r#"{{"id":"msg_{id}","type":"message","role":"assistant","model":{model},"#,
                    r#""content":[{{"type":"tool_use","id":"toolu_{id}","name":{name},"input":{input}}}],"#,
                    r#""stop_reason":"tool_use","stop_sequence":null,"#,
                    r#""usage":{{"input_tokens":{input_tokens},"output_tokens":{output_tokens}}}}}"#
                ),
                id = id,
                model = model,
                name = name,
                input = input,
                input_tokens = input_tokens,
                output_tokens = output_tokens,
            )));
        }
        let mut out = String::with_capacity(2048);
        event(
            &mut out,
            "message_start",
            &format!(
                concat!(
                    r#"{{"type":"message_start","message":{{"id":"msg_{id}","type":"message","role":"assistant","#,
                    r#""model":{model},"content":[],"stop_reason":null,"stop_sequence":null,"#,
                    r#""usage":{{"input_tokens":{input_tokens},"output_tokens":1}}}}}}"#
                ),
                id = id,
                model = model,
                input_tokens = input_tokens,
            ),
        );
        event(&mut out, "ping", r#"{"type": "ping"}"#);
        event(
            &mut out,
            "content_block_start",
            &format!(
                r#"{{"type":"content_block_start","index":0,"content_block":{{"type":"tool_use","id":"toolu_{id}","name":{name},"input":{{}}}}}}"#
            ),
        );
        for piece in pieces {
            event(
                &mut out,
                "content_block_delta",
                &format!(
                    r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":{piece}}}}}"#
                ),
            );
        }
        event(
            &mut out,
            "content_block_stop",
            r#"{"type":"content_block_stop","index":0}"#,
        );
        event(
            &mut out,
            "message_delta",
            &format!(
                r#"{{"type":"message_delta","delta":{{"stop_reason":"tool_use","stop_sequence":null}},"usage":{{"output_tokens":{output_tokens}}}}}"#
            ),
        );
        event(&mut out, "message_stop", r#"{"type":"message_stop"}"#);
        Ok(Reply::Events(out))
    }
}
