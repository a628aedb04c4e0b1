use agent_core::agent_output;

/// Triage decision.
#[agent_output(validate = "check_triage")]
pub struct Triage {
    pub severity: u8,
}

fn main() {}
