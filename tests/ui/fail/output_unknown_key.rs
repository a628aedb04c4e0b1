use agent_core::agent_output;

/// Triage decision.
#[agent_output(descripton = "typo in the key")]
pub struct Triage {
    pub severity: u8,
}

fn main() {}
