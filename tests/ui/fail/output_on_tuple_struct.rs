use agent_core::agent_output;

/// Severity and summary.
#[agent_output]
pub struct Triage(u8, String);

fn main() {}
