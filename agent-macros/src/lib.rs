//! Procedural macros for `agent-core`: `#[agent_output]` and `#[tool]`.
//!
//! Use them through `agent_core::{agent_output, tool}`; the generated code names only
//! `::agent_core` paths (its hidden `__private` module re-exports serde, schemars and
//! serde_json), so a user crate depends on `agent-core` alone.
//!
//! Layout, as in serde_derive and thiserror: `attr` parses the macros' own arguments
//! and doc comments, `ast` turns the annotated item into the macro's model, `valid`
//! holds the checks (every mistake a `syn::Error` spanned on the token at fault),
//! `expand` writes the code and `json` the part of it for the structs the model's JSON
//! is read into.
//!
//! # One mistake, one error
//!
//! Some mistakes only the type checker can see: a field or parameter type without
//! `Deserialize` or `JsonSchema` (a struct without `#[agent_type]`, `std::time::Instant`),
//! or `State`/`ToolContext` imported under another name. The generated code is laid
//! out so that the compiler reports each such mistake once, with our message, on the
//! type as the user wrote it:
//!
//! - **The check comes first and fails once.** Each field type of an `#[agent_output]`
//!   struct and each JSON parameter type of a `#[tool]` fn is checked in an item
//!   emitted before the struct. A probe dispatched by method resolution
//!   (`agent_core::__private::Probe`, "autoref specialization") picks a verdict on the
//!   concrete type (has both traits, misses `JsonSchema`, misses `Deserialize`, misses
//!   both, is `State`/`ToolContext`) and the verdict's method carries a bound that only
//!   the bad verdicts fail. That bound's trait has `#[diagnostic::on_unimplemented]`:
//!   the error reads "`Address` cannot be a field of an `#[agent_output]` struct" with
//!   the fix in its notes, and its help line names what is missing. A plain bound
//!   (`T: DeserializeOwned + JsonSchema`) fails once per missing trait, in serde's or
//!   schemars' words.
//! - **The derives do not fail again.** `Deserialize` and `JsonSchema` are derived on a
//!   private copy of the struct that is generic over an unused marker, so that serde's
//!   and schemars' `bound` attributes apply (schemars ignores `bound` on a struct
//!   without generics): the copy's impls then require each field type's impls instead
//!   of failing inside the derived code. The struct's own impls are unconditional and
//!   hand over to the copy through the same kind of probe, moving the fields across.
//!   Unconditional matters: impls with where clauses on the field types make the
//!   compiler's proof recurse (E0275) for structs that contain each other, or
//!   themselves through a type alias. The copy keeps the struct's attributes, its serde
//!   name and "expected struct" text, and its schemars name and id (tests check the
//!   schemas against schemars' own derive). A struct with a container `from`,
//!   `try_from`, `remote`, `bound` or `default = "path"`, or with a serde or schemars
//!   attribute that names `Self`, keeps plain derives, which the copy could not
//!   honour; a bad field type there gets the check's error first and the derives'
//!   errors after it.
//! - **Injected parameters are told apart by the compiler.** `#[tool]` recognises
//!   `State<T>` and `ToolContext` by the name the type is written with, before names
//!   are resolved; it cannot see through `use agent_core::State as Dep` or a type
//!   alias. Guessing from the shape would misfire (`Dep<Orders>` looks like
//!   `Vec<Order>`), so instead the check has a verdict for these two types: the
//!   compiler, which knows what `Dep` is, reports "`State<Orders>` is injected by the
//!   runner, but `#[tool]` took this parameter for one the model sends" and says what
//!   to write, where a JSON type without a schema gets the `#[agent_type]` advice.
//! - **Spans.** The error underlines the type's own tokens. rustc adds a "required by a
//!   bound introduced by this call" label on the generated call; for a type of several
//!   tokens that call is spanned on the field or parameter name, since on stable Rust
//!   a span cannot cover several tokens and the label would split the underline.
//!
//! A bad type used twice gives two errors, one at each use. Return types and the fields
//! of an `#[agent_type]` item are not checked this way: their errors are the derives'.

mod ast;
mod attr;
mod expand;
mod json;
mod valid;

use proc_macro::TokenStream;

/// Turns a struct with named fields into a run's output type.
///
/// Implements `Deserialize` and `JsonSchema` (derived through `agent_core::__private`
/// on a private copy of the struct, see "One mistake, one error" above; the user's
/// `#[serde(..)]` and `#[schemars(..)]` attributes keep working) and
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
/// call's context (both recognised by the name the type is written with, alone or at
/// the end of a path; not through a renamed import or a type alias). The fn returns `T: Serialize` or `Result<T, E>` with `E: Display`.
/// Types of your own used as parameters or return values need `#[agent_type]`.
///
/// The fn must not block its thread: a timeout, the deadline or cancellation stop it
/// only at an `.await` (use `tokio::task::spawn_blocking` for blocking work).
///
/// Keys: `name = "..."`, `description = "..."`, `params(name = "...", ..)`, and the
/// flags `irreversible` (a successful call cannot be taken back: listed in hand-overs,
/// never re-run after a crash) and `requires_approval` (every call waits for a person's
/// approval: the run pauses; the config needs a checkpoint store).
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
