use agent_core::tool;

/// Looks up an order by its id.
#[tool]
async fn look_up_the_order_in_the_warehouse_database_by_its_identifier_now(order_id: String) -> String {
    order_id
}

fn main() {}
