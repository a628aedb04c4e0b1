//! The runs around one run: the tree of runs an agent used as a tool makes (`tree.rs`:
//! shared cancellation, deadline and caps), and the handoffs that give the
//! conversation to another agent (`handoff.rs`).

pub(crate) mod handoff;
pub(crate) mod tree;
