//! What the run decided for one call before it runs ([`Gate`]) and how it was answered
//! ([`Executed`]).

use serde_json::Value;

use crate::handover::CallOutcome;
use crate::message::{ToolCall, ToolResult};
use crate::pause::{ChildPause, ChildResume, PauseReason};
use crate::usage::ChildUsage;

/// What the run decided for one call of a known, offered tool with valid arguments,
/// before it runs (approvals and the decisions of a resumed run).
pub(crate) enum Gate {
    /// Run it.
    Run,
    /// Run it: a person approved it as it stands (edits were applied to the turn).
    Approved,
    /// Do not run it: it waits for a person's approval.
    Hold,
    /// Answer it without running (a denial, an outside result); `ran` when the tool ran
    /// before the pause (it deferred its result): the execution counts.
    Answer(ToolResult, CallOutcome, bool),
    /// Run it again: the child run it started paused, and resumes with these decisions
    /// (C64).
    Resume(ChildResume),
}

/// One call of a turn, answered.
pub(crate) struct Executed {
    /// The result fed back to the model.
    pub(crate) result: ToolResult,
    /// How it turned out (for the run's call records).
    pub(crate) outcome: CallOutcome,
    /// Whether the tool ran and said it cannot safely continue.
    pub(crate) fatal: bool,
    /// Why the call waits, when it does: held for approval, or deferred by the tool.
    pub(crate) pause: Option<PauseReason>,
    /// The tool's escalation (reason, summary), when it said a person must take over.
    pub(crate) escalation: Option<(String, String)>,
    /// The child runs the call started (an agent used as a tool), with their usage.
    pub(crate) children: Vec<ChildUsage>,
    /// The tool guardrails that did not pass it: (name, verdict: `deny`, `replace`,
    /// `redact`).
    pub(crate) interventions: Vec<(String, &'static str)>,
    /// A tool guardrail that tripped on it: (name, reason).
    pub(crate) trip: Option<(String, String)>,
    /// For a call that waits for approval: the arguments a tool guardrail replaced the
    /// model's with (what the person is shown, and what runs once approved).
    pub(crate) held_arguments: Option<Value>,
    /// For a call that waits because the child run it started paused: that run and the
    /// calls it waits on.
    pub(crate) inside: Option<Box<ChildPause>>,
}

impl Executed {
    /// A call answered without running.
    pub(crate) fn answered(result: ToolResult, outcome: CallOutcome) -> Self {
        Self {
            result,
            outcome,
            fatal: false,
            pause: None,
            escalation: None,
            children: Vec::new(),
            interventions: Vec::new(),
            trip: None,
            held_arguments: None,
            inside: None,
        }
    }

    /// A call that waits (`reason`); `result` is a placeholder no model sees.
    pub(crate) fn waiting(call: &ToolCall, reason: PauseReason) -> Self {
        let text = match &reason {
            PauseReason::Approval => format!("{} waits for approval", call.name),
            PauseReason::Deferred { note } => note.clone(),
            PauseReason::Input { message } => message.clone(),
        };
        Self {
            result: ToolResult::ok(&call.id, &call.name, text.clone()),
            outcome: CallOutcome::NotRun(text),
            fatal: false,
            pause: Some(reason),
            escalation: None,
            children: Vec::new(),
            interventions: Vec::new(),
            trip: None,
            held_arguments: None,
            inside: None,
        }
    }
}
