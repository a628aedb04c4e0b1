//! agent-tests's integration tests, one test binary: each file of `tests/` is a module
//! here, so the dependencies are linked once, not once per file. Its tests are named
//! `file::test`; one file's tests:
//!
//! ```text
//! cargo test -p agent-tests --test integration macros_tool::
//! ```
//!
//! A new file of `tests/` must be declared below: agent-core's `tests/layout.rs` fails on any
//! that is not.

// `pub`: each file was a crate root, whose `pub` items were reachable (so neither
// `dead_code` nor `unreachable_pub` applied to them); in public modules they still are.
pub mod docs_guide;
pub mod live_triage;
pub mod macros_output;
pub mod macros_schema_copy;
pub mod macros_tool;
pub mod otel;
pub mod schemas_providers;
pub mod schemas_rules;
pub mod ui;
