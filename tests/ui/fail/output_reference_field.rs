use agent_core::agent_output;

/// Triage decision.
#[agent_output]
pub struct Triage {
    pub summary: &'static str,
    pub tags: &'static [String],
}

fn main() {}
