//! The state of one run: building it from the config and the run's options, the tools
//! offered per turn, and the bookkeeping of calls, events and cancellation.

use foldhash::{HashSet, HashSetExt};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crate::config::{Compiled, OutputPlan};
use crate::error::AgentError;
use crate::handover::{CallOutcome, CallRecord, RunState};
use crate::llm::LlmRequest;
use crate::message::{Message, ToolCall, ToolResult};
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::run_options::RunOptions;
use crate::stream::{EventSender, StreamEvent};
use crate::tool::ToolDefinition;
use crate::usage::Usage;
use tokio_util::sync::CancellationToken;

use super::Run;
use super::guard::Guard;
use super::trace::Observers;
use crate::error::panic_message;

impl<'c, T: AgentOutput> Run<'c, T> {
    pub(super) fn new(
        cfg: &'c Compiled<T>,
        trace_id: Arc<str>,
        input: String,
        options: RunOptions,
        events: Option<EventSender<T>>,
    ) -> Self {
        let s = &cfg.settings;
        let parent = super::child::parent_of(&options);
        let RunOptions {
            state: run_state,
            cancellation,
            deadline,
            observer,
            metadata: _,
            history,
            thread: _,
            run_id: _,
            decisions: _,
            parent: _,
        } = options;
        let mut request = LlmRequest::new(cfg.wire_model.clone());
        request.system = cfg.system_prompt.clone();
        request.prompt_cache = cfg.prompt_cache;
        if let OutputPlan::Json(spec) = &cfg.output {
            request.output = Some(Arc::clone(spec));
        }
        request.messages = history;
        request.messages.push(Message::user(input.clone()));
        let own_start = request.messages.len();
        request.tools = Arc::clone(&cfg.table.offered);
        request.max_tokens = s.budgets.max_tokens;
        request.temperature = s.budgets.temperature;
        request.reasoning = s.budgets.reasoning;
        let state = if run_state.is_empty() {
            Arc::clone(&cfg.state)
        } else {
            let mut merged = (*cfg.state).clone();
            merged.extend(run_state);
            Arc::new(merged)
        };
        let mut tokens: Vec<CancellationToken> =
            s.cancellation.iter().cloned().chain(cancellation).collect();
        if let Some(parent) = &parent {
            tokens.extend(parent.run.tokens.iter().cloned());
        }
        let pool = super::child::Pool::new(
            s.budgets.max_total_tokens,
            s.budgets.max_cost_usd,
            parent.map(|p| Arc::clone(&p.run.pool)),
        );
        let deadline = match (s.budgets.deadline, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Self {
            cfg,
            table: Arc::clone(&cfg.table),
            run_id: Arc::clone(&trace_id),
            durable: None,
            decisions: crate::pause::Decisions::new(),
            trace_id,
            input,
            request,
            state,
            observers: Observers {
                config: s.observer.clone(),
                run: observer,
            },
            tokens,
            deadline,
            usage: Usage::default(),
            cost_usd: 0.0,
            last_call_tokens: 0,
            last_call_cost: 0.0,
            attempts: Vec::new(),
            failures: Vec::new(),
            route: 0,
            tried: Vec::new(),
            force_answer: false,
            last_text: String::new(),
            output: String::new(),
            scores: None,
            guard: Guard::new(s.budgets.repeated_call_limit, s.budgets.no_progress_turns),
            deadline_at: None,
            seen_ids: HashSet::new(),
            wrap_up_turn: false,
            calls: Vec::new(),
            last_correction: None,
            model_summary: None,
            fatal: None,
            events,
            in_flight: false,
            meter: Arc::default(),
            pool,
            link: None,
            reserved: super::child::Reserved::default(),
            trip: None,
            handoffs: 0,
            max_handoffs: s.budgets.max_handoffs,
            compactor: super::compact::Compactor::new(own_start),
        }
    }

    /// Brings the tool table up to date with the config's tool sources (nothing
    /// without any): awaits each source's refresh, then takes the table for their
    /// snapshots (see `ToolSource`).
    pub(super) async fn refresh_tools(&mut self) {
        let sources = self.cfg.settings.tools.sources();
        if sources.is_empty() {
            return;
        }
        let mut snapshots = Vec::with_capacity(sources.len());
        for registered in sources {
            registered.source.refresh().await;
            snapshots.push(registered.source.snapshot());
        }
        self.table = self.cfg.table_for(&snapshots);
    }

    /// The tools offered in an ordinary turn: every tool of the table, or, with
    /// `tools_for`, the user tools it keeps for the run's state (each distinct set is
    /// one `Arc`, cached in the table so it is encoded once), then `submit_output` and
    /// `escalate_to_human`.
    pub(super) fn offered_tools(&self) -> Arc<[ToolDefinition]> {
        let cfg = self.cfg;
        let table = &*self.table;
        let Some(keep) = &cfg.settings.tools_for else {
            return Arc::clone(&table.offered);
        };
        let state = RunState {
            turn: self.usage.llm_calls.saturating_add(1),
            tool_calls: self.usage.tool_calls,
            calls: &self.calls,
        };
        let kept: Vec<bool> = table
            .tools
            .iter()
            .map(|t| {
                match std::panic::catch_unwind(AssertUnwindSafe(|| keep(&state, &t.definition))) {
                    Ok(keep) => keep,
                    Err(payload) => {
                        tracing::warn!(
                            tool = %t.definition.name,
                            panic = %panic_message(payload.as_ref()),
                            "tools_for panicked; the tool is not offered this turn"
                        );
                        false
                    }
                }
            })
            .collect();
        let build = || -> Arc<[ToolDefinition]> {
            let user = table
                .tools
                .iter()
                .zip(&kept)
                .filter(|(_, k)| **k)
                .map(|(t, _)| t.definition.clone());
            let rest = table.offered[table.tools.len()..].iter().cloned();
            user.chain(rest).collect::<Vec<_>>().into()
        };
        if kept.len() > 64 {
            return build();
        }
        let mask = kept
            .iter()
            .enumerate()
            .fold(0u64, |m, (i, k)| if *k { m | (1 << i) } else { m });
        let mut subsets = table
            .subsets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(subsets.entry(mask).or_insert_with(build))
    }

    /// Records the calls of a turn that ran none of them, with why.
    pub(super) fn record_not_run(&mut self, calls: &[ToolCall], results: &[ToolResult]) {
        for (call, result) in calls.iter().zip(results) {
            if self.table.index.contains_key(&call.name) {
                self.record_call(call, CallOutcome::NotRun(result.content.clone()));
            }
        }
    }

    pub(super) fn record_call(&mut self, call: &ToolCall, outcome: CallOutcome) {
        let irreversible = self.table.get(&call.name).is_some_and(|t| t.irreversible);
        self.calls.push(CallRecord {
            llm_call: self.usage.llm_calls,
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            outcome,
            irreversible,
        });
    }

    /// Sends the tool results the turn added to the transcript (from message `from`
    /// on) as stream events.
    pub(super) fn send_results(&self, from: usize) {
        let Some(events) = &self.events else { return };
        let llm_call = self.usage.llm_calls;
        for message in self.request.messages.iter().skip(from) {
            if let Message::Tool { results } = message {
                for r in results {
                    events.send(StreamEvent::ToolResult {
                        llm_call,
                        id: r.call_id.clone(),
                        name: r.name.clone(),
                        content: r.content.clone(),
                        is_error: r.is_error,
                    });
                }
            }
        }
    }

    pub(super) fn notify(&self, event: &RunEvent<'_>) {
        self.observers.notify(event);
    }

    pub(super) fn is_cancelled(&self) -> bool {
        self.tokens.iter().any(CancellationToken::is_cancelled)
    }

    /// The state types the config expects per run that this run lacks.
    pub(super) fn missing_state(&self) -> Option<AgentError> {
        let missing: Vec<&str> = self
            .cfg
            .settings
            .run_state
            .iter()
            .filter(|need| !self.state.contains(need.type_id))
            .map(|need| need.type_name)
            .collect();
        (!missing.is_empty()).then(|| AgentError::InvalidRun {
            message: format!(
                "the config expects state of type {} per run (expects_state); pass it with \
                 RunOptions::state",
                missing.join(", ")
            ),
        })
    }
}
