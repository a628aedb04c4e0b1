//! [`Usage`]: what a run spent.

use serde::{Deserialize, Serialize};

use crate::llm::TokenUsage;

/// What a run spent: LLM calls, tool executions, tokens and cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// LLM calls to the model, failed ones included.
    pub llm_calls: u32,
    /// Tool executions (the tool's code ran; failed, panicked and timed-out ones included;
    /// `submit_output` never).
    pub tool_calls: u32,
    /// Input tokens over all LLM calls that cost tokens (tokens): every successful one,
    /// and the failed ones the provider accepted (a stream cut mid-way, a 200 that is an
    /// error, a call cut by `llm_timeout`, the deadline or cancellation; case C40).
    pub input_tokens: u64,
    /// Output tokens over the same LLM calls (tokens): for a cut call, at least what
    /// arrived of its turn.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache (tokens; part of `input_tokens`).
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache (tokens; part of `input_tokens`).
    pub cache_write_tokens: u64,
    /// The cost (USD), when the model has a price in the config's pricing table.
    pub cost_usd: Option<f64>,
    /// LLM calls whose response carried no token usage (some compatible servers send
    /// none), and failed calls counted in part or whole from an estimate (C40): their
    /// tokens, and the cost from them, are estimates by the rule of
    /// [`LlmRequest::estimated_input_tokens`](crate::llm::LlmRequest::estimated_input_tokens)
    /// (bytes / 4), so the token and cost caps still bind. Zero when every count is
    /// the provider's.
    pub estimated_llm_calls: u32,
    /// What each model spent, for a config with fallback models (the builder's
    /// `fallback_models`): one entry per model that was called, in the order first
    /// called; the totals above are their sums. Empty for a config with one model
    /// (the totals are that model's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_model: Vec<ModelUsage>,
    /// The child runs of this run: agents its tool calls ran (`AgentConfig::as_tool`),
    /// in the order they ended, each with its own usage (which lists its children in
    /// turn). Their tokens and cost are included in the totals above (so the run's
    /// token and cost caps bind the whole tree); their LLM calls and tool executions
    /// are not (`llm_calls` and `tool_calls` are this run's own loop counters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildUsage>,
    /// Guardrail verdicts other than a pass (see `agent_core::guardrail`): output
    /// rejections, tool denials, replaced arguments, redacted results and trips.
    #[serde(default)]
    pub guardrail_interventions: u32,
    /// Compactions of the conversation (see `agent_core::Compaction`): tool results
    /// cleared or older turns summarized before an LLM call. A summary's tokens and
    /// cost are in the totals above; its call is not in `llm_calls`.
    #[serde(default)]
    pub compactions: u32,
    /// Summaries that failed (a provider error, an empty summary, a cap that would not
    /// allow the call): each fell back to clearing tool results.
    #[serde(default)]
    pub compaction_failures: u32,
}

/// What one child run spent (see [`Usage::children`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChildUsage {
    /// The tool the parent called (the agent's tool name).
    pub tool: String,
    /// The parent's tool call id.
    pub call_id: String,
    /// The child agent's name.
    pub agent: String,
    /// The child run's trace id (its trace record's key).
    pub trace_id: String,
    /// How the child run ended (`answered`, `escalated`, `exhausted`, `stuck`,
    /// `failed`, `paused`).
    pub ending: String,
    /// The child's category when it did not answer (`budget_exhausted`, ...).
    pub category: Option<String>,
    /// What the child run spent, its own children included.
    pub usage: Usage,
}

/// What one model spent in a run (see [`Usage::by_model`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelUsage {
    /// The model as configured, with its routing prefix (`gpt-5-mini`, `azure/prod`).
    pub model: String,
    /// LLM calls sent to this model, failed ones included.
    pub llm_calls: u32,
    /// Input tokens of its LLM calls (tokens; the rule of [`Usage::input_tokens`]).
    pub input_tokens: u64,
    /// Output tokens of its LLM calls (tokens).
    pub output_tokens: u64,
    /// Input tokens read from its prompt cache (tokens; part of `input_tokens`).
    pub cache_read_tokens: u64,
    /// Input tokens written to its prompt cache (tokens; part of `input_tokens`).
    pub cache_write_tokens: u64,
    /// Its cost (USD) at its own price, when the pricing table has one.
    pub cost_usd: Option<f64>,
    /// Its LLM calls counted from an estimate (see [`Usage::estimated_llm_calls`]).
    pub estimated_llm_calls: u32,
}

impl ModelUsage {
    pub(crate) fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            ..Self::default()
        }
    }

    /// Input plus output tokens (tokens).
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    pub(crate) fn add_tokens(&mut self, tokens: &TokenUsage, cost: Option<f64>) {
        self.input_tokens = self.input_tokens.saturating_add(tokens.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(tokens.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(tokens.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(tokens.cache_write_tokens);
        if let Some(cost) = cost {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
        }
    }
}

impl Usage {
    /// Input plus output tokens (tokens).
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// What `model` (as configured) spent, for a config with fallback models; `None`
    /// when it was never called or the config has one model (see
    /// [`by_model`](Self::by_model)).
    pub fn of_model(&self, model: &str) -> Option<&ModelUsage> {
        self.by_model.iter().find(|m| m.model == model)
    }

    /// Whether any token count (and so any cost) is an estimate (see
    /// [`estimated_llm_calls`](Self::estimated_llm_calls)).
    pub fn is_estimated(&self) -> bool {
        self.estimated_llm_calls > 0
    }

    pub(crate) fn add_tokens(&mut self, tokens: &TokenUsage) {
        // Saturating: a client may report anything, and a wrapped total would slip past
        // `max_total_tokens`.
        self.input_tokens = self.input_tokens.saturating_add(tokens.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(tokens.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(tokens.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(tokens.cache_write_tokens);
    }
}
