//! [`AgentError`]: the one typed failure a run can end with, and [`Ending`].

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod category;
mod config;
mod text;

pub use category::Category;
pub use config::ConfigError;
use text::{
    Attempts, AttemptsSuffix, BudgetText, Last, Models, Pending, RefusalCategory,
    RefusalExplanation, StuckText, Times,
};

use crate::llm::{LlmError, RefusalReason, StopReason};

/// Why a run ended, in six words that say whose move is next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Ending {
    /// A validated value came back.
    Answered,
    /// The agent handed the case over on purpose (`escalate_to_human`).
    Escalated,
    /// A budget ran out: parse retries, LLM calls, tokens, cost, the deadline, or the
    /// caller cancelled. Raise the budget or fix the prompt.
    Exhausted,
    /// A guard saw no progress (the same call repeated, nothing new learned). Fix the agent.
    Stuck,
    /// The provider failed (permanently, or transiently more times than allowed), or the
    /// runner hit an internal fault.
    Failed,
    /// The run waits for a person's decision or for a result from outside
    /// ([`AgentError::Paused`]): not a failure, not exhausted, not stuck. It goes on with
    /// [`resume_agent_with`](crate::durable::resume_agent_with).
    Paused,
}

impl Ending {
    /// Every ending, in a fixed order (answered, escalated, exhausted, stuck, failed,
    /// paused).
    pub const ALL: [Ending; 6] = [
        Ending::Answered,
        Ending::Escalated,
        Ending::Exhausted,
        Ending::Stuck,
        Ending::Failed,
        Ending::Paused,
    ];

    /// The stable string: `answered`, `escalated`, `exhausted`, `stuck`, `failed` or
    /// `paused`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Answered => "answered",
            Ending::Escalated => "escalated",
            Ending::Exhausted => "exhausted",
            Ending::Stuck => "stuck",
            Ending::Failed => "failed",
            Ending::Paused => "paused",
        }
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of a malformed model turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptKind {
    /// `submit_output` alone with arguments that failed validation (or were rejected by
    /// an output validator).
    SchemaValidation,
    /// `submit_output` together with another call, or more than once; in native and
    /// prompted modes, a reply holding two different JSON answers (none is picked).
    AmbiguousTurn,
    /// Plain text where a `submit_output` call was expected.
    SchemaNotCalled,
}

impl AttemptKind {
    /// The category of the error this kind ends a run with.
    pub fn category(self) -> &'static str {
        self.kind().as_str()
    }

    /// The [`Category`] of the error this kind ends a run with.
    pub fn kind(self) -> Category {
        match self {
            AttemptKind::SchemaValidation => Category::SchemaValidation,
            AttemptKind::AmbiguousTurn => Category::AmbiguousTurn,
            AttemptKind::SchemaNotCalled => Category::SchemaNotCalled,
        }
    }
}

/// One malformed model turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Attempt {
    /// What was wrong with the turn.
    pub kind: AttemptKind,
    /// Which LLM call produced it (1-based).
    pub llm_call: u32,
    /// The feedback the runner gave the model.
    pub message: String,
}

impl Attempt {
    pub(crate) fn new(kind: AttemptKind, llm_call: u32, message: impl Into<String>) -> Self {
        Self {
            kind,
            llm_call,
            message: message.into(),
        }
    }
}

/// The failed LLM calls of one model of a fallback chain (see
/// [`AgentError::ModelsFailed`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelFailures {
    /// The model as configured, with its routing prefix (`gpt-5-mini`, `azure/prod`).
    pub model: String,
    /// Its provider (`gen_ai.provider.name`: `openai`, `gemini`, ...).
    pub provider: String,
    /// Its failed LLM calls in a row, oldest first; the last one made the run leave
    /// the model (or end).
    pub failures: Vec<LlmError>,
}

impl ModelFailures {
    pub(crate) fn new(model: &str, provider: &str, failures: Vec<LlmError>) -> Self {
        Self {
            model: model.to_owned(),
            provider: provider.to_owned(),
            failures,
        }
    }
}

