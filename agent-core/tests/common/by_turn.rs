//! `ByTurn`: a model that answers the `n`-th turn of a run with `steps[n]`, `n` being the
//! number of assistant turns in the request, so a process that takes a run over mid-way
//! (a resume, a crash) gets the right step; it counts its requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_core::llm::{
    LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, Message, TokenUsage,
};

/// See the module's doc.
#[derive(Clone)]
pub(crate) struct ByTurn {
    steps: Arc<Vec<LlmResponse>>,
    requests: Arc<AtomicU64>,
    name: &'static str,
}

impl ByTurn {
    /// Provider `scripted`, answering with `steps`.
    pub(crate) fn new(steps: Vec<LlmResponse>) -> Self {
        Self::named("scripted", steps)
    }

    /// Provider `name` (a fallback chain tells its models apart by it).
    pub(crate) fn named(name: &'static str, steps: Vec<LlmResponse>) -> Self {
        Self {
            steps: Arc::new(steps),
            requests: Arc::new(AtomicU64::new(0)),
            name,
        }
    }

    /// Every step reporting `tokens` input and `tokens` output tokens.
    pub(crate) fn with_tokens(steps: Vec<LlmResponse>, tokens: u64) -> Self {
        let steps = steps
            .into_iter()
            .map(|s| s.with_usage(TokenUsage::new(tokens, tokens)))
            .collect();
        Self::new(steps)
    }

    /// The requests made so far.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl LlmClient for ByTurn {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let step = self.steps.get(turn).cloned();
        let name = self.name;
        Box::pin(async move {
            step.ok_or_else(|| LlmError::permanent(format!("{name}: the script is used up")))
        })
    }

    fn provider(&self) -> &str {
        self.name
    }
}
