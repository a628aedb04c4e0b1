//! Agents used as tools: [`AgentConfig::as_tool`] makes a [`Tool`] whose call runs
//! another agent (the child) and returns its typed output as JSON.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::output::AgentOutput;
use crate::pause::ChildPause;
use crate::run_options::RunOptions;
use crate::tool::{Opaque, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};
use crate::usage::ChildUsage;

use super::agents::tree::CallLink;

use crate::store::{META_PARENT_CALL_ID, META_PARENT_TRACE_ID};

/// The share of the parent's `tool_timeout`, and of the time left before its deadline,
/// a child run may use: it ends typed (`deadline_exceeded`) before the parent's timeout
/// or deadline would drop it, and its usage is counted.
const TIMEOUT_SHARE: f64 = 0.9;

/// An agent used as a tool by another agent (made by [`AgentConfig::as_tool`]).
///
/// A call runs the child agent on the call's input and returns its validated answer as
/// JSON: the submitted `submit_output` arguments (the JSON read from the reply in native
/// and prompted modes; a `String` output as a JSON string). The child run:
/// - shares the parent run's cancellation and deadline: its deadline is 90 % of the
///   time the parent has left, and at most 90 % of the parent's `tool_timeout`, so
///   that it ends typed before either would drop it; raise the parent's
///   `tool_timeout` (60 s by default) for long children;
/// - cannot pass the parent's token or cost caps (`max_total_tokens`,
///   `max_cost_usd`): a child's LLM call is allowed when its estimate (its last
///   call's tokens and cost, the rule a run applies to its own caps) fits under every
///   cap above it, counting what the whole tree spent and what calls in flight
///   reserved, so children running at once share what is left; a child's first call
///   has no estimate yet and runs when the tree is still under every cap, so a tree
///   can pass a cap by at most one call per child run in flight; a child with no
///   price under a parent that caps cost does not run;
/// - has its own loop budgets (`max_llm_calls`, `max_tool_calls`, ...);
/// - adds its tokens and cost to the parent's [`Usage`](crate::usage::Usage) and is listed in
///   [`Usage::children`](crate::usage::Usage::children) with its trace id and ending;
/// - runs inside the parent's `execute_tool` span, so its `invoke_agent` span is a
///   child of the parent's, and its run and trace records carry
///   [`META_PARENT_TRACE_ID`] and [`META_PARENT_CALL_ID`];
/// - ends as a tool result whatever happens: its error is a tool error the model sees
///   (`"the NAME agent did not answer (CATEGORY): ..."`), never a failed parent. With
///   [`escalates_parent`](Self::escalates_parent), a child that escalates ends the
///   parent escalated too (after the turn's other calls), with the child's reason.
///
/// A child that pauses (a call waiting for approval, or a deferred result) pauses the
/// parent (C64): with a checkpoint store, the parent's run pauses once its turn is
/// answered and lists the child's pending calls as its own, their ids prefixed with
/// the parent's call id (`call_7/call_2`, see
/// [`PendingCall::via`](crate::durable::PendingCall::via)); resuming the parent with
/// decisions for those ids resumes the child inside the call, from its checkpoint (the
/// child's tool calls that ran do not run again, and its usage is counted once). The
/// child needs a checkpoint store of its own (the parent's may be shared) to pause at
/// all; a parent without one cannot wait, and its model gets a tool error naming the
/// child's paused run.
pub struct AgentTool<U> {
    config: AgentConfig<U>,
    name: String,
    description: String,
    /// The parameter schema; `None`: the default `{"input": string}`.
    input_schema: Option<Value>,
    escalates_parent: bool,
}

impl<U: AgentOutput> std::fmt::Debug for AgentTool<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.name)
            .field("agent", &self.config.name())
            .field("typed_input", &self.input_schema.is_some())
            .field("escalates_parent", &self.escalates_parent)
            .finish()
    }
}

impl<U: AgentOutput> AgentConfig<U> {
    /// This agent as a tool another agent can call: `name` and `description` are what
    /// the model sees; its parameters are `{"input": string}`, the child's input (see
    /// [`AgentTool::input`] for a typed input). Register it with the parent's builder
    /// (`.tool(child.as_tool("refunds", "Answers refund questions."))`); the builder
    /// checks the name like any tool's. See [`AgentTool`] for how the child run shares
    /// the parent's budgets and usage.
    pub fn as_tool(&self, name: impl Into<String>, description: impl Into<String>) -> AgentTool<U> {
        AgentTool {
            config: self.clone(),
            name: name.into(),
            description: description.into(),
            input_schema: None,
            escalates_parent: false,
        }
    }
}

impl<U: AgentOutput> AgentConfig<U> {
    /// The validated answer of `result` (a run of this config) as JSON, as an agent used
    /// as a tool returns it and the stores keep it: the submitted `submit_output`
    /// arguments in tool mode, the JSON read from the reply in native and prompted
    /// modes, the text as a JSON string for a `String` output. `None` when the run did
    /// not answer. What a server that serves this agent to another process sends (an
    /// MCP tool's `structuredContent`, `agent-mcp`'s `McpService`).
    pub fn answer_json(&self, result: &crate::AgentResult<U>) -> Option<Value> {
        result
            .outcome
            .is_ok()
            .then(|| super::stores::output_value(&self.inner, result))
    }
}

