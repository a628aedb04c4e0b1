use agent_core::tool;

/// Refund an order.
#[tool(requires_approval = "yes")]
async fn refund(order_id: String) -> String {
    order_id
}

fn main() {}
