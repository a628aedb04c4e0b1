use agent_core::agent_output;

pub struct Customer {
    pub id: u64,
}

/// Triage decision.
#[agent_output]
pub struct Triage {
    pub severity: u8,
    pub customer: Customer,
}

fn main() {}
