// C26: a tool with no doc comment and no description.
use agent_core::tool;

#[tool]
async fn lookup_order(order_id: String) -> String {
    order_id
}

fn main() {}
