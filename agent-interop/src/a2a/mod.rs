//! A2A 1.0 (the Agent2Agent protocol, <https://a2a-protocol.org/v1.0.0/specification/>):
//! an agent served over its JSON-RPC binding ([`A2aServer`]), and a remote A2A agent as
//! a tool ([`A2aAgent`]). See the crate docs for what each ending becomes.

mod client;
mod jsonrpc;
mod mapping;
mod queued;
mod run;
mod server;
mod sse;
mod tasks;
pub mod types;

pub use client::{A2aAgent, A2aError, A2aTool, REPLY_CALL};
pub use jsonrpc::{RpcCode, RpcError};
pub use mapping::{INTERRUPTED, METADATA_KEY, OUTPUT_ARTIFACT};
pub use queued::Swept;
pub use server::{A2aServer, DEFAULT_MAX_BODY_BYTES};
pub use tasks::{InMemoryTasks, TaskFuture, TaskRecord, TaskStore};
