use agent_core::agent_output;

/// Nothing to say.
#[agent_output]
pub struct Done;

fn main() {}
