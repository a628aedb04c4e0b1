use agent_core::{AgentOutput, agent_output, json};

/// A plan of work: partial while steps are open.
#[agent_output(partial = Plan::has_open_steps)]
pub struct Plan {
    pub done: Vec<String>,
    pub open: Vec<String>,
}

impl Plan {
    fn has_open_steps(&self) -> bool {
        !self.open.is_empty()
    }
}

fn main() {
    let partial = Plan::from_arguments(&json!({"done": ["a"], "open": ["b"]})).unwrap();
    assert!(partial.is_partial());
    let full = Plan::from_arguments(&json!({"done": ["a"], "open": []})).unwrap();
    assert!(!full.is_partial());
}
