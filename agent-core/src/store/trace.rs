//! [`TraceStore`]: the full transcript and events of every run, for audits, replay and
//! diff.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

use crate::error::Ending;
use crate::message::{Message, ToolCall};
use crate::store::StoreFuture;
use crate::usage::Usage;

/// Transcripts and events of runs.
///
/// After every run of a config with a trace store, the runner calls
/// [`record_trace`](Self::record_trace) once with the run's [`TraceRecord`]. Keyed by
/// trace id: recording the same run twice keeps one trace.
pub trait TraceStore: Send + Sync {
    /// Stores one run's trace (an upsert by trace id). Resolves once it is durable, or,
    /// for a write-behind store, once it is queued (its failure is then counted by
    /// [`flush`](Self::flush)).
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when it cannot be stored.
    fn record_trace<'a>(&'a self, trace: &'a TraceRecord) -> StoreFuture<'a, ()>;

    /// The trace of the run with this id, if recorded.
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the store cannot be read.
    fn trace<'a>(&'a self, trace_id: &'a str) -> StoreFuture<'a, Option<TraceRecord>>;

    /// Resolves once every trace accepted before it is written or has failed, with the
    /// number of accepted writes that failed since the previous flush and were not
    /// reported by their own call (see [`FeedbackStore::flush`](crate::store::FeedbackStore::flush)).
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the store cannot flush.
    fn flush(&self) -> StoreFuture<'_, u64>;
}

/// Everything needed to audit, replay and compare one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TraceRecord {
    /// The run's trace id.
    pub trace_id: String,
    /// The config's name.
    pub agent: String,
    /// The config's variant label.
    pub variant: Option<String>,
    /// The config's fingerprint.
    pub fingerprint: String,
    /// The model as configured.
    pub model: String,
    /// When the run started (ms since the Unix epoch).
    pub started_at_ms: u64,
    /// The run's input.
    pub input: String,
    /// The messages sent before the input: the thread's (when the run named one), then
    /// [`RunOptions::history`](crate::RunOptions::history)'s.
    pub history: Vec<Message>,
    /// The memory thread the run belonged to.
    pub thread: Option<String>,
    /// The run's metadata.
    pub metadata: BTreeMap<String, String>,
    /// The run's messages from the input on (every tool call answered).
    pub transcript: Vec<Message>,
    /// The run's events, in order.
    pub events: Vec<TraceEvent>,
    /// How the run ended.
    pub ending: Ending,
    /// The error category, when it failed.
    pub category: Option<String>,
    /// The error message, when it failed.
    pub error: Option<String>,
    /// The output, as in [`RunRecord::output`](crate::store::RunRecord::output).
    pub output: Value,
    /// What the run spent.
    pub usage: Usage,
    /// Wall-clock time of the run (ms).
    pub duration_ms: u64,
}

impl TraceRecord {
    /// The run's tool calls in order (`submit_output` and `escalate_to_human` included).
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.transcript.iter().flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
    }
}

/// One stored event of a run; `at_ms` is the time since the run started (ms).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TraceEvent {
    /// An LLM call was about to be sent.
    TurnStarted {
        /// Time since the run started (ms).
        at_ms: u64,
        /// Which LLM call (1-based).
        llm_call: u32,
    },
    /// A tool execution finished.
    ToolFinished {
        /// Time since the run started (ms).
        at_ms: u64,
        /// The tool name.
        tool: String,
        /// The call id.
        call_id: String,
        /// Whether the result is an error.
        is_error: bool,
        /// How long it ran (ms).
        duration_ms: u64,
    },
    /// A transient provider failure; the request was sent again after `delay_ms`.
    RetryScheduled {
        /// Time since the run started (ms).
        at_ms: u64,
        /// The failed LLM call (1-based).
        llm_call: u32,
        /// The wait before the next attempt (ms).
        delay_ms: u64,
        /// The failure.
        error: String,
    },
    /// A tool search revealed tools (see
    /// [`ToolSearch`](crate::config::ToolSearch)).
    ToolsRevealed {
        /// Time since the run started (ms).
        at_ms: u64,
        /// The LLM call whose turn made the search (1-based).
        llm_call: u32,
        /// The tools newly revealed (names), in rank order.
        tools: Vec<String>,
    },
    /// A store call failed before the trace was written.
    StoreFailed {
        /// Time since the run started (ms).
        at_ms: u64,
        /// Which store (`memory`, `retriever`, `feedback`, `trace`).
        store: String,
        /// The operation (`load`, `append`, `retrieve`, `record`, `record_trace`).
        operation: String,
        /// The failure.
        error: String,
    },
    /// The run ended.
    RunEnded {
        /// Time since the run started (ms).
        at_ms: u64,
        /// How it ended.
        ending: Ending,
        /// The error category, when it failed.
        category: Option<String>,
    },
}

pub(crate) fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
