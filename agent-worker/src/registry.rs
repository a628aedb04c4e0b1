//! [`Registry`]: the agents a worker can run, by name, and how one run becomes a stored
//! record.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_core::store::RunRecord;
use agent_core::{AgentConfig, AgentOutput, AgentResult, Value, run_agent};
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

type RecordFuture<'a> = Pin<Box<dyn Future<Output = Result<RunRecord, QueueError>> + Send + 'a>>;

/// One registered agent, its output type erased.
trait Runnable: Send + Sync {
    fn run<'a>(&'a self, job: &'a Job) -> RecordFuture<'a>;
}

impl<T: AgentOutput + Sync> Runnable for AgentConfig<T> {
    fn run<'a>(&'a self, job: &'a Job) -> RecordFuture<'a> {
        Box::pin(async move {
            let started_at_ms = now_ms();
            let result = run_agent(self, job.input.as_str()).await;
            record_of(self, job, &result, started_at_ms)
        })
    }
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

    /// Runs `job` on its agent and returns the record to store (keyed by the run id;
    /// see [`record_of`]). The run's own failure is the record's ending, not an error.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] when no agent has the job's name, or the record does not
    /// encode.
    pub async fn run(&self, job: &Job) -> Result<RunRecord, QueueError> {
        let agent = self.agents.get(&job.agent).ok_or_else(|| {
            QueueError::invalid(format!("no agent is registered as {:?}", job.agent))
        })?;
        agent.run(job).await
    }
}

/// The stored form of one run: agent-core's [`RunRecord`] with the **run id** as its
/// key (`trace_id`), and in its metadata what a receipt needs beyond it: the run's own
/// trace id ([`META_TRACE_ID`]), whether the answer was partial ([`META_PARTIAL`]), its
/// failed store calls ([`META_STORE_FAILURES`]) and the config's cap
/// ([`META_MAX_LLM_CALLS`]). `output` is the final text parsed as JSON when it is a JSON
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
    let metadata = BTreeMap::from([
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
