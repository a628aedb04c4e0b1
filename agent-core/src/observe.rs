//! [`Observer`]: typed events of a run, for progress bars and metrics.

use std::time::Duration;

use crate::error::Ending;
use crate::llm::LlmError;
use crate::store::{StoreError, StoreKind};
use crate::usage::Usage;

/// One thing that happened in a run. Borrowed: copy what you keep.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunEvent<'a> {
    /// The run started.
    RunStarted {
        /// The run's trace id.
        trace_id: &'a str,
        /// The config's name.
        agent: &'a str,
    },
    /// An LLM call is about to be sent.
    TurnStarted {
        /// The run's trace id.
        trace_id: &'a str,
        /// Which LLM call (1-based).
        llm_call: u32,
    },
    /// A tool execution finished (or was answered without running).
    ToolFinished {
        /// The run's trace id.
        trace_id: &'a str,
        /// The tool name.
        tool: &'a str,
        /// The call id.
        call_id: &'a str,
        /// Whether the result is an error.
        is_error: bool,
        /// How long it ran.
        duration: Duration,
    },
    /// A transient provider failure; the same request goes again after `delay`.
    RetryScheduled {
        /// The run's trace id.
        trace_id: &'a str,
        /// The failed LLM call (1-based).
        llm_call: u32,
        /// The wait before the next attempt.
        delay: Duration,
        /// The failure.
        error: &'a LlmError,
    },
    /// The conversation went to another agent (the builder's `handoff`).
    Handoff {
        /// The run's trace id.
        trace_id: &'a str,
        /// The agent that handed over.
        from: &'a str,
        /// The agent that has the conversation now.
        to: &'a str,
    },
    /// The conversation was compacted before an LLM call (see `agent_core::Compaction`),
    /// or the newest tool results were cut so that the request fits the model's context
    /// window (strategy `cut_tool_results`; with or without a compaction policy).
    Compacted {
        /// The run's trace id.
        trace_id: &'a str,
        /// What was done: `clear_tool_results`, `summarize` or `cut_tool_results`.
        strategy: &'a str,
        /// The history's tokens before (tokens; reported or estimated, see
        /// `Compaction`).
        before_tokens: u64,
        /// The history's estimated tokens after (tokens).
        after_tokens: u64,
        /// Why a summary was not used, when the run fell back to clearing.
        fallback_reason: Option<&'a str>,
    },
    /// A guardrail did not pass (see `agent_core::guardrail`): it rejected an answer,
    /// denied or changed a tool call, redacted a result, or tripped.
    Guardrail {
        /// The run's trace id.
        trace_id: &'a str,
        /// The guardrail's name.
        guardrail: &'a str,
        /// Where it ran: `input`, `output`, `tool_before` or `tool_after`.
        stage: &'a str,
        /// What it decided: `reject`, `deny`, `replace`, `redact` or `trip`.
        verdict: &'a str,
        /// The tool call's id, for a tool guardrail.
        call_id: Option<&'a str>,
    },
    /// The model failed in a way another provider can serve (`max_llm_retries`
    /// transient failures in a row, or a model-not-found, quota or access failure) and
    /// the same turn goes to the next fallback model, at once.
    ModelSwitched {
        /// The run's trace id.
        trace_id: &'a str,
        /// The failed LLM call (1-based).
        llm_call: u32,
        /// The model left (as configured, with its routing prefix).
        from: &'a str,
        /// The model the turn goes to.
        to: &'a str,
        /// The failure that made the run leave `from`.
        error: &'a LlmError,
    },
    /// A tool search (see [`ToolSearch`](crate::config::ToolSearch)) revealed tools:
    /// every later LLM call of the run offers them.
    ToolsRevealed {
        /// The run's trace id.
        trace_id: &'a str,
        /// The LLM call whose turn made the search (1-based).
        llm_call: u32,
        /// The tools newly revealed (names), in rank order.
        tools: &'a [String],
    },
    /// A store call failed, timed out or panicked (see [`crate::store`]). The run's
    /// outcome is unchanged; the failure is counted in `AgentResult::store_failures`.
    /// Failures of the recording after the run come after `RunEnded`. `run_batch`'s
    /// final flush reports its failures (and write-behind writes that failed) to the
    /// config's observer with operation `flush` and an empty trace id; they are counted
    /// in `Receipt::store_failures`.
    StoreFailed {
        /// The run's trace id (empty for a batch's flush).
        trace_id: &'a str,
        /// Which store.
        store: StoreKind,
        /// The operation: `load`, `append`, `retrieve`, `record`, `record_trace` or
        /// `flush`.
        operation: &'static str,
        /// The failure.
        error: &'a StoreError,
    },
    /// The run ended.
    RunEnded {
        /// The run's trace id.
        trace_id: &'a str,
        /// How it ended.
        ending: Ending,
        /// The error category, when it failed.
        category: Option<&'static str>,
        /// What it spent.
        usage: &'a Usage,
        /// How long it took.
        duration: Duration,
    },
}

/// Receives the [`RunEvent`]s of every run of a config.
///
/// Called inline on the run's task: keep it quick. A panic in an observer is caught and
/// traced; it never changes a run.
pub trait Observer: Send + Sync {
    /// Handles one event.
    fn on_event(&self, event: &RunEvent<'_>);
}

impl<F> Observer for F
where
    F: Fn(&RunEvent<'_>) + Send + Sync,
{
    fn on_event(&self, event: &RunEvent<'_>) {
        self(event);
    }
}
