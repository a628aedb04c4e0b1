use agent_core::tool;

/// Looks up an order by its id.
#[tool(params(order_id = "The order id.", order_id = "Again."))]
async fn lookup_order(order_id: String) -> String {
    order_id
}

fn main() {}
