//! [`Category`]: the stable tag of every way a run can fail, declared once. The table
//! below gives each category its tag and its [`Ending`]; [`AgentError::category`], the
//! list of all categories and every consumer (receipts, turn data, stored records) derive
//! from it.

use std::fmt;

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::AgentError;
use super::Ending;

/// Generates [`Category`] with its tags, endings and the list of all categories.
macro_rules! categories {
    ($( $(#[$doc:meta])* $variant:ident = $tag:literal => $ending:ident, )*) => {
        /// The stable tag of a failed run, one per [`AgentError`] variant (see the
        /// table in docs/running.md).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[non_exhaustive]
        pub enum Category {
            $(
                $(#[$doc])*
                #[serde(rename = $tag)]
                $variant,
            )*
        }

        impl Category {
            /// Every category, in a fixed order.
            pub const ALL: &'static [Category] = &[$(Category::$variant),*];

            /// The stable tag, e.g. `schema_validation_failed`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Category::$variant => $tag,)*
                }
            }

            /// The ending a run with this category has.
            pub const fn ending(self) -> Ending {
                match self {
                    $(Category::$variant => Ending::$ending,)*
                }
            }

            /// The category with this tag; `None` for a tag this version does not know.
            pub fn from_tag(tag: &str) -> Option<Self> {
                match tag {
                    $($tag => Some(Category::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

categories! {
    /// `submit_output` arguments (or an answer in text) failed validation too often.
    SchemaValidation = "schema_validation_failed" => Exhausted,
    /// `submit_output` came with other calls, or twice, too often.
    AmbiguousTurn = "ambiguous_tool_turn" => Exhausted,
    /// The model wrote plain text instead of answering, too often.
    SchemaNotCalled = "schema_not_called" => Exhausted,
    /// Transient provider failures in a row reached `max_llm_retries`.
    MaxLlmRetries = "max_llm_retries" => Failed,
    /// A permanent provider failure.
    LlmPermanent = "llm_permanent_error" => Failed,
    /// Every model of a fallback chain that was tried failed.
    ModelsFailed = "models_failed" => Failed,
    /// LLM calls reached `max_llm_calls`.
    MaxLlmCalls = "max_llm_calls" => Exhausted,
    /// A token or cost cap would be passed.
    BudgetExhausted = "budget_exhausted" => Exhausted,
    /// The deadline passed.
    DeadlineExceeded = "deadline_exceeded" => Exhausted,
    /// The caller cancelled.
    Cancelled = "cancelled" => Exhausted,
    /// A guard saw no progress.
    Stuck = "stuck" => Stuck,
    /// The model handed the case to a human.
    Escalated = "escalated" => Escalated,
    /// The provider refused or filtered the answer.
    Refused = "refused" => Failed,
    /// A tool said the run cannot safely continue.
    ToolFatal = "tool_fatal" => Failed,
    /// A guardrail (input, output or tool) tripped.
    GuardrailTripped = "guardrail_tripped" => Failed,
    /// The conversation filled the model's context window.
    ContextWindowExceeded = "context_window_exceeded" => Exhausted,
    /// The run could not start as asked (missing state).
    InvalidRun = "invalid_run" => Failed,
    /// A fault inside the runner or a panic in a client.
    Internal = "internal_error" => Failed,
    /// The run waits for a decision or an outside result (not a failure).
    Paused = "paused" => Paused,
    /// Another process took the run over (its checkpoint save was fenced).
    Fenced = "fenced" => Failed,
}

impl Category {
    /// How many categories there are.
    pub const COUNT: usize = Category::ALL.len();

    /// Every tag, in the order of [`Category::ALL`].
    pub const TAGS: [&'static str; Category::COUNT] = {
        let mut tags = [""; Category::COUNT];
        let mut i = 0;
        while i < Category::COUNT {
            tags[i] = Category::ALL[i].as_str();
            i += 1;
        }
        tags
    };
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