impl<U> AgentTool<U> {
    /// A typed input: the tool's parameters are `I`'s JSON Schema (an
    /// `#[agent_type]` struct, or any `JsonSchema` type whose schema is an object), and
    /// the child's input is the call's validated arguments as JSON text.
    #[must_use]
    pub fn input<I: schemars::JsonSchema>(mut self) -> Self {
        self.input_schema = Some(crate::schema::parameters_for::<I>());
        self
    }

    /// Whether a child run that escalates (`escalate_to_human`) ends the parent
    /// escalated too, with the child's reason and summary (default `false`: the
    /// parent's model gets a tool error saying the child escalated, and goes on).
    #[must_use]
    pub fn escalates_parent(mut self, yes: bool) -> Self {
        self.escalates_parent = yes;
        self
    }
}

impl<U: AgentOutput + Sync> Tool for AgentTool<U> {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name.clone(),
            self.description.clone(),
            self.input_schema
                .clone()
                .unwrap_or_else(crate::tool::agent_input_schema),
        )
    }

    fn call<'a>(&'a self, arguments: Value, context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input = match (&self.input_schema, arguments.get("input")) {
                (None, Some(Value::String(text))) => text.clone(),
                _ => crate::message::json_text(&arguments),
            };
            let link: Option<Arc<CallLink>> = context
                .link()
                .and_then(|any| Arc::clone(any).downcast::<CallLink>().ok());
            let mut options = RunOptions::new()
                .metadata(META_PARENT_TRACE_ID, context.trace_id())
                .metadata(META_PARENT_CALL_ID, context.call_id());
            if let Some(link) = &link {
                if link.run.pool.caps_cost() && self.config.inner.primary().price.is_none() {
                    return Err(ToolError::new(format!(
                        "the {} agent cannot run here: this run caps its cost and the \
                         model {} has no price",
                        self.config.name(),
                        self.config.model()
                    )));
                }
                let mut left = link.run.tool_timeout.mul_f64(TIMEOUT_SHARE);
                if let Some(at) = link.run.deadline_at {
                    let remaining = at.saturating_duration_since(tokio::time::Instant::now());
                    left = left.min(remaining.mul_f64(TIMEOUT_SHARE));
                }
                options = options.deadline(left.max(Duration::from_millis(1)));
                options.parent = Some(Opaque(Arc::clone(link) as _));
            }
            let result = match context.resuming() {
                // The child paused before and this run was resumed: the child goes on
                // from its checkpoint with the decisions for its calls (C64).
                Some(resume) => {
                    let with = options.clone().decisions(resume.decisions.clone());
                    let resumed =
                        super::resume::resume_agent_with(&self.config, &resume.run_id, with).await;
                    match resumed {
                        Ok(result) => result,
                        // Someone decided for the child directly and it finished: its
                        // stored result is this call's.
                        Err(crate::store::ResumeError::NotPaused { .. }) => {
                            match super::resume::resume_agent_with(
                                &self.config,
                                &resume.run_id,
                                options,
                            )
                            .await
                            {
                                Ok(result) if result.ending() != crate::Ending::Paused => result,
                                Ok(_) | Err(_) => {
                                    return Err(ToolError::new(format!(
                                        "the {} agent's paused run {} is neither paused nor \
                                         finished",
                                        self.config.name(),
                                        resume.run_id
                                    )));
                                }
                            }
                        }
                        Err(error) => {
                            return Err(ToolError::new(format!(
                                "the {} agent's paused run {} could not go on: {error}",
                                self.config.name(),
                                resume.run_id
                            )));
                        }
                    }
                }
                None => super::entry::run_agent_with(&self.config, input, options).await,
            };
            let ending = result.ending();
            if let Some(link) = &link {
                link.push(ChildUsage {
                    tool: self.name.clone(),
                    call_id: context.call_id().to_owned(),
                    agent: self.config.name().to_owned(),
                    trace_id: result.trace_id.clone(),
                    ending: ending.as_str().to_owned(),
                    category: result.category().map(str::to_owned),
                    usage: result.usage.clone(),
                });
            }
            if result.outcome.is_ok() {
                // The validated answer as the child's stores keep it: the submitted
                // arguments, or the JSON of a native-mode reply, or the text as a
                // JSON string.
                return Ok(super::stores::output_value(&self.config.inner, &result).to_string());
            }
            match result.outcome {
                Ok(_) => Ok(String::new()),
                Err(AgentError::Escalated { reason, summary }) if self.escalates_parent => {
                    Err(ToolError::escalate(reason, summary))
                }
                // The child waits for decisions: this run pauses too, listing the
                // child's calls as its own (C64), each with its tool's schema so that
                // an edit is checked before anything resumes.
                Err(AgentError::Paused { run_id, pending }) => {
                    let table = &self.config.inner.table;
                    let pending = pending
                        .into_iter()
                        .map(|p| match table.get(&p.tool) {
                            Some(tool) if p.via.is_empty() && p.parameters.is_none() => {
                                p.with_parameters(tool.definition.parameters.clone())
                            }
                            _ => p,
                        })
                        .collect();
                    let paused = ChildPause::new(run_id, self.config.name(), pending);
                    Err(ToolError::paused_inside(paused))
                }
                Err(error) => Err(ToolError::new(format!(
                    "the {} agent did not answer ({}): {error}",
                    self.config.name(),
                    error.category()
                ))),
            }
        })
    }
}
