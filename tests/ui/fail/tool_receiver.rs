use agent_core::tool;

pub struct Shop;

impl Shop {
    /// Looks up an order by its id.
    #[tool]
    async fn lookup_order(&self, order_id: String) -> String {
        order_id
    }
}

fn main() {}
