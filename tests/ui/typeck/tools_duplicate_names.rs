use agent_core::{tool, tools};

/// Looks up an order by its id.
#[tool(name = "lookup")]
async fn lookup_order(order_id: String) -> String {
    order_id
}

/// Looks up a customer by id.
#[tool(name = "lookup")]
async fn lookup_customer(customer_id: String) -> String {
    customer_id
}

fn main() {
    let _registry = tools![lookup_order, lookup_customer];
}
