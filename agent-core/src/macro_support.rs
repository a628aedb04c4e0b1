//! Support code for what `#[agent_output]`, `#[tool]` and `tools!` generate. Reached
//! through `agent_core::__private`; not a public API.

mod probe;

use std::fmt::Display;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::output::SUBMIT_OUTPUT;
use crate::schema::parameters_for;
use crate::tool::{State, ToolContext, ToolDefinition, ToolError};
use crate::validate::{SchemaValidator, ValidationErrors, deserialize};

pub use agent_macros::SchemaAttrs;
pub use probe::*;

/// A per-type cache of the compiled output schema (one `static` per `#[agent_output]`).
#[derive(Debug)]
pub struct ValidatorCell(OnceLock<Result<SchemaValidator, String>>);

impl ValidatorCell {
    /// An empty cell.
    pub const fn new() -> Self {
        Self(OnceLock::new())
    }
}

impl Default for ValidatorCell {
    fn default() -> Self {
        Self::new()
    }
}

/// The `submit_output` definition of `T`.
pub fn output_tool<T: JsonSchema>(description: &str) -> ToolDefinition {
    ToolDefinition::new(SUBMIT_OUTPUT, description, parameters_for::<T>())
}

/// Validates `arguments` against `T`'s schema (compiled once into `cell`), then
/// deserializes them.
///
/// # Errors
/// Every schema violation (`"/severity: 9 is greater than the maximum of 4"`), or serde's
/// error for a schema-valid value that still does not deserialize.
pub fn output_from_arguments<T: JsonSchema + DeserializeOwned>(
    cell: &ValidatorCell,
    arguments: &Value,
) -> Result<T, ValidationErrors> {
    let validator = cell
        .0
        .get_or_init(|| SchemaValidator::new(&parameters_for::<T>()));
    match validator {
        Ok(validator) => validator.validate_into(arguments),
        Err(message) => Err(ValidationErrors::one(format!(
            "/: the output schema does not compile: {message}"
        ))),
    }
}

/// A `validate = path` check of an `#[agent_output]` type.
#[diagnostic::on_unimplemented(
    message = "`validate` must name a fn(&{T}) -> Result<(), E> where E: Display",
    label = "this is not a fn(&{T}) -> Result<(), impl Display>"
)]
pub trait OutputCheck<T> {
    /// Runs the check; an error becomes one validation message.
    ///
    /// # Errors
    /// The check's error, as `"/: <message>"` unless it already starts with a `/` path.
    fn run(&self, value: &T) -> Result<(), ValidationErrors>;
}

impl<T, E, F> OutputCheck<T> for F
where
    F: Fn(&T) -> Result<(), E>,
    E: Display,
{
    fn run(&self, value: &T) -> Result<(), ValidationErrors> {
        self(value).map_err(|e| {
            let message = e.to_string();
            if message.starts_with('/') {
                ValidationErrors::one(message)
            } else {
                ValidationErrors::one(format!("/: {message}"))
            }
        })
    }
}

/// Runs a `validate = path` check.
///
/// # Errors
/// The check's error (see [`OutputCheck::run`]).
pub fn run_output_check<T>(check: impl OutputCheck<T>, value: &T) -> Result<(), ValidationErrors> {
    check.run(value)
}

/// A `partial = path` check of an `#[agent_output]` type.
#[diagnostic::on_unimplemented(
    message = "`partial` must name a fn(&{T}) -> bool",
    label = "this is not a fn(&{T}) -> bool"
)]
pub trait PartialCheck<T> {
    /// Whether the value is a partial answer.
    fn is_partial(&self, value: &T) -> bool;
}

impl<T, F> PartialCheck<T> for F
where
    F: Fn(&T) -> bool,
{
    fn is_partial(&self, value: &T) -> bool {
        self(value)
    }
}

/// Runs a `partial = path` check.
pub fn run_partial_check<T>(check: impl PartialCheck<T>, value: &T) -> bool {
    check.is_partial(value)
}

