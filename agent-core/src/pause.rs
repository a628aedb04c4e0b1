//! Paused runs: the tool calls a run waits on ([`PendingCall`]) and the decisions that
//! let it go on ([`Decisions`]). See `docs/durable.md`, "Approvals and deferred results".
//!
//! A run pauses when the model calls a tool that needs a person's approval
//! (`#[tool(requires_approval)]`, or the config's `.approval(..)` policy) or a tool
//! whose result comes from outside the process ([`ToolError::deferred`](crate::ToolError::deferred)).
//! The other calls of that turn run first; the run then ends with
//! [`AgentError::Paused`](crate::AgentError::Paused) (ending `paused`, not a failure),
//! its checkpoint keeps everything, and
//! [`resume_agent_with`](crate::durable::resume_agent_with) continues it once every pending call
//! has a decision.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call a paused run waits on. Serializable: what a review queue or a client
/// shows, and what comes back as a [`Decision`] under the same `call_id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PendingCall {
    /// The call id the model gave (unique within the run); decisions name it.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The call's arguments, validated against the tool's parameter schema.
    pub arguments: Value,
    /// Why the run waits on it.
    pub reason: PauseReason,
    /// For a call made inside a child run (an agent used as a tool, or a remote agent,
    /// that paused): the calls that lead to it, outermost first. Empty for the run's
    /// own calls. The call's `call_id` is then the path of call ids joined with `/`
    /// (`"call_7/call_2"`: call `call_2` of the child run that this run's call `call_7`
    /// started); a decision for that id resumes the child inside this run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<Via>,
    /// For a call inside a child run: its tool's parameter schema (what an edit is
    /// checked against here; a review form can be made from it). `None` for the run's
    /// own calls, whose schemas the run's config holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// One step from a run into the child run a pending call was made in (see
/// [`PendingCall::via`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Via {
    /// The call (of the run one step out) that started the child run.
    pub call_id: String,
    /// That call's tool (the agent used as a tool).
    pub tool: String,
    /// The child's agent name.
    pub agent: String,
    /// The child run's id (in the child config's checkpoint store).
    pub run_id: String,
}

impl Via {
    /// A step into child run `run_id` of agent `agent`, started by call `call_id` of
    /// tool `tool`.
    pub fn new(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        agent: impl Into<String>,
        run_id: impl Into<String>,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            tool: tool.into(),
            agent: agent.into(),
            run_id: run_id.into(),
        }
    }
}

/// What a tool call whose child run paused resumes it with (see
/// [`ToolContext::resuming`](crate::tool::ToolContext::resuming)): the child run's id and
/// the decisions for its pending calls, under the child's own call ids.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildResume {
    /// The child run's id.
    pub run_id: String,
    /// The decisions for its pending calls.
    pub decisions: Decisions,
}

impl ChildResume {
    /// Resume child run `run_id` with `decisions`.
    pub fn new(run_id: impl Into<String>, decisions: Decisions) -> Self {
        Self {
            run_id: run_id.into(),
            decisions,
        }
    }
}

/// A child run that paused inside a tool call (see
/// [`ToolError::paused_inside`](crate::tool::ToolError::paused_inside)): its id, its
/// agent, the calls it waits on, and, for each of them, its tool's parameter schema.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildPause {
    /// The child run's id.
    pub run_id: String,
    /// The child's agent name.
    pub agent: String,
    /// The calls it waits on, as the child run lists them (its own call ids).
    pub pending: Vec<PendingCall>,
    /// Decisions the child already has and needs again when it resumes, under its own
    /// call ids (see [`with_decided`](Self::with_decided)). Empty for agent-core runs,
    /// whose checkpoints keep their decisions.
    pub decided: Decisions,
}

impl ChildPause {
    /// Child run `run_id` of agent `agent` waits on `pending` (each with its
    /// [`parameters`](PendingCall::parameters) set where an edit is to be checked).
    pub fn new(
        run_id: impl Into<String>,
        agent: impl Into<String>,
        pending: Vec<PendingCall>,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            agent: agent.into(),
            pending,
            decided: Decisions::new(),
        }
    }

    /// With decisions the child was given before and that the parent keeps for it: the
    /// calling run records them (ids prefixed as [`lifted`](Self::lifted) does) with
    /// its pause, and they come back in the child's [`ChildResume`] beside the new
    /// ones. For a child that keeps no state of its own between two resumes (an MCP
    /// tool call made again, whose server asks the same questions again: its earlier
    /// answers).
    #[must_use]
    pub fn with_decided(mut self, decided: Decisions) -> Self {
        self.decided = decided;
        self
    }

    /// The child's [`decided`](Self::decided) decisions as the parent records them: each
    /// id prefixed with `call_id/`.
    pub fn lifted_decided(&self, call_id: &str) -> Decisions {
        let mut out = Decisions::new();
        for (id, decision) in self.decided.iter() {
            out = out.with(format!("{call_id}/{id}"), decision.clone());
        }
        out
    }

    /// The child's pending calls as the parent lists them: each call id prefixed with
    /// `call_id/`, and the step (`call_id` of tool `tool` into this run) put first in
    /// its [`via`](PendingCall::via).
    pub fn lifted(&self, call_id: &str, tool: &str) -> Vec<PendingCall> {
        self.pending
            .iter()
            .map(|p| {
                let mut via = Vec::with_capacity(p.via.len() + 1);
                via.push(Via::new(call_id, tool, &self.agent, &self.run_id));
                via.extend(p.via.iter().cloned());
                PendingCall {
                    call_id: format!("{call_id}/{}", p.call_id),
                    via,
                    ..p.clone()
                }
            })
            .collect()
    }
}

