//! [`Handover`]: what a run that did not answer leaves for the human who takes over,
//! and [`RunState`]: what `tools_for` sees of a run in progress.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Ending;
use crate::limits::Limits;
use crate::usage::Usage;

/// How one tool call the model made turned out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "detail", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallOutcome {
    /// The tool ran and returned this result content.
    Succeeded(String),
    /// The tool ran and failed (an error, a panic, a timeout): the error text.
    Failed(String),
    /// The tool did not run (unknown or not offered, invalid or cut-off arguments, the
    /// call limit, an ambiguous or wrap-up turn, a stopped run): why.
    NotRun(String),
    /// The tool started but the process running it was interrupted (a crash) before its
    /// result was recorded, and the tool is irreversible, so a resumed run did not run
    /// it again: whether its effect happened is unknown. The text is what the model was
    /// told (see `docs/durable.md`).
    Unknown(String),
    /// A person denied the call of a paused run (`Decisions::deny`): the reason, which
    /// the model was given.
    Denied(String),
    /// The call's result came from outside the process (`Decisions::result`, for a
    /// deferred call or one a person answered): the result content.
    External(String),
}

impl CallOutcome {
    /// Whether the tool's code ran (successfully or not; for
    /// [`Unknown`](Self::Unknown), it started; for [`External`](Self::External), it
    /// ran and deferred its result).
    pub fn ran(&self) -> bool {
        !matches!(self, CallOutcome::NotRun(_) | CallOutcome::Denied(_))
    }
}

/// One call of a user tool the model made, in the order it was made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallRecord {
    /// The LLM call whose turn made the call (1-based).
    pub llm_call: u32,
    /// The tool name as the model wrote it.
    pub tool: String,
    /// The arguments (`{}` when they arrived unusable).
    pub arguments: Value,
    /// How it turned out.
    pub outcome: CallOutcome,
    /// Whether the tool is marked irreversible (`#[tool(irreversible)]`,
    /// `Tool::irreversible`).
    pub irreversible: bool,
}

impl CallRecord {
    /// Whether this was an irreversible tool that ran successfully: an action taken
    /// that cannot be taken back.
    pub fn is_irreversible_action(&self) -> bool {
        self.irreversible && matches!(self.outcome, CallOutcome::Succeeded(_))
    }
}

/// What a run that did not answer leaves for the human who takes over, built by the
/// runner from the run itself (no extra model call): what was asked, every tool call
/// with its outcome, the irreversible actions taken, the last correction the model got,
/// the budgets and what was spent, why it ended, and the model's own summary when it
/// handed over with one (`escalate_to_human`).
///
/// On every `AgentResult` whose ending is not `answered` (`AgentResult::handover`). Its
/// `Display` is a plain-text brief for a person.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Handover {
    /// The run's input (what was asked).
    pub input: String,
    /// How the run ended.
    pub ending: Ending,
    /// The error category (`max_llm_calls`, `escalated`, ...).
    pub category: String,
    /// The error, as text.
    pub reason: String,
    /// Every user-tool call the model made, in order, with its outcome.
    pub calls: Vec<CallRecord>,
    /// The last correction the runner gave the model (a nudge, the problems of a
    /// rejected answer), when there was one.
    pub last_feedback: Option<String>,
    /// What the run spent.
    pub spent: Usage,
    /// The budgets it had.
    pub limits: Limits,
    /// The model's own summary of the case, when it gave one (`escalate_to_human`).
    pub model_summary: Option<String>,
}

impl Handover {
    /// The calls to irreversible tools that ran successfully: actions taken that
    /// cannot be taken back, which whoever takes over must know about.
    pub fn irreversible_actions(&self) -> impl Iterator<Item = &CallRecord> {
        self.calls.iter().filter(|c| c.is_irreversible_action())
    }
}

impl fmt::Display for Handover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Asked: {}", one_line(&self.input, 300))?;
        writeln!(
            f,
            "Ended: {} ({}): {}",
            self.ending, self.category, self.reason
        )?;
        if let Some(summary) = &self.model_summary {
            writeln!(f, "Agent's summary: {summary}")?;
        }
        let actions: Vec<&CallRecord> = self.irreversible_actions().collect();
        if actions.is_empty() {
            writeln!(f, "Irreversible actions taken: none")?;
        } else {
            writeln!(f, "Irreversible actions taken:")?;
            for c in actions {
                writeln!(f, "  - {}({})", c.tool, c.arguments)?;
            }
        }
        if self.calls.is_empty() {
            writeln!(f, "Tool calls: none")?;
        } else {
            writeln!(f, "Tool calls:")?;
            for c in &self.calls {
                let (status, detail) = match &c.outcome {
                    CallOutcome::Succeeded(d) => ("ok", d),
                    CallOutcome::Failed(d) => ("failed", d),
                    CallOutcome::NotRun(d) => ("not run", d),
                    CallOutcome::Unknown(d) => ("outcome unknown", d),
                    CallOutcome::Denied(d) => ("denied", d),
                    CallOutcome::External(d) => ("result from outside", d),
                };
                writeln!(
                    f,
                    "  - turn {}: {}({}): {status}: {}",
                    c.llm_call,
                    c.tool,
                    c.arguments,
                    one_line(detail, 160)
                )?;
            }
        }
        if let Some(feedback) = &self.last_feedback {
            writeln!(f, "Last correction given: {}", one_line(feedback, 300))?;
        }
        write!(
            f,
            "Spent: {} of {} LLM calls, {} of {} tool calls, {} tokens",
            self.spent.llm_calls,
            self.limits.max_llm_calls,
            self.spent.tool_calls,
            self.limits.max_tool_calls,
            self.spent.total_tokens()
        )?;
        if let Some(cost) = self.spent.cost_usd {
            write!(f, ", ${cost:.4}")?;
        }
        writeln!(f)?;
        write!(f, "Still open: the case has no validated answer")
    }
}

/// `text` on one line, cut to `max` characters with an ellipsis.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}...")
    }
}

/// What `tools_for` sees of a run in progress, before each LLM call.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct RunState<'a> {
    /// The LLM call about to be made (1-based).
    pub turn: u32,
    /// Tool executions so far.
    pub tool_calls: u32,
    /// Every user-tool call made so far, in order, with its outcome.
    pub calls: &'a [CallRecord],
}

impl RunState<'_> {
    /// Whether `tool` ran successfully at least once.
    pub fn succeeded(&self, tool: &str) -> bool {
        self.calls
            .iter()
            .any(|c| c.tool == tool && matches!(c.outcome, CallOutcome::Succeeded(_)))
    }

    /// The irreversible actions taken so far (see [`CallRecord::is_irreversible_action`]).
    pub fn irreversible_actions(&self) -> impl Iterator<Item = &CallRecord> {
        self.calls.iter().filter(|c| c.is_irreversible_action())
    }
}
