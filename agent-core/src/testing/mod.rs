//! Models for tests and offline runs: [`ScriptedModel`] replays a script and records
//! every request; [`TestModel`] (model name `test`) answers any config with
//! schema-valid arguments, no script and no network. [`CrashAt`] and [`HangAt`] wrap a
//! checkpoint store to make a run "die" at a chosen write; with the `conformance`
//! feature, `conformance` holds the store trait tests as functions any backend can run.

#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
mod example;
mod faults;
mod scripted;
mod test_model;

pub use example::example_for_schema;
pub use faults::{CrashAt, HangAt};
pub use scripted::{ScriptStep, ScriptedModel};
pub use test_model::TestModel;
