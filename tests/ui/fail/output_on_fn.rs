use agent_core::agent_output;

/// Not a type.
#[agent_output]
pub fn triage() {}

fn main() {}
