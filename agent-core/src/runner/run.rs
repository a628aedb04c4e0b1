//! [`Run`]: one run in this process. It is the frozen inputs ([`Inputs`]), the state a
//! checkpoint keeps ([`RunState`]), and this process's live parts (the request being
//! built, the emitter, the turn's live state, the run tree, the durable writer, the
//! compactor). Each capability keeps its own fields and methods in its own part; the
//! loop's files (`drive.rs`, `call.rs`, `turn.rs`, `submit.rs`, `act.rs`, `finish.rs`)
//! orchestrate them.

use foldhash::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{Compiled, ModelEntry, OutputPlan, ToolTable};
use crate::content::Input;
use crate::error::{AgentError, panic_message};
use crate::handover::{CallOutcome, CallRecord, RunState as RunView};
use crate::llm::LlmRequest;
use crate::message::{Message, ToolCall, ToolResult};
use crate::observe::RunEvent;
use crate::output::AgentOutput;
use crate::run_options::RunOptions;
use crate::scores::Scores;
use crate::tool::{StateMap, ToolDefinition};

use super::agents::tree::Tree;
use super::compact::Compactor;
use super::durable::Durable;
use super::emit::{Emitter, EventSender, Observers};
use super::model::sink::Meter;
use super::state::RunState;
use super::tools::guardrails::Trip;

/// What the loop does after a turn.
pub(super) enum Next<T> {
    /// Ask the model again.
    Continue,
    /// The run is over.
    Stop(Result<T, AgentError>),
}

/// What a run was started with, fixed for its life.
pub(super) struct Inputs {
    pub(super) trace_id: Arc<str>,
    /// The run id (`RunOptions::run_id`, else the trace id).
    pub(super) run_id: Arc<str>,
    pub(super) input: String,
    /// The application state tools see: the config's, with the run's own added.
    pub(super) app: Arc<StateMap>,
    /// The cancellation tokens: the config's, the run's, a parent run's.
    pub(super) tokens: Vec<CancellationToken>,
    /// The deadline's limit: the config's or the run's, whichever is sooner.
    pub(super) deadline: Option<Duration>,
    /// When the deadline passes (set when the loop starts).
    pub(super) deadline_at: Option<tokio::time::Instant>,
    /// The first agent's `max_handoffs`: the bound of the whole run.
    pub(super) max_handoffs: u32,
    /// The run's seat at a provider batch gate, in a batched `run_batch`.
    pub(super) batch: Option<Arc<crate::providers::batch::Seat>>,
}

/// The tools a run with tool search offered last: for how many revealed tools, from
/// which table.
pub(super) type Searched = (usize, Arc<ToolTable>, Arc<[ToolDefinition]>);

/// This process's live parts of the turn under way.
pub(super) struct Live {
    /// The user tools of the current turn: the agent's frozen table, or one rebuilt
    /// when a tool source changed (refreshed before each LLM call).
    pub(super) table: Arc<ToolTable>,
    /// Every call id the run has seen (a repeated id is renamed).
    pub(super) seen_ids: HashSet<String>,
    /// Whether the current turn is the wrap-up turn (only the answer offered).
    pub(super) wrap_up_turn: bool,
    /// Whether an LLM call is under way (set for the call, cleared when it returns):
    /// one that never returns (cancelled, cut by the deadline) is counted anyway.
    pub(super) in_flight: bool,
    /// What a streamed call received so far (the bytes of its turn, the usage the
    /// provider reported mid-stream), kept by its sink: what a cut call is counted from.
    pub(super) meter: Arc<Meter>,
    /// A guardrail that tripped during the turn: the run ends with it after the turn
    /// (boxed: rare, and `Run` is held by every run).
    pub(super) trip: Option<Box<AgentError>>,
    /// What the grader gave an answer.
    pub(super) scores: Option<Scores>,
    /// Whether the conversation holds parts (images, documents, audio): only then are
    /// they checked against the model before each call.
    pub(super) has_parts: bool,
    /// With tool search: the tools last offered, for the number of tools revealed then
    /// and the table they came from (see `search.rs`; boxed: most configs have no tool
    /// search, and `Run` is held by every run).
    pub(super) searched: Option<Box<Searched>>,
    /// Whether the current LLM call uses the provider's own tool search (see
    /// `native_search.rs`): then it offers every tool, as without tool search.
    pub(super) native_search: bool,
}

/// One run in this process (see the module docs).
pub(super) struct Run<'c, T> {
    /// The agent that has the conversation: the config's, or the one a handoff gave it
    /// to (`state.handoffs` names it).
    pub(super) agent: &'c Compiled<T>,
    pub(super) inputs: Inputs,
    pub(super) state: RunState,
    /// The next LLM call's request, all but its messages: the state holds those, and
    /// they are moved in for the call (see `call.rs`).
    pub(super) request: LlmRequest,
    pub(super) emit: Emitter<T>,
    pub(super) live: Live,
    /// This run's place in a tree of runs (agents used as tools).
    pub(super) tree: Tree,
    /// Checkpoints, the tool ledger and a resumed pause's decisions, with a checkpoint
    /// store.
    pub(super) durable: Option<Box<Durable>>,
    pub(super) compactor: Compactor,
}

