//! The pieces of [`AgentError`](super::AgentError)'s messages (its `Display`).

use std::fmt;

use super::{Attempt, Budget, ModelFailures, StuckReason};
use crate::llm::{LlmError, RefusalReason};

/// `, category C` when a refusal's reason names one.
pub(super) struct RefusalCategory<'a>(pub(super) Option<&'a RefusalReason>);

impl fmt::Display for RefusalCategory<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.and_then(|r| r.category.as_deref()) {
            Some(category) => write!(f, ", category {category}"),
            None => Ok(()),
        }
    }
}

/// ` (explanation)` when a refusal's reason explains more than its message says.
pub(super) struct RefusalExplanation<'a>(pub(super) Option<&'a RefusalReason>, pub(super) &'a str);

impl fmt::Display for RefusalExplanation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.and_then(|r| r.explanation.as_deref()) {
            Some(explanation) if explanation != self.1 => write!(f, " ({explanation})"),
            _ => Ok(()),
        }
    }
}

pub(super) struct Pending<'a>(pub(super) &'a [crate::pause::PendingCall]);

impl fmt::Display for Pending<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, call) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{call}")?;
        }
        Ok(())
    }
}

pub(super) struct Attempts<'a>(pub(super) &'a [Attempt]);

impl fmt::Display for Attempts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed attempts", self.0.len())?;
        for (i, a) in self.0.iter().enumerate() {
            write!(
                f,
                "; #{} ({}, llm call {}): {}",
                i + 1,
                a.kind.category(),
                a.llm_call,
                a.message
            )?;
        }
        Ok(())
    }
}

pub(super) struct AttemptsSuffix<'a>(pub(super) &'a [Attempt]);

impl fmt::Display for AttemptsSuffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, " ({})", Attempts(self.0))
        }
    }
}

/// `once`, `twice in a row`, `3 times in a row`.
pub(super) struct Times(pub(super) usize);

impl fmt::Display for Times {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("once"),
            2 => f.write_str("twice in a row"),
            n => write!(f, "{n} times in a row"),
        }
    }
}

pub(super) struct Last<'a>(pub(super) &'a [LlmError]);

impl fmt::Display for Last<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.last() {
            Some(e) => write!(f, "{e}"),
            None => f.write_str("none"),
        }
    }
}

pub(super) struct Models<'a>(pub(super) &'a [ModelFailures]);

impl fmt::Display for Models<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, m) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(
                f,
                "{} ({}): {} failed calls, last: {}",
                m.model,
                m.provider,
                m.failures.len(),
                Last(&m.failures)
            )?;
        }
        Ok(())
    }
}

pub(super) struct BudgetText<'a>(pub(super) &'a Budget);

impl fmt::Display for BudgetText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Budget::TotalTokens { limit, used } => {
                write!(f, "max_total_tokens {limit} (used {used})")
            }
            Budget::CostUsd { limit, spent } => {
                write!(f, "max_cost_usd {limit} (spent {spent:.6})")
            }
            Budget::ThreadLlmCalls { limit, used } => {
                write!(f, "max_thread_llm_calls {limit} (the thread used {used})")
            }
        }
    }
}

pub(super) struct StuckText<'a>(pub(super) &'a StuckReason);

impl fmt::Display for StuckText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            StuckReason::RepeatedCall {
                tool,
                arguments,
                times,
            } => write!(
                f,
                "{tool}({arguments}) called {times} times in a row without progress (the same \
                 result, or an error, each time)"
            ),
            StuckReason::NoProgress { turns } => {
                write!(f, "{turns} turns in a row brought no new tool results")
            }
            StuckReason::Handoffs { limit } => {
                write!(
                    f,
                    "the agents handed the conversation over more than {limit} times"
                )
            }
        }
    }
}
