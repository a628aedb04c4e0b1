//! Approvals and deferred results in a checkpoint: the decisions a resume brings, and
//! the paused runs a store holds (see `docs/durable.md`, "Approvals and deferred
//! results"). Which calls of a turn wait, and the pause itself, are the tool turn's
//! (`act.rs`).

use serde_json::Value;

use crate::message::Message;
use crate::pause::{Decision, DecisionProblem, Decisions, PauseReason, PendingCall};
use crate::store::{
    CheckpointRecord, CheckpointStore, ResumeError, SaveOutcome, StoreError, now_ms,
};
use crate::validate::SchemaValidator;

use super::{FORMAT, Header, Phase, Snapshot};

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
                | (
                    PauseReason::Input { .. },
                    Decision::Result { .. } | Decision::Dismiss
                )
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
            && let Err(errors) = check_edit(call, arguments, &validate)
        {
            out.push(DecisionProblem::InvalidArguments {
                call_id: call_id.to_owned(),
                errors,
            });
        }
        if let (PauseReason::Input { .. }, Decision::Result { value }) = (&call.reason, decision)
            && let Err(errors) = check_answer(call, value)
        {
            out.push(DecisionProblem::InvalidAnswer {
                call_id: call_id.to_owned(),
                errors,
            });
        }
    }
    out
}

