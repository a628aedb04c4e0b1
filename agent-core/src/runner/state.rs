//! [`RunState`]: everything a run has done so far that decides what it does next, as
//! one serializable value. It is exactly what a checkpoint keeps (see `durable/`): a run
//! resumed in another process starts from it and goes on as the run without the crash
//! would have.
//!
//! What is not in it belongs to this process: the frozen inputs (ids, input, deadline,
//! cancellation), the tool table of the current turn, the link to a parent run, the
//! reservation of the call in flight, the stream. The budget checks and the counting of
//! tokens are functions over this state and the config's [`Limits`].

use serde::{Deserialize, Serialize};

use crate::error::{AgentError, Attempt, AttemptKind, Budget, ModelFailures};
use crate::handover::CallRecord;
use crate::limits::Limits;
use crate::llm::{LlmError, TokenUsage};
use crate::message::Message;
use crate::pricing::ModelPrice;
use crate::usage::{ChildUsage, ModelUsage, Usage};

use super::guard::Guard;

/// What a run has done so far (see the module docs). `messages` comes first: the
/// checkpoint writes its JSON in place from a cache (`durable/snapshot.rs`).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct RunState {
    /// The conversation: the history before the input, the input, and every turn since.
    pub(crate) messages: Vec<Message>,
    /// What the run spent.
    pub(crate) usage: Usage,
    /// The run's cost so far (USD), children's included.
    pub(crate) cost_usd: f64,
    /// The last LLM call's input + output tokens: the estimate of the next one.
    pub(crate) last_call_tokens: u64,
    /// The last LLM call's cost (USD): the estimate of the next one.
    pub(crate) last_call_cost: f64,
    /// The malformed turns since the last good one.
    pub(crate) attempts: Vec<Attempt>,
    /// The failed LLM calls in a row on the current model.
    pub(crate) failures: Vec<LlmError>,
    /// Whether the next turn must answer (a nudge was sent).
    pub(crate) force_answer: bool,
    /// The model's last non-empty text.
    pub(crate) last_text: String,
    /// The accepted answer's text (or an escalation's arguments).
    pub(crate) output: String,
    /// The stuck guards' counters.
    pub(crate) guard: Guard,
    /// Every user-tool call the model made, with its outcome (for the hand-over and
    /// `tools_for`).
    pub(crate) calls: Vec<CallRecord>,
    /// The last correction written to the model.
    pub(crate) last_correction: Option<String>,
    /// The model's own summary, when it handed over with one.
    pub(crate) model_summary: Option<String>,
    /// A tool that said it cannot safely continue, and its message (boxed: rare, and
    /// the state is held by every run).
    pub(crate) fatal: Option<Box<(String, String)>>,
    /// Which of the current agent's models the run is on: 0 the primary, `i` its
    /// fallback `i - 1`.
    #[serde(default)]
    pub(crate) route: usize,
    /// The models the run left, with their failures (empty until a switch).
    #[serde(default)]
    pub(crate) tried: Vec<ModelFailures>,
    /// The agents the conversation was handed to, in order (their names): the agent
    /// that has it now is the last one's, else the config's.
    /// (A boxed slice: most runs have none, and the state is held by every run.)
    #[serde(default)]
    pub(crate) handoffs: Box<[String]>,
    /// The tools the run's tool searches revealed, in the order revealed (names; see
    /// `ToolSearch`): offered in every later LLM call. A checkpoint written before tool
    /// search reads as none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) revealed: Vec<String>,
    /// Time spent toward the deadline (ms), as of the last checkpoint.
    pub(crate) elapsed_ms: u64,
    /// Store failures counted, as of the last checkpoint.
    pub(crate) store_failures: u32,
    /// In a batched `run_batch`: the provider job and line the run's waiting LLM call
    /// is in, from the job's acceptance until the call returns (see
    /// `runner/batched.rs`). A run resumed with one waits on that job instead of
    /// sending the call again. A checkpoint written before it reads as none. (Boxed:
    /// rare, and the state is held by every run.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) batch_call: Option<Box<crate::providers::batch::BatchedCall>>,
}

