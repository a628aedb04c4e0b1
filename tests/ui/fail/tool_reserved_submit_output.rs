use agent_core::tool;

/// Submits the answer early.
#[tool(name = "submit_output")]
async fn submit(answer: String) -> String {
    answer
}

fn main() {}