/// Which token or cost budget ran out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Budget {
    /// `max_total_tokens` (input + output, tokens).
    TotalTokens {
        /// The limit (tokens).
        limit: u64,
        /// Tokens used so far (tokens).
        used: u64,
    },
    /// `max_cost_usd` (USD).
    CostUsd {
        /// The limit (USD).
        limit: f64,
        /// Spent so far (USD).
        spent: f64,
    },
    /// `max_thread_llm_calls`: the LLM calls of every run of the memory thread so far
    /// reached the cap; checked before the run, which then sends no request.
    ThreadLlmCalls {
        /// The limit (LLM calls over the thread).
        limit: u64,
        /// LLM calls used by the thread's earlier runs.
        used: u64,
    },
}

/// What a no-progress guard saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StuckReason {
    /// The same tool with the same canonical arguments returned the same result
    /// `times` times in a row (with `repeated_call_limit` 2: twice), or an error `times`
    /// times in a row (`repeated_call_limit + 1`). A repeat whose result changed is
    /// progress (polling a job), and does not count.
    RepeatedCall {
        /// The tool name.
        tool: String,
        /// The canonical arguments (sorted keys, no whitespace).
        arguments: String,
        /// How many times in a row it returned the same result (or an error).
        times: u32,
    },
    /// `turns` consecutive turns brought no new tool result content.
    NoProgress {
        /// The number of turns.
        turns: u32,
    },
    /// The agents transferred the conversation more than `max_handoffs` times (a
    /// ping-pong between two agents).
    Handoffs {
        /// The limit (`max_handoffs`).
        limit: u32,
    },
}

