//! The tests' MCP server (rmcp's server side) and helpers shared by the test targets.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use agent_core::{LlmRequest, Message, ToolResult, agent_output};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// The value the scripted runs submit.
#[agent_output]
#[derive(Debug)]
pub(crate) struct Answer {
    /// What the agent found.
    pub summary: String,
}

/// A small MCP server: `add` (structured result), `weather.lookup` (text; `isError` for
/// Atlantis), `tags.set` (a schema strict mode cannot express), `sleep`, and, when
/// `exit_tool` is set, `crash` (exits the process mid-call). Lists `page_size` tools
/// per page.
#[derive(Clone)]
pub(crate) struct TestServer {
    pub page_size: usize,
    pub exit_tool: bool,
}

fn schema(value: Value) -> Arc<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => panic!("schemas are objects"),
    }
}

/// Annotations that say "destructive" (`tags.set` overwrites the tags).
fn destructive() -> ToolAnnotations {
    let mut annotations = ToolAnnotations::default();
    annotations.destructive_hint = Some(true);
    annotations.read_only_hint = Some(false);
    annotations
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            Tool::new(
                "add",
                "Adds two integers.",
                schema(json!({
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"]
                })),
            ),
            Tool::new(
                "weather.lookup",
                "Current weather in a city.",
                schema(json!({
                    "$schema": "http://json-schema.org/draft-07/schema#",
                    "type": "object",
                    "properties": {"city": {"type": "string", "minLength": 1}},
                    "required": ["city"]
                })),
            ),
            Tool::new(
                "tags.set",
                "Sets free-form tags.",
                schema(json!({
                    "title": "TagsArgs",
                    "properties": {
                        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                        "note": {"type": ["string", "null"], "format": "uri"}
                    },
                    "required": ["tags"]
                })),
            )
            .with_annotations(destructive()),
            Tool::new(
                "sleep",
                "Sleeps for ms milliseconds.",
                schema(json!({
                    "type": "object",
                    "properties": {"ms": {"type": "integer", "minimum": 0}},
                    "required": ["ms"]
                })),
            ),
        ];
        if self.exit_tool {
            tools.push(Tool::new(
                "crash",
                "Exits the server process.",
                schema(json!({"type": "object", "properties": {}})),
            ));
        }
        tools
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let all = self.tools();
        let start: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let end = (start + self.page_size).min(all.len());
        let mut page = ListToolsResult::with_all_items(all[start..end].to_vec());
        if end < all.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match request.name.as_ref() {
            "add" => {
                let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
                CallToolResult::structured(json!({"sum": sum}))
            }
            "weather.lookup" => match args["city"].as_str().unwrap_or_default() {
                "Atlantis" => {
                    CallToolResult::error(vec![ContentBlock::text("no such city: Atlantis")])
                }
                city => {
                    CallToolResult::success(vec![ContentBlock::text(format!("sunny in {city}"))])
                }
            },
            "tags.set" => CallToolResult::success(vec![ContentBlock::text(format!(
                "{} tags set",
                args["tags"].as_object().map_or(0, serde_json::Map::len)
            ))]),
            "sleep" => {
                let ms = args["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                CallToolResult::success(vec![ContentBlock::text("slept")])
            }
            "crash" if self.exit_tool => std::process::exit(3),
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(result.into())
    }
}

/// The tool results fed back in request `index`, in order.
pub(crate) fn results_of(requests: &[LlmRequest], index: usize) -> Vec<ToolResult> {
    match requests[index].messages.last() {
        Some(Message::Tool { results }) => results.clone(),
        other => panic!("expected tool results, got {other:?}"),
    }
}
