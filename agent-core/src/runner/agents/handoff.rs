//! Handoffs: a turn that calls `transfer_to_{name}` hands the conversation to that
//! agent, which goes on in the same run (its system prompt, model, tools, output mode
//! and limits; the run's usage, counters, deadline and transcript so far). The run
//! keeps the names of the agents it was handed to in its state, so that a resumed run
//! goes on with the agent it had ([`agent_at`]).

use std::sync::Arc;

use crate::config::{Compiled, Handoff};
use crate::message::{ToolCall, ToolResult};
use crate::tool::StateMap;

/// A turn's calls with its transfers taken out.
pub(crate) struct Transfers {
    /// The answer to each transfer call: the first transfers, any other is an error.
    pub(crate) answers: Vec<ToolResult>,
    /// The index (in the agent's handoffs) of the first transfer.
    pub(crate) target: Option<usize>,
    /// The turn's other calls, in order.
    pub(crate) rest: Vec<ToolCall>,
}

/// Whether any of `calls` is a transfer of `handoffs`.
pub(crate) fn any_transfer<T>(handoffs: &[Handoff<T>], calls: &[ToolCall]) -> bool {
    !handoffs.is_empty()
        && calls
            .iter()
            .any(|c| handoffs.iter().any(|h| h.tool_name == c.name))
}

/// Splits a turn's `calls` into its transfers (answered) and the rest.
pub(crate) fn split<T>(handoffs: &[Handoff<T>], calls: &[ToolCall]) -> Transfers {
    let index = |name: &str| handoffs.iter().position(|h| h.tool_name == name);
    let (transfers, rest): (Vec<&ToolCall>, Vec<&ToolCall>) =
        calls.iter().partition(|c| index(&c.name).is_some());
    let mut answers = Vec::with_capacity(transfers.len());
    let mut target = None;
    for call in &transfers {
        match (target, index(&call.name)) {
            (None, Some(i)) => {
                target = Some(i);
                let to = handoffs[i].config.inner.name.as_str();
                answers.push(ToolResult::ok(
                    &call.id,
                    &call.name,
                    format!("Transferred to the {to} agent."),
                ));
            }
            _ => answers.push(ToolResult::error(
                &call.id,
                &call.name,
                "not done: one transfer per turn, and this turn transferred already",
            )),
        }
    }
    Transfers {
        answers,
        target,
        rest: rest.into_iter().cloned().collect(),
    }
}

/// The application state after a handoff to `target`: the run's, with the target's own
/// added (the target's wins for a type both have).
pub(crate) fn merged_state<T>(run: &Arc<StateMap>, target: &Compiled<T>) -> Arc<StateMap> {
    if target.state.is_empty() {
        return Arc::clone(run);
    }
    let mut merged = (**run).clone();
    merged.extend((*target.state).clone());
    Arc::new(merged)
}

/// The agent that has the conversation after the handoffs `path` (agent names, in
/// order) from `root`, with the application state the run had then.
///
/// # Errors
/// The name of the first agent of `path` the config no longer hands off to.
pub(crate) fn agent_at<'c, T>(
    root: &'c Compiled<T>,
    path: &[String],
    app: &Arc<StateMap>,
) -> Result<(&'c Compiled<T>, Arc<StateMap>), String> {
    let mut agent = root;
    let mut state = Arc::clone(app);
    for name in path {
        let next = agent
            .handoffs
            .iter()
            .find(|h| h.config.inner.name == *name)
            .ok_or_else(|| name.clone())?;
        agent = &next.config.inner;
        state = merged_state(&state, agent);
    }
    Ok((agent, state))
}
