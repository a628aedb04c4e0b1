use agent_core::agent_output;

/// Triage decision.
#[agent_output]
#[derive(Debug, serde::Deserialize)]
pub struct Triage {
    pub severity: u8,
}

fn main() {}
