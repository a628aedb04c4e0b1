// A struct of the user's own, without `#[agent_type]`, used as an output field and as a
// tool parameter: one error per use, on the type as written, pointing at `#[agent_type]`.
use agent_core::{agent_output, tool};

pub struct Address {
    pub city: String,
}

/// Where to ship the order.
#[agent_output]
pub struct Shipment {
    pub order_id: String,
    pub address: Address,
}

/// Checks that an address can be shipped to.
#[tool]
async fn check_address(address: Address) -> bool {
    !address.city.is_empty()
}

fn main() {}
