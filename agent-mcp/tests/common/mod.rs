//! The tests' MCP server (rmcp's server side) and helpers shared by the test targets.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::content::Bytes;
use agent_core::{
    agent_output,
    llm::{LlmRequest, Message, ToolResult},
};
pub(crate) mod served;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ResourceContents, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// The first bytes of a PNG file (enough for its type to be recognized): the image
/// `screenshot` returns.
pub(crate) const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";

/// The first bytes of a PDF file: the resource `screenshot` returns.
pub(crate) const PDF: &[u8] = b"%PDF-1.4\n%test\n";

/// The value the scripted runs submit.
#[agent_output]
#[derive(Debug)]
pub(crate) struct Answer {
    /// What the agent found.
    pub summary: String,
}

/// A small MCP server: `add` (structured result), `weather.lookup` (text; `isError` for
/// Atlantis), `tags.set` (a schema strict mode cannot express), `sleep`, `slow` (sleeps,
/// sending `notifications/progress` with the call's token every `every_ms` when more
/// than 0), `screenshot` (a caption, an image, a PDF blob resource and a text
/// resource), and, when `exit_tool` is set, `crash` (exits the process mid-call). With
/// `changes`, it declares `tools.listChanged` and also lists `swap` and `old_tool`;
/// calling `swap` replaces `old_tool` with `new_tool` and sends
/// `notifications/tools/list_changed` before its result. Lists `page_size` tools per
/// page.
#[derive(Clone)]
pub(crate) struct TestServer {
    pub page_size: usize,
    pub exit_tool: bool,
    pub changes: Option<Arc<Changes>>,
}

/// The state of a server whose tool list changes, shared by its sessions.
#[derive(Default)]
pub(crate) struct Changes {
    /// Whether `swap` ran.
    pub swapped: AtomicBool,
    /// The MCP names of every `tools/call` received, in order.
    pub calls: Mutex<Vec<String>>,
    /// How long `swap` waits between its notification and its result. Over stdio the
    /// two share one stream, in order; over streamable HTTP the notification takes the
    /// session's GET stream and the result the call's POST stream, so without a pause
    /// the result may arrive first.
    pub settle: Duration,
}

impl Changes {
    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
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
        tools.push(Tool::new(
            "slow",
            "Sleeps for ms milliseconds, reporting progress every every_ms (0: never).",
            schema(json!({
                "type": "object",
                "properties": {
                    "ms": {"type": "integer", "minimum": 0},
                    "every_ms": {"type": "integer", "minimum": 0}
                },
                "required": ["ms", "every_ms"]
            })),
        ));
        tools.push(Tool::new(
            "screenshot",
            "Returns a caption, a PNG image, a PDF resource and a text resource.",
            schema(json!({"type": "object", "properties": {}})),
        ));
        if let Some(changes) = &self.changes {
            let empty = || schema(json!({"type": "object", "properties": {}}));
            tools.push(Tool::new(
                "swap",
                "Replaces old_tool with new_tool.",
                empty(),
            ));
            let current = if changes.swapped.load(Ordering::SeqCst) {
                Tool::new("new_tool", "The tool swap added.", empty())
            } else {
                Tool::new("old_tool", "The tool swap removes.", empty())
            };
            tools.push(current);
        }
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
        let capabilities = ServerCapabilities::builder().enable_tools();
        if self.changes.is_some() {
            return ServerConfig::new(capabilities.enable_tool_list_changed().build());
        }
        ServerConfig::new(capabilities.build())
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
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(changes) = &self.changes {
            changes.calls.lock().unwrap().push(request.name.to_string());
        }
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
            "slow" => {
                let ms = args["ms"].as_u64().unwrap_or(0);
                let every = args["every_ms"].as_u64().unwrap_or(0);
                let token = context.meta.get_progress_token();
                let mut sent = 0_u32;
                let mut slept = 0;
                while slept < ms {
                    let step = if every == 0 {
                        ms
                    } else {
                        every.min(ms - slept)
                    };
                    tokio::time::sleep(Duration::from_millis(step)).await;
                    slept += step;
                    if let (true, Some(token)) = (every > 0 && slept < ms, &token) {
                        sent += 1;
                        let progress =
                            ProgressNotificationParam::new(token.clone(), f64::from(sent));
                        context.peer.notify_progress(progress).await.unwrap();
                    }
                }
                CallToolResult::success(vec![ContentBlock::text(format!(
                    "done after {sent} progress notifications"
                ))])
            }
            "screenshot" => CallToolResult::success(vec![
                ContentBlock::text("captured"),
                ContentBlock::image(Bytes::from(PNG).to_base64(), "image/png"),
                ContentBlock::resource(
                    ResourceContents::blob(Bytes::from(PDF).to_base64(), "file:///bills/b-7.pdf")
                        .with_mime_type("application/pdf"),
                ),
                ContentBlock::embedded_text("mem://notes", "page 2 is blank"),
            ]),
            "swap" if self.changes.is_some() => {
                if let Some(changes) = &self.changes {
                    changes.swapped.store(true, Ordering::SeqCst);
                }
                context.peer.notify_tool_list_changed().await.unwrap();
                if let Some(changes) = &self.changes {
                    tokio::time::sleep(changes.settle).await;
                }
                CallToolResult::success(vec![ContentBlock::text("swapped")])
            }
            name @ ("old_tool" | "new_tool") if self.changes.is_some() => {
                CallToolResult::success(vec![ContentBlock::text(format!("{name} ran"))])
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
