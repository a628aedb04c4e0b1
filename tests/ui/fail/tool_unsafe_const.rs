use agent_core::tool;

/// Looks up an order by its id.
#[tool]
unsafe fn lookup_order(order_id: String) -> String {
    order_id
}

fn main() {}
