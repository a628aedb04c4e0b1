//! Procedural macros for `agent-core`: `#[agent_output]` and `#[tool]`.
//!
//! Use them through `agent_core::{agent_output, tool}`; the generated code names only
//! `::agent_core` paths (its hidden `__private` module re-exports serde, schemars and
//! serde_json), so a user crate depends on `agent-core` alone.
//!
//! Layout, as in serde_derive and thiserror: `attr` parses the macros' own arguments
//! and doc comments, `ast` turns the annotated item into the macro's model, `valid`
//! holds the checks (every mistake a `syn::Error` spanned on the token at fault), and
//! `expand` writes the code.

mod ast;
mod attr;
mod expand;
mod json;
mod valid;

use proc_macro::TokenStream;

/// Turns a struct with named fields into a run's output type.
///
/// Derives `Deserialize` and `JsonSchema` (through `agent_core::__private`; the user's
/// `#[serde(..)]` and `#[schemars(..)]` attributes keep working) and implements
/// `agent_core::AgentOutput`: the tool `submit_output`, described by the struct's doc
/// comment or `description = "..."`, whose parameters are the struct's JSON Schema.
/// Arguments are checked against that schema (compiled once), then deserialized, then
/// passed to the `validate = path` fn if given (`fn(&Self) -> Result<(), impl Display>`).
///
/// Keys: `description = "..."`, `validate = path`.
#[proc_macro_attribute]
pub fn agent_output(args: TokenStream, input: TokenStream) -> TokenStream {
    let input = proc_macro2::TokenStream::from(input);
    match expand::agent_output(args.into(), input.clone()) {
        Ok(tokens) => tokens.into(),
        Err(error) => expand::with_fallback(error, input).into(),
    }
}

/// Makes a struct or enum usable inside an output type, as a tool parameter, or as a
/// tool's return value, with no serde or schemars dependency in the user's crate.
///
/// Derives `Serialize`, `Deserialize` and `JsonSchema` through `agent_core::__private`;
/// the item's own `#[serde(..)]` and `#[schemars(..)]` attributes keep working, and doc
/// comments on enum variants reach the model. Takes no keys.
#[proc_macro_attribute]
pub fn agent_type(args: TokenStream, input: TokenStream) -> TokenStream {
    let input = proc_macro2::TokenStream::from(input);
    match expand::agent_type(args.into(), input.clone()) {
        Ok(tokens) => tokens.into(),
        Err(error) => expand::with_fallback(error, input).into(),
    }
}

/// Turns an async fn into a tool the model can call; the fn stays callable as written.
///
/// The tool's name is the fn's name or `name = "..."` (`^[A-Za-z0-9_-]{1,64}$`, not a
/// name the runner reserves); its description is the doc comment or
/// `description = "..."`; `params(arg = "...", ..)` describes parameters. Parameters of
/// any `Deserialize + JsonSchema` type become the argument schema (`Option<T>` ones are
/// optional; `#[serde(..)]` and `#[schemars(..)]` on a parameter apply to it); a
/// `State<T>` parameter receives application state and a `ToolContext` parameter the
/// call's context. The fn returns `T: Serialize` or `Result<T, E>` with `E: Display`.
/// Types of your own used as parameters or return values need `#[agent_type]`.
///
/// The fn must not block its thread: a timeout, the deadline or cancellation stop it
/// only at an `.await` (use `tokio::task::spawn_blocking` for blocking work).
///
/// Keys: `name = "..."`, `description = "..."`, `params(name = "...", ..)`.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, input: TokenStream) -> TokenStream {
    let input = proc_macro2::TokenStream::from(input);
    match expand::tool(args.into(), input.clone()) {
        Ok(tokens) => tokens.into(),
        Err(error) => expand::with_fallback(error, input).into(),
    }
}

/// Not a public API: lets an `#[agent_output]` struct carry the `#[serde]`,
/// `#[schemars]`, `#[validate]` and `#[garde]` attributes that its `Deserialize` and
/// `JsonSchema` (derived on a copy of it) read. Expands to nothing.
#[doc(hidden)]
#[proc_macro_derive(SchemaAttrs, attributes(serde, schemars, validate, garde))]
pub fn schema_attrs(_input: TokenStream) -> TokenStream {
    TokenStream::new()
}