/// Checks an answer to a call that asks for input against the schema it asked with (its
/// `parameters`; none: any answer). The errors name the fields (paths) and rules, never
/// the values.
fn check_answer(call: &PendingCall, value: &Value) -> Result<(), String> {
    match &call.parameters {
        Some(schema) => SchemaValidator::new(schema)?
            .validate_masked(value)
            .map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

/// Checks an edit: of a call inside a child run (C64) against the parameter schema the
/// child listed it with (the child's tool guardrails judge it when the child resumes),
/// of one of the run's own calls with `validate`.
fn check_edit(
    call: &PendingCall,
    arguments: &Value,
    validate: impl Fn(&str, &Value) -> Result<(), String>,
) -> Result<(), String> {
    if call.via.is_empty() {
        return validate(&call.tool, arguments);
    }
    match &call.parameters {
        Some(schema) => SchemaValidator::new(schema)?
            .validate(arguments)
            .map_err(|e| e.to_string()),
        None => Ok(()),
    }
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
pub(crate) fn take_decisions(
    run_id: &str,
    snapshot: &mut Snapshot,
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
    if let Some(Message::Assistant { tool_calls, .. }) = snapshot.state.messages.last_mut() {
        for call in tool_calls.iter_mut() {
            if let Some(Decision::Edit { arguments }) = all.get(&call.id) {
                call.arguments = arguments.clone();
            }
        }
    }
    // The calls whose child run paused: each runs again, resuming that run.
    let mut inside: Vec<(String, String)> = Vec::new();
    for step in pending.iter().filter_map(|p| p.via.first()) {
        if !inside.iter().any(|(call_id, _)| *call_id == step.call_id) {
            inside.push((step.call_id.clone(), step.run_id.clone()));
        }
    }
    snapshot.phase = Phase::ToolsPending {
        offered,
        decisions: all,
        inside,
    };
    Ok(())
}

/// A run waiting in a checkpoint store for decisions (see [`paused_runs`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct PausedRun {
    /// The run id (what [`resume_agent_with`](crate::durable::resume_agent_with) takes).
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
            let snapshot = Snapshot::from_text(&record.state).ok()?;
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

/// How many times [`record_decisions`] reads the run again when another write came
/// between its read and its write.
const RECORD_ATTEMPTS: usize = 8;

/// Records decisions for a paused run in `store` without resuming it (a reviewer's
/// approval from a process that does not run the agent): they are checked against the
/// run's pending calls (edited arguments against the tool's parameter schema as the run
/// recorded it) and kept in its checkpoint; a later [`resume_agent`](crate::resume_agent)
/// uses them. Decisions for the same call replace earlier ones. Returns the pending
/// calls still without a decision.
///
/// The write is fenced like a run's: it is stored only if the checkpoint is still the
/// one it read (its `seq`), so a resume that claimed the run in between is never
/// overwritten. Two reviewers recording at once both keep their decisions (the later
/// write reads the run again and merges; up to 8 times). A run whose lease is held
/// (a resume claimed it and is running it) is not paused any more.
///
/// # Errors
/// [`ResumeError::UnknownRun`], [`ResumeError::Unreadable`] (the store failed: nothing
/// recorded), [`ResumeError::Corrupt`], [`ResumeError::NotPaused`] (the run is running,
/// finished, or was resumed already: a resume holds its lease), [`ResumeError::Decisions`]
/// (an unknown call id, a decision of the wrong kind, edited arguments that do not
/// validate; nothing recorded), [`ResumeError::Fenced`] (other writes came between each
/// of its reads and its write, 8 times: nothing recorded).
pub async fn record_decisions(
    store: &dyn CheckpointStore,
    run_id: &str,
    decisions: Decisions,
) -> Result<Vec<PendingCall>, ResumeError> {
    for _ in 0..RECORD_ATTEMPTS {
        if let Some(left) = record_once(store, run_id, decisions.clone()).await? {
            return Ok(left);
        }
    }
    Err(ResumeError::Fenced {
        run_id: run_id.to_owned(),
    })
}

/// One attempt of [`record_decisions`]: `None` when another write came between its read
/// and its write (nothing stored).
async fn record_once(
    store: &dyn CheckpointStore,
    run_id: &str,
    decisions: Decisions,
) -> Result<Option<Vec<PendingCall>>, ResumeError> {
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
    // Finished, or claimed by a resume that holds it (a paused checkpoint holds no
    // lease; a claim takes one).
    if record.finished || record.lease_until_ms > now_ms() {
        return Err(not_paused());
    }
    let header: Header = serde_json::from_str(&record.header)
        .map_err(|e| corrupt(format!("the header does not decode: {e}")))?;
    let mut snapshot = Snapshot::from_text(&record.state).map_err(corrupt)?;
    if header.format != FORMAT {
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
    let state = snapshot
        .to_text()
        .map_err(|e| corrupt(format!("the state does not encode: {e}")))?;
    // A writer token of its own: the write is stored only if the checkpoint is still
    // the one read (its seq), never because an earlier writer's token matches.
    let taken_at = record.seq;
    let next = CheckpointRecord {
        state,
        seq: record.seq + 1,
        updated_at_ms: now_ms(),
        writer: super::new_writer(),
        lease_until_ms: 0,
        ..record
    };
    match store
        .save_fenced(&next, taken_at)
        .await
        .map_err(unreadable)?
    {
        SaveOutcome::Saved => Ok(Some(left)),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::pause::Via;
    use serde_json::json;

    /// A question asked inside call `call_7`'s child: answers must match `schema`.
    fn question() -> PendingCall {
        let mut call = PendingCall::new(
            "call_7/elicit-1-00000000",
            "elicitation",
            json!({"message": "How many?"}),
            PauseReason::Input {
                message: "How many?".into(),
            },
        )
        .with_parameters(json!({"type": "object", "properties": {
            "guests": {"type": "integer", "minimum": 1}}, "required": ["guests"]}));
        call.via = vec![Via::new("call_7", "book", "srv", "mcp-1")];
        call
    }

    fn no_tools(_: &str, _: &Value) -> Result<(), String> {
        Err("no tools".into())
    }

    #[test]
    fn an_answer_is_checked_against_the_asked_schema_naming_the_field_not_the_value() {
        let pending = [question()];
        let id = &pending[0].call_id;
        let ok = Decisions::new().result(id, json!({"guests": 2}));
        assert_eq!(problems(&pending, &ok, no_tools), []);
        let bad = Decisions::new().result(id, json!({"guests": "s3cr3t"}));
        let found = problems(&pending, &bad, no_tools);
        let [DecisionProblem::InvalidAnswer { call_id, errors }] = found.as_slice() else {
            panic!("expected an invalid answer, got {found:?}");
        };
        assert_eq!(call_id, id);
        assert!(errors.starts_with("/guests: "), "{errors}");
        assert!(!errors.contains("s3cr3t"), "{errors}");
        let text = found[0].to_string();
        assert!(
            text.contains("does not match the schema it asked with"),
            "{text}"
        );
    }

    #[test]
    fn a_question_takes_result_deny_or_dismiss_and_nothing_else_does_dismiss() {
        let pending = [question()];
        let id = &pending[0].call_id;
        for fits in [
            Decisions::new().deny(id, "no"),
            Decisions::new().dismiss(id),
        ] {
            assert_eq!(problems(&pending, &fits, no_tools), []);
        }
        for (wrong, kind) in [
            (Decisions::new().approve(id), "approve"),
            (Decisions::new().edit(id, json!({})), "edit"),
        ] {
            assert_eq!(
                problems(&pending, &wrong, no_tools),
                [DecisionProblem::WrongKind {
                    call_id: id.clone(),
                    decision: kind.into(),
                    waits_for: "input".into(),
                }]
            );
        }
        let approval = [PendingCall::new(
            "call_1",
            "refund",
            json!({}),
            PauseReason::Approval,
        )];
        let dismissed = problems(&approval, &Decisions::new().dismiss("call_1"), no_tools);
        assert_eq!(
            dismissed[0].to_string(),
            "call_1 waits for approval, which takes approve, deny or edit, not dismiss"
        );
    }
}
