//! Approvals and deferred results in the runner: which calls of a turn wait, the pause
//! itself, the decisions a resume brings, and the paused runs a store holds (see
//! `docs/durable.md`, "Approvals and deferred results").

use std::panic::AssertUnwindSafe;

use serde_json::Value;

use crate::error::{AgentError, panic_message};
use crate::handover::{CallOutcome, RunState};
use crate::message::{Message, ToolCall, ToolResult};
use crate::output::AgentOutput;
use crate::pause::{Decision, DecisionProblem, Decisions, PauseReason, PendingCall};
use crate::stores::{CheckpointRecord, CheckpointStore, ResumeError, StoreError, now_ms};
use crate::validate::SchemaValidator;

use super::Run;
use super::checkpoint::{FORMAT, Header, Phase, Snapshot};
use super::tools::{Executed, Gate, truncate};

impl<T: AgentOutput> Run<'_, T> {
    /// One gate per call of the turn: the decision a resume brought for it, else
    /// whether it needs approval (the tool's flag or the config's policy).
    pub(super) fn gates(&mut self, calls: &[ToolCall]) -> Vec<Gate> {
        let cfg = self.cfg;
        let max_bytes = cfg.settings.budgets.max_tool_result_bytes;
        let state = RunState {
            turn: self.usage.llm_calls,
            tool_calls: self.usage.tool_calls,
            calls: &self.calls,
        };
        let decisions = &mut self.decisions;
        let table = &self.table;
        let ledger = self
            .durable
            .as_deref()
            .map(super::checkpoint::Durable::ledger);
        calls
            .iter()
            .map(|call| {
                if let Some(decision) = decisions.take(&call.id) {
                    let ran = ledger.is_some_and(|l| l.deferred(&call.id));
                    return gate_of(call, decision, max_bytes, ran);
                }
                let Some(tool) = table.get(&call.name) else {
                    return Gate::Run;
                };
                if call.arguments_error.is_some() {
                    return Gate::Run;
                }
                let asked = cfg.settings.approval.as_ref().is_some_and(|needs| {
                    std::panic::catch_unwind(AssertUnwindSafe(|| needs(call, &state)))
                        .unwrap_or_else(|payload| {
                            tracing::warn!(
                                tool = %call.name,
                                panic = %panic_message(payload.as_ref()),
                                "the approval policy panicked; the call waits for approval"
                            );
                            true
                        })
                });
                if tool.requires_approval || asked {
                    Gate::Hold
                } else {
                    Gate::Run
                }
            })
            .collect()
    }

    /// After the turn's calls ran: the calls that wait, if any. With a checkpoint store
    /// the run pauses: the checkpoint is saved as the turn stood before it ran (the
    /// calls that ran are in the ledger), and the error to end the run with comes back.
    /// Without one, a waiting call cannot wait: it gets an error result.
    pub(super) async fn pause_if_waiting(
        &mut self,
        calls: &[ToolCall],
        executed: &mut [Executed],
        offered: &[String],
        tool_calls_before: u32,
    ) -> Option<AgentError> {
        let pending: Vec<PendingCall> = calls
            .iter()
            .zip(executed.iter())
            .filter_map(|(call, done)| {
                done.pause.clone().map(|reason| PendingCall {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                    reason,
                })
            })
            .collect();
        if pending.is_empty() {
            return None;
        }
        if self.durable.is_none() {
            for (call, done) in calls.iter().zip(executed.iter_mut()) {
                if done.pause.take().is_some() {
                    let text = format!(
                        "{} could not run: its result has to wait (for approval or from \
                         outside), and this run cannot wait (no checkpoint store)",
                        call.name
                    );
                    done.outcome = CallOutcome::Failed(text.clone());
                    done.result = ToolResult::error(&call.id, &call.name, text);
                }
            }
            return None;
        }
        // The turn is answered again when the run resumes (the calls that ran, from the
        // ledger), and its tool executions are counted then: the checkpoint keeps the
        // count from before the turn, the paused result the count so far.
        let so_far = std::mem::replace(&mut self.usage.tool_calls, tool_calls_before);
        let saved = self
            .save_checkpoint(Phase::Paused {
                offered: offered.to_vec(),
                pending: pending.clone(),
                decisions: Decisions::new(),
            })
            .await;
        self.usage.tool_calls = so_far;
        if let Err(fenced) = saved {
            return Some(fenced);
        }
        Some(AgentError::Paused {
            run_id: self.run_id.to_string(),
            pending,
        })
    }
}

