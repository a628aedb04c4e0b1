//! [`McpTool`]: one MCP server tool as an agent-core [`Tool`], how a listed tool becomes
//! one, and how its results map.

use std::collections::HashSet;
use std::sync::Arc;

use agent_core::content::Part;
use agent_core::durable::Decisions;
use agent_core::{
    Tool, ToolContext, ToolError,
    tool::{ContentFuture, ToolContent, ToolDefinition, ToolFuture},
};
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientNotification, ClientRequest, ContentBlock, RequestId,
    ResourceContents, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};
use serde_json::Value;

use crate::connection::Connection;
use crate::elicit::{self, Asking};
use crate::names::model_name;
use crate::server::scrub;

/// One tool of a connected MCP server (built by [`McpServer::connect`](crate::McpServer::connect)).
pub(crate) struct McpTool {
    pub(crate) definition: ToolDefinition,
    pub(crate) mcp_name: String,
    pub(crate) irreversible: bool,
    pub(crate) connection: Arc<Connection>,
}

/// The listed tools as agent-core tools: provider-legal unique names (see
/// [`McpTools::names`]), the description, the `inputSchema` as the parameters, and
/// `destructiveHint` as irreversible.
pub(crate) fn map_tools(
    prefix: Option<&str>,
    listed: Vec<rmcp::model::Tool>,
    connection: &Arc<Connection>,
) -> Vec<Arc<McpTool>> {
    let mut taken = HashSet::new();
    listed
        .into_iter()
        .map(|tool| {
            let name = model_name(prefix, &tool.name, &taken);
            taken.insert(name.clone());
            let description = tool
                .description
                .as_deref()
                .or(tool.title.as_deref())
                .unwrap_or_default()
                .to_owned();
            let parameters = parameters(Value::Object((*tool.input_schema).clone()));
            let irreversible = tool.annotations.as_ref().is_some_and(|a| {
                a.destructive_hint == Some(true) && a.read_only_hint != Some(true)
            });
            Arc::new(McpTool {
                definition: ToolDefinition::new(name, description, parameters),
                mcp_name: tool.name.into_owned(),
                irreversible,
                connection: Arc::clone(connection),
            })
        })
        .collect()
}

/// An MCP `inputSchema` as a tool's parameters: root `type: object` ensured (MCP
/// requires it; a server that leaves it out still gets a usable schema), then the same
/// normalisation as generated schemas (no `$schema`, `title` or root `description`, a
/// `properties` object). A root of another type is kept, and the config's `build()`
/// rejects it with `ConfigError::InvalidSchema` naming the tool.
fn parameters(mut schema: Value) -> Value {
    if let Value::Object(map) = &mut schema {
        map.entry("type")
            .or_insert_with(|| Value::String("object".to_owned()));
    }
    agent_core::schema::normalize(&mut schema);
    schema
}

impl Tool for McpTool {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    /// The result's text, with a line `[image image/png, 1234 bytes]` (and so on) for
    /// each part, for a caller that takes text alone; the runner calls
    /// [`call_content`](Tool::call_content).
    fn call<'a>(&'a self, arguments: Value, context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let content = self.call_mcp(arguments, context).await?;
            let mut text = content.text;
            for part in &content.parts {
                text.push_str(&format!("\n[{}]", part.describe()));
            }
            Ok(text)
        })
    }

    /// The result's text and its image, audio and embedded resource content as parts
    /// (see [`map_result`]).
    fn call_content<'a>(&'a self, arguments: Value, context: ToolContext) -> ContentFuture<'a> {
        Box::pin(self.call_mcp(arguments, context))
    }

    fn irreversible(&self) -> bool {
        self.irreversible
    }
}

