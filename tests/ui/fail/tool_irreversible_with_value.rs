use agent_core::tool;

/// Refund an order.
#[tool(irreversible = true)]
async fn refund(order_id: String) -> String {
    order_id
}

fn main() {}