impl<'c, T: AgentOutput> Run<'c, T> {
    pub(super) fn new(
        cfg: &'c Compiled<T>,
        trace_id: Arc<str>,
        input: Input,
        options: RunOptions,
        events: Option<EventSender<T>>,
    ) -> Self {
        let (input, parts) = input.into_parts();
        let parent = super::agents::tree::parent_of(&options);
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
            lease: _,
            parent: _,
            batch,
        } = options;
        let has_parts = !parts.is_empty() || history.iter().any(|m| m.parts().next().is_some());
        let mut messages = history;
        messages.push(Message::user_with(input.clone(), parts));
        let own_start = messages.len();
        let app = if run_state.is_empty() {
            Arc::clone(&cfg.state)
        } else {
            let mut merged = (*cfg.state).clone();
            merged.extend(run_state);
            Arc::new(merged)
        };
        let mut tokens: Vec<CancellationToken> = cfg
            .cancellation
            .iter()
            .cloned()
            .chain(cancellation)
            .collect();
        if let Some(parent) = &parent {
            tokens.extend(parent.run.tokens.iter().cloned());
        }
        let deadline = match (cfg.limits.deadline, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut run = Self {
            agent: cfg,
            inputs: Inputs {
                run_id: Arc::clone(&trace_id),
                trace_id,
                input,
                app,
                tokens,
                deadline,
                deadline_at: None,
                max_handoffs: cfg.limits.max_handoffs,
                batch,
            },
            state: RunState::new(messages),
            request: LlmRequest::new(String::new()),
            emit: Emitter {
                observers: Observers {
                    config: cfg.hooks.observer.clone(),
                    run: observer,
                },
                stream: events,
            },
            live: Live {
                table: Arc::clone(&cfg.table),
                seen_ids: HashSet::default(),
                wrap_up_turn: false,
                in_flight: false,
                meter: Arc::default(),
                trip: None,
                scores: None,
                has_parts,
                searched: None,
                native_search: false,
            },
            tree: Tree::new(&cfg.limits, parent),
            durable: None,
            compactor: Compactor::new(own_start),
        };
        run.apply_agent();
        run
    }

    /// Sets what the request takes from the agent that has the conversation and the
    /// model it is on: the model, system prompt, reasoning and prompt cache of that
    /// model's entry, the agent's output schema, output cap, temperature and tools. A
    /// fresh run, a handoff, a fallback switch and a resumed run all go through here, so
    /// every request carries the current agent's own settings (case C52).
    pub(super) fn apply_agent(&mut self) {
        let agent = self.agent;
        let model = self.model();
        self.request.model.clone_from(&model.wire_model);
        self.request.system.clone_from(&model.system_prompt);
        self.request.reasoning = model.reasoning;
        self.request.prompt_cache = agent.prompt_cache;
        self.request.prompt_cache_ttl = agent.prompt_cache_ttl;
        self.request
            .prompt_cache_key
            .clone_from(&agent.prompt_cache_key);
        self.request.output = match &agent.output {
            OutputPlan::Json(spec) => Some(Arc::clone(spec)),
            _ => None,
        };
        self.request.max_tokens = agent.limits.max_tokens;
        self.request.temperature = agent.temperature;
        self.request.tools = Arc::clone(&agent.table.offered);
        self.live.table = Arc::clone(&agent.table);
        self.set_token_rule();
    }

    /// Sets how the request's estimates count parts: by the rule of the model the run
    /// is on, once the run has parts (a text-only run never asks).
    pub(super) fn set_token_rule(&mut self) {
        if self.live.has_parts {
            let model = self.model();
            self.request.token_rule = model.client.content_capabilities(&model.wire_model).tokens;
        }
    }

