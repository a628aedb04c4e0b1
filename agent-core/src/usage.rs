//! [`Usage`]: what a run spent.

use serde::{Deserialize, Serialize};

use crate::llm::TokenUsage;

/// What a run spent: LLM calls, tool executions, tokens and cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// [`LlmRequest::estimated_input_tokens`](crate::LlmRequest::estimated_input_tokens)
    /// (bytes / 4), so the token and cost caps still bind. Zero when every count is
    /// the provider's.
    pub estimated_llm_calls: u32,
}

impl Usage {
    /// Input plus output tokens (tokens).
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
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
