//! [`resume_agent`]: continues a run from its last checkpoint (see `docs/durable.md`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::config::{AgentConfig, Compiled, OutputPlan};
use crate::output::{AgentOutput, Extracted, extract_json};
use crate::result::AgentResult;
use crate::run_options::RunOptions;
use crate::store::{CheckpointRecord, ConfigDifference, ResumeError, SaveOutcome, now_ms};

use super::durable::{FORMAT, Finished, Header, Resumed, Snapshot, bounded, new_writer};
use super::tools::guardrails::{Before, before_tool};

/// Continues the run `run_id` from its last checkpoint (see [`resume_agent_with`]).
///
/// # Errors
/// As [`resume_agent_with`].
pub async fn resume_agent<T: AgentOutput>(
    config: &AgentConfig<T>,
    run_id: &str,
) -> Result<AgentResult<T>, ResumeError> {
    resume_agent_with(config, run_id, RunOptions::default()).await
}

/// Continues the run `run_id` from its last checkpoint in the config's checkpoint store,
/// with the budgets it had left, and returns its result as [`run_agent_with`](crate::run_agent_with) would.
///
/// - A run that had used 7 of its 8 LLM calls has 1 left; every counter (parse retries,
///   consecutive provider failures, tool executions, tokens, cost) and the guards go on
///   from where they were, and the deadline is its limit minus the time already spent.
///   The budgets' limits are the config's.
/// - A run stopped with a turn of tool calls unanswered answers them first: a call the
///   ledger says completed is not run again (its recorded result is fed back); a call
///   that started and never completed runs again with the same
///   [`idempotency_key`](crate::ToolContext::idempotency_key), unless its tool is
///   irreversible: then the model is told its outcome is unknown, and the hand-over
///   lists it as [`CallOutcome::Unknown`](crate::handover::CallOutcome::Unknown).
/// - A finished run returns its stored result; no request is sent.
/// - A paused run ([`AgentError::Paused`](crate::AgentError::Paused)) goes on once every
///   pending call has a decision, given here ([`RunOptions::decisions`], or a
///   [`Decisions`](crate::durable::Decisions) as `options`) or recorded before with
///   [`record_decisions`](crate::durable::record_decisions): approved calls run (edited ones
///   with the new arguments, which the transcript's call then shows), denied ones give
///   the model the reason as an error result, outside results are fed back; the turn's
///   other calls come from the ledger. The pause cost no LLM call, and the time it
///   lasted does not count toward the deadline. It may pause again.
///
/// `options` gives the resumed run its per-run inputs (state, cancellation, a deadline,
/// an observer, metadata, decisions); its history, thread and run id are ignored (the
/// checkpoint's are used). The result keeps the run's trace id.
///
/// # Errors
/// [`ResumeError::NoCheckpointStore`] without `.checkpoints(..)`;
/// [`ResumeError::UnknownRun`] when nothing is stored under `run_id`;
/// [`ResumeError::Unreadable`] when the checkpoint or the ledger cannot be read, or the
/// claim (the fenced save that makes the run this process's, before the ledger is read)
/// cannot be written;
/// [`ResumeError::Fenced`] when another process claimed the run between this one's read
/// and its claim (two resumes at once: one goes on, the other gets this);
/// [`ResumeError::Corrupt`] when they do not decode;
/// [`ResumeError::ConfigMismatch`] when the config's output schema, output mode or tools
/// (names and parameter schemas) differ from the run's, listing each difference;
/// [`ResumeError::NotPaused`] when decisions are given for a run that is not paused (it
/// finished, or a resume took its decisions already); [`ResumeError::Decisions`] when
/// they do not fit its pending calls (an unknown call id, a pending call without a
/// decision, a decision of the wrong kind, edited arguments that do not validate),
/// listing each problem. In each case nothing is sent, and nothing is written but the
/// claim (the stored state unchanged, under this process's writer token) when the
/// ledger read after it fails.
pub async fn resume_agent_with<T: AgentOutput>(
    config: &AgentConfig<T>,
    run_id: &str,
    options: impl Into<RunOptions>,
) -> Result<AgentResult<T>, ResumeError> {
    match take_over(config, run_id, options.into()).await? {
        TakenOver::Finished(result) => Ok(*result),
        TakenOver::Running(going) => {
            let GoingOn {
                input,
                options,
                resumed,
            } = *going;
            Ok(super::entry::run(config, input, options, None, Some(resumed)).await)
        }
    }
}

/// What a resume found: a finished run's result, or a run this process took over,
/// ready to go on.
pub(super) enum TakenOver<T> {
    Finished(Box<AgentResult<T>>),
    Running(Box<GoingOn>),
}

/// A run taken over, and what it goes on with.
pub(super) struct GoingOn {
    pub(super) input: crate::content::Input,
    pub(super) options: RunOptions,
    pub(super) resumed: Box<Resumed>,
}

