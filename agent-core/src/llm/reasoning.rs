//! [`Reasoning`]: how much a reasoning model thinks before it answers, as an effort
//! level or a token budget, mapped by each adapter to its provider's setting.

use serde::{Deserialize, Serialize};

/// An effort level for a reasoning model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Effort {
    /// As little as the model allows (OpenAI `minimal`, gpt-5 models only).
    Minimal,
    /// Low.
    Low,
    /// Medium (OpenAI's default).
    Medium,
    /// High.
    High,
}

impl Effort {
    /// The name providers use (`minimal`, `low`, `medium`, `high`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }

    /// The thinking budget (tokens) an effort maps to on providers that take a budget
    /// (Anthropic, Gemini 2.5): 1,024, 2,048, 8,192 and 24,576.
    pub fn budget_tokens(self) -> u32 {
        match self {
            Self::Minimal => 1_024,
            Self::Low => 2_048,
            Self::Medium => 8_192,
            Self::High => 24_576,
        }
    }
}

/// The reasoning a run asks of its model (the builder's `reasoning`): an effort level,
/// a thinking budget (tokens), or both. Each adapter sends what its provider takes:
///
/// | provider | sent | from a budget only |
/// |---|---|---|
/// | OpenAI Chat Completions | `reasoning_effort` | a `ConfigError` (OpenAI takes no budget) |
/// | OpenAI Responses | `reasoning: {effort}` | a `ConfigError` |
/// | Anthropic | `thinking: {type: enabled, budget_tokens}` (an effort as its budget, [`Effort::budget_tokens`]) | the budget |
/// | Gemini 2.5 | `thinkingConfig: {thinkingBudget}` (likewise) | the budget |
///
/// `build()` asks the client ([`LlmClient::check_reasoning`](crate::llm::LlmClient::check_reasoning))
/// and returns `ConfigError::InvalidSetting` (setting `reasoning`) for a model that
/// does not reason or a budget it cannot honour (Anthropic: at least 1,024 tokens and
/// less than `max_tokens`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Reasoning {
    /// The effort level.
    pub effort: Option<Effort>,
    /// The thinking budget (tokens).
    pub budget_tokens: Option<u32>,
}

impl Reasoning {
    /// An effort level.
    pub fn effort(effort: Effort) -> Self {
        Self {
            effort: Some(effort),
            budget_tokens: None,
        }
    }

    /// A thinking budget (tokens).
    pub fn budget(tokens: u32) -> Self {
        Self {
            effort: None,
            budget_tokens: Some(tokens),
        }
    }

    /// The budget (tokens) for a provider that takes one: the budget if set, else the
    /// effort's ([`Effort::budget_tokens`]); `None` when neither is set.
    pub fn budget_or_effort(&self) -> Option<u32> {
        self.budget_tokens
            .or_else(|| self.effort.map(Effort::budget_tokens))
    }
}
