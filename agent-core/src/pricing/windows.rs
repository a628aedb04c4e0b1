//! Context windows: how many tokens a model takes in one request, and how many it may
//! write, per model-name prefix (the longest matching prefix wins, as for prices).
//!
//! Sources, read 2026-12-03:
//! - Anthropic: the "Model comparison" table of
//!   <https://docs.anthropic.com/en/docs/about-claude/models/overview> (context window
//!   and max output per model; the 1M-token window of Sonnet 4 / 4.5 is a beta behind a
//!   header and is not assumed here).
//! - OpenAI: each model's page under <https://platform.openai.com/docs/models> (for
//!   example <https://platform.openai.com/docs/models/gpt-5>: "400,000 context window,
//!   128,000 max output tokens").
//! - Gemini: <https://ai.google.dev/gemini-api/docs/models> ("Input token limit
//!   1,048,576, output token limit 65,536" for Gemini 2.5 Pro and Flash).
//!
//! For every model here the window counts input and output together: a request may hold
//! at most `tokens - max_tokens` input tokens, where `max_tokens` is the output cap it
//! sends.

use serde::{Deserialize, Serialize};

/// A model's context window (tokens): the input and output of one request together, and
/// the most output one request may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ContextWindow {
    /// Input plus output tokens of one request (tokens).
    pub tokens: u64,
    /// The most output tokens one request may ask for (tokens).
    pub max_output_tokens: u64,
}

impl ContextWindow {
    /// A window of `tokens` (input and output together) with at most
    /// `max_output_tokens` of output, for a model the table does not know (set it with
    /// the builder's `context_window`).
    pub const fn new(tokens: u64, max_output_tokens: u64) -> Self {
        Self {
            tokens,
            max_output_tokens,
        }
    }

    /// The window of `model` (as configured, a routing prefix such as `azure/` or
    /// `openai-responses/` removed) from the table of known models (see the module
    /// docs for the sources), or `None` for a model it does not know (local and
    /// compatible servers' models, deployments named by the user).
    pub fn of(model: &str) -> Option<Self> {
        let name = model.rsplit('/').next().unwrap_or(model);
        let name = name.strip_prefix("anthropic.").unwrap_or(name);
        WINDOWS
            .iter()
            .filter(|(prefix, _)| name.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .and_then(|(_, window)| *window)
    }
}

const fn w(tokens: u64, max_output_tokens: u64) -> Option<ContextWindow> {
    Some(ContextWindow::new(tokens, max_output_tokens))
}

/// Every row: a model-name prefix and its window (`None`: unknown on purpose, so that a
/// newer model is not taken for the older one whose name is a prefix of its own).
const WINDOWS: &[(&str, Option<ContextWindow>)] = &[
    // --- Anthropic ---
    ("claude-opus-4", w(200_000, 32_000)),
    ("claude-opus-4-", None),
    ("claude-opus-4-0", w(200_000, 32_000)),
    ("claude-opus-4-2025", w(200_000, 32_000)),
    ("claude-opus-4-1", w(200_000, 32_000)),
    ("claude-opus-4-5", w(200_000, 64_000)),
    ("claude-sonnet-4", w(200_000, 64_000)),
    ("claude-sonnet-4-", None),
    ("claude-sonnet-4-0", w(200_000, 64_000)),
    ("claude-sonnet-4-2025", w(200_000, 64_000)),
    ("claude-sonnet-4-5", w(200_000, 64_000)),
    ("claude-3-7-sonnet", w(200_000, 64_000)),
    ("claude-haiku-4-5", w(200_000, 64_000)),
    ("claude-3-5-haiku", w(200_000, 8_192)),
    ("claude-3-haiku", w(200_000, 4_096)),
    ("claude-3-opus", w(200_000, 4_096)),
    // --- OpenAI ---
    ("gpt-5", w(400_000, 128_000)),
    ("gpt-5-chat", w(128_000, 16_384)),
    ("gpt-5-pro", w(400_000, 272_000)),
    ("gpt-5.", None),
    ("gpt-5.1", w(400_000, 128_000)),
    ("gpt-5.1-chat", w(128_000, 16_384)),
    ("gpt-4.1", w(1_047_576, 32_768)),
    ("gpt-4o", w(128_000, 16_384)),
    ("gpt-4o-2024-05-13", w(128_000, 4_096)),
    ("chatgpt-4o-latest", w(128_000, 16_384)),
    ("o1", w(200_000, 100_000)),
    ("o1-mini", w(128_000, 65_536)),
    ("o3", w(200_000, 100_000)),
    ("o4-mini", w(200_000, 100_000)),
    // --- Gemini ---
    ("gemini-2.5-pro", w(1_048_576, 65_536)),
    ("gemini-2.5-flash", w(1_048_576, 65_536)),
    ("gemini-2.0-flash", w(1_048_576, 8_192)),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins_and_routing_prefixes_are_ignored() {
        assert_eq!(ContextWindow::of("gpt-5-mini"), w(400_000, 128_000));
        assert_eq!(ContextWindow::of("gpt-5-chat-latest"), w(128_000, 16_384));
        assert_eq!(
            ContextWindow::of("openai-responses/gpt-5"),
            w(400_000, 128_000)
        );
        assert_eq!(
            ContextWindow::of("claude-sonnet-4-5-20250929"),
            w(200_000, 64_000)
        );
        assert_eq!(
            ContextWindow::of("bedrock/anthropic.claude-haiku-4-5-20251001-v1:0"),
            w(200_000, 64_000)
        );
        // Newer than the table: unknown, not the older model's window.
        assert_eq!(ContextWindow::of("gpt-5.4"), None);
        assert_eq!(ContextWindow::of("claude-opus-4-9"), None);
        assert_eq!(ContextWindow::of("dispatch/qwen"), None);
    }
}
