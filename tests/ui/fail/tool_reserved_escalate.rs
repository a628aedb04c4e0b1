use agent_core::tool;

/// Pages the on-call human.
#[tool]
async fn escalate_to_human(reason: String) -> String {
    reason
}

fn main() {}
