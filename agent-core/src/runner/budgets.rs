//! The budgets: the checks before every LLM call, the last-call rule that forces
//! the answer, and the tokens and cost each turn adds.

use crate::error::{AgentError, Budget};
use crate::llm::LlmResponse;
use crate::output::AgentOutput;

use super::Run;

impl<'c, T: AgentOutput> Run<'c, T> {
    /// The checks made before every LLM call: cancellation and the deadline (checked
    /// here too, so a loop that never waits cannot outrun them), the call cap, then
    /// token and cost budgets.
    pub(super) fn check_before_call(&mut self) -> Result<(), AgentError> {
        if self.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        let s = &self.cfg.settings;
        if let (Some(at), Some(limit)) = (self.deadline_at, self.deadline)
            && tokio::time::Instant::now() >= at
        {
            return Err(AgentError::DeadlineExceeded { limit });
        }
        if self.usage.llm_calls >= s.budgets.max_llm_calls {
            return Err(AgentError::MaxLlmCalls {
                limit: s.budgets.max_llm_calls,
                attempts: std::mem::take(&mut self.attempts),
            });
        }
        if let Some(limit) = s.budgets.max_total_tokens {
            let used = self.usage.total_tokens();
            if used >= limit || used.saturating_add(self.last_call_tokens) > limit {
                return Err(AgentError::BudgetExhausted {
                    budget: Budget::TotalTokens { limit, used },
                });
            }
        }
        if let Some(limit) = s.budgets.max_cost_usd {
            let spent = self.cost_usd;
            if spent >= limit || spent + self.last_call_cost > limit {
                return Err(AgentError::BudgetExhausted {
                    budget: Budget::CostUsd { limit, spent },
                });
            }
        }
        Ok(())
    }

    /// Whether this LLM call is the last one the budgets allow.
    pub(super) fn is_last_call(&self) -> bool {
        let s = &self.cfg.settings;
        if self.usage.llm_calls.saturating_add(1) >= s.budgets.max_llm_calls {
            return true;
        }
        let tokens_tight = s.budgets.max_total_tokens.is_some_and(|limit| {
            self.last_call_tokens > 0
                && self
                    .usage
                    .total_tokens()
                    .saturating_add(self.last_call_tokens.saturating_mul(2))
                    > limit
        });
        let cost_tight = s.budgets.max_cost_usd.is_some_and(|limit| {
            self.last_call_cost > 0.0 && self.cost_usd + 2.0 * self.last_call_cost > limit
        });
        tokens_tight || cost_tight
    }

    /// Adds an LLM call's tokens and cost. A response without usage (no input and no
    /// output tokens: some compatible servers send none) is counted from an estimate
    /// of the request just sent and of the reply (bytes / 4; see
    /// [`LlmRequest::estimated_input_tokens`]), so the token and cost caps still bind,
    /// and `Usage::estimated_llm_calls` says so.
    ///
    /// Called after the turn's calls were sanitized: the estimate serializes their
    /// arguments, which must not nest deeper than the sanitizer allows.
    pub(super) fn add_usage(&mut self, response: &LlmResponse) {
        let reported = response.usage;
        let usage = if reported.input_tokens == 0 && reported.output_tokens == 0 {
            self.usage.estimated_llm_calls = self.usage.estimated_llm_calls.saturating_add(1);
            crate::llm::TokenUsage::new(
                self.request.estimated_input_tokens(),
                response.estimated_output_tokens(),
            )
        } else {
            reported
        };
        self.usage.add_tokens(&usage);
        self.last_call_tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        if let Some(price) = &self.cfg.price {
            let cost = price.cost(&usage);
            self.cost_usd += cost;
            self.last_call_cost = cost;
            self.usage.cost_usd = Some(self.cost_usd);
        }
    }
}