impl RunState {
    /// A run's first state: its messages so far (the history and the input).
    pub(crate) fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    /// The caps checked before every LLM call: the call cap, then the token and cost
    /// caps (spent so far, and with the last call's as the next one's estimate).
    ///
    /// # Errors
    /// [`AgentError::MaxLlmCalls`] (taking the malformed attempts),
    /// [`AgentError::BudgetExhausted`].
    pub(crate) fn check_caps(&mut self, limits: &Limits) -> Result<(), AgentError> {
        if self.usage.llm_calls >= limits.max_llm_calls {
            return Err(AgentError::MaxLlmCalls {
                limit: limits.max_llm_calls,
                attempts: std::mem::take(&mut self.attempts),
            });
        }
        if let Some(limit) = limits.max_total_tokens {
            let used = self.usage.total_tokens();
            if used >= limit || used.saturating_add(self.last_call_tokens) > limit {
                return Err(AgentError::BudgetExhausted {
                    budget: Budget::TotalTokens { limit, used },
                });
            }
        }
        if let Some(limit) = limits.max_cost_usd {
            let spent = self.cost_usd;
            if spent >= limit || spent + self.last_call_cost > limit {
                return Err(AgentError::BudgetExhausted {
                    budget: Budget::CostUsd { limit, spent },
                });
            }
        }
        Ok(())
    }

    /// Whether the next LLM call is the last one the caps allow.
    pub(crate) fn is_last_call(&self, limits: &Limits) -> bool {
        if self.usage.llm_calls.saturating_add(1) >= limits.max_llm_calls {
            return true;
        }
        let tokens_tight = limits.max_total_tokens.is_some_and(|limit| {
            self.last_call_tokens > 0
                && self
                    .usage
                    .total_tokens()
                    .saturating_add(self.last_call_tokens.saturating_mul(2))
                    > limit
        });
        let cost_tight = limits.max_cost_usd.is_some_and(|limit| {
            self.last_call_cost > 0.0 && self.cost_usd + 2.0 * self.last_call_cost > limit
        });
        tokens_tight || cost_tight
    }

    /// Whether a summary call of `tokens` (its estimate and its whole output allowance)
    /// fits under the caps, at `price`.
    ///
    /// # Errors
    /// Why it does not, as text.
    pub(crate) fn check_summary(
        &self,
        limits: &Limits,
        tokens: TokenUsage,
        price: Option<&ModelPrice>,
    ) -> Result<(), String> {
        let total = tokens.input_tokens + tokens.output_tokens;
        if let Some(limit) = limits.max_total_tokens
            && self.usage.total_tokens().saturating_add(total) > limit
        {
            return Err(format!(
                "a summary of about {total} tokens would pass max_total_tokens ({limit})"
            ));
        }
        if let Some(limit) = limits.max_cost_usd {
            let cost = price.map_or(f64::INFINITY, |p| p.cost(&tokens));
            if self.cost_usd + cost > limit {
                return Err(format!(
                    "a summary would pass max_cost_usd ({limit} USD) or has no price"
                ));
            }
        }
        Ok(())
    }

    /// Records a malformed turn; the error that ends the run when the corrections
    /// (`max_parse_retries`) are used up.
    pub(crate) fn malformed(
        &mut self,
        kind: AttemptKind,
        message: String,
        max_parse_retries: u32,
    ) -> Option<AgentError> {
        self.attempts
            .push(Attempt::new(kind, self.usage.llm_calls, message));
        if self.attempts.len() > max_parse_retries as usize {
            let attempts = std::mem::take(&mut self.attempts);
            return Some(AgentError::from_attempts(kind, attempts));
        }
        None
    }