/// What `tools!` needs of a `#[tool]` fn's type: its tool name (for the compile-time
/// duplicate check) and a value.
pub trait ToolName: Sized {
    /// The name the model calls the tool by.
    const NAME: &'static str;
    /// The tool.
    fn instance() -> Self;
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The first name that occurs twice in `names`, if any (evaluated at compile time by
/// `tools!`).
pub const fn duplicate_tool_name(names: &[&'static str]) -> Option<&'static str> {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() {
            if same(names[i], names[j]) {
                return Some(names[i]);
            }
            j += 1;
        }
        i += 1;
    }
    None
}

/// Deserializes a tool's (already schema-valid) arguments.
///
/// # Errors
/// A [`ToolError`] naming what did not deserialize.
pub fn tool_arguments<A: DeserializeOwned>(arguments: &Value) -> Result<A, ToolError> {
    deserialize(arguments).map_err(|e| ToolError::new(format!("invalid arguments: {e}")))
}

/// The application state of type `S` for a `State<S>` parameter.
///
/// # Errors
/// A [`ToolError`] when the config holds no `S` (the config's `build()` rejects that
/// case already, through [`Tool::required_state`](crate::Tool::required_state)).
pub fn tool_state<S: Send + Sync + 'static>(context: &ToolContext) -> Result<State<S>, ToolError> {
    context.state::<S>().map(State).ok_or_else(|| {
        ToolError::new(format!(
            "state of type {} is not set: add it with .state(value)",
            std::any::type_name::<S>()
        ))
    })
}

/// The return value of a `#[tool]` fn as tool result content: a string as it is,
/// anything else as JSON.
#[diagnostic::on_unimplemented(
    message = "a #[tool] fn must return a type that implements `Serialize`, or `Result<T, E>` with `T: Serialize` and `E: Display`",
    label = "`{Self}` is not a supported tool return type"
)]
pub trait ToolReturn {
    /// The tool result content.
    ///
    /// # Errors
    /// The fn's error (its `Display` text), or a serialization failure.
    fn into_tool_result(self) -> Result<String, ToolError>;
}

/// A tool return value that is not a `Result`.
#[derive(Debug)]
pub struct Plain<T>(pub T);

impl<T: Serialize> ToolReturn for Plain<T> {
    fn into_tool_result(self) -> Result<String, ToolError> {
        content(&self.0)
    }
}

impl<T: Serialize, E: Display + 'static> ToolReturn for Result<T, E> {
    fn into_tool_result(self) -> Result<String, ToolError> {
        match self {
            Ok(value) => content(&value),
            // A `ToolError` keeps whether it is fatal; any other error is its text.
            Err(e) => Err(
                match (&e as &dyn std::any::Any).downcast_ref::<ToolError>() {
                    Some(error) => error.clone(),
                    None => ToolError::new(e.to_string()),
                },
            ),
        }
    }
}

/// The result of a `#[tool]` fn that returns a `ToolContent` (or a
/// `Result<ToolContent, E>`): its text and parts, or its error as a tool error.
///
/// # Errors
/// The fn's error (a `ToolError` as it is, any other as its `Display` text).
pub fn content_of<E: Display + 'static>(
    returned: Result<crate::tool::ToolContent, E>,
) -> Result<crate::tool::ToolContent, ToolError> {
    returned.map_err(
        |e| match (&e as &dyn std::any::Any).downcast_ref::<ToolError>() {
            Some(error) => error.clone(),
            None => ToolError::new(e.to_string()),
        },
    )
}

fn content<T: Serialize>(value: &T) -> Result<String, ToolError> {
    // Written straight to JSON text (no `Value` in between); a value that serializes
    // to a JSON string is its text, unquoted, as a `String` result is.
    match serde_json::to_string(value) {
        Ok(text) if text.starts_with('"') => {
            Ok(serde_json::from_str::<String>(&text).unwrap_or(text))
        }
        Ok(text) => Ok(text),
        Err(e) => Err(ToolError::new(format!(
            "the tool's result does not serialize to JSON: {e}"
        ))),
    }
}

