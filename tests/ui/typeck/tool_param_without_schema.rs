use agent_core::tool;

pub struct OrderId(pub String);

/// Looks up an order by its id.
#[tool]
async fn lookup_order(order_id: OrderId) -> String {
    order_id.0
}

fn main() {}
