use agent_core::agent_output;

#[agent_output(description = 42)]
pub struct Triage {
    pub severity: u8,
}

fn main() {}
