// `State` and `ToolContext` imported under other names: the macro cannot recognise
// `Dep<Orders>` or `Ctx` by name, so the error says what to write instead of telling
// the user to add `#[agent_type]`.
use agent_core::State as Dep;
use agent_core::ToolContext as Ctx;
use agent_core::tool;

pub struct Orders {
    pub count: u32,
}

/// Counts the orders.
#[tool]
async fn count_orders(orders: Dep<Orders>) -> u32 {
    orders.count
}

/// Names the call being served.
#[tool]
async fn call_name(ctx: Ctx) -> String {
    ctx.call_id().to_owned()
}

fn main() {}