    /// The model entry the run is on (the agent's primary, or a fallback).
    pub(super) fn model(&self) -> &'c ModelEntry {
        let agent = self.agent;
        agent
            .models
            .get(self.state.route)
            .unwrap_or(agent.primary())
    }

    /// The key of the current model's usage entry: its name, with fallbacks; `None`
    /// without (the totals are the one model's).
    pub(super) fn usage_key(&self) -> Option<&'c str> {
        let agent = self.agent;
        (agent.models.len() > 1).then(|| self.model().name.as_str())
    }

    /// The user tools of the current turn.
    pub(super) fn table(&self) -> Arc<ToolTable> {
        Arc::clone(&self.live.table)
    }

    /// Brings the tool table up to date with the agent's tool sources (nothing
    /// without any): awaits each source's refresh, then takes the table for their
    /// snapshots (see `ToolSource`).
    pub(super) async fn refresh_tools(&mut self) {
        let sources = self.agent.tool_sources();
        if sources.is_empty() {
            return;
        }
        let mut snapshots = Vec::with_capacity(sources.len());
        for registered in sources {
            registered.source.refresh().await;
            snapshots.push(registered.source.snapshot());
        }
        self.live.table = self.agent.table_for(&snapshots);
    }

    /// What `tools_for` and the approval policy see of the run.
    pub(super) fn view(&self, turn: u32) -> RunView<'_> {
        RunView {
            turn,
            tool_calls: self.state.usage.tool_calls,
            calls: &self.state.calls,
        }
    }

    /// The tools offered in an ordinary turn: every tool of the table, or, with
    /// `tools_for`, the user tools it keeps for the run's state (each distinct set is
    /// one `Arc`, cached in the table so it is encoded once), then `submit_output` and
    /// `escalate_to_human`.
    /// With tool search on, the user tools are the always-on and revealed ones (see
    /// `search.rs`), unless the call uses the provider's own search (every tool).
    pub(super) fn offered_tools(&mut self) -> Arc<[ToolDefinition]> {
        let table = self.table();
        if let Some(plan) = &self.agent.tool_search
            && !self.live.native_search
        {
            return self.searched_offer(&table, plan);
        }
        if self.agent.hooks.tools_for.is_none() {
            return Arc::clone(&table.offered);
        }
        let view = self.view(self.state.usage.llm_calls.saturating_add(1));
        let kept: Vec<bool> = table
            .tools
            .iter()
            .map(|t| self.keeps(&view, &t.definition))
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

    /// Whether `tools_for` (set) keeps `tool` in this turn; one that panics does not.
    pub(super) fn keeps(&self, view: &RunView<'_>, tool: &ToolDefinition) -> bool {
        let Some(keep) = &self.agent.hooks.tools_for else {
            return true;
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| keep(view, tool))) {
            Ok(keep) => keep,
            Err(payload) => {
                tracing::warn!(
                    tool = %tool.name,
                    panic = %panic_message(payload.as_ref()),
                    "tools_for panicked; the tool is not offered this turn"
                );
                false
            }
        }
    }

    /// Records the calls of a turn that ran none of them, with why.
    pub(super) fn record_not_run(&mut self, calls: &[ToolCall], results: &[ToolResult]) {
        for (call, result) in calls.iter().zip(results) {
            if self.is_user_tool(&call.name) {
                self.record_call(call, CallOutcome::NotRun(result.content.clone()));
            }
        }
    }

    /// Whether `name` is a user tool of the current turn's table.
    pub(super) fn is_user_tool(&self, name: &str) -> bool {
        self.live.table.index.contains_key(name)
    }

    pub(super) fn record_call(&mut self, call: &ToolCall, outcome: CallOutcome) {
        let irreversible = self
            .live
            .table
            .get(&call.name)
            .is_some_and(|t| t.irreversible);
        self.state.calls.push(CallRecord {
            llm_call: self.state.usage.llm_calls,
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            outcome,
            irreversible,
        });
    }

    pub(super) fn is_cancelled(&self) -> bool {
        self.inputs
            .tokens
            .iter()
            .any(CancellationToken::is_cancelled)
    }

    /// The state types the config expects per run that this run lacks.
    pub(super) fn missing_state(&self) -> Option<AgentError> {
        let missing: Vec<&str> = self
            .agent
            .run_state
            .iter()
            .filter(|need| !self.inputs.app.contains(need.type_id))
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

    /// Time spent toward the deadline before this process took the run over.
    pub(super) fn elapsed_before(&self) -> Duration {
        self.durable
            .as_ref()
            .map_or(Duration::ZERO, |d| d.elapsed_before())
    }

    /// Counts and reports a guardrail's verdict other than a pass.
    pub(super) fn guardrail_intervened(
        &mut self,
        guardrail: &str,
        stage: &str,
        verdict: &str,
        call_id: Option<&str>,
    ) {
        let usage = &mut self.state.usage;
        usage.guardrail_interventions = usage.guardrail_interventions.saturating_add(1);
        tracing::info!(guardrail, stage, verdict, call_id, "guardrail");
        self.emit.emit(&RunEvent::Guardrail {
            trace_id: &self.inputs.trace_id,
            guardrail,
            stage,
            verdict,
            call_id,
        });
    }

    /// The error of a tripped guardrail, counted and reported.
    pub(super) fn tripped(&mut self, (guardrail, reason): Trip, stage: &str) -> AgentError {
        self.guardrail_intervened(&guardrail, stage, "trip", None);
        AgentError::GuardrailTripped { guardrail, reason }
    }

    /// The messages, back from the request when a call was cut off while it held them
    /// (the deadline or a cancellation dropped the loop mid-call).
    pub(super) fn reclaim_messages(&mut self) {
        if !self.request.messages.is_empty() {
            self.state.messages = std::mem::take(&mut self.request.messages);
        }
    }
}
