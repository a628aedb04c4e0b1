//! agent-interop's integration tests: one binary, each file a module.

pub mod a2a_client;
pub mod a2a_queued;
pub mod a2a_server;
pub mod ag_ui;
pub mod common;
