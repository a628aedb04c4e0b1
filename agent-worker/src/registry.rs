//! [`Registry`]: the agents a worker can run, by name, and how one run becomes a stored
//! record.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_core::providers::{BatchGate, BatchSeat};
use agent_core::store::RunRecord;
use agent_core::{
    AgentConfig, AgentError, AgentOutput, AgentResult, Category, Ending, RunOptions, Value,
    durable::{CheckpointStore, ResumeError, resume_agent_with},
    handover::CallOutcome,
    run_agent_with,
};
use serde_json::json;

use crate::error::QueueError;
use crate::job::Job;

/// The metadata key holding the run's own trace id (the record's key is the run id).
pub const META_TRACE_ID: &str = "trace_id";
/// The metadata key saying whether the answer was partial (`true` / `false`).
pub const META_PARTIAL: &str = "partial";
/// The metadata key holding the run's failed store calls (a count).
pub const META_STORE_FAILURES: &str = "store_failures";
/// The metadata key holding which delivery of the job ran (1 for the first; set by the
/// worker, absent in process).
pub const META_DELIVERY: &str = "delivery";
/// The metadata key holding the config's `max_llm_calls`.
pub const META_MAX_LLM_CALLS: &str = "max_llm_calls";
/// The metadata key saying whether this delivery continued the run from its checkpoint
/// (`true`) or started it (`false`); only with a checkpoint store.
pub const META_RESUMED: &str = "resumed";
/// The metadata key listing the tools (comma-separated, in call order) of the calls
/// whose outcome is unknown (an irreversible call interrupted mid-flight; see
/// `docs/durable.md`, "The ledger"), from the run's hand-over; absent when none.
pub const META_OUTCOME_UNKNOWN: &str = "outcome_unknown";
/// The metadata key of a run that could not be resumed: the [`ResumeError`] kind
/// (`corrupt`, `config_mismatch`, `not_paused`, `decisions`); the record then ends
/// `failed` with category `invalid_run` and the error's text.
pub const META_RESUME_ERROR: &str = "resume_error";

type RecordFuture<'a> = Pin<Box<dyn Future<Output = Result<RunRecord, QueueError>> + Send + 'a>>;

/// One registered agent, its output type erased.
trait Runnable: Send + Sync {
    /// Runs `job`, its calls to a batched model waiting at `seat`'s gate when given.
    fn run<'a>(
        &'a self,
        job: &'a Job,
        lease: Option<Duration>,
        seat: Option<BatchSeat>,
    ) -> RecordFuture<'a>;

    /// A new provider batch gate for this agent's runs when its config has
    /// `.provider_batch(..)` ([`AgentConfig::batch_gate`]).
    fn batch_gate(&self) -> Option<BatchGate>;

    /// This agent checkpointing into `store` when its config has no checkpoint store
    /// of its own; `None` when it has one.
    fn checkpointed(&self, store: &Arc<dyn CheckpointStore>) -> Option<Arc<dyn Runnable>>;

    /// The config's name ([`AgentConfig::name`]).
    fn agent_name(&self) -> &str;
}

impl<T: AgentOutput + Sync> Runnable for AgentConfig<T> {
    fn run<'a>(
        &'a self,
        job: &'a Job,
        lease: Option<Duration>,
        seat: Option<BatchSeat>,
    ) -> RecordFuture<'a> {
        Box::pin(async move {
            let started_at_ms = now_ms();
            let (result, resumed) = match resume_or_start(self, job, lease, seat).await {
                Ok(ran) => ran,
                Err(Unresumable::Fenced) => {
                    return Err(QueueError::Fenced {
                        run_id: job.run_id.clone(),
                    });
                }
                Err(Unresumable::Unreadable(error)) => return Err(QueueError::Store(error)),
                Err(Unresumable::Waiting(waiting_on)) => {
                    return Err(QueueError::Waiting {
                        run_id: job.run_id.clone(),
                        waiting_on,
                    });
                }
                Err(Unresumable::Failed(error)) => {
                    return resume_failure(self, job, &error, started_at_ms);
                }
            };
            if let Err(AgentError::Fenced { .. }) = &result.outcome {
                return Err(QueueError::Fenced {
                    run_id: job.run_id.clone(),
                });
            }
            let mut record = record_of(self, job, &result, started_at_ms)?;
            if let Some(resumed) = resumed {
                record
                    .metadata
                    .insert(META_RESUMED.to_owned(), resumed.to_string());
            }
            Ok(record)
        })
    }

    fn checkpointed(&self, store: &Arc<dyn CheckpointStore>) -> Option<Arc<dyn Runnable>> {
        if self.has_checkpoints() {
            return None;
        }
        match self.with_(|b| b.checkpoints(Arc::clone(store))) {
            Ok(config) => Some(Arc::new(config)),
            Err(error) => {
                // Not expected: a store adds no constraint a built config could fail.
                tracing::warn!(agent = self.name(), error = %error, "cannot add the worker's checkpoint store; its runs are not durable");
                None
            }
        }
    }

    fn agent_name(&self) -> &str {
        self.name()
    }

    fn batch_gate(&self) -> Option<BatchGate> {
        AgentConfig::batch_gate(self)
    }
}