/// Why a call waits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PauseReason {
    /// The tool needs a person's approval before it runs: decide with
    /// [`Decisions::approve`], [`deny`](Decisions::deny) or [`edit`](Decisions::edit).
    Approval,
    /// The tool ran and said its result comes from outside (a client-side action, a
    /// long job): give it with [`Decisions::result`] (or [`deny`](Decisions::deny) it).
    Deferred {
        /// What the tool said about where the result comes from.
        note: String,
    },
    /// A call asks a person for values (an MCP server's `elicitation/create` during a
    /// tool call, see agent-mcp): the answer must match the JSON schema in the pending
    /// call's [`parameters`](PendingCall::parameters). Give it with
    /// [`Decisions::result`] (the values: checked against that schema before anything
    /// runs, MCP's `accept`), [`deny`](Decisions::deny) it (MCP's `decline`) or
    /// [`dismiss`](Decisions::dismiss) it (MCP's `cancel`).
    Input {
        /// The question, in the asker's words.
        message: String,
    },
}

impl PauseReason {
    /// `approval`, `deferred` or `input`.
    pub fn as_str(&self) -> &'static str {
        match self {
            PauseReason::Approval => "approval",
            PauseReason::Deferred { .. } => "deferred",
            PauseReason::Input { .. } => "input",
        }
    }
}

impl PendingCall {
    /// A pending call (the runner makes them; this is for tests and review tools).
    pub fn new(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        arguments: Value,
        reason: PauseReason,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            tool: tool.into(),
            arguments,
            reason,
            via: Vec::new(),
            parameters: None,
        }
    }

    /// With the tool's parameter schema (see [`parameters`](Self::parameters)).
    #[must_use]
    pub fn with_parameters(mut self, schema: Value) -> Self {
        self.parameters = Some(schema);
        self
    }
}

impl fmt::Display for PendingCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({})",
            self.tool,
            self.call_id,
            self.reason.as_str()
        )
    }
}

/// What a person (or the system a deferred result comes from) decided about one
/// pending call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Decision {
    /// Run the call as the model made it.
    Approve,
    /// Do not run it; the model gets `reason` as an error tool result.
    Deny {
        /// Why, in words the model reads.
        reason: String,
    },
    /// Run it with these arguments instead (validated against the tool's parameter
    /// schema before anything runs; the transcript's call shows them).
    Edit {
        /// The new arguments.
        arguments: Value,
    },
    /// The call's result, from outside: the model gets it as the tool result (a JSON
    /// string as its text, any other value as JSON text).
    Result {
        /// The result.
        value: Value,
    },
    /// For a call that asks a person for input ([`PauseReason::Input`]): the question
    /// was put aside without a choice (MCP's `cancel`; a [`Deny`](Self::Deny) is its
    /// `decline`).
    Dismiss,
}

impl Decision {
    /// `approve`, `deny`, `edit`, `result` or `dismiss`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny { .. } => "deny",
            Decision::Edit { .. } => "edit",
            Decision::Result { .. } => "result",
            Decision::Dismiss => "dismiss",
        }
    }
}

/// The decisions for a paused run's pending calls, by call id: what
/// [`resume_agent_with`](crate::durable::resume_agent_with) takes (it converts into
/// [`RunOptions`](crate::RunOptions)) and what [`record_decisions`](crate::durable::record_decisions)
/// stores. Serializable (a map from call id to decision), so a decision can come from a
/// web form or a queue.
///
/// ```
/// use agent_core::Decisions;
/// use serde_json::json;
///
/// let decisions = Decisions::new()
///     .approve("call_1")
///     .deny("call_2", "refunds over 100 USD need a manager")
///     .edit("call_3", json!({"amount": 50}))
///     .result("call_4", json!({"status": "shipped"}));
/// assert_eq!(decisions.len(), 4);
/// let text = serde_json::to_string(&decisions).unwrap();
/// assert_eq!(serde_json::from_str::<Decisions>(&text).unwrap(), decisions);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Decisions {
    by_call: BTreeMap<String, Decision>,
}

impl Decisions {
    /// No decisions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Approves the call `call_id`: it runs as the model made it.
    #[must_use]
    pub fn approve(self, call_id: impl Into<String>) -> Self {
        self.with(call_id, Decision::Approve)
    }