impl McpTool {
    /// One `tools/call`. The call timeout is an idle timeout: each
    /// `notifications/progress` the server sends with this call's `progressToken`
    /// starts it again (C37), and `deadline` (the run's) bounds the whole wait, progress
    /// or not. While it is in flight, the server's sampling requests run as children
    /// of the calling run (see [`McpSampling`](crate::McpSampling)), and an
    /// elicitation no handler answers ends the call as a pause of the calling run (see
    /// `elicit.rs`). A call given up on is cancelled (`notifications/cancelled`), also
    /// when the runner drops it.
    async fn call_mcp(
        &self,
        arguments: Value,
        context: ToolContext,
    ) -> Result<ToolContent, ToolError> {
        let deadline = context.deadline();
        let connection = &self.connection;
        // A call made again on resume after it paused on a question: its answers, and
        // the id of the paused "run" the calling run knows it by.
        let (answers, run_id) = match context.resuming() {
            Some(resume) => (resume.decisions.clone(), resume.run_id.clone()),
            None => (Decisions::new(), elicit::fresh_run_id()),
        };
        let (asking, mut paused) = Asking::new(answers);
        // The server's sampling and elicitation requests during this call are this run's.
        let _in_flight = connection.calls.enter(context, Arc::clone(&asking));
        let label = &connection.label;
        let mut params = CallToolRequestParams::new(self.mcp_name.clone());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        let limit = connection.call_timeout;
        let left = deadline.map(|at| at.saturating_duration_since(tokio::time::Instant::now()));
        if left.is_some_and(|left| left.is_zero()) {
            return Err(past_deadline(label));
        }
        let mut options = PeerRequestOptions::with_timeout(limit).reset_timeout_on_progress();
        if let Some(left) = left {
            options = options.with_max_total_timeout(left);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let peer = connection.service.peer();
        let sent = peer.send_cancellable_request(request, options).await;
        let handle = match sent {
            Ok(handle) => handle,
            Err(error) => return Err(self.failed(&error)),
        };
        let mut guard = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
        };
        // The pause is looked at first: it is signalled before the server gets the
        // error that lets its call end, so a pause is never lost to that answer.
        let response = tokio::select! {
            biased;
            Ok(question) = &mut paused => {
                // A question nobody here answers: the call is cancelled (the guard
                // sends `notifications/cancelled`) and the run pauses on it.
                return Err(elicit::paused(label, run_id, &question, asking.used()));
            }
            response = handle.await_response() => response,
        };
        // The SDK cancels a call it timed out itself; any other end needs none.
        guard.id = None;
        match response {
            Ok(ServerResult::CallToolResult(result)) => map_result(result),
            Ok(_) => Err(ToolError::new(format!(
                "MCP server {label} answered the call with something other than a tool result"
            ))),
            Err(ServiceError::Timeout { .. })
                if deadline.is_some_and(|at| tokio::time::Instant::now() >= at) =>
            {
                Err(past_deadline(label))
            }
            Err(ServiceError::Timeout { timeout }) => Err(ToolError::new(format!(
                "MCP server {label} did not answer within {} ms (and sent no progress \
                 for that long)",
                timeout.as_millis()
            ))),
            Err(error) => Err(self.failed(&error)),
        }
    }

    fn failed(&self, error: &ServiceError) -> ToolError {
        let connection = &self.connection;
        ToolError::new(scrub(
            service_error(&connection.label, error),
            &connection.secrets,
        ))
    }
}

/// The tool error of a call the run's deadline ended.
fn past_deadline(label: &str) -> ToolError {
    ToolError::new(format!(
        "MCP server {label} did not answer before the run's deadline"
    ))
}

/// Sends `notifications/cancelled` for a call dropped before its answer (the runner's
/// `tool_timeout`, the deadline, cancellation), from a spawned task.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        let params = CancelledNotificationParam::new(
            Some(id),
            Some("the caller gave up on the call".to_owned()),
        );
        let notification =
            ClientNotification::CancelledNotification(CancelledNotification::new(params));
        runtime.spawn(async move {
            let _ = peer.send_notification(notification).await;
        });
    }
}

/// A failed `tools/call` as the message the model sees.
fn service_error(label: &str, error: &ServiceError) -> String {
    match error {
        ServiceError::McpError(data) => {
            format!("MCP server {label} rejected the call: {}", data.message)
        }
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => format!(
            "MCP server {label} is not reachable (its process exited or the connection \
             closed); this tool cannot be used now"
        ),
        other => format!("MCP server {label} failed: {other}"),
    }
}

/// A `tools/call` result as the tool's result. Text: `structuredContent` as compact
/// JSON if present, else the text blocks (and the text of embedded text resources)
/// joined by newlines. Parts, in order: each `image` and `audio` block (base64 with its
/// MIME type), and each embedded blob resource (base64, its `mimeType`, else the type
/// sniffed from the bytes; named after the last segment of its URI), checked as
/// [`Part::from_base64`] checks (empty, undecodable, or not the type it claims: a note
/// in the text instead, naming the block and why). A resource link stays a line of
/// text naming its URI (it is not content; nothing is fetched). `isError: true`
/// becomes a [`ToolError`] with the text, its parts named in it.
pub(crate) fn map_result(result: CallToolResult) -> Result<ToolContent, ToolError> {
    let is_error = result.is_error.unwrap_or(false);
    let mut lines: Vec<String> = Vec::new();
    let mut parts: Vec<Part> = Vec::new();
    for block in &result.content {
        match block_part(block) {
            Some(Ok(part)) => parts.push(part),
            Some(Err(note)) => lines.push(note),
            None => lines.push(block_text(block)),
        }
    }
    let text = lines.join("\n");
    if is_error {
        let mut message = text;
        for part in &parts {
            if !message.is_empty() {
                message.push('\n');
            }
            message.push_str(&format!("[{}]", part.describe()));
        }
        return Err(ToolError::new(if message.trim().is_empty() {
            "the MCP tool reported an error without a message".to_owned()
        } else {
            message
        }));
    }
    let text = match result.structured_content {
        Some(value) => value.to_string(),
        None => text,
    };
    Ok(parts
        .into_iter()
        .fold(ToolContent::text(text), ToolContent::part))
}