/// Why a delivery could not continue its run.
enum Unresumable {
    /// Another process has the run (its claim came first).
    Fenced,
    /// The checkpoint store could not be read (or the claim written): try later.
    Unreadable(agent_core::store::StoreError),
    /// The run is paused and these pending calls (their ids) have no decision yet:
    /// nothing to do until they do.
    Waiting(Vec<String>),
    /// The checkpoint cannot be continued with this config (or does not decode): a
    /// stored failure.
    Failed(ResumeError),
}

/// Continues the job's run from its checkpoint, or starts it (under the job's run id)
/// when it has none or the config has no checkpoint store; either way with `seat`, the
/// run's place at its agent's provider batch gate. Returns the result and, with a
/// checkpoint store, whether it was resumed.
async fn resume_or_start<T: AgentOutput + Sync>(
    config: &AgentConfig<T>,
    job: &Job,
    lease: Option<Duration>,
    seat: Option<BatchSeat>,
) -> Result<(AgentResult<T>, Option<bool>), Unresumable> {
    let mut base = RunOptions::new().run_id(job.run_id.clone());
    if let Some(lease) = lease {
        base = base.lease(lease);
    }
    if let Some(seat) = seat {
        base = base.batch_seat(seat);
    }
    let options = || base.clone();
    match resume_agent_with(config, &job.run_id, options()).await {
        Ok(result) => return Ok((result, Some(true))),
        Err(ResumeError::NoCheckpointStore) => {
            let result = run_agent_with(config, job.input.as_str(), options()).await;
            return Ok((result, None));
        }
        Err(ResumeError::UnknownRun { .. }) => {}
        Err(error) => return Err(unresumable(error)),
    }
    let result = run_agent_with(config, job.input.as_str(), options()).await;
    // Refused before any request because the id has a checkpoint now: another delivery
    // started the run in the meantime. Take it over like any redelivery (the loser of
    // the two is fenced).
    if let Err(AgentError::InvalidRun { .. }) = &result.outcome
        && result.usage.llm_calls == 0
    {
        return match resume_agent_with(config, &job.run_id, options()).await {
            Ok(result) => Ok((result, Some(true))),
            Err(ResumeError::UnknownRun { .. }) => Ok((result, Some(false))),
            Err(error) => Err(unresumable(error)),
        };
    }
    Ok((result, Some(false)))
}

fn unresumable(error: ResumeError) -> Unresumable {
    use agent_core::durable::DecisionProblem;
    match error {
        // Only missing decisions: not a bad decision, a delivery before the reviewer.
        ResumeError::Decisions { problems, .. }
            if !problems.is_empty()
                && problems
                    .iter()
                    .all(|p| matches!(p, DecisionProblem::Missing { .. })) =>
        {
            Unresumable::Waiting(
                problems
                    .into_iter()
                    .filter_map(|p| match p {
                        DecisionProblem::Missing { call_id, .. } => Some(call_id),
                        _ => None,
                    })
                    .collect(),
            )
        }
        ResumeError::Fenced { .. } => Unresumable::Fenced,
        ResumeError::Unreadable { error, .. } => Unresumable::Unreadable(error),
        other => Unresumable::Failed(other),
    }
}

