//! The budgets: the checks before every LLM call, the last-call rule that forces
//! the answer, and the tokens and cost each turn adds.

use crate::error::{AgentError, Budget};
use crate::llm::{LlmError, LlmResponse, TokenUsage};
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
        // A child run: the caps of the runs above it, over the whole tree.
        self.check_tree_budgets()
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
            self.count_estimated();
            TokenUsage::new(
                self.request.estimated_input_tokens(),
                response.estimated_output_tokens(),
            )
        } else {
            reported
        };
        self.count_tokens(usage);
    }

    /// Adds the tokens of an LLM call that gave no turn (case C40). A call costs tokens
    /// when the provider accepted it: its failure came with a 2xx status (a stream cut
    /// mid-way or ending in an error event, a 200 whose body is an error), some of the
    /// turn arrived, or it was `abandoned` while under way (`llm_timeout`, the deadline,
    /// cancellation: the provider may still be generating). Its tokens are the ones the
    /// provider reported with the failure, else an estimate from the request and the
    /// bytes received (the rule of [`add_usage`](Self::add_usage)), counted in
    /// `Usage::estimated_llm_calls`. A failure with an error status (429, 500, ...) and
    /// nothing received costs nothing.
    pub(super) fn add_failed_usage(&mut self, error: Option<&LlmError>, abandoned: bool) {
        self.in_flight = false;
        let received = self.meter.received();
        let streamed = self.meter.reported();
        self.meter.reset();
        let some = |u: &TokenUsage| u.input_tokens > 0 || u.output_tokens > 0;
        if let Some(usage) = error.and_then(|e| e.usage).filter(some) {
            self.count_tokens(usage);
            return;
        }
        let accepted = error
            .and_then(|e| e.status)
            .is_some_and(|s| (200..300).contains(&s));
        if !(accepted || abandoned || received > 0 || some(&streamed)) {
            return;
        }
        // What the provider reported mid-stream (Anthropic's input tokens at the
        // start), the rest estimated; the output at least what arrived.
        let mut usage = streamed;
        let mut estimated = false;
        if usage.input_tokens == 0 {
            usage.input_tokens = self.request.estimated_input_tokens();
            estimated = true;
        }
        let arrived = received.div_ceil(4);
        if usage.output_tokens < arrived {
            usage.output_tokens = arrived;
            estimated = true;
        }
        if estimated {
            self.count_estimated();
        }
        self.count_tokens(usage);
    }

    /// An LLM call counted from an estimate, in the run's and its model's usage.
    fn count_estimated(&mut self) {
        self.usage.estimated_llm_calls = self.usage.estimated_llm_calls.saturating_add(1);
        if let Some(model) = self.model_usage() {
            model.estimated_llm_calls = model.estimated_llm_calls.saturating_add(1);
        }
    }

    /// The tokens and cost of one LLM call, at the price of the model that made it,
    /// added to the run's (and its model's) and kept as the last call's.
    fn count_tokens(&mut self, usage: TokenUsage) {
        self.usage.add_tokens(&usage);
        self.last_call_tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        let cost = self.price().map(|price| price.cost(&usage));
        self.count_in_tree(self.last_call_tokens, cost.unwrap_or(0.0));
        if let Some(cost) = cost {
            self.cost_usd += cost;
            self.last_call_cost = cost;
            self.usage.cost_usd = Some(self.cost_usd);
        }
        if let Some(model) = self.model_usage() {
            model.add_tokens(&usage, cost);
        }
    }
}
