//! [`McpTool`]: one MCP server tool as an agent-core [`Tool`], and how its results map.

use std::sync::Arc;

use agent_core::{Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

use crate::connect::Connection;
use crate::server::scrub;

/// One tool of a connected MCP server (built by [`McpServer::connect`](crate::McpServer::connect)).
pub(crate) struct McpTool {
    pub(crate) definition: ToolDefinition,
    pub(crate) mcp_name: String,
    pub(crate) irreversible: bool,
    pub(crate) connection: Arc<Connection>,
}

impl Tool for McpTool {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(self.call_mcp(arguments))
    }

    fn irreversible(&self) -> bool {
        self.irreversible
    }
}

impl McpTool {
    async fn call_mcp(&self, arguments: Value) -> Result<String, ToolError> {
        let connection = &self.connection;
        let mut params = CallToolRequestParams::new(self.mcp_name.clone());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        let limit = connection.call_timeout;
        match tokio::time::timeout(limit, connection.service.call_tool(params)).await {
            Ok(Ok(result)) => map_result(result),
            Ok(Err(error)) => Err(ToolError::new(scrub(
                service_error(&connection.label, &error),
                &connection.secrets,
            ))),
            Err(_) => Err(ToolError::new(format!(
                "MCP server {} did not answer within {} ms",
                connection.label,
                limit.as_millis()
            ))),
        }
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

/// A `tools/call` result as the tool's result: `structuredContent` as compact JSON if
/// present, else the content blocks joined by newlines (text as is; other blocks as a
/// one-line placeholder naming their kind). `isError: true` becomes a [`ToolError`] with
/// the same text.
pub(crate) fn map_result(result: CallToolResult) -> Result<String, ToolError> {
    let is_error = result.is_error.unwrap_or(false);
    let text = result
        .content
        .iter()
        .map(block_text)
        .collect::<Vec<_>>()
        .join("\n");
    if is_error {
        return Err(ToolError::new(if text.trim().is_empty() {
            "the MCP tool reported an error without a message".to_owned()
        } else {
            text
        }));
    }
    match result.structured_content {
        Some(value) => Ok(value.to_string()),
        None => Ok(text),
    }
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image: {}]", image.mime_type),
        ContentBlock::Audio(audio) => format!("[audio: {}]", audio.mime_type),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            ResourceContents::BlobResourceContents { uri, .. } => format!("[resource: {uri}]"),
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
        assert_eq!(
            map_result(text).unwrap(),
            "line one\n[image: image/png]\nline two"
        );
        let structured = parse(json!({
            "content": [{"type": "text", "text": "{\"sum\": 5}"}],
            "structuredContent": {"sum": 5}
        }));
        assert_eq!(map_result(structured).unwrap(), r#"{"sum":5}"#);
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