/// The part of an image, audio or embedded blob block (`None` for any other block);
/// `Err` with a note naming the block and why when its data is not a usable part.
fn block_part(block: &ContentBlock) -> Option<Result<Part, String>> {
    let (kind, data, mime_type, uri) = match block {
        ContentBlock::Image(image) => ("image", &image.data, Some(&image.mime_type), None),
        ContentBlock::Audio(audio) => ("audio", &audio.data, Some(&audio.mime_type), None),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => ("resource", blob, mime_type.as_ref(), Some(uri)),
            _ => return None,
        },
        _ => return None,
    };
    let named = |reason: String| match uri {
        Some(uri) => format!("[{kind} {uri}: {reason}]"),
        None => format!(
            "[{kind} {}: {reason}]",
            mime_type.map_or("", String::as_str)
        ),
    };
    let part = match mime_type {
        Some(mime_type) => Part::from_base64(data, mime_type.as_str()),
        None => agent_core::content::Bytes::from_base64(data).and_then(Part::from_bytes),
    };
    Some(
        part.map(|part| match uri.map(String::as_str).and_then(file_name) {
            Some(name) => part.named(name),
            None => part,
        })
        .map_err(|e| named(format!("not passed on: {e}"))),
    )
}

/// The last segment of a resource URI, when it looks like a file name.
fn file_name(uri: &str) -> Option<String> {
    let path = uri.split(['?', '#']).next().unwrap_or_default();
    let last = path.rsplit('/').next().unwrap_or_default();
    (!last.is_empty() && !last.contains(':')).then(|| last.to_owned())
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            _ => "[resource]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
        _ => "[unsupported content]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_blocks_are_joined_and_structured_content_wins() {
        let text = parse(json!({"content": [
            {"type": "text", "text": "line one"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "line two"}
        ]}));
        let content = map_result(text).unwrap();
        assert_eq!(content.text, "line one\nline two");
        assert_eq!(
            content.parts,
            [Part::from_bytes_as(vec![0_u8; 3], "image/png").unwrap()]
        );
        let structured = parse(json!({
            "content": [{"type": "text", "text": "{\"sum\": 5}"}],
            "structuredContent": {"sum": 5}
        }));
        assert_eq!(map_result(structured).unwrap().text, r#"{"sum":5}"#);
    }

    #[test]
    fn audio_and_blob_resources_become_parts_and_bad_data_a_note() {
        // "%PDF-1.4" in base64, with no MIME type: sniffed.
        let result = parse(json!({"content": [
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///bills/b-7.pdf",
                "blob": "JVBERi0xLjQ="}},
            {"type": "resource", "resource": {"uri": "mem://notes", "text": "a note"}},
            {"type": "image", "data": "not base64!", "mimeType": "image/png"},
            {"type": "image", "data": "", "mimeType": "image/png"}
        ]}));
        let content = map_result(result).unwrap();
        assert_eq!(
            content.text,
            "a note\n[image image/png: not passed on: the content is not valid base64: \
             Invalid symbol 32, offset 3.]\n\
             [image image/png: not passed on: the content is empty (0 bytes)]"
        );
        let pdf = Part::from_bytes_as(b"%PDF-1.4".to_vec(), "application/pdf")
            .unwrap()
            .named("b-7.pdf");
        assert_eq!(
            content.parts,
            [
                Part::from_bytes_as(vec![0_u8; 3], "audio/wav").unwrap(),
                pdf
            ]
        );
    }

    #[test]
    fn is_error_becomes_a_tool_error_with_the_text() {
        let failed = parse(json!({
            "content": [{"type": "text", "text": "no such city"}],
            "isError": true
        }));
        let error = map_result(failed).unwrap_err();
        assert_eq!(error.message(), "no such city");
        assert!(!error.is_fatal());
        let silent = parse(json!({"content": [], "isError": true}));
        assert_eq!(
            map_result(silent).unwrap_err().message(),
            "the MCP tool reported an error without a message"
        );
    }
}
