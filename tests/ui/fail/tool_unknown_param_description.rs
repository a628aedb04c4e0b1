// C25: a parameter description naming a parameter that does not exist.
use agent_core::tool;

/// Looks up an order by its id.
#[tool(params(order_id = "The order id, like A-123.", ordr_id = "A typo."))]
async fn lookup_order(order_id: String, verbose: Option<bool>) -> String {
    let _ = verbose;
    order_id
}

fn main() {}
