//! # agent-core
//!
//! A run loop for LLM agents that is *total*: every run ends in an [`AgentResult`]
//! holding either a validated value of your type or exactly one typed [`AgentError`],
//! within the budgets you set. No hang, no escaped panic, no silent `None`, no unbounded
//! spend.
//!
//! Your output type is the termination contract: `#[agent_output]` turns a struct into
//! the synthetic tool `submit_output`, whose parameters are the struct's JSON Schema. A
//! `submit_output` call whose arguments validate is the only happy exit; everything else
//! is a bounded retry or a named failure.
//!
//! ```
//! use agent_core::{AgentConfig, run_agent};
//! use agent_core::testing::ScriptedModel;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), agent_core::ConfigError> {
//! // Compat mode: `String` output, a plain-text turn ends the run.
//! let model = ScriptedModel::new().text("Paris");
//! let config: AgentConfig<String> = AgentConfig::builder("capitals")
//!     .llm(model.clone())
//!     .system_prompt("Answer with the city only.")
//!     .build()?;
//! let result = run_agent(&config, "Capital of France?").await;
//! assert_eq!(result.outcome.as_deref(), Ok("Paris"));
//! assert_eq!(result.usage.llm_calls, 1);
//! # Ok(())
//! # }
//! ```
//!
//! `use agent_core::prelude::*;` brings the names most programs need.
//!
//! # A tour
//!
//! **The config.** [`AgentConfig<T>`](AgentConfig) is a frozen agent for output type
//! `T`: model, system prompt, tools, budgets and guards. [`AgentConfig::builder`] checks
//! every setting at `build()` (a malformed config is a [`ConfigError`] before any
//! request), and [`with_`](AgentConfig::with_) derives a variant that keeps `T` and the
//! parent's HTTP pool. Per-request inputs (state, deadline, cancellation, history,
//! thread, metadata) go in [`RunOptions`].
//!
//! **The output.** [`#[agent_output]`](agent_output) derives [`AgentOutput`]: the JSON
//! Schema, the `submit_output` tool and the validation of its arguments (schema, serde,
//! an optional `validate` fn). How the model is asked for it is the [`OutputMode`]:
//! a tool call, the provider's structured output, or JSON in the text; all three end
//! through the same validator.
//!
//! **Tools.** [`#[tool]`](tool) turns an async fn into a [`Tool`]: its name, description
//! and parameter schema come from the signature and doc comments; [`State<S>`](State)
//! parameters reach application state; [`tools!`] collects them into a
//! [`ToolRegistry`]. A tool's failure is a tool result the model sees, never a crashed
//! run; [`ToolError::fatal`] stops the run when continuing is unsafe.
//!
//! **The loop.** [`run_agent`] classifies every model turn into one transition, each
//! with its own budget, and ends in an [`AgentResult`]: the value or an [`AgentError`],
//! whose [`category`](AgentError::category) ([`Category`]) names what happened and
//! whose [`ending`](AgentError::ending) ([`Ending`]: answered, escalated, exhausted,
//! stuck, failed) says whose fix is next. A run that did not answer carries a
//! [`Handover`] for the person who takes over. [`run_agent_stream`] is the same run with
//! its events as they happen ([`StreamEvent`]); see the [`stream`] module.
//!
//! **Models.** [`LlmClient`] is the boundary: one request ([`LlmRequest`]), one
//! response ([`LlmResponse`]) or a transient or permanent [`LlmError`]. `.model(name)`
//! routes by prefix to the adapters in [`providers`] (Anthropic, OpenAI, Gemini,
//! OpenAI-compatible servers, Ollama); [`testing`] has models that need no network.
//! [`Usage`] counts LLM calls, tool executions, tokens and cost ([`Pricing`]).
//!
//! **Around the loop.** [`store`] holds the traits of conversation memory, retrieval,
//! run records with human feedback and trace records (the `agent-store` crate
//! implements them on SQLite and PostgreSQL); an [`Observer`] sees every [`RunEvent`];
//! every run is a `tracing` span tree with the OpenTelemetry GenAI attributes (feature
//! `otel` exports it).
//!
//! **Many runs.** [`run_batch`] runs many inputs and returns a [`Receipt`] (counts per
//! ending and category, spend, latency, [`TurnStats`] with a suggested `max_llm_calls`).
//! [`eval`] judges finished runs (ground truth, heuristics, an LLM judge) and compares
//! variants of a config on the same inputs ([`eval::sweep`]). The `agent-worker` crate
//! runs batches over NATS JetStream; `agent-mcp` brings the tools of MCP servers.
//!
//! **Features.** `otel`: OpenTelemetry glue (`agent_core::otel`); `plot`: the sweep's SVG chart
//! (`Comparison::write_svg`). Both are off by default.
//!
//! The layers of this crate and what each may use are in `docs/architecture.md`.

