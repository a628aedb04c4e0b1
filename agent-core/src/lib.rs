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
//! [`run_agent_stream`] is the same run with its events as they happen ([`StreamEvent`]:
//! text deltas, tool calls, tool results, the structured answer as it arrives) and the
//! [`AgentResult`] last; see the [`stream`] module.

#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets the macros' `::agent_core::..` paths resolve inside this crate's own tests.
extern crate self as agent_core;

mod backoff;
mod batch;
mod config;
mod error;
mod grader;
mod handover;
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
mod pricing;
pub mod providers;
mod registry;
mod result;
mod run_options;
mod runner;
pub mod schema;
mod scores;
mod stores;
pub mod stream;
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
pub use config::{AgentConfig, AgentConfigBuilder, OutputValidator};
pub use error::{
    AgentError, Attempt, AttemptKind, Budget, Category, ConfigError, Ending, StuckReason,
};
pub use grader::{
    Case, Check, Comparator, Composite, CriterionVerdict, FnGrader, Grade, GradeError, GradeFuture,
    Grader, GroundTruth, Heuristic, JudgeVerdict, LlmJudge, Match, Rubric, RunGradeFuture,
    RunGrader, Scores,
};
pub use handover::{CallOutcome, CallRecord, Handover, Limits, RunState};
pub use llm::{
    LlmClient, LlmError, LlmErrorKind, LlmFuture, LlmRequest, LlmResponse, OutputCapabilities,
    StopReason, TokenUsage, ToolChoice,
};
pub use message::{Message, ToolCall, ToolResult};
pub use observe::{Observer, RunEvent};
pub use output::{
    AgentOutput, ESCALATE_TO_HUMAN, OutputMode, OutputSpec, PromptCaching, SUBMIT_OUTPUT,
};
pub use pricing::{ModelPrice, Pricing};
pub use registry::ToolRegistry;
pub use result::AgentResult;
pub use run_options::RunOptions;
pub use runner::{run_agent, run_agent_with};
/// serde_json, re-exported: tool arguments and scripted turns are `serde_json::Value`s, so
/// a user crate needs no serde_json dependency of its own (`agent_core::json!`).
pub use serde_json::{self, Value, json};
pub use stores::{
    Embedder, FeedbackStore, Memory, MemoryWindow, Retriever, StoreError, TraceStore,
};
pub use stream::{
    RunStream, StreamDelta, StreamEvent, StreamSink, run_agent_stream, run_agent_stream_with,
};
pub use sweep::{
    Comparison, Estimate, GradeFailure, Paired, RunRecord, Sample, Spread, SweepError, SweepEvent,
    SweepOptions, Variant, VariantSummary, WinLoss, sweep,
};
pub use tally::RunTally;
pub use tokio_util::sync::CancellationToken;
pub use tool::{
    State, StateMap, StateRequirement, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture,
};
pub use turns::TurnStats;
pub use usage::Usage;
pub use validate::{SchemaValidator, ValidationErrors, whole_numbers_as_integers};

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

/// Re-exports and helpers for the code the macros generate. Not a public API: it may
/// change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::macro_support::*;
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
