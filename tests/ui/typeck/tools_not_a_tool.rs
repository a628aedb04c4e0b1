use agent_core::tools;

/// Looks up an order by its id (no #[tool]).
async fn lookup_order(order_id: String) -> String {
    order_id
}

fn main() {
    let _registry = tools![lookup_order];
}