#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets the macros' `::agent_core::..` paths resolve inside this crate's own tests.
extern crate self as agent_core;

mod backoff;
mod batch;
mod config;
mod error;
mod grader;
mod guardrail;
mod handover;
mod limits;
mod llm;
// Hidden support for the macros' expansions (types used only at compile time).
#[allow(missing_debug_implementations)]
mod macro_support;
mod message;
mod observe;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod otel;
mod output;
mod partial_json;
mod pause;
mod pricing;
pub mod providers;
mod registry;
mod result;
mod run_options;
mod runner;
pub mod schema;
mod scores;
mod stores;
mod sweep;
mod tally;
pub mod testing;
mod tool;
mod turns;
mod usage;
mod validate;

pub use agent_macros::{agent_output, agent_type, tool};
pub use backoff::Backoff;
pub use batch::{Batch, Receipt, run_batch};
pub use config::{
    AgentConfig, AgentConfigBuilder, Compaction, Handoff, HistoryFilter, OutputValidator,
};
pub use error::{
    AgentError, Attempt, AttemptKind, Budget, Category, ConfigError, Ending, ModelFailures,
    StuckReason,
};
pub use guardrail::{
    InputGuardrail, OutputGuardrail, ToolGuardrail, ToolVerdict, Verdict, VerdictFuture,
};
pub use handover::{CallOutcome, CallRecord, Handover, RunState};
pub use limits::Limits;
pub use llm::{
    Effort, LlmClient, LlmError, LlmErrorCause, LlmErrorKind, LlmFuture, LlmRequest, LlmResponse,
    OutputCapabilities, Reasoning, RefusalReason, StopReason, TokenUsage, ToolChoice,
};
pub use message::{Message, ToolCall, ToolResult};
pub use observe::{Observer, RunEvent};
pub use output::{
    AgentOutput, AnswerMode, ESCALATE_TO_HUMAN, OutputMode, OutputSpec, PromptCaching,
    SUBMIT_OUTPUT,
};
pub use pause::{Decision, DecisionProblem, Decisions, PauseReason, PendingCall};
pub use pricing::{ContextWindow, ModelPrice, Pricing};
pub use registry::{ToolRegistry, ToolSnapshot, ToolSource};
pub use result::AgentResult;
pub use run_options::RunOptions;
pub use runner::{
    AgentTool, META_PARENT_CALL_ID, META_PARENT_TRACE_ID, PausedRun, paused_runs, record_decisions,
    resume_agent, resume_agent_with, run_agent, run_agent_with,
};
pub use scores::{FnGrader, GradeFuture, Grader, Scores};
/// serde_json, re-exported: tool arguments and scripted turns are `serde_json::Value`s, so
/// a user crate needs no serde_json dependency of its own (`agent_core::json!`).
pub use serde_json::{self, Value, json};
// The stores' traits live in `store`; these root paths are kept for existing code.
pub use llm::{StreamDelta, StreamSink};
pub use runner::{RunStream, StreamEvent, run_agent_stream, run_agent_stream_with};
pub use stores::ResumeError;
#[doc(hidden)]
pub use stores::{
    Embedder, FeedbackStore, Memory, MemoryWindow, Retriever, StoreError, TraceStore,
};

