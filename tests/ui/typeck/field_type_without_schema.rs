// A type from another crate that has no JSON form (`std::time::Instant`), as an output
// field and as a tool parameter: the first error is ours, on the type, not serde's.
use agent_core::{agent_output, tool};

/// When the ticket was opened.
#[agent_output]
pub struct Opened {
    pub ticket: String,
    pub at: std::time::Instant,
}

/// Schedules a callback.
#[tool]
async fn schedule(at: std::time::Instant) -> String {
    format!("{at:?}")
}

fn main() {}