    /// Denies the call `call_id`: it does not run, and the model gets `reason` as an
    /// error tool result.
    #[must_use]
    pub fn deny(self, call_id: impl Into<String>, reason: impl Into<String>) -> Self {
        self.with(
            call_id,
            Decision::Deny {
                reason: reason.into(),
            },
        )
    }

    /// Approves the call `call_id` with other arguments (validated against the tool's
    /// schema before anything runs).
    #[must_use]
    pub fn edit(self, call_id: impl Into<String>, arguments: Value) -> Self {
        self.with(call_id, Decision::Edit { arguments })
    }

    /// Gives the deferred call `call_id` its result.
    #[must_use]
    pub fn result(self, call_id: impl Into<String>, value: Value) -> Self {
        self.with(call_id, Decision::Result { value })
    }

    /// Dismisses the question of the call `call_id`, which asks a person for input
    /// ([`PauseReason::Input`]), without an answer (MCP's `cancel`).
    #[must_use]
    pub fn dismiss(self, call_id: impl Into<String>) -> Self {
        self.with(call_id, Decision::Dismiss)
    }

    /// Sets the decision for `call_id`, replacing an earlier one.
    #[must_use]
    pub fn with(mut self, call_id: impl Into<String>, decision: Decision) -> Self {
        self.by_call.insert(call_id.into(), decision);
        self
    }

    /// The decision for `call_id`, if any.
    pub fn get(&self, call_id: &str) -> Option<&Decision> {
        self.by_call.get(call_id)
    }

    /// Every decision, by call id (sorted).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Decision)> {
        self.by_call.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many calls have a decision.
    pub fn len(&self) -> usize {
        self.by_call.len()
    }

    /// Whether there is no decision.
    pub fn is_empty(&self) -> bool {
        self.by_call.is_empty()
    }

    /// Adds `other`'s decisions, replacing those for the same call ids.
    pub(crate) fn merge(&mut self, other: Decisions) {
        self.by_call.extend(other.by_call);
    }

    /// Takes the decision for `call_id` out.
    pub(crate) fn take(&mut self, call_id: &str) -> Option<Decision> {
        self.by_call.remove(call_id)
    }

    /// Takes out the decisions for the calls inside the child run that call `call_id`
    /// started (ids `call_id/...`), with that prefix removed: the child's own decisions.
    pub(crate) fn take_inside(&mut self, call_id: &str) -> Decisions {
        let prefix = format!("{call_id}/");
        let ids: Vec<String> = self
            .by_call
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        let mut inside = Decisions::new();
        for id in ids {
            if let Some(decision) = self.by_call.remove(&id) {
                inside
                    .by_call
                    .insert(id[prefix.len()..].to_owned(), decision);
            }
        }
        inside
    }
}

/// Why a set of decisions cannot be applied to a paused run. Nothing was run and
/// nothing was stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DecisionProblem {
    /// No pending call has this id.
    UnknownCall {
        /// The call id decided on.
        call_id: String,
    },
    /// A pending call has no decision (neither given now nor recorded before).
    Missing {
        /// The pending call's id.
        call_id: String,
        /// Its tool.
        tool: String,
    },
    /// Edited arguments that do not validate against the tool's parameter schema.
    InvalidArguments {
        /// The call id.
        call_id: String,
        /// The validation errors.
        errors: String,
    },
    /// An answer to a call that asks for input ([`PauseReason::Input`]) that does not
    /// match the schema it asked with. `errors` names each field that does not and why
    /// (the path, `/guests`, and the rule), never the value given.
    InvalidAnswer {
        /// The call id.
        call_id: String,
        /// The validation errors.
        errors: String,
    },
    /// A decision of a kind the call does not take: a call waiting for approval takes
    /// `approve`, `deny` or `edit`; a deferred call takes `result` or `deny`; a call
    /// asking for input takes `result`, `deny` or `dismiss`.
    WrongKind {
        /// The call id.
        call_id: String,
        /// The decision given (`approve`, `deny`, `edit`, `result`, `dismiss`).
        decision: String,
        /// Why the call waits (`approval`, `deferred`, `input`).
        waits_for: String,
    },
}

impl fmt::Display for DecisionProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecisionProblem::UnknownCall { call_id } => {
                write!(f, "no pending call has the id {call_id}")
            }
            DecisionProblem::Missing { call_id, tool } => {
                write!(f, "the {tool} call {call_id} has no decision")
            }
            DecisionProblem::InvalidArguments { call_id, errors } => {
                write!(
                    f,
                    "the edited arguments of {call_id} do not validate: {errors}"
                )
            }
            DecisionProblem::InvalidAnswer { call_id, errors } => {
                write!(
                    f,
                    "the answer to {call_id} does not match the schema it asked with: {errors}"
                )
            }
            DecisionProblem::WrongKind {
                call_id,
                decision,
                waits_for,
            } => {
                let takes = match waits_for.as_str() {
                    "deferred" => "result or deny",
                    "input" => "result, deny or dismiss",
                    _ => "approve, deny or edit",
                };
                write!(
                    f,
                    "{call_id} waits for {waits_for}, which takes {takes}, not {decision}"
                )
            }
        }
    }
}