pub mod stream {
    //! Streaming: [`run_agent_stream`] yields a run's [`StreamEvent`]s as they happen, and
    //! [`LlmClient::complete_streaming`](crate::LlmClient::complete_streaming) hands a
    //! turn's pieces ([`StreamDelta`]) to a [`StreamSink`] as they arrive.
    //!
    //! The run behind a stream is the run of [`run_agent_with`](crate::run_agent_with):
    //! the same loop, budgets, retries, guards, output modes, stores and observers. Only
    //! the model call differs: it streams, and what arrives is also sent to the caller.
    //! The last event is always [`StreamEvent::Finished`] with the
    //! [`AgentResult`](crate::AgentResult).

    pub use crate::llm::{StreamDelta, StreamSink};
    pub use crate::partial_json::parse_partial;
    pub use crate::runner::{
        RunStream, StreamEvent, resume_agent_stream, resume_agent_stream_with, run_agent_stream,
        run_agent_stream_with,
    };
}
pub use tally::RunTally;
pub use tokio_util::sync::CancellationToken;
pub use tool::{
    State, StateMap, StateRequirement, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture,
};
pub use turns::TurnStats;
pub use usage::{ChildUsage, ModelUsage, Usage};
pub use validate::{SchemaValidator, ValidationErrors, whole_numbers_as_integers};

pub mod eval {
    //! Evaluation: judging finished runs and comparing variants of a config.
    //!
    //! A [`RunGrader`] grades a whole run after it ended (a [`Case`]: the input, the
    //! result, optionally the expected answer) and gives a [`Grade`]: named scores in
    //! `0.0..=1.0` with a reason each, one overall score, and what grading spent. The
    //! built-in graders are [`GroundTruth`] (field by field against a label),
    //! [`Heuristic`] (a closure over the run), [`LlmJudge`] (a rubric graded by a model
    //! through this crate's own loop) and [`Composite`] (a weighted combination with a
    //! pass threshold). [`sweep`] runs [`Variant`]s of a config over the same
    //! [`Sample`]s and returns a [`Comparison`]: per variant, every ending and category,
    //! scores with 95% intervals, wins and losses against the baseline, spend, latency
    //! and turn data.
    //!
    //! The config's in-run scorer, [`Grader`](crate::Grader) (`.grader(..)`), is part of
    //! the loop and lives at the crate root.

    pub use crate::grader::{
        Case, Check, Comparator, Composite, CriterionVerdict, Grade, GradeError, GroundTruth,
        Heuristic, JudgeVerdict, LlmJudge, Match, Rubric, RunGradeFuture, RunGrader,
    };
    pub use crate::sweep::{
        Comparison, Estimate, GradeFailure, Paired, RunRecord, Sample, Spread, SweepError,
        SweepEvent, SweepOptions, Variant, VariantSummary, WinLoss, sweep,
    };
}

pub mod prelude {
    //! The names most programs need: `use agent_core::prelude::*;`.

    pub use crate::{
        AgentConfig, AgentError, AgentOutput, AgentResult, Category, ConfigError, Ending,
        OutputMode, RunOptions, State, StreamEvent, ToolError, ToolRegistry, Value, agent_output,
        agent_type, json, run_agent, run_agent_stream, run_agent_with, tool, tools,
    };
}

/// The evaluation names' root paths before [`eval`]: deprecated aliases, kept so that
/// existing code compiles (with a warning that names the new path).
macro_rules! moved_to_eval {
    ($($name:ident $(<$($param:tt),+>)?),+ $(,)?) => {$(
        #[deprecated(note = "moved to agent_core::eval (same name)")]
        #[doc(hidden)]
        pub type $name$(<$($param),+>)? = eval::$name$(<$($param),+>)?;
    )+};
}

moved_to_eval!(
    Case<'a, T>,
    Check,
    Comparator,
    Composite<T>,
    CriterionVerdict,
    Grade,
    GradeError,
    GroundTruth,
    Heuristic<T>,
    JudgeVerdict,
    LlmJudge,
    Match,
    Rubric,
    RunGradeFuture<'a>,
    Comparison,
    Estimate,
    GradeFailure,
    Paired,
    RunRecord,
    Sample,
    Spread,
    SweepError,
    SweepEvent<'a, T>,
    SweepOptions<T>,
    Variant<T>,
    VariantSummary,
    WinLoss,
);
// A trait and a fn cannot be deprecated aliases; their old root paths stay, hidden.
#[doc(hidden)]
pub use eval::{RunGrader, sweep};

