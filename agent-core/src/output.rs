//! The [`AgentOutput`] trait: a run's output type and how a submission becomes a value.

use serde_json::Value;

use crate::tool::ToolDefinition;
use crate::validate::ValidationErrors;

/// The name of the synthetic tool whose valid call ends a run.
pub const SUBMIT_OUTPUT: &str = "submit_output";

/// A type a run can end with.
///
/// `#[agent_output]` implements it for a struct: [`output_tool`](Self::output_tool) is
/// `submit_output` with the struct's JSON Schema as parameters, and
/// [`from_arguments`](Self::from_arguments) validates against that schema (compiled
/// once), then deserializes, then runs the struct's `validate = path` check.
///
/// `String` implements it as the compat mode: no `submit_output`; a plain-text turn ends
/// the run with its text.
pub trait AgentOutput: Sized + Send + 'static {
    /// The synthetic tool whose valid call ends the run, named [`SUBMIT_OUTPUT`]; `None`
    /// for the text compat mode.
    fn output_tool() -> Option<ToolDefinition>;

    /// Turns `submit_output` arguments into a value.
    ///
    /// # Errors
    /// Every problem, each message naming the JSON path and the rule
    /// (`"/severity: 9 is greater than the maximum of 4"`); the runner feeds them back
    /// to the model.
    fn from_arguments(arguments: &Value) -> Result<Self, ValidationErrors>;

    /// In compat mode, the value a plain-text turn ends the run with; `None` (the
    /// default) for types that end only through `submit_output`.
    fn from_text(text: &str) -> Option<Self> {
        let _ = text;
        None
    }
}

impl AgentOutput for String {
    fn output_tool() -> Option<ToolDefinition> {
        None
    }

    fn from_arguments(_arguments: &Value) -> Result<Self, ValidationErrors> {
        Err(ValidationErrors::one(
            "/: this run ends with plain text, not a submit_output call",
        ))
    }

    fn from_text(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
}