/// The record of a run that could not be resumed: ending `failed`, category
/// `invalid_run`, the error's text, and [`META_RESUME_ERROR`] naming its kind.
fn resume_failure<T: AgentOutput + Sync>(
    config: &AgentConfig<T>,
    job: &Job,
    error: &ResumeError,
    started_at_ms: u64,
) -> Result<RunRecord, QueueError> {
    let kind = match error {
        ResumeError::Corrupt { .. } => "corrupt",
        ResumeError::ConfigMismatch { .. } => "config_mismatch",
        ResumeError::NotPaused { .. } => "not_paused",
        ResumeError::Decisions { .. } => "decisions",
        _ => "other",
    };
    let metadata = BTreeMap::from([
        (META_RESUMED.to_owned(), "false".to_owned()),
        (META_RESUME_ERROR.to_owned(), kind.to_owned()),
        (META_STORE_FAILURES.to_owned(), "0".to_owned()),
        (META_PARTIAL.to_owned(), "false".to_owned()),
        (
            META_MAX_LLM_CALLS.to_owned(),
            config.max_llm_calls().to_string(),
        ),
    ]);
    let value = json!({
        "trace_id": job.run_id,
        "agent": job.agent,
        "variant": config.variant(),
        "fingerprint": config.fingerprint(),
        "model": config.model(),
        "thread": null,
        "input": job.input,
        "output": "",
        "ending": Ending::Failed,
        "category": Category::InvalidRun.as_str(),
        "error": format!("cannot resume: {error}"),
        "usage": agent_core::usage::Usage::default(),
        "scores": null,
        "duration_ms": now_ms().saturating_sub(started_at_ms),
        "started_at_ms": started_at_ms,
        "metadata": metadata,
    });
    serde_json::from_value(value).map_err(|e| {
        QueueError::invalid(format!(
            "the run record of {} does not encode: {e}",
            job.run_id
        ))
    })
}

/// Agent configs by name: what a worker (or an in-process pipeline) can run.
///
/// Configs are code (an LLM client, tools, a typed output), so a worker process
/// registers them at start-up; a job names one. Every process that serves a queue should
/// register the same configs under the same names.
#[derive(Clone, Default)]
pub struct Registry {
    agents: BTreeMap<String, Arc<dyn Runnable>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// No agents.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `config` under its own name ([`AgentConfig::name`]), replacing any
    /// config registered under that name.
    #[must_use]
    pub fn with<T: AgentOutput + Sync>(self, config: AgentConfig<T>) -> Self {
        let name = config.name().to_owned();
        self.with_name(name, config)
    }

    /// Registers `config` under `name`.
    #[must_use]
    pub fn with_name<T: AgentOutput + Sync>(
        mut self,
        name: impl Into<String>,
        config: AgentConfig<T>,
    ) -> Self {
        self.agents.insert(name.into(), Arc::new(config));
        self
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }

    /// Whether `agent` is registered.
    pub fn contains(&self, agent: &str) -> bool {
        self.agents.contains_key(agent)
    }

    /// Every agent whose config has no checkpoint store of its own checkpoints into
    /// `store` from now on (`AgentConfig::with_` adding `.checkpoints(store)`); configs
    /// with one keep theirs. What a [`Worker`](crate::Worker) does with its own store
    /// unless [`WorkerOptions::checkpoints`](crate::WorkerOptions::checkpoints) is off
    /// (C62: a queued job is durable whatever its config says).
    #[must_use]
    pub fn with_default_checkpoints(mut self, store: &Arc<dyn CheckpointStore>) -> Self {
        for runnable in self.agents.values_mut() {
            if let Some(durable) = runnable.checkpointed(store) {
                *runnable = durable;
            }
        }
        self
    }

    /// The name a job uses for the agent whose config is named `agent`
    /// ([`AgentConfig::name`]): `agent` itself when registered under it, else the first
    /// name (sorted) whose config has that name. What a sweeper puts on a job for an
    /// unfinished run, whose checkpoint holds the config's name.
    pub fn name_of(&self, agent: &str) -> Option<&str> {
        if let Some((name, _)) = self.agents.get_key_value(agent) {
            return Some(name);
        }
        self.agents
            .iter()
            .find(|(_, runnable)| runnable.agent_name() == agent)
            .map(|(name, _)| name.as_str())
    }

    /// Runs `job` on its agent under the job's run id and returns the record to store
    /// (keyed by the run id; see [`record_of`]). The run's own failure is the record's
    /// ending, not an error.
    ///
    /// With a checkpoint store in the agent's config, the job's run is first continued
    /// from its checkpoint ([`resume_agent_with`]): a redelivered job whose worker died
    /// mid-run does not run its finished tool calls again, and an irreversible call
    /// interrupted mid-flight is `outcome unknown` ([`META_OUTCOME_UNKNOWN`]). Only
    /// [`ResumeError::UnknownRun`] (no checkpoint: the run never got to its first one)
    /// starts it. A checkpoint that does not decode or does not fit the config
    /// (`Corrupt`, `ConfigMismatch`, ...) is a stored failure, never a silent re-run:
    /// ending `failed`, category `invalid_run`, the error's text and
    /// [`META_RESUME_ERROR`]. [`META_RESUMED`] says which it was.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] when no agent has the job's name, or the record does not
    /// encode; [`QueueError::Store`] when the checkpoint store cannot be read (the job
    /// should be tried again later); [`QueueError::Fenced`] when another process has the
    /// run (its resume claimed it first, or it took the run over from this one mid-run:
    /// [`AgentError::Fenced`]): that process stores the record, so this one must not.
    pub async fn run(&self, job: &Job) -> Result<RunRecord, QueueError> {
        self.run_seated(job, None, None).await
    }