pub mod store {
    //! Stores beside the run loop: conversation [`Memory`], document retrieval
    //! ([`Retriever`], [`Embedder`]), run records with human feedback ([`FeedbackStore`]) and
    //! full transcripts for replay and diff ([`TraceStore`]).
    //!
    //! The traits live here; the SQLite and PostgreSQL backends live in the `agent-store`
    //! crate. A config takes them with the builder's `memory`, `retriever`,
    //! `feedback_store` and `trace_store`; the runner calls them around every run:
    //!
    //! - **before** the run (only when the config has the store): the thread's cap on round
    //!   trips is checked and its earlier messages are loaded ([`Memory`], when the run names
    //!   a thread with [`RunOptions::thread`](crate::RunOptions::thread)); documents are
    //!   retrieved for the input and appended to the system prompt ([`Retriever`], see
    //!   [`context_section`]);
    //! - **after** it: the run's messages are appended to its thread, the run is recorded
    //!   ([`FeedbackStore::record`]) and so is its trace ([`TraceStore::record_trace`]).
    //!
    //! A store never changes a run's outcome. Every store call is bounded by the config's
    //! `store_timeout` (default 5 s) and sits behind a catch boundary; a call that fails,
    //! times out or panics is reported as a `tracing` warning and a
    //! [`RunEvent::StoreFailed`](crate::RunEvent::StoreFailed), and counted in
    //! [`AgentResult::store_failures`](crate::AgentResult::store_failures) (which
    //! [`Receipt`](crate::Receipt) sums). A failed memory load means the run goes on without
    //! the thread's history (and without the thread cap check); a failed retrieval, without
    //! context. The one store outcome that does end a run is the thread cap itself:
    //! [`AgentError::BudgetExhausted`](crate::AgentError::BudgetExhausted) with
    //! [`Budget::ThreadLlmCalls`](crate::Budget::ThreadLlmCalls), before any request.

    pub use crate::runner::replay;
    pub use crate::stores::*;
}

/// Builds a [`ToolRegistry`] from `#[tool]` fns, in order: `tools![lookup_order, refund_status]`.
///
/// Each argument is the path of a `#[tool]` fn (`lookup_order`, `orders::lookup_order`).
/// Two tools with the same tool name are a compile error. A hand-written [`Tool`] is
/// added with [`ToolRegistry::with`] (`tools![a, b].with(MyTool::new())`); the config's
/// `build()` rejects duplicates among those with a [`ConfigError`].
///
/// ```
/// use agent_core::{tool, tools};
///
/// /// Adds two numbers.
/// #[tool]
/// async fn add(a: i64, b: i64) -> i64 {
///     a + b
/// }
///
/// /// Says hello.
/// #[tool(name = "greet")]
/// async fn hello(name: String) -> String {
///     format!("Hello, {name}!")
/// }
///
/// let registry = tools![add, hello];
/// assert_eq!(registry.names().collect::<Vec<_>>(), ["add", "greet"]);
/// ```
#[macro_export]
macro_rules! tools {
    () => { $crate::ToolRegistry::new() };
    ($($tool:path),+ $(,)?) => {{
        const _: () = if let ::core::option::Option::Some(message) =
            $crate::__private::duplicate_tool_message(
                &[$(<$tool as $crate::__private::ToolName>::NAME),+],
            )
        {
            ::core::panic!("{}", message.as_str());
        };
        $crate::ToolRegistry::new()
            $(.with(<$tool as $crate::__private::ToolName>::instance()))+
    }};
}

/// Benchmark entry points into crate-private code (`agent-core/benches/`). Not a public
/// API: it may change in any release.
#[doc(hidden)]
pub mod __bench {
    pub use crate::runner::bench_partial_output;
    pub use crate::runner::bench_run_sizes as run_sizes;
}

/// Re-exports and helpers for the code the macros generate. Not a public API: it may
/// change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::macro_support::*;
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
