use agent_core::agent_output;

/// Triage decision.
#[agent_output(description = "one", description = "two")]
pub struct Triage {
    pub severity: u8,
}

fn main() {}