/// The gate a decision sets. Edits were applied to the turn when the run resumed.
fn gate_of(call: &ToolCall, decision: Decision, max_bytes: usize, ran: bool) -> Gate {
    match decision {
        Decision::Approve | Decision::Edit { .. } => Gate::Run,
        Decision::Deny { reason } => {
            let text = format!(
                "{} was not run: a person denied the call. Their reason: {reason}",
                call.name
            );
            Gate::Answer(
                ToolResult::error(&call.id, &call.name, text),
                CallOutcome::Denied(reason),
                ran,
            )
        }
        Decision::Result { value } => {
            let text = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
            let text = truncate(text, max_bytes);
            Gate::Answer(
                ToolResult::ok(&call.id, &call.name, text.clone()),
                CallOutcome::External(text),
                ran,
            )
        }
    }
}

/// What is wrong with `given` for the calls a run waits on (unknown call ids, decisions
/// of the wrong kind, edited arguments that do not validate); `validate` checks a tool's
/// arguments.
fn problems(
    pending: &[PendingCall],
    given: &Decisions,
    validate: impl Fn(&str, &Value) -> Result<(), String>,
) -> Vec<DecisionProblem> {
    let mut out = Vec::new();
    for (call_id, decision) in given.iter() {
        let Some(call) = pending.iter().find(|p| p.call_id == call_id) else {
            out.push(DecisionProblem::UnknownCall {
                call_id: call_id.to_owned(),
            });
            continue;
        };
        let fits = matches!(
            (&call.reason, decision),
            (_, Decision::Deny { .. })
                | (
                    PauseReason::Approval,
                    Decision::Approve | Decision::Edit { .. }
                )
                | (PauseReason::Deferred { .. }, Decision::Result { .. })
        );
        if !fits {
            out.push(DecisionProblem::WrongKind {
                call_id: call_id.to_owned(),
                decision: decision.as_str().to_owned(),
                waits_for: call.reason.as_str().to_owned(),
            });
            continue;
        }
        if let Decision::Edit { arguments } = decision
            && let Err(errors) = validate(&call.tool, arguments)
        {
            out.push(DecisionProblem::InvalidArguments {
                call_id: call_id.to_owned(),
                errors,
            });
        }
    }
    out
}

/// The pending calls of `all` that have no decision.
fn missing(pending: &[PendingCall], all: &Decisions) -> Vec<DecisionProblem> {
    pending
        .iter()
        .filter(|p| all.get(&p.call_id).is_none())
        .map(|p| DecisionProblem::Missing {
            call_id: p.call_id.clone(),
            tool: p.tool.clone(),
        })
        .collect()
}

/// Applies the decisions a resume brings to a paused run's state: checks them (every
/// pending call decided, now or before; nothing unknown; edits valid), applies the
/// edits to the turn, and turns the pause into a turn of calls to answer. A state that
/// is not paused takes no decisions.
///
/// # Errors
/// [`ResumeError::Decisions`] listing every problem, [`ResumeError::NotPaused`] for
/// decisions on a run that is not paused; the state is then unchanged.
// The error is the one `resume_agent_with` returns, as it is: no box on that path.
#[allow(clippy::result_large_err)]
pub(super) fn take_decisions(
    run_id: &str,
    snapshot: &mut Snapshot<'static>,
    given: Decisions,
    validate: impl Fn(&str, &Value) -> Result<(), String>,
) -> Result<(), ResumeError> {
    let Phase::Paused {
        offered,
        pending,
        decisions,
    } = &snapshot.phase
    else {
        return if given.is_empty() {
            Ok(())
        } else {
            Err(ResumeError::NotPaused {
                run_id: run_id.to_owned(),
            })
        };
    };
    let mut found = problems(pending, &given, validate);
    let mut all = decisions.clone();
    all.merge(given);
    found.extend(missing(pending, &all));
    if !found.is_empty() {
        return Err(ResumeError::Decisions {
            run_id: run_id.to_owned(),
            problems: found,
        });
    }
    let offered = offered.clone();
    if let Some(Message::Assistant { tool_calls, .. }) = snapshot.messages.to_mut().last_mut() {
        for call in tool_calls.iter_mut() {
            if let Some(Decision::Edit { arguments }) = all.get(&call.id) {
                call.arguments = arguments.clone();
            }
        }
    }
    snapshot.phase = Phase::ToolsPending {
        offered,
        decisions: all,
    };
    Ok(())
}

/// A run waiting in a checkpoint store for decisions (see [`paused_runs`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct PausedRun {
    /// The run id (what [`resume_agent_with`](crate::resume_agent_with) takes).
    pub run_id: String,
    /// The agent's name.
    pub agent: String,
    /// The run's input.
    pub input: String,
    /// The calls it waits on.
    pub pending: Vec<PendingCall>,
    /// The decisions recorded so far ([`record_decisions`]).
    pub decided: Decisions,
    /// When it paused, or a decision was last recorded (ms since the Unix epoch).
    pub updated_at_ms: u64,
}

