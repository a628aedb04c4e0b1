//! Tool search (see `ToolSearch`): the tools an LLM call offers with it on (the search
//! tool, the always-on tools, the tools revealed so far), and the answers to the
//! model's `search_tools` calls, which reveal tools for the rest of the run (kept in
//! `RunState::revealed`, so a checkpoint keeps them).

use std::sync::Arc;
use std::time::Instant;

use crate::config::{SEARCH_TOOLS, SearchPlan, ToolTable};
use crate::message::{Message, ToolCall, ToolResult};
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::tool::ToolDefinition;

use super::run::Run;
use super::tools::correction;

/// The longest tool description a search result shows (bytes, cut at a char boundary).
const DESCRIPTION_BYTES: usize = 200;

/// How many searchable tools a search that matches nothing names, as examples.
const EXAMPLES: usize = 10;

impl<'c, T: AgentOutput> Run<'c, T> {
    /// The tools offered in an ordinary turn with tool search on: the always-on and
    /// revealed user tools of `table` (in table order; those `tools_for` keeps), then
    /// `search_tools`, then the runner's own (`submit_output`, `escalate_to_human`,
    /// transfers). Without `tools_for`, the set is one `Arc` until a reveal or a new
    /// table changes it.
    pub(super) fn searched_offer(
        &mut self,
        table: &Arc<ToolTable>,
        plan: &SearchPlan,
    ) -> Arc<[ToolDefinition]> {
        let revealed = self.state.revealed.len();
        let filtered = self.agent.hooks.tools_for.is_some();
        if !filtered
            && let Some((at, of, offer)) = self.live.searched.as_deref()
            && *at == revealed
            && Arc::ptr_eq(of, table)
        {
            return Arc::clone(offer);
        }
        let view = self.view(self.state.usage.llm_calls.saturating_add(1));
        let visible = table.tools.iter().map(|t| &t.definition).filter(|d| {
            (plan.is_always_on(&d.name) || self.state.revealed.contains(&d.name))
                && (!filtered || self.keeps(&view, d))
        });
        let own = table.offered.get(table.tools.len()..).unwrap_or_default();
        let offer: Arc<[ToolDefinition]> = visible
            .chain(std::iter::once(&plan.definition))
            .chain(own)
            .cloned()
            .collect::<Vec<_>>()
            .into();
        if !filtered {
            let kept = (revealed, Arc::clone(table), Arc::clone(&offer));
            self.live.searched = Some(Box::new(kept));
        }
        offer
    }

    /// Answers the turn's `search_tools` calls (`ran`: whether they run; not when the
    /// run ended in their turn) and adds the answers to the turn's tool results: each
    /// search counts as a tool call (toward `max_tool_calls`), and reveals its matches.
    pub(super) fn answer_searches(&mut self, searches: &[ToolCall], ran: bool) {
        let Some(plan) = self.agent.tool_search.as_ref() else {
            return;
        };
        let mut answers = Vec::with_capacity(searches.len());
        for call in searches {
            let started = Instant::now();
            let limit = self.agent.limits.max_tool_calls;
            let result = if !ran {
                ToolResult::error(
                    &call.id,
                    &call.name,
                    format!("{SEARCH_TOOLS} was not run: the run ended in this turn"),
                )
            } else if self.state.usage.tool_calls >= limit {
                let text = correction::tool_limit(limit, &self.agent.output);
                ToolResult::error(&call.id, &call.name, text)
            } else {
                self.state.usage.tool_calls += 1;
                self.search(call, plan)
            };
            self.emit.emit(&RunEvent::ToolFinished {
                trace_id: &self.inputs.trace_id,
                tool: &call.name,
                call_id: &call.id,
                is_error: result.is_error,
                duration: started.elapsed(),
            });
            answers.push(result);
        }
        self.add_to_turn(answers);
    }

    /// One search: its result, with the tools it revealed added to the run's.
    fn search(&mut self, call: &ToolCall, plan: &SearchPlan) -> ToolResult {
        if let Some(error) = &call.arguments_error {
            let text = correction::unusable_arguments(&call.name, error);
            return ToolResult::error(&call.id, &call.name, text);
        }
        let Some(query) = call.arguments.get("query").and_then(|q| q.as_str()) else {
            let text = format!(
                "{SEARCH_TOOLS} was not run: it needs {{\"query\": \"words for what the tool \
                 should do\"}}"
            );
            return ToolResult::error(&call.id, &call.name, text);
        };
        let table = self.table();
        let index = table.search_index(plan);
        let found = index.search(query, plan.max_results);
        if found.is_empty() {
            let examples: Vec<&str> = index
                .positions()
                .take(EXAMPLES)
                .filter_map(|at| table.tools.get(at))
                .map(|t| t.definition.name.as_str())
                .collect();
            let text = format!(
                "No tool matches {query:?}. Search again with other words: what the tool \
                 does, or what it works on. {} tools can be found; some of them: {}.",
                index.len(),
                examples.join(", ")
            );
            return ToolResult::ok(&call.id, &call.name, text);
        }
        let mut text = format!(
            "Found {} tools for {query:?}; you can call them from now on:",
            found.len()
        );
        let mut new = Vec::new();
        for tool in found.iter().filter_map(|at| table.tools.get(*at)) {
            let def = &tool.definition;
            let line = def.description.lines().next().unwrap_or_default();
            let mut cut = line.len().min(DESCRIPTION_BYTES);
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            text.push_str(&format!("\n- {}: {}", def.name, &line[..cut]));
            if !self.state.revealed.contains(&def.name) {
                self.state.revealed.push(def.name.clone());
                new.push(def.name.clone());
            }
        }
        if !new.is_empty() {
            tracing::info!(tools = ?new, "tool search revealed tools");
            self.emit.emit(&RunEvent::ToolsRevealed {
                trace_id: &self.inputs.trace_id,
                llm_call: self.state.usage.llm_calls,
                tools: &new,
            });
        }
        ToolResult::ok(&call.id, &call.name, text)
    }

    /// Adds `answers` to the tool results of the turn that made their calls: the
    /// message after that turn's assistant message (made when there is none). Answers
    /// whose turn is no longer in the transcript (a handoff's history filter dropped
    /// it) are left out.
    fn add_to_turn(&mut self, answers: Vec<ToolResult>) {
        let Some(first) = answers.first() else {
            return;
        };
        let messages = &mut self.state.messages;
        let turn = messages.iter().rposition(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().any(|c| c.id == first.call_id)
            }
            _ => false,
        });
        let Some(turn) = turn else {
            return;
        };
        match messages.get_mut(turn + 1) {
            Some(Message::Tool { results }) => results.extend(answers),
            _ => messages.insert(turn + 1, Message::tool_results(answers)),
        }
    }
}
