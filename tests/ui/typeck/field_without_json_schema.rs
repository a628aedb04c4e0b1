// A type of the user's own that derives serde's `Deserialize` but not `JsonSchema`: one
// error, saying which of the two is missing.
use agent_core::agent_output;

#[derive(serde::Deserialize)]
pub struct Money {
    pub cents: u64,
}

/// A refund decision.
#[agent_output]
pub struct Refund {
    pub amount: Money,
}

fn main() {}