/// Everything [`resume_agent_with`] does before the run goes on: reads and checks the
/// checkpoint, takes the decisions, claims the run and reads its ledger.
///
/// # Errors
/// As [`resume_agent_with`].
pub(super) async fn take_over<T: AgentOutput>(
    config: &AgentConfig<T>,
    run_id: &str,
    mut options: RunOptions,
) -> Result<TakenOver<T>, ResumeError> {
    let given = std::mem::take(&mut options.decisions);
    let cfg: &Compiled<T> = &config.inner;
    let store = cfg
        .stores
        .checkpoints
        .clone()
        .ok_or(ResumeError::NoCheckpointStore)?;
    let limit = cfg.stores.timeout;
    let unreadable = |error| ResumeError::Unreadable {
        run_id: run_id.to_owned(),
        error,
    };
    let corrupt = |message: String| ResumeError::Corrupt {
        run_id: run_id.to_owned(),
        message,
    };
    let record = bounded(limit, || store.load(run_id))
        .await
        .map_err(unreadable)?
        .ok_or_else(|| ResumeError::UnknownRun {
            run_id: run_id.to_owned(),
        })?;
    let header: Header = serde_json::from_str(&record.header)
        .map_err(|e| corrupt(format!("the header does not decode: {e}")))?;
    if header.format != FORMAT {
        return Err(corrupt(format!(
            "format {} (this version reads {FORMAT})",
            header.format
        )));
    }
    let differences = differences::<T>(cfg, &header);
    if !differences.is_empty() {
        return Err(ResumeError::ConfigMismatch {
            run_id: run_id.to_owned(),
            differences,
        });
    }
    if header.fingerprint != cfg.fingerprint {
        tracing::warn!(
            run_id,
            stored = %header.fingerprint,
            current = %cfg.fingerprint,
            "resuming with a config whose fingerprint differs (same output and tools)"
        );
    }
    if record.finished {
        if !given.is_empty() {
            return Err(ResumeError::NotPaused {
                run_id: run_id.to_owned(),
            });
        }
        let finished: Finished<'static> = serde_json::from_str(&record.state)
            .map_err(|e| corrupt(format!("the result does not decode: {e}")))?;
        let result = rebuild(cfg, finished).map_err(corrupt)?;
        return Ok(TakenOver::Finished(Box::new(result)));
    }
    let mut snapshot = Snapshot::from_text(&record.state).map_err(corrupt)?;
    // The agent and the model the run had: both must still be in the config.
    let moved = moved_away(cfg, &snapshot);
    if !moved.is_empty() {
        return Err(ResumeError::ConfigMismatch {
            run_id: run_id.to_owned(),
            differences: moved,
        });
    }
    // An edit is checked as the tool's arguments, and by the tool guardrails, which
    // judged the call before it waited: an edit they would change or deny is refused
    // here, never changed after the approval (C51).
    let validate = |tool: &str, arguments: &Value| -> Result<(), String> {
        let compiled = cfg
            .table
            .get(tool)
            .ok_or_else(|| format!("the config has no tool {tool}"))?;
        compiled
            .validator
            .validate(arguments)
            .map_err(|e| e.to_string())?;
        let call = crate::message::ToolCall::new("edit", tool, arguments.clone());
        match before_tool(&cfg.hooks.guardrails.tool, &call) {
            Before::Run => Ok(()),
            Before::Replaced(arguments, name) => Err(format!(
                "the tool guardrail {name} would run the call with other arguments \
                 ({arguments}): approve those, or edit within its rules"
            )),
            Before::Deny(name, message) => Err(format!(
                "the tool guardrail {name} denies these arguments: {message}"
            )),
            Before::Trip(name, reason) => Err(format!(
                "the tool guardrail {name} trips on these arguments: {reason}"
            )),
        }
    };
    super::durable::pause::take_decisions(run_id, &mut snapshot, given, validate)?;
    // The claim: the same checkpoint under this process's writer token, fenced on the
    // seq just read, so that of two processes resuming at once exactly one goes on.
    // The ledger is read after it: an entry another process wrote before it is seen.
    let writer = new_writer();
    let taken_at = record.seq;
    let claim = CheckpointRecord {
        seq: taken_at + 1,
        writer: writer.clone(),
        updated_at_ms: now_ms(),
        lease_until_ms: super::durable::lease::lease_from_now(
            options.lease.unwrap_or(super::durable::lease::LEASE),
        ),
        ..record
    };
    match bounded(limit, || store.save_fenced(&claim, taken_at)).await {
        Ok(SaveOutcome::Saved) => {}
        Ok(_) => {
            return Err(ResumeError::Fenced {
                run_id: run_id.to_owned(),
            });
        }
        Err(error) => return Err(unreadable(error)),
    }
    let ledger = bounded(limit, || store.ledger(run_id))
        .await
        .map_err(unreadable)?;
    options.thread.clone_from(&header.thread);
    options.run_id = Some(run_id.to_owned());
    options.history = Vec::new();
    let input = crate::content::Input::text(header.input.clone());
    let resumed = Resumed {
        header,
        snapshot,
        ledger,
        seq: claim.seq,
        writer,
    };
    Ok(TakenOver::Running(Box::new(GoingOn {
        input,
        options,
        resumed: Box::new(resumed),
    })))
}