    /// The usage entry of `model`, created at its first call.
    pub(crate) fn model_usage(&mut self, model: &str) -> &mut ModelUsage {
        let by_model = &mut self.usage.by_model;
        let at = match by_model.iter().position(|m| m.model == model) {
            Some(at) => at,
            None => {
                by_model.push(ModelUsage::new(model));
                by_model.len() - 1
            }
        };
        &mut by_model[at]
    }

    /// One more LLM call, on `model` (`None`: a config without fallbacks, whose totals
    /// are its one model's).
    pub(crate) fn count_call(&mut self, model: Option<&str>) {
        self.usage.llm_calls = self.usage.llm_calls.saturating_add(1);
        if let Some(model) = model {
            let entry = self.model_usage(model);
            entry.llm_calls = entry.llm_calls.saturating_add(1);
        }
    }

    /// An LLM call counted from an estimate, in the run's and its model's usage.
    pub(crate) fn count_estimated(&mut self, model: Option<&str>) {
        self.usage.estimated_llm_calls = self.usage.estimated_llm_calls.saturating_add(1);
        if let Some(model) = model {
            let entry = self.model_usage(model);
            entry.estimated_llm_calls = entry.estimated_llm_calls.saturating_add(1);
        }
    }

    /// The tokens and cost of one LLM call, at `price`, added to the run's (and
    /// `model`'s) and kept as the last call's; returns its tokens and cost (0 without a
    /// price), for the run tree's caps.
    pub(crate) fn count_tokens(
        &mut self,
        usage: TokenUsage,
        price: Option<&ModelPrice>,
        model: Option<&str>,
    ) -> (u64, f64) {
        self.usage.add_tokens(&usage);
        self.last_call_tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        let cost = price.map(|price| price.cost(&usage));
        if let Some(cost) = cost {
            self.cost_usd += cost;
            self.last_call_cost = cost;
            self.usage.cost_usd = Some(self.cost_usd);
        }
        if let Some(model) = model {
            self.model_usage(model).add_tokens(&usage, cost);
        }
        (self.last_call_tokens, cost.unwrap_or(0.0))
    }

    /// A summary call's tokens and cost (not in `llm_calls`, not the last call's
    /// estimate); returns them for the run tree's caps.
    pub(crate) fn count_summary(
        &mut self,
        tokens: TokenUsage,
        price: Option<&ModelPrice>,
    ) -> (u64, f64) {
        self.usage.add_tokens(&tokens);
        let cost = price.map(|p| p.cost(&tokens));
        if let Some(cost) = cost {
            self.cost_usd += cost;
            self.usage.cost_usd = Some(self.cost_usd);
        }
        (
            tokens.input_tokens.saturating_add(tokens.output_tokens),
            cost.unwrap_or(0.0),
        )
    }

    /// Adds what a child run spent: its tokens and cost count toward this run's caps
    /// (the run tree's pools counted them already, while they happened); its LLM calls
    /// and tool executions stay its own.
    pub(crate) fn add_child(&mut self, child: ChildUsage) {
        // A child run that paused and was resumed inside the same call (C64) reports
        // what it spent in all: its entry from the pause is replaced, not added to.
        if let Some(i) = self.usage.children.iter().position(|c| {
            c.call_id == child.call_id && c.agent == child.agent && c.ending == "paused"
        }) {
            let before = self.usage.children.remove(i);
            let u = &before.usage;
            let usage = &mut self.usage;
            usage.input_tokens = usage.input_tokens.saturating_sub(u.input_tokens);
            usage.output_tokens = usage.output_tokens.saturating_sub(u.output_tokens);
            usage.cache_read_tokens = usage.cache_read_tokens.saturating_sub(u.cache_read_tokens);
            usage.cache_write_tokens = usage
                .cache_write_tokens
                .saturating_sub(u.cache_write_tokens);
            if let Some(cost) = u.cost_usd {
                self.cost_usd = (self.cost_usd - cost).max(0.0);
                self.usage.cost_usd = Some(self.cost_usd);
            }
        }
        let u: &Usage = &child.usage;
        self.usage.input_tokens = self.usage.input_tokens.saturating_add(u.input_tokens);
        self.usage.output_tokens = self.usage.output_tokens.saturating_add(u.output_tokens);
        self.usage.cache_read_tokens = self
            .usage
            .cache_read_tokens
            .saturating_add(u.cache_read_tokens);
        self.usage.cache_write_tokens = self
            .usage
            .cache_write_tokens
            .saturating_add(u.cache_write_tokens);
        if let Some(cost) = u.cost_usd {
            self.cost_usd += cost;
            self.usage.cost_usd = Some(self.cost_usd);
        }
        self.usage.children.push(child);
    }

