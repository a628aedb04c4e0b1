//! agent-mcp's integration tests, one test binary: each file of `tests/` is a module
//! here, so the dependencies are linked once, not once per file. Its tests are named
//! `file::test`; one file's tests:
//!
//! ```text
//! cargo test -p agent-mcp --test integration http::
//! ```
//!
//! A new file of `tests/` must be declared below: agent-core's `tests/layout.rs` fails on any
//! that is not.
//!
//! `stdio.rs` is not here: it is a test target of its own (`--test stdio`) with its own
//! `main`, because that binary is also the MCP server its tests start, and libtest's own
//! lines on stdout would corrupt the protocol.

mod common;

// `pub`: each file was a crate root, whose `pub` items were reachable (so neither
// `dead_code` nor `unreachable_pub` applied to them); in public modules they still are.
pub mod asking;
pub mod elicit_pause;
pub mod field_reports;
pub mod http;
pub mod parts;
pub mod serve;
