//! agent-core's integration tests, one test binary: each file of `tests/` is a module
//! here, so the dependencies are linked once, not once per file. Its tests are named
//! `file::test`; one file's tests:
//!
//! ```text
//! cargo test -p agent-core --test integration loop_transitions::
//! ```
//!
//! A new file of `tests/` must be declared below: `layout.rs` (below) fails on any
//! that is not.

mod common;
mod module_graph;
mod providers_support;

// `pub`: each file was a crate root, whose `pub` items were reachable (so neither
// `dead_code` nor `unreachable_pub` applied to them); in public modules they still are.
pub mod agent_tools;
pub mod approvals;
pub mod architecture;
pub mod batch;
pub mod child_approvals;
pub mod compaction;
pub mod config;
pub mod content;
pub mod content_limits;
pub mod durable;
pub mod durable_state;
pub mod embeddings;
pub mod endings;
pub mod fallback;
pub mod field_reports;
pub mod field_reports_3;
pub mod field_reports_4;
pub mod fuzz_smoke;
pub mod graders;
pub mod guardrails;
pub mod handoffs;
pub mod layout;
pub mod loop_budgets;
pub mod loop_guards;
pub mod loop_properties;
pub mod loop_transitions;
pub mod observe;
pub mod observe_spans;
pub mod output_modes;
pub mod providers_anthropic;
pub mod providers_azure;
pub mod providers_batch;
pub mod providers_batch_gate;
pub mod providers_batch_resume;
pub mod providers_bedrock;
pub mod providers_compaction;
pub mod providers_compatible;
pub mod providers_errors;
pub mod providers_field_reports;
pub mod providers_field_reports_3;
pub mod providers_field_reports_4;
pub mod providers_field_reports_5;
pub mod providers_gemini;
pub mod providers_native_tools;
pub mod providers_openai;
pub mod providers_output_modes;
pub mod providers_parts_anthropic;
pub mod providers_parts_b;
pub mod providers_parts_bedrock;
pub mod providers_parts_gemini;
pub mod providers_prompt_cache;
pub mod providers_reasoning;
pub mod providers_responses;
pub mod providers_secrets;
pub mod providers_vertex;
pub mod run_future_is_send;
pub mod run_options;
pub mod shared_connections;
pub mod store_conformance;
pub mod streaming;
pub mod streaming_runs;
pub mod sweep;
pub mod temperature;
pub mod tool_search;
pub mod tool_search_native;
