//! Handoffs: the model transfers the conversation to another agent of the same output
//! type (`transfer_to_{name}`), which answers in its place. The runner's side is in
//! `runner/handoff.rs`.

use std::fmt;
use std::sync::Arc;

use serde_json::json;

use crate::error::ConfigError;
use crate::message::Message;
use crate::tool::ToolDefinition;

use super::{AgentConfig, AgentConfigBuilder};

/// Which history goes along to the agent taken over to: the run's messages so far (the
/// transfer call's turn not included), returning the messages the next agent sees. It
/// must return a valid history: every tool call answered, every result after its call
/// (`Handoff::input_only` is one that always is).
pub type HistoryFilter = Arc<dyn Fn(&[Message]) -> Vec<Message> + Send + Sync>;

/// A transfer of the conversation to another agent (see the builder's
/// [`handoff`](AgentConfigBuilder::handoff)).
pub struct Handoff<T> {
    pub(crate) config: AgentConfig<T>,
    pub(crate) tool_name: String,
    pub(crate) description: String,
    pub(crate) filter: Option<HistoryFilter>,
}

impl<T> Clone for Handoff<T> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
            tool_name: self.tool_name.clone(),
            description: self.description.clone(),
            filter: self.filter.clone(),
        }
    }
}

impl<T> fmt::Debug for Handoff<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handoff")
            .field("tool", &self.tool_name)
            .field("filter", &self.filter.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: crate::output::AgentOutput> Handoff<T> {
    /// A transfer to `config`, offered to the model as the tool
    /// `transfer_to_{config's name}` with a description naming the agent.
    pub fn new(config: AgentConfig<T>) -> Self {
        let name = config.name().to_owned();
        Self {
            tool_name: format!("transfer_to_{name}"),
            description: format!(
                "Hand the conversation over to the {name} agent, which answers in your place."
            ),
            config,
            filter: None,
        }
    }
}

impl<T> Handoff<T> {
    /// What the model reads about when to transfer.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }

    /// Which history goes along (default: all of it; see [`HistoryFilter`]).
    #[must_use]
    pub fn filter(
        mut self,
        filter: impl Fn(&[Message]) -> Vec<Message> + Send + Sync + 'static,
    ) -> Self {
        self.filter = Some(Arc::new(filter));
        self
    }

    /// Only the user messages go along (no tool calls, results or answers of the agent
    /// handing over).
    #[must_use]
    pub fn input_only(self) -> Self {
        self.filter(|history: &[Message]| {
            history
                .iter()
                .filter(|m| matches!(m, Message::User { .. }))
                .cloned()
                .collect()
        })
    }

    /// The tool the model calls to transfer.
    pub(crate) fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.tool_name.clone(),
            self.description.clone(),
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }
}

impl<T: crate::output::AgentOutput> AgentConfigBuilder<T> {
    /// Lets the model transfer the conversation to `config` (an agent with the same
    /// output type), which then answers: the run goes on with its system prompt, model,
    /// tools and budgets, and the usage, deadline and counters of the whole run so far.
    /// The tool is `transfer_to_{config's name}`; the result's
    /// [`agent`](crate::AgentResult::agent) names the agent that answered. At most
    /// `max_handoffs` transfers per run (default 4; a ping-pong ends `stuck`). For a
    /// description or a history filter, use [`handoff_with`](Self::handoff_with).
    #[must_use]
    pub fn handoff(self, config: AgentConfig<T>) -> Self {
        self.handoff_with(Handoff::new(config))
    }

    /// A transfer with its own description or history filter (see [`Handoff`]).
    #[must_use]
    pub fn handoff_with(mut self, handoff: Handoff<T>) -> Self {
        self.settings.handoffs.push(handoff);
        self
    }
}

/// The handoff tools' definitions, checked: legal names, unique among themselves and
/// the user tools.
pub(super) fn definitions<T>(
    handoffs: &[Handoff<T>],
    taken: &[ToolDefinition],
) -> Result<Vec<ToolDefinition>, ConfigError> {
    let mut out: Vec<ToolDefinition> = Vec::with_capacity(handoffs.len());
    for h in handoffs {
        if !super::checks::is_legal_tool_name(&h.tool_name) {
            return Err(ConfigError::InvalidToolName {
                name: h.tool_name.clone(),
            });
        }
        if taken
            .iter()
            .chain(out.iter())
            .any(|d| d.name == h.tool_name)
        {
            return Err(ConfigError::DuplicateTool {
                name: h.tool_name.clone(),
            });
        }
        out.push(h.definition());
    }
    Ok(out)
}
