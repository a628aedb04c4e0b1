use agent_core::agent_output;

/// A wrapped answer.
#[agent_output]
pub struct Answer<T> {
    pub value: T,
}

fn main() {}
