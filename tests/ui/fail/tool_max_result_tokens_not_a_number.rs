use agent_core::tool;

/// List the orders.
#[tool(max_result_tokens = "2000")]
async fn list_orders() -> String {
    String::new()
}

fn main() {}