    /// [`run`](Self::run) with the run's lease ([`RunOptions::lease`]) and its seat at
    /// the agent's provider batch gate ([`RunOptions::batch_seat`]).
    pub(crate) async fn run_seated(
        &self,
        job: &Job,
        lease: Option<Duration>,
        seat: Option<BatchSeat>,
    ) -> Result<RunRecord, QueueError> {
        let agent = self.agents.get(&job.agent).ok_or_else(|| {
            QueueError::invalid(format!("no agent is registered as {:?}", job.agent))
        })?;
        agent.run(job, lease, seat).await
    }

    /// A new provider batch gate for the runs of the agent registered as `agent` when
    /// its config has `.provider_batch(..)`; `None` otherwise or when not registered.
    pub(crate) fn batch_gate(&self, agent: &str) -> Option<BatchGate> {
        self.agents.get(agent)?.batch_gate()
    }
}

/// The stored form of one run: agent-core's [`RunRecord`] with the **run id** as its
/// key (`trace_id`), and in its metadata what a receipt needs beyond it: the run's own
/// trace id ([`META_TRACE_ID`]), whether the answer was partial ([`META_PARTIAL`]), its
/// failed store calls ([`META_STORE_FAILURES`]), the config's cap
/// ([`META_MAX_LLM_CALLS`]) and, when the hand-over lists calls whose outcome is unknown,
/// their tools ([`META_OUTCOME_UNKNOWN`]). `output` is the final text parsed as JSON when it is a JSON
/// object or array (a submitted value), else the text as a JSON string.
///
/// # Errors
/// [`QueueError::Invalid`] if the record does not encode (not expected: it is built
/// from agent-core's own types).
pub fn record_of<T: AgentOutput + Sync>(
    config: &AgentConfig<T>,
    job: &Job,
    result: &AgentResult<T>,
    started_at_ms: u64,
) -> Result<RunRecord, QueueError> {
    let output = match serde_json::from_str::<Value>(&result.output) {
        Ok(v @ (Value::Object(_) | Value::Array(_))) => v,
        _ => Value::String(result.output.clone()),
    };
    let mut metadata = BTreeMap::from([
        (META_TRACE_ID.to_owned(), result.trace_id.clone()),
        (META_PARTIAL.to_owned(), result.is_partial().to_string()),
        (
            META_STORE_FAILURES.to_owned(),
            result.store_failures.to_string(),
        ),
        (
            META_MAX_LLM_CALLS.to_owned(),
            config.max_llm_calls().to_string(),
        ),
    ]);
    let unknown: Vec<&str> = result
        .handover
        .iter()
        .flat_map(|h| &h.calls)
        .filter(|c| matches!(c.outcome, CallOutcome::Unknown(_)))
        .map(|c| c.tool.as_str())
        .collect();
    if !unknown.is_empty() {
        metadata.insert(META_OUTCOME_UNKNOWN.to_owned(), unknown.join(","));
    }
    let duration_ms = u64::try_from(result.duration.as_millis()).unwrap_or(u64::MAX);
    // RunRecord is non-exhaustive: it is built through its serde form.
    let value = json!({
        "trace_id": job.run_id,
        "agent": job.agent,
        "variant": config.variant(),
        "fingerprint": config.fingerprint(),
        "model": config.model(),
        "thread": null,
        "input": job.input,
        "output": output,
        "ending": result.ending(),
        "category": result.category(),
        "error": result.outcome.as_ref().err().map(ToString::to_string),
        "usage": result.usage,
        "scores": result.scores,
        "duration_ms": duration_ms,
        "started_at_ms": started_at_ms,
        "metadata": metadata,
    });
    serde_json::from_value(value).map_err(|e| {
        QueueError::invalid(format!(
            "the run record of {} does not encode: {e}",
            job.run_id
        ))
    })
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The next step's input from a record's output: a string as it is, any other value as
/// JSON text.
pub(crate) fn output_text(record: &RunRecord) -> String {
    match &record.output {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
