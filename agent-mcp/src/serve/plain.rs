//! A tool of a registry served as itself.

use std::sync::Arc;

use agent_core::schema::SchemaValidator;
use agent_core::{Tool, ToolContext};
use rmcp::model::{CallToolResult, ContentBlock, ToolAnnotations};
use serde_json::Value;

use super::call::{Call, CallFuture, Entry, Served, Shared, object};

struct ServedTool {
    tool: Arc<dyn Tool>,
    name: String,
}

/// `tool` as a served entry; an error when it needs approval or its schema is no object.
pub(super) fn entry(tool: Arc<dyn Tool>) -> Result<Entry, String> {
    let definition = tool.definition();
    let name = definition.name.clone();
    if tool.requires_approval() {
        return Err(format!(
            "the tool {name} needs a person's approval, which an MCP client cannot give; \
             serve an agent that uses it instead"
        ));
    }
    let validator = SchemaValidator::new(&definition.parameters)
        .map_err(|e| format!("the parameter schema of {name}: {e}"))?;
    let schema = object(definition.parameters)
        .ok_or_else(|| format!("the parameter schema of {name} is not an object"))?;
    let mut served = rmcp::model::Tool::new(name.clone(), definition.description, schema);
    if tool.irreversible() {
        served = served.with_annotations(ToolAnnotations::new().destructive(true));
    }
    Ok(Entry {
        tool: served,
        validator,
        served: Arc::new(ServedTool { tool, name }),
    })
}

impl Served for ServedTool {
    fn call<'a>(&'a self, arguments: Value, call: Call, shared: &'a Shared) -> CallFuture<'a> {
        Box::pin(async move {
            let context = ToolContext::new(
                call.request_id.clone(),
                self.name.clone(),
                Arc::from(trace_id()),
                Arc::clone(&shared.state),
            );
            let run = self.tool.call_content(arguments, context);
            let outcome = tokio::select! {
                outcome = run => outcome,
                () = call.cancel.cancelled() => {
                    return CallToolResult::error(vec![ContentBlock::text(
                        "the call was cancelled by the client",
                    )]);
                }
            };
            match outcome {
                Ok(content) => {
                    let mut text = content.text;
                    for part in &content.parts {
                        text.push_str(&format!("\n[{}]", part.describe()));
                    }
                    CallToolResult::success(vec![ContentBlock::text(text)])
                }
                Err(error) => CallToolResult::error(vec![ContentBlock::text(
                    shared.scrub(error.message().to_owned()),
                )]),
            }
        })
    }
}

/// A random trace id for a served call (32 lowercase hex digits).
fn trace_id() -> String {
    format!("{:032x}", fastrand::u128(..))
}
