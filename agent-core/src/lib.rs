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
//! **Tools.** [`#[tool]`](macro@tool) turns an async fn into a [`Tool`]: its name, description
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

// The public modules: each is a part of the crate under its own name.
pub mod config;
pub mod conformance;
pub mod content;
pub mod error;
pub mod eval;
// The fuzz targets' entry points (`fuzz/`); not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod guardrail;
pub mod handover;
pub mod llm;
pub mod observe;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod otel;
pub mod output;
pub mod pricing;
pub mod providers;
pub mod schema;
pub mod store;
pub mod testing;
pub mod tool;
pub mod usage;

// Private modules, published through the ones above or the root.
mod backoff;
mod limits;
// Hidden support for the macros' expansions (types used only at compile time).
#[allow(missing_debug_implementations)]
mod macro_support;
mod message;
mod partial_json;
mod pause;
mod result;
mod run_options;
mod runner;
mod scores;
mod validate;

// The root: what nearly every program names.
pub use agent_macros::{agent_output, agent_type, tool};
pub use config::{AgentConfig, AgentConfigBuilder};
pub use error::{AgentError, Category, ConfigError, Ending};
pub use limits::Limits;
pub use output::{AgentOutput, OutputMode};
pub use result::AgentResult;
pub use run_options::RunOptions;
pub use runner::{AgentTool, resume_agent, run_agent, run_agent_stream, run_agent_with};
/// serde_json, re-exported: tool arguments and scripted turns are `serde_json::Value`s, so
/// a user crate needs no serde_json dependency of its own (`agent_core::json!`).
pub use serde_json::{self, Value, json};
pub use tokio_util::sync::CancellationToken;
pub use tool::ToolRegistry;
pub use tool::{State, Tool, ToolContext, ToolError};

pub mod durable {
    //! Durable runs: a run checkpointed at every boundary ([`CheckpointStore`], the
    //! builder's `checkpoints`) goes on after a crash with [`resume_agent`] (or
    //! [`resume_agent_stream`](crate::stream::resume_agent_stream)), and a run that pauses
    //! for a person ([`AgentError::Paused`](crate::AgentError::Paused): a call waiting
    //! for approval, or a tool's deferred result) goes on with the [`Decisions`] made on
    //! its [`PendingCall`]s. See `docs/durable.md`.
    //!
    //! Assembled here from the runner (the resume), the pause's types and the store's
    //! checkpoint types, which live in different layers of the crate.

    pub use crate::pause::{
        ChildPause, ChildResume, Decision, DecisionProblem, Decisions, PauseReason, PendingCall,
        Via,
    };
    pub use crate::runner::{
        LEASE, PausedRun, UnfinishedRun, paused_runs, record_decisions, resume_agent,
        resume_agent_with, unfinished_runs,
    };
    pub use crate::store::{
        CheckpointRecord, CheckpointStore, ConfigDifference, InMemoryCheckpoints, LedgerEntry,
        LedgerStatus, ResumeError, SaveOutcome,
    };
}

pub mod stream {
    //! Streaming: [`run_agent_stream`] yields a run's [`StreamEvent`]s as they happen, and
    //! [`LlmClient::complete_streaming`](crate::llm::LlmClient::complete_streaming) hands
    //! a turn's pieces ([`StreamDelta`]) to a [`StreamSink`] as they arrive.
    //!
    //! The run behind a stream is the run of [`run_agent_with`](crate::run_agent_with):
    //! the same loop, budgets, retries, guards, output modes, stores and observers. Only
    //! the model call differs: it streams, and what arrives is also sent to the caller.
    //! The last event is always [`StreamEvent::Finished`] with the
    //! [`AgentResult`](crate::AgentResult).
    //!
    //! Assembled here from the model boundary (the sink the clients write to, the lenient
    //! parser of a partial answer) and the runner (the stream of a run).

    pub use crate::llm::{StreamDelta, StreamSink};
    pub use crate::partial_json::parse_partial;
    pub use crate::runner::{
        RunStream, StreamEvent, resume_agent_stream, resume_agent_stream_with, run_agent_stream,
        run_agent_stream_with,
    };
}

pub mod prelude {
    //! The names most programs need: `use agent_core::prelude::*;`.

    pub use crate::stream::StreamEvent;
    pub use crate::{
        AgentConfig, AgentError, AgentOutput, AgentResult, Category, ConfigError, Ending,
        OutputMode, RunOptions, State, ToolError, ToolRegistry, Value, agent_output, agent_type,
        json, run_agent, run_agent_stream, run_agent_with, tool, tools,
    };
}

mod moved;
#[allow(deprecated)]
#[doc(hidden)]
pub use moved::*;

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
