use agent_core::{State, tool};

pub struct Db;

/// Looks up an order by its id.
#[tool(params(db = "The database."))]
async fn lookup_order(db: State<Db>, order_id: String) -> String {
    let _ = db;
    order_id
}

fn main() {}
