use agent_core::tool;

/// Checks an order.
#[tool]
async fn prüfen(order_id: String) -> String {
    order_id
}

fn main() {}
