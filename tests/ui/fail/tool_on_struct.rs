use agent_core::tool;

/// Looks up an order by its id.
#[tool]
pub struct LookupOrder {
    pub order_id: String,
}

fn main() {}
