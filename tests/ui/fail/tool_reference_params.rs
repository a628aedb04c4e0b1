use agent_core::tool;

/// Looks up orders by id.
#[tool]
async fn lookup_orders(customer: &str, order_ids: &[String], note: &mut String) -> usize {
    let _ = (customer, note);
    order_ids.len()
}

fn main() {}
