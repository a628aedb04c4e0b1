//! Models for tests and offline runs: [`ScriptedModel`] replays a script and records
//! every request; [`TestModel`] (model name `test`) answers any config with
//! schema-valid arguments, no script and no network. The fault-injecting store
//! wrappers and the store trait tests are in [`conformance`](crate::conformance).

mod example;
mod scripted;
mod test_model;

pub use example::example_for_schema;
pub use scripted::{ScriptStep, ScriptedModel};
pub use test_model::TestModel;