/// The paused runs in `store`, most recently updated first, at most `limit` (a review
/// queue: what `runs pending` lists).
///
/// # Errors
/// A [`StoreError`] when the store cannot be read. Checkpoints that do not decode (another
/// version's) are skipped.
pub async fn paused_runs(
    store: &dyn CheckpointStore,
    limit: usize,
) -> Result<Vec<PausedRun>, StoreError> {
    let records = store.unfinished(usize::MAX).await?;
    let mut out: Vec<PausedRun> = records
        .iter()
        .filter_map(|record| {
            let header: Header = serde_json::from_str(&record.header).ok()?;
            let snapshot: Snapshot<'_> = serde_json::from_str(&record.state).ok()?;
            let Phase::Paused {
                pending, decisions, ..
            } = snapshot.phase
            else {
                return None;
            };
            Some(PausedRun {
                run_id: record.run_id.clone(),
                agent: header.agent,
                input: header.input,
                pending,
                decided: decisions,
                updated_at_ms: record.updated_at_ms,
            })
        })
        .collect();
    out.sort_by_key(|r| std::cmp::Reverse(r.updated_at_ms));
    out.truncate(limit);
    Ok(out)
}

/// Records decisions for a paused run in `store` without resuming it (a reviewer's
/// approval from a process that does not run the agent): they are checked against the
/// run's pending calls (edited arguments against the tool's parameter schema as the run
/// recorded it) and kept in its checkpoint; a later [`resume_agent`](crate::resume_agent)
/// uses them. Decisions for the same call replace earlier ones. Returns the pending
/// calls still without a decision.
///
/// # Errors
/// [`ResumeError::UnknownRun`], [`ResumeError::Unreadable`] (the store failed: nothing
/// recorded), [`ResumeError::Corrupt`], [`ResumeError::NotPaused`] (the run is running,
/// finished, or was resumed already), [`ResumeError::Decisions`] (an unknown call id, a
/// decision of the wrong kind, edited arguments that do not validate; nothing recorded).
pub async fn record_decisions(
    store: &dyn CheckpointStore,
    run_id: &str,
    decisions: Decisions,
) -> Result<Vec<PendingCall>, ResumeError> {
    let unreadable = |error| ResumeError::Unreadable {
        run_id: run_id.to_owned(),
        error,
    };
    let corrupt = |message: String| ResumeError::Corrupt {
        run_id: run_id.to_owned(),
        message,
    };
    let record = store
        .load(run_id)
        .await
        .map_err(unreadable)?
        .ok_or_else(|| ResumeError::UnknownRun {
            run_id: run_id.to_owned(),
        })?;
    let not_paused = || ResumeError::NotPaused {
        run_id: run_id.to_owned(),
    };
    if record.finished {
        return Err(not_paused());
    }
    let header: Header = serde_json::from_str(&record.header)
        .map_err(|e| corrupt(format!("the header does not decode: {e}")))?;
    let mut snapshot: Snapshot<'static> = serde_json::from_str(&record.state)
        .map_err(|e| corrupt(format!("the state does not decode: {e}")))?;
    if header.format != FORMAT || snapshot.format != FORMAT {
        return Err(corrupt(format!(
            "format {} (this version reads {FORMAT})",
            header.format
        )));
    }
    let Phase::Paused {
        pending,
        decisions: recorded,
        ..
    } = &mut snapshot.phase
    else {
        return Err(not_paused());
    };
    let validate = |tool: &str, arguments: &Value| -> Result<(), String> {
        let schema = header
            .tools
            .iter()
            .find(|(name, _)| name == tool)
            .map(|(_, schema)| schema)
            .ok_or_else(|| format!("the run has no tool {tool}"))?;
        let validator = SchemaValidator::new(schema)?;
        validator.validate(arguments).map_err(|e| e.to_string())
    };
    let found = problems(pending, &decisions, validate);
    if !found.is_empty() {
        return Err(ResumeError::Decisions {
            run_id: run_id.to_owned(),
            problems: found,
        });
    }
    recorded.merge(decisions);
    let left: Vec<PendingCall> = pending
        .iter()
        .filter(|p| recorded.get(&p.call_id).is_none())
        .cloned()
        .collect();
    let state = serde_json::to_string(&snapshot)
        .map_err(|e| corrupt(format!("the state does not encode: {e}")))?;
    let next = CheckpointRecord {
        state,
        seq: record.seq + 1,
        updated_at_ms: now_ms(),
        ..record
    };
    store.save(&next).await.map_err(unreadable)?;
    Ok(left)
}
