//! agent-store's integration tests, one test binary: each file of `tests/` is a module
//! here, so the dependencies are linked once, not once per file. Its tests are named
//! `file::test`; one file's tests:
//!
//! ```text
//! cargo test -p agent-store --test integration records::
//! ```
//!
//! A new file of `tests/` must be declared below: agent-core's `tests/layout.rs` fails on any
//! that is not.

#[macro_use]
mod common;

// `pub`: each file was a crate root, whose `pub` items were reachable (so neither
// `dead_code` nor `unreachable_pub` applied to them); in public modules they still are.
pub mod approvals;
pub mod batch;
pub mod blobs;
pub mod dashboard;
pub mod durable;
pub mod errors;
pub mod failures;
pub mod faults;
pub mod kill;
pub mod leases;
pub mod memory;
pub mod records;
pub mod retrieval;
pub mod thread_compaction;
pub mod threads;
