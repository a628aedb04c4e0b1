//! Shared code of the examples: the support-ticket triage agent over the invented shop
//! data in `examples/data/` (tickets and `orders.json`).

pub mod cli;
pub mod delegation;
pub mod labels;
pub mod lookups;
pub mod model;
pub mod triage;
