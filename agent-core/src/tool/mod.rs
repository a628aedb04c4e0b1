//! Tools: the [`Tool`] trait a model's calls run through (what `#[tool]` generates), its
//! [`ToolContext`] and [`ToolError`], the application state tools see ([`State`],
//! [`StateMap`]), and the [`ToolRegistry`] a config takes its tools from, including
//! [`ToolSource`]s whose tools may change during a run.

mod core;
mod registry;

pub(crate) use self::core::Opaque;
pub use self::core::{
    ContentFuture, State, StateMap, StateRequirement, Tool, ToolContent, ToolContext,
    ToolDefinition, ToolError, ToolFuture,
};
pub(crate) use registry::RegisteredSource;
pub use registry::{ToolRegistry, ToolSnapshot, ToolSource};

/// The input schema of an agent called as a tool (a local agent as a tool, a served
/// agent, a remote agent): one required string, `input`, the text the agent is asked,
/// and nothing else: `{"type": "object", "properties": {"input": {"type": "string",
/// ..}}, "required": ["input"], "additionalProperties": false}`.
#[must_use]
pub fn agent_input_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "input": {"type": "string", "description": "What the agent is asked."}
        },
        "required": ["input"],
        "additionalProperties": false
    })
}