/// The compile-time error text of `tools!` when two tools share a name.
#[derive(Clone, Copy, Debug)]
pub struct DuplicateMessage {
    buf: [u8; 192],
    len: usize,
}

impl DuplicateMessage {
    /// The message.
    pub const fn as_str(&self) -> &str {
        let (head, _) = self.buf.split_at(self.len);
        match std::str::from_utf8(head) {
            Ok(text) => text,
            Err(_) => "tools![..] lists two tools with the same name",
        }
    }

    const fn push(mut self, text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() && self.len < self.buf.len() {
            self.buf[self.len] = bytes[i];
            self.len += 1;
            i += 1;
        }
        self
    }
}

/// When a name occurs twice in `names`: the error `tools!` reports at compile time.
pub const fn duplicate_tool_message(names: &[&'static str]) -> Option<DuplicateMessage> {
    match duplicate_tool_name(names) {
        Some(name) => Some(
            DuplicateMessage {
                buf: [0; 192],
                len: 0,
            }
            .push("tools![..] lists two tools named `")
            .push(name)
            .push("`: tool names must be unique"),
        ),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::{BTreeMap, HashMap};

    use super::*;

    /// The result text as it was made before it was written directly: through a
    /// `Value`.
    fn through_value<T: Serialize>(value: &T) -> String {
        match serde_json::to_value(value).unwrap() {
            Value::String(text) => text,
            other => other.to_string(),
        }
    }

    #[derive(Serialize)]
    struct Order {
        id: &'static str,
        status: Option<&'static str>,
        total: f64,
        lines: Vec<(u32, &'static str)>,
        by_line: BTreeMap<u32, bool>,
    }

    #[test]
    fn results_are_the_text_a_value_would_give() {
        let order = Order {
            id: "A-1001",
            status: None,
            total: 12.5,
            lines: vec![(1, "boots \"trail\"")],
            by_line: BTreeMap::from([(1, true), (2, false)]),
        };
        let text = Plain(&order).into_tool_result().unwrap();
        assert_eq!(
            text,
            r#"{"id":"A-1001","status":null,"total":12.5,"lines":[[1,"boots \"trail\""]],"by_line":{"1":true,"2":false}}"#
        );
        assert_eq!(text, through_value(&order));
        for plain in ["shipped", "", "line\nbreak \"quoted\" \u{e9}"] {
            assert_eq!(Plain(plain).into_tool_result().unwrap(), plain);
            assert_eq!(plain, through_value(&plain));
        }
        assert_eq!(Plain(f64::NAN).into_tool_result().unwrap(), "null");
        assert_eq!(Plain(()).into_tool_result().unwrap(), "null");
        assert_eq!(Plain(7_u8).into_tool_result().unwrap(), "7");
        let ok: Result<Vec<&str>, ToolError> = Ok(vec!["a"]);
        assert_eq!(ok.into_tool_result().unwrap(), r#"["a"]"#);
    }

    #[test]
    fn errors_stay_errors() {
        let fatal = ToolError::fatal("card declined");
        let err: Result<u8, ToolError> = Err(fatal.clone());
        assert_eq!(err.into_tool_result().unwrap_err(), fatal);
        let other: Result<u8, std::fmt::Error> = Err(std::fmt::Error);
        assert_eq!(
            other.into_tool_result().unwrap_err(),
            ToolError::new(std::fmt::Error.to_string())
        );
        let bad_keys = HashMap::from([((1, 2), "pair keys are not JSON")]);
        let error = Plain(bad_keys).into_tool_result().unwrap_err();
        assert!(
            error.to_string().contains("does not serialize to JSON"),
            "{error}"
        );
    }
}