/// The one typed failure a run can end with.
///
/// [`category`](Self::category) gives a stable tag; [`ending`](Self::ending) groups it.
/// Where a budget ran out, the error carries every failed attempt, so the cause is never
/// hidden. Serializable (externally tagged by variant name), so a checkpoint can keep a
/// finished run's error.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum AgentError {
    /// `max_parse_retries` ran out on a `submit_output` whose arguments failed validation.
    #[error("schema validation failed: {}", Attempts(.attempts))]
    SchemaValidation {
        /// Every malformed turn of the run, oldest first.
        attempts: Vec<Attempt>,
    },
    /// `max_parse_retries` ran out on a turn with `submit_output` and other calls (or,
    /// in native and prompted modes, on replies holding two different JSON answers).
    #[error("ambiguous tool turn: {}", Attempts(.attempts))]
    AmbiguousTurn {
        /// Every malformed turn of the run, oldest first.
        attempts: Vec<Attempt>,
    },
    /// `max_parse_retries` ran out on a plain-text turn.
    #[error("the model did not call submit_output: {}", Attempts(.attempts))]
    SchemaNotCalled {
        /// Every malformed turn of the run, oldest first.
        attempts: Vec<Attempt>,
    },
    /// `max_llm_retries` consecutive transient provider failures.
    #[error("the provider failed {}; last: {}", Times(.failures.len()), Last(.failures))]
    MaxLlmRetries {
        /// The consecutive failures, oldest first.
        failures: Vec<LlmError>,
    },
    /// A permanent provider failure.
    #[error("{error}")]
    LlmPermanent {
        /// The failure.
        error: LlmError,
    },
    /// The run had fallback models (the builder's `fallback_models`), switched at
    /// least once, and ended on a provider failure: every model that was tried, in
    /// order, with its failed LLM calls. The last failure of the last entry ended the
    /// run: no model was left, or it was one no other model can serve (a 400, see
    /// [`LlmError::falls_back`]). A run that never switched ends with
    /// [`MaxLlmRetries`](Self::MaxLlmRetries) or [`LlmPermanent`](Self::LlmPermanent)
    /// as without fallbacks.
    #[error("every model failed: {}", Models(.models))]
    ModelsFailed {
        /// Each model tried, in the order tried, with its failures.
        models: Vec<ModelFailures>,
    },
    /// The round-trip cap was reached before the run answered.
    #[error("reached max_llm_calls ({limit}) without an answer{}", AttemptsSuffix(.attempts))]
    MaxLlmCalls {
        /// The cap (LLM calls).
        limit: u32,
        /// Every malformed turn of the run, oldest first.
        attempts: Vec<Attempt>,
    },
    /// A token or cost budget would be passed by the next call.
    #[error("budget exhausted: {}", BudgetText(.budget))]
    BudgetExhausted {
        /// Which budget, with its limit and use.
        budget: Budget,
    },
    /// The run's wall-clock deadline passed.
    #[error("deadline of {} ms exceeded", .limit.as_millis())]
    DeadlineExceeded {
        /// The deadline, from the start of the run.
        limit: Duration,
    },
    /// The caller cancelled the run.
    #[error("cancelled by the caller")]
    Cancelled,
    /// A no-progress guard fired.
    #[error("stuck: {}", StuckText(.reason))]
    Stuck {
        /// What the guard saw.
        reason: StuckReason,
    },
    /// A tool said it cannot safely continue ([`ToolError::fatal`](crate::ToolError::fatal)):
    /// the other calls of that turn were answered, then the run stopped. Its ending is
    /// [`Ending::Failed`]: the fix is in the system the tool talks to, not a budget.
    #[error("tool {tool} cannot safely continue: {message}")]
    ToolFatal {
        /// The tool's name.
        tool: String,
        /// The tool's message.
        message: String,
    },
    /// The provider declared it would not answer this input: a refusal (OpenAI
    /// `message.refusal`, Anthropic `stop_reason: "refusal"`) or a content filter
    /// (OpenAI `finish_reason: "content_filter"`). Not retried, not nudged: the same
    /// input gets the same answer. Its ending is [`Ending::Failed`]: the fix is the
    /// input or the policy, not a budget.
    ///
    /// Match it with `..` (`AgentError::Refused { stop_reason, .. }`): fields may be
    /// added, as `reason` was (case C58).
    #[error("the provider refused to answer ({}{}): {message}{}", .stop_reason.as_str(), RefusalCategory(.reason.as_ref()), RefusalExplanation(.reason.as_ref(), .message))]
    Refused {
        /// `Refusal` or `ContentFilter`.
        stop_reason: StopReason,
        /// The provider's text (the refusal message); without one, the reason's
        /// explanation; without either, a note that the provider sent none.
        message: String,
        /// The structured reason the provider gave (a policy category, an
        /// explanation), when it gave one ([`RefusalReason`]); `None` otherwise, and
        /// in records written before it existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<RefusalReason>,
    },
    /// The conversation no longer fits the model's context window (Anthropic
    /// `stop_reason: "model_context_window_exceeded"`); another LLM call cannot help.
    /// Its ending is [`Ending::Exhausted`].
    #[error("the conversation filled the model's context window ({input_tokens} input tokens)")]
    ContextWindowExceeded {
        /// The input tokens of the last LLM call (tokens; 0 when not reported).
        input_tokens: u64,
    },
    /// The agent called `escalate_to_human`.
    #[error("escalated to a human: {reason}")]
    Escalated {
        /// Why the agent handed over.
        reason: String,
        /// The agent's summary of the case for the human.
        summary: String,
    },
    /// The run's own inputs were unusable (for example state the config expects per run
    /// was not given): the run ended before any request.
    #[error("invalid run: {message}")]
    InvalidRun {
        /// What was wrong.
        message: String,
    },
    /// A part of the run's input or history (an image, a document, audio) that the
    /// model cannot take: its kind, its media type, its source (a URL to a provider that
    /// takes only bytes) or its size. The run ended before any request (or, with
    /// fallback models, no model of the chain takes it). Category `invalid_run`.
    #[error("the model {model} cannot take part {index} ({kind} {media_type}): {reason}")]
    UnsupportedContent {
        /// The model, as configured.
        model: String,
        /// The part's place among the conversation's parts (0-based, oldest first).
        index: usize,
        /// Its kind.
        kind: crate::content::Kind,
        /// Its media type.
        media_type: String,
        /// Why the model cannot take it (naming the limit and its source where one was
        /// passed).
        reason: String,
    },
    /// A part of the run's input or history that an agent the run may hand over to
    /// cannot take with any model of its chain (its primary and fallbacks): the run
    /// ended before any request, instead of failing at the handoff. Names the agent,
    /// the model (its primary's, or the last of its chain), the part and why.
    /// Category `invalid_run`.
    #[error(
        "the handoff target {agent} cannot take part {index} ({kind} {media_type}) on \
         model {model}: {reason}"
    )]
    UnsupportedHandoffContent {
        /// The agent handed over to, by name.
        agent: String,
        /// Its model that refused last (as configured).
        model: String,
        /// The part's place among the conversation's parts (0-based, oldest first).
        index: usize,
        /// Its kind.
        kind: crate::content::Kind,
        /// Its media type.
        media_type: String,
        /// Why the model cannot take it.
        reason: String,
    },
    /// The run paused: the model called tools that need a person's approval, or a tool
    /// said its result comes from outside. Not a failure (ending [`Ending::Paused`]):
    /// the turn's other calls ran, the checkpoint keeps the run, and
    /// [`resume_agent_with`](crate::durable::resume_agent_with) with a decision for every pending
    /// call continues it. The paused time does not count toward the deadline.
    #[error("paused: run {run_id} waits on {}", Pending(.pending))]
    Paused {
        /// The run id to resume.
        run_id: String,
        /// The calls waiting for a decision, in the order the model made them.
        pending: Vec<crate::pause::PendingCall>,
    },
    /// Another process took this run over (it resumed the run from its checkpoint while
    /// this process was still running it): this process's checkpoint save or tool start
    /// was refused (fenced), so it stopped at once, sending no more requests and
    /// starting no more tools. The run goes on in the other process; this result is not
    /// the run's and is not checkpointed. Needs a checkpoint store (see
    /// `docs/durable.md`, "One process per run").
    #[error(
        "run {run_id} was taken over by another process; this one stopped at its write #{seq} (fenced)"
    )]
    Fenced {
        /// The run id.
        run_id: String,
        /// The number of the checkpoint this process tried to write (its boundary count,
        /// [`CheckpointRecord::seq`](crate::store::CheckpointRecord::seq)).
        seq: u64,
    },
    /// A guardrail tripped (see [`Verdict`](crate::guardrail::Verdict)): an input guardrail before any
    /// tool ran, an output guardrail on an answer, or a tool guardrail before a call
    /// (after the turn's other calls were answered). Its ending is [`Ending::Failed`].
    #[error("the guardrail {guardrail} tripped: {reason}")]
    GuardrailTripped {
        /// The guardrail's name.
        guardrail: String,
        /// Why it tripped.
        reason: String,
    },
    /// A fault inside the runner (a bug), or a panic in a user's `LlmClient`: caught,
    /// never a panic.
    #[error("internal error: {message}")]
    Internal {
        /// What happened.
        message: String,
    },
}

