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