/// Where the run had gone that the config no longer goes: the agents of its handoffs,
/// and the model of its current agent it had switched to.
fn moved_away<T>(cfg: &Compiled<T>, snapshot: &Snapshot) -> Vec<ConfigDifference> {
    let state = &snapshot.state;
    let empty = std::sync::Arc::default();
    match super::agents::handoff::agent_at(cfg, &state.handoffs, &empty) {
        Err(agent) => vec![ConfigDifference::HandoffRemoved { agent }],
        Ok((agent, _)) if state.route >= agent.models.len() => {
            vec![ConfigDifference::ModelRemoved { route: state.route }]
        }
        Ok(_) => Vec::new(),
    }
}

/// How the config differs from the checkpoint's run, output first, then tools by name.
fn differences<T: AgentOutput>(cfg: &Compiled<T>, header: &Header) -> Vec<ConfigDifference> {
    let mut out = Vec::new();
    let schema = T::output_tool().map(|d| d.parameters);
    if schema != header.output_schema {
        out.push(ConfigDifference::OutputSchema {
            stored: header.output_schema.clone(),
            current: schema,
        });
    }
    let mode = cfg.output.mode();
    if mode != header.output_mode {
        out.push(ConfigDifference::OutputMode {
            stored: header.output_mode,
            current: mode,
        });
    }
    let stored: BTreeMap<&str, &Value> =
        header.tools.iter().map(|(n, p)| (n.as_str(), p)).collect();
    let current_tools = cfg.tool_signatures();
    let current: BTreeMap<&str, &Value> =
        current_tools.iter().map(|(n, p)| (n.as_str(), p)).collect();
    // A checkpoint written before tool sources were left out of headers may list a
    // source's tools: those are not differences.
    let from_sources = cfg.source_tool_names();
    for (name, params) in &stored {
        if !current.contains_key(name) && from_sources.contains(name) {
            continue;
        }
        match current.get(name) {
            None => out.push(ConfigDifference::ToolRemoved {
                name: (*name).to_owned(),
            }),
            Some(now) if now != params => out.push(ConfigDifference::ToolParameters {
                name: (*name).to_owned(),
            }),
            Some(_) => {}
        }
    }
    for name in current.keys() {
        if !stored.contains_key(name) {
            out.push(ConfigDifference::ToolAdded {
                name: (*name).to_owned(),
            });
        }
    }
    out
}

/// A finished run's stored result as an [`AgentResult`].
fn rebuild<T: AgentOutput>(
    cfg: &Compiled<T>,
    f: Finished<'static>,
) -> Result<AgentResult<T>, String> {
    let outcome = if f.ok {
        Ok(value_of::<T>(cfg, &f.output)?)
    } else {
        Err(f
            .error
            .map(Cow::into_owned)
            .ok_or("a failed run without its error")?)
    };
    Ok(AgentResult {
        agent: cfg.name.clone(),
        outcome,
        output: f.output.into_owned(),
        trace_id: f.trace_id.into_owned(),
        usage: f.usage,
        scores: f.scores.map(Cow::into_owned),
        duration: Duration::from_millis(f.duration_ms),
        transcript: f.transcript.into_owned(),
        handover: f.handover.map(Cow::into_owned),
        partial: f.partial,
        customer_message: f.customer_message.into_owned(),
        store_failures: f.store_failures,
    })
}

/// The value a finished run answered with, from its stored output (which passed every
/// check when the run accepted it).
fn value_of<T: AgentOutput>(cfg: &Compiled<T>, output: &str) -> Result<T, String> {
    let mut value = match &cfg.output {
        OutputPlan::Text => {
            return T::from_text(output).ok_or_else(|| "the stored text is no answer".to_owned());
        }
        OutputPlan::Tool => serde_json::from_str::<Value>(output)
            .map_err(|e| format!("the stored answer is not JSON: {e}"))?,
        OutputPlan::Json(_) => match extract_json(output) {
            Extracted::Value(value) => value,
            _ => return Err("the stored answer holds no JSON".to_owned()),
        },
    };
    crate::validate::whole_numbers_as_integers(&mut value);
    T::from_arguments(&value).map_err(|e| format!("the stored answer does not decode: {e}"))
}
