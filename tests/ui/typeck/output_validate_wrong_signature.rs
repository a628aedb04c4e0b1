use agent_core::agent_output;

/// Triage decision.
#[agent_output(validate = check_triage)]
pub struct Triage {
    pub severity: u8,
}

fn check_triage(triage: Triage) -> bool {
    triage.severity > 0
}

fn main() {}
