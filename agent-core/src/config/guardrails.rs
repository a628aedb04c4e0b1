//! The guardrails of a config (see [`Verdict`](crate::guardrail::Verdict)) and their builder methods.

use crate::guardrail::{InputGuardrail, OutputGuardrail, ToolGuardrail};

use super::AgentConfigBuilder;

/// Every guardrail of a config, in the order added.
pub(crate) struct Guardrails<T> {
    pub(crate) input: Vec<InputGuardrail>,
    pub(crate) output: Vec<OutputGuardrail<T>>,
    pub(crate) tool: Vec<ToolGuardrail>,
}

impl<T> Default for Guardrails<T> {
    fn default() -> Self {
        Self {
            input: Vec::new(),
            output: Vec::new(),
            tool: Vec::new(),
        }
    }
}

impl<T> Clone for Guardrails<T> {
    fn clone(&self) -> Self {
        Self {
            input: self.input.clone(),
            output: self.output.clone(),
            tool: self.tool.clone(),
        }
    }
}

impl<T> Guardrails<T> {
    /// The names of every guardrail, by kind (for the config's fingerprint).
    pub(crate) fn names(&self) -> [Vec<&str>; 3] {
        [
            self.input.iter().map(|g| g.name.as_str()).collect(),
            self.output.iter().map(|g| g.name.as_str()).collect(),
            self.tool.iter().map(|g| g.name.as_str()).collect(),
        ]
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.input.is_empty() && self.output.is_empty() && self.tool.is_empty()
    }
}

impl<T> AgentConfigBuilder<T> {
    /// A check on the run's input before the first LLM call (or at the same time as it,
    /// [`InputGuardrail::concurrent`]); tripped, the run ends `failed` with category
    /// `guardrail_tripped` and no tool runs. Guardrails run in the order added.
    #[must_use]
    pub fn input_guardrail(mut self, guardrail: InputGuardrail) -> Self {
        self.settings.guardrails.input.push(guardrail);
        self
    }

    /// A check on each validated answer, after the output validator: it passes it,
    /// rejects it with feedback the model corrects under `max_parse_retries`, or trips
    /// (ending `failed`, category `guardrail_tripped`).
    #[must_use]
    pub fn output_guardrail(mut self, guardrail: OutputGuardrail<T>) -> Self {
        self.settings.guardrails.output.push(guardrail);
        self
    }

    /// A check around tool calls: before a call runs (allow, deny, replace the
    /// arguments, trip) and after it returns (redact the result).
    #[must_use]
    pub fn tool_guardrail(mut self, guardrail: ToolGuardrail) -> Self {
        self.settings.guardrails.tool.push(guardrail);
        self
    }
}
