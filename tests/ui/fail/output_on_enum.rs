use agent_core::agent_output;

/// The ticket's queue.
#[agent_output]
pub enum Queue {
    Billing,
    Shipping,
}

fn main() {}
