//! The total run loop: [`run_agent`], its streamed form, and resumption.
//!
//! Every model turn is classified into exactly one transition (see `docs/loop.md`, the
//! transition table); every run ends in an [`AgentResult`](crate::AgentResult) holding a
//! validated value or one [`AgentError`](crate::AgentError).
//!
//! The layout (see `docs/architecture.md`, "Inside the runner"): `entry.rs` starts and
//! ends a run; `run.rs` is the [`Run`](run::Run) itself, which `state.rs`' `RunState`
//! (what a checkpoint keeps) is part of; the loop is `drive.rs`, `call.rs`, `turn.rs`,
//! `submit.rs`, `act.rs`, `search.rs` (tool search) and `finish.rs`; each capability is a part in its own module:
//! `model/` (the call's sink, span and the transcript for another provider), `tools/`
//! (tool execution, guards, guardrails), `durable/` (checkpoints, the ledger, pauses),
//! `agents/` (the run tree, handoffs), `compact.rs`, `stores.rs` and `emit.rs` (where
//! happenings go).

mod act;
mod agent_tool;
mod agents;
mod batched;
mod call;
mod cancel;
mod compact;
mod customer;
mod drive;
mod durable;
mod emit;
mod entry;
mod finish;
mod guard;
mod model;
mod native_search;
mod parts;
mod resume;
mod run;
mod search;
mod state;
mod stores;
mod stream;
mod submit;
mod thread;
mod tools;
mod trace;
mod turn;

pub use agent_tool::AgentTool;
pub use durable::lease::LEASE;
pub use durable::pause::{PausedRun, paused_runs, record_decisions};
pub use durable::unfinished::{UnfinishedRun, unfinished_runs};
pub use emit::StreamEvent;
pub use entry::{bench_run_sizes, run_agent, run_agent_with};
pub use model::sink::bench_partial_output;
pub use resume::{resume_agent, resume_agent_with};
pub(crate) use stores::flush_stores;
pub use stream::{
    RunStream, resume_agent_stream, resume_agent_stream_with, run_agent_stream,
    run_agent_stream_with,
};
