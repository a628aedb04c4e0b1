use agent_core::tool;

pub struct Order {
    pub id: String,
}

/// Looks up an order by its id.
#[tool]
async fn lookup_order(order_id: String) -> Order {
    Order { id: order_id }
}

/// Looks up an order by its id, or fails.
#[tool]
async fn find_order(order_id: String) -> Result<String, Order> {
    Err(Order { id: order_id })
}

fn main() {}
