//! The provider's own tool search (`ToolSearch::prefer_native`): whether an LLM call
//! uses it (the model's client sends one, and the call is not batched), what the
//! request asks of it (`NativeToolSearch`), and what a turn's provider searches did
//! to the run: each one a tool call, its tools revealed as the local search's are
//! (`RunState::revealed`, a `ToolsRevealed` event).

use std::sync::Arc;

use crate::llm::{NativeToolSearch, ProviderSearches};
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::tool::ToolDefinition;

use super::run::Run;

impl<'c, T: AgentOutput> Run<'c, T> {
    /// Whether the next LLM call uses the provider's tool search: the config prefers
    /// it, the model's client sends one for the model, and the call is not one of a
    /// batched `run_batch` (a batch job goes without the beta header).
    pub(super) fn uses_native_search(&self) -> bool {
        if !self.agent.tool_search.as_ref().is_some_and(|p| p.native) {
            return false;
        }
        let model = self.model();
        let batched = self.emit.stream.is_none()
            && self
                .inputs
                .batch
                .as_deref()
                .is_some_and(|seat| model.batch.as_ref().is_some_and(|wire| seat.serves(wire)));
        !batched && model.client.native_tool_search(&model.wire_model)
    }

    /// What the request asks of the provider's search, for the call's `tools`: the
    /// user tools among them but the always-on are searchable; the run's revealed set.
    /// `None` when none is searchable (a wrap-up turn offers the answer tools alone).
    pub(super) fn native_request(&self, tools: &[ToolDefinition]) -> Option<Arc<NativeToolSearch>> {
        let plan = self.agent.tool_search.as_ref()?;
        let table = &self.live.table;
        let searchable = tools
            .iter()
            .filter(|d| table.index.contains_key(&d.name) && !plan.is_always_on(&d.name))
            .map(|d| d.name.clone())
            .collect::<Vec<_>>();
        if searchable.is_empty() {
            return None;
        }
        let search = NativeToolSearch::new(searchable, self.state.revealed.iter().cloned());
        Some(Arc::new(search))
    }

    /// Takes a turn's provider searches: each counts as a tool call (toward
    /// `max_tool_calls`); the tools they returned that the run had not revealed are
    /// added to its revealed set, in the order returned, with one `ToolsRevealed`
    /// event. A name no tool of the table has is left out, with a warning that gives
    /// only how many (never the names: they are the provider's text).
    pub(super) fn on_provider_searches(&mut self, found: &ProviderSearches) {
        if found.is_empty() {
            return;
        }
        self.state.usage.tool_calls = self.state.usage.tool_calls.saturating_add(found.searches);
        let table = Arc::clone(&self.live.table);
        let mut new = Vec::new();
        let mut unknown = 0usize;
        for name in &found.revealed {
            if !table.index.contains_key(name) {
                unknown += 1;
            } else if !self.state.revealed.contains(name) && !new.contains(name) {
                new.push(name.clone());
            }
        }
        if unknown > 0 {
            tracing::warn!(
                unknown,
                "the provider's tool search returned tools the config does not have; \
                 they are ignored"
            );
        }
        if new.is_empty() {
            return;
        }
        self.state.revealed.extend(new.iter().cloned());
        tracing::info!(tools = ?new, "the provider's tool search revealed tools");
        self.emit.emit(&RunEvent::ToolsRevealed {
            trace_id: &self.inputs.trace_id,
            llm_call: self.state.usage.llm_calls,
            tools: &new,
        });
    }
}
