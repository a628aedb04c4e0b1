use agent_core::tool;

/// Looks up an order by its id.
#[tool(name = "")]
async fn lookup_order(order_id: String) -> String {
    order_id
}

fn main() {}