    /// Remembers a correction for the hand-over, and returns it.
    pub(crate) fn remember_correction(&mut self, text: String) -> String {
        self.last_correction = Some(text.clone());
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caps_stop_before_the_call_that_would_pass_them() {
        let limits = Limits::default().max_total_tokens(1_000).max_llm_calls(3);
        let mut state = RunState::new(vec![Message::user("x")]);
        assert!(state.check_caps(&limits).is_ok());
        state.count_tokens(TokenUsage::new(500, 100), None, None);
        // 600 used, and a next call of about 600 would pass 1,000.
        assert!(matches!(
            state.check_caps(&limits),
            Err(AgentError::BudgetExhausted {
                budget: Budget::TotalTokens {
                    limit: 1_000,
                    used: 600
                }
            })
        ));
        assert!(state.is_last_call(&limits));
    }

    #[test]
    fn the_revealed_tools_are_kept_and_a_state_without_them_reads_as_none() {
        let mut state = RunState::new(vec![Message::user("x")]);
        let plain = serde_json::to_string(&state).unwrap_or_default();
        assert!(!plain.contains("revealed"), "{plain}");
        let back: Result<RunState, _> = serde_json::from_str(&plain);
        assert!(back.is_ok_and(|s| s.revealed.is_empty()));
        state.revealed = vec!["refund_order".to_owned()];
        let text = serde_json::to_string(&state).unwrap_or_default();
        let back: Result<RunState, _> = serde_json::from_str(&text);
        assert_eq!(
            back.map(|s| s.revealed).ok(),
            Some(vec!["refund_order".to_owned()])
        );
    }

    #[test]
    fn a_batched_call_is_kept_and_a_state_written_before_it_reads_as_none() {
        let mut state = RunState::new(vec![Message::user("x")]);
        let plain = serde_json::to_string(&state).unwrap_or_default();
        assert!(!plain.contains("batch_call"), "{plain}");
        let back: Result<RunState, _> = serde_json::from_str(&plain);
        assert!(back.is_ok_and(|s| s.batch_call.is_none()));
        let call = crate::providers::batch::BatchedCall {
            provider: "openai".to_owned(),
            job: "batch_abc".to_owned(),
            custom_id: "0a1b2c3d-s4-q9".to_owned(),
            submitted_at_ms: 1_765_000_000_000,
            requests: 20,
        };
        state.batch_call = Some(Box::new(call.clone()));
        let text = serde_json::to_string(&state).unwrap_or_default();
        let back: Result<RunState, _> = serde_json::from_str(&text);
        assert_eq!(back.ok().and_then(|s| s.batch_call).map(|c| *c), Some(call));
    }

    #[test]
    fn a_model_entry_is_made_at_its_first_call_and_counts_its_own_calls() {
        let mut state = RunState::default();
        state.count_call(Some("a"));
        state.count_call(Some("b"));
        state.count_call(Some("a"));
        assert_eq!(state.usage.llm_calls, 3);
        let calls: Vec<(&str, u32)> = state
            .usage
            .by_model
            .iter()
            .map(|m| (m.model.as_str(), m.llm_calls))
            .collect();
        assert_eq!(calls, [("a", 2), ("b", 1)]);
    }
}
