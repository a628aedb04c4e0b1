use agent_core::agent_output;

fn has_open_items(plan: &Plan) -> usize {
    plan.open.len()
}

/// A plan of work.
#[agent_output(partial = has_open_items)]
pub struct Plan {
    pub done: Vec<String>,
    pub open: Vec<String>,
}

fn main() {}
