use agent_core::agent_type;

#[agent_type]
fn not_a_type() {}

fn main() {}
