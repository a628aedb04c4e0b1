//! The texts of a checkpoint (see `checkpoint.rs`): the header, fixed for a run; the
//! state of a running run at a boundary, with the boundary's phase; and a finished
//! run's result. Serialized as JSON; [`FORMAT`] is their version.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{AgentError, Attempt};
use crate::handover::{CallRecord, Handover};
use crate::llm::LlmError;
use crate::message::Message;
use crate::output::OutputMode;
use crate::pause::{Decisions, PendingCall};
use crate::scores::Scores;
use crate::usage::Usage;

use super::guard::GuardState;

/// The version of the header and state texts this runner writes.
pub(super) const FORMAT: u32 = 1;

/// What does not change during a run: written with every save, read on resume.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Header {
    pub(super) format: u32,
    pub(super) run_id: String,
    pub(super) trace_id: String,
    pub(super) agent: String,
    pub(super) fingerprint: String,
    pub(super) output_mode: OutputMode,
    pub(super) output_schema: Option<Value>,
    /// The user tools: name and parameter schema, in the config's order.
    pub(super) tools: Vec<(String, Value)>,
    pub(super) thread: Option<String>,
    pub(super) input: String,
    /// The system prompt as sent (retrieved context included).
    pub(super) system: Option<String>,
    /// Messages before the input (the thread's and `RunOptions::history`).
    pub(super) history_len: usize,
    /// The run's deadline (ms), when it had one.
    pub(super) deadline_ms: Option<u64>,
}

/// Which boundary a running checkpoint was saved at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub(super) enum Phase {
    /// Before an LLM call: the previous transition is complete.
    BeforeCall,
    /// The last message is a turn of ordinary tool calls, none answered yet; `offered`
    /// names the tools that turn was offered; `decisions` are those a resume of a paused
    /// run brought (edits already applied to the turn).
    ToolsPending {
        offered: Vec<String>,
        #[serde(default, skip_serializing_if = "Decisions::is_empty")]
        decisions: Decisions,
    },
    /// As `ToolsPending`, and the run paused: `pending` wait for a decision (the turn's
    /// other calls completed in the ledger); `decisions` recorded so far.
    Paused {
        offered: Vec<String>,
        pending: Vec<PendingCall>,
        #[serde(default, skip_serializing_if = "Decisions::is_empty")]
        decisions: Decisions,
    },
}

/// A running run's state (the `state` text of an unfinished checkpoint).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Snapshot<'a> {
    pub(super) format: u32,
    pub(super) phase: Phase,
    pub(super) messages: Cow<'a, [Message]>,
    pub(super) usage: Usage,
    pub(super) cost_usd: f64,
    pub(super) last_call_tokens: u64,
    pub(super) last_call_cost: f64,
    pub(super) attempts: Cow<'a, [Attempt]>,
    pub(super) failures: Cow<'a, [LlmError]>,
    pub(super) force_answer: bool,
    pub(super) last_text: Cow<'a, str>,
    pub(super) output: Cow<'a, str>,
    pub(super) guard: GuardState,
    pub(super) calls: Cow<'a, [CallRecord]>,
    pub(super) last_correction: Option<Cow<'a, str>>,
    pub(super) model_summary: Option<Cow<'a, str>>,
    pub(super) fatal: Option<(String, String)>,
    /// Time spent toward the deadline so far (ms).
    pub(super) elapsed_ms: u64,
    /// Store failures counted so far.
    pub(super) store_failures: u32,
}

/// A finished run's result (the `state` text of a finished checkpoint).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Finished<'a> {
    pub(super) format: u32,
    pub(super) ok: bool,
    pub(super) error: Option<Cow<'a, AgentError>>,
    pub(super) output: Cow<'a, str>,
    pub(super) trace_id: Cow<'a, str>,
    pub(super) usage: Usage,
    pub(super) scores: Option<Cow<'a, Scores>>,
    pub(super) duration_ms: u64,
    pub(super) transcript: Cow<'a, [Message]>,
    pub(super) handover: Option<Cow<'a, Handover>>,
    pub(super) partial: bool,
    pub(super) customer_message: Cow<'a, str>,
    pub(super) store_failures: u32,
}
