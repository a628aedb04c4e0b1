//! `#[agent_type]` on nested structs and enums, tool parameters and return values: the
//! user's crate needs no serde or schemars dependency.
use agent_core::{agent_output, agent_type, tool, tools};

/// Where a ticket goes.
#[agent_type]
#[derive(Debug, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Queue {
    /// Payments, invoices, refunds.
    Billing,
    /// Parcels and carriers.
    Shipping,
}

#[agent_type]
#[derive(Debug)]
pub struct Customer {
    /// The customer's first name.
    pub name: String,
    #[serde(default)]
    pub vip: bool,
}

/// The triage of one ticket.
#[agent_output]
pub struct Triage {
    pub queue: Queue,
    pub customer: Customer,
}

#[agent_type]
pub struct Order {
    pub id: String,
    pub queue: Queue,
}

/// Look up an order.
#[tool]
async fn lookup(id: String, queue: Option<Queue>) -> Order {
    Order { id, queue: queue.unwrap_or(Queue::Shipping) }
}

fn main() {
    let _ = tools![lookup];
}