impl AgentError {
    /// The stable tag: `schema_validation_failed`, `ambiguous_tool_turn`,
    /// `schema_not_called`, `max_llm_retries`, `llm_permanent_error`, `models_failed`,
    /// `max_llm_calls`,
    /// `budget_exhausted`, `deadline_exceeded`, `cancelled`, `stuck`, `escalated`,
    /// `refused`, `tool_fatal`, `guardrail_tripped`, `context_window_exceeded`,
    /// `invalid_run`, `paused`, `fenced` or `internal_error` (the tag of
    /// [`kind`](Self::kind)).
    pub fn category(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The error's [`Category`].
    pub fn kind(&self) -> Category {
        match self {
            AgentError::SchemaValidation { .. } => Category::SchemaValidation,
            AgentError::AmbiguousTurn { .. } => Category::AmbiguousTurn,
            AgentError::SchemaNotCalled { .. } => Category::SchemaNotCalled,
            AgentError::MaxLlmRetries { .. } => Category::MaxLlmRetries,
            AgentError::LlmPermanent { .. } => Category::LlmPermanent,
            AgentError::ModelsFailed { .. } => Category::ModelsFailed,
            AgentError::MaxLlmCalls { .. } => Category::MaxLlmCalls,
            AgentError::BudgetExhausted { .. } => Category::BudgetExhausted,
            AgentError::DeadlineExceeded { .. } => Category::DeadlineExceeded,
            AgentError::Cancelled => Category::Cancelled,
            AgentError::Stuck { .. } => Category::Stuck,
            AgentError::Escalated { .. } => Category::Escalated,
            AgentError::Refused { .. } => Category::Refused,
            AgentError::ToolFatal { .. } => Category::ToolFatal,
            AgentError::ContextWindowExceeded { .. } => Category::ContextWindowExceeded,
            AgentError::InvalidRun { .. }
            | AgentError::UnsupportedContent { .. }
            | AgentError::UnsupportedHandoffContent { .. } => Category::InvalidRun,
            AgentError::Paused { .. } => Category::Paused,
            AgentError::Fenced { .. } => Category::Fenced,
            AgentError::GuardrailTripped { .. } => Category::GuardrailTripped,
            AgentError::Internal { .. } => Category::Internal,
        }
    }

    /// Every category's tag, in a fixed order ([`Category::TAGS`]).
    pub const CATEGORIES: [&'static str; Category::COUNT] = Category::TAGS;

    /// The ending this error belongs to (its category's).
    pub fn ending(&self) -> Ending {
        self.kind().ending()
    }

    /// The structured reason of a refusal ([`AgentError::Refused`]), when the
    /// provider gave one.
    pub fn refusal_reason(&self) -> Option<&RefusalReason> {
        match self {
            AgentError::Refused { reason, .. } => reason.as_ref(),
            _ => None,
        }
    }

    /// The error a provider-declared refusal ends the run with: `text` is the turn's
    /// text (or the error's message); when blank, the reason's explanation, else a note
    /// that the provider gave no text.
    pub(crate) fn refused(
        stop_reason: StopReason,
        text: String,
        reason: Option<RefusalReason>,
    ) -> Self {
        let message = if !text.trim().is_empty() {
            text
        } else if let Some(explanation) = reason.as_ref().and_then(|r| r.explanation.clone()) {
            explanation
        } else {
            "the provider gave no text".to_owned()
        };
        AgentError::Refused {
            stop_reason,
            message,
            reason,
        }
    }

    /// The calls a paused run waits on (empty unless [`AgentError::Paused`]).
    pub fn pending_calls(&self) -> &[crate::pause::PendingCall] {
        match self {
            AgentError::Paused { pending, .. } => pending,
            _ => &[],
        }
    }

    /// The malformed turns the error carries (empty for provider, budget and guard errors).
    pub fn attempts(&self) -> &[Attempt] {
        match self {
            AgentError::SchemaValidation { attempts }
            | AgentError::AmbiguousTurn { attempts }
            | AgentError::SchemaNotCalled { attempts }
            | AgentError::MaxLlmCalls { attempts, .. } => attempts,
            _ => &[],
        }
    }

    pub(crate) fn from_attempts(kind: AttemptKind, attempts: Vec<Attempt>) -> Self {
        match kind {
            AttemptKind::SchemaValidation => AgentError::SchemaValidation { attempts },
            AttemptKind::AmbiguousTurn => AgentError::AmbiguousTurn { attempts },
            AttemptKind::SchemaNotCalled => AgentError::SchemaNotCalled { attempts },
        }
    }
}

impl AgentError {
    /// The [`AgentError::Internal`] for a panic caught in `what` ("the runner", "the
    /// model client"): `"{what} panicked: {message}"`.
    pub(crate) fn from_panic(what: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        AgentError::Internal {
            message: format!("{what} panicked: {}", panic_message(payload)),
        }
    }
}

/// The message of a caught panic.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::AgentError;
    use crate::llm::LlmError;

    #[test]
    fn retries_are_counted_in_words_a_person_reads() {
        let failed = |n: usize| AgentError::MaxLlmRetries {
            failures: (0..n).map(|_| LlmError::transient("503")).collect(),
        };
        let texts: Vec<String> = [1, 2, 3].map(|n| failed(n).to_string()).into();
        assert!(texts[0].starts_with("the provider failed once; last: "));
        assert!(texts[1].starts_with("the provider failed twice in a row; last: "));
        assert!(texts[2].starts_with("the provider failed 3 times in a row; last: "));
    }
}
