//! [`replay`]: a stored run's input run again on a config.

use crate::config::AgentConfig;
use crate::output::AgentOutput;
use crate::result::AgentResult;
use crate::run_options::RunOptions;
use crate::store::{StoreError, TraceStore};

/// Runs a stored run's input again on `config` (a `with_` variant, another model, a new
/// prompt) with the same messages before it: the stored history (the thread's messages
/// as they were, then the run's own history) and metadata, plus
/// `replay_of = TRACE_ID`. The replay names no thread, so it neither reads nor extends
/// the thread's memory; it is recorded like any run of `config`.
///
/// # Errors
/// [`StoreError::NotFound`] when no trace has this id; another [`StoreError`] when the
/// store cannot be read. The run itself never errors here: its outcome is in the result.
pub async fn replay<T: AgentOutput>(
    store: &dyn TraceStore,
    trace_id: &str,
    config: &AgentConfig<T>,
) -> Result<AgentResult<T>, StoreError> {
    let Some(trace) = store.trace(trace_id).await? else {
        return Err(StoreError::not_found(format!("trace {trace_id}")));
    };
    let mut options = RunOptions::new().history(trace.history);
    for (key, value) in trace.metadata {
        options = options.metadata(key, value);
    }
    options = options.metadata("replay_of", trace_id);
    Ok(crate::runner::run_agent_with(config, trace.input, options).await)
}
