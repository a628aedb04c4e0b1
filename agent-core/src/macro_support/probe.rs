//! How the macros' generated code asks the type checker about a concrete type without
//! failing when the answer is no, so that one mistake gives one error.
//!
//! A [`Probe<T>`] is dispatched by method resolution ("autoref/autoderef specialization"):
//! the compiler tries the impls of a method on `&&&&Probe<T>`, `&&&Probe<T>`, ... in
//! order and takes the first whose bounds `T` meets, so the same call compiles whatever
//! `T` is and its return type tells which case holds. `T` must be concrete (the macros
//! only probe the types as written in a struct or fn signature).
//!
//! - [`Verdict`]s check an `#[agent_output]` field or a `#[tool]` parameter: the one
//!   error for a type without a JSON form is raised by a trait that has no impl for the
//!   case at hand ([`OutputField`], [`ToolParam`], [`InjectedParam`]), with a message of
//!   ours, on the type as the user wrote it; no serde or schemars bound leaks into it.
//! - [`Ready`]/[`NotReady`] let the generated `AgentOutput` and `Tool` impls compile
//!   even when the output struct or the arguments struct lacks `Deserialize` or
//!   `JsonSchema` (their derives carry where clauses on the field types, so a bad field
//!   makes them not apply instead of failing): the field check has reported the mistake
//!   already, and no second error follows.

use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ValidatorCell;
use crate::output::SUBMIT_OUTPUT;
use crate::schema::parameters_for;
use crate::tool::{State, ToolContext, ToolDefinition, ToolError};
use crate::validate::ValidationErrors;

/// The dispatch probe of the concrete type `T`.
pub struct Probe<T: ?Sized>(PhantomData<fn() -> PhantomData<T>>);

impl<T: ?Sized> Probe<T> {
    /// The probe.
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T: ?Sized> Default for Probe<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The outcome of checking one field or parameter type: `K` says what the type has.
pub struct Verdict<K>(PhantomData<K>);

impl<K> Verdict<K> {
    const fn new() -> Self {
        Self(PhantomData)
    }

    /// Compiles when `T` can be a field of an `#[agent_output]` struct.
    pub fn output_field<T: ?Sized + OutputField<K>>(self) {}

    /// Compiles when `T` can be a JSON parameter of a `#[tool]` fn.
    pub fn tool_param<T: ?Sized + ToolParam<K>>(self) {}
}

/// `T` implements `Deserialize` and `JsonSchema`.
pub enum DeserializeAndJsonSchema {}
/// `T` implements `Deserialize` but not `JsonSchema`.
pub enum MissingJsonSchema {}
/// `T` implements `JsonSchema` but not `Deserialize`.
pub enum MissingDeserialize {}
/// `T` implements neither `Deserialize` nor `JsonSchema`.
pub enum MissingDeserializeAndJsonSchema {}
/// `T` is `State<S>` or `ToolContext`, written under another name.
pub enum WrittenUnderAnotherName {}
/// `T` is written `State<..>` or `ToolContext`.
pub enum WrittenAsIs {}

/// The verdict on `State<S>` and `ToolContext` taken for JSON parameters (a renamed
/// import, a type alias).
pub struct InjectedVerdict;

impl InjectedVerdict {
    /// Never compiles: `T` is injected by the runner (see [`InjectedParam`]).
    pub fn tool_param<T: ?Sized + InjectedParam<WrittenUnderAnotherName>>(self) {}

    /// Never compiles: state or a context is not JSON.
    pub fn output_field<T: ?Sized + OutputField<MissingDeserializeAndJsonSchema>>(self) {}
}

/// What a field of an `#[agent_output]` struct must be; `K` is the [`Verdict`] on it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a field of an `#[agent_output]` struct",
    label = "needs `Deserialize` and `JsonSchema`",
    note = "for a type of your own, put `#[agent_type]` on its definition in place of any serde or schemars derives: it derives them through agent-core",
    note = "a type from another crate needs both from that crate; if it has neither (like `std::time::Instant`), use a type that has: a number, a `String`, or a type of your own with `#[agent_type]`"
)]
pub trait OutputField<K> {}

impl<T: ?Sized> OutputField<DeserializeAndJsonSchema> for T {}

/// What a JSON parameter of a `#[tool]` fn must be; `K` is the [`Verdict`] on it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[tool]` parameter",
    label = "needs `Deserialize` and `JsonSchema`",
    note = "for a type of your own, put `#[agent_type]` on its definition in place of any serde or schemars derives: it derives them through agent-core",
    note = "a type from another crate needs both from that crate; if it has neither (like `std::time::Instant`), use a type that has: a number, a `String`, or a type of your own with `#[agent_type]`"
)]
pub trait ToolParam<K> {}

impl<T: ?Sized> ToolParam<DeserializeAndJsonSchema> for T {}

/// What `State<S>` and `ToolContext` parameters must be written as for `#[tool]` to
/// inject them.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is injected by the runner, but `#[tool]` took this parameter for one the model sends",
    label = "`#[tool]` recognises `State<..>` and `ToolContext` by these names",
    note = "`#[tool]` reads the type as written, before imports are resolved: write `State<..>` or `ToolContext` here (a path ending in them, like `agent_core::State<T>`, works too), not a renamed import (`use agent_core::State as Dep`) or a type alias"
)]
pub trait InjectedParam<K> {}

impl<T: ?Sized> InjectedParam<WrittenAsIs> for T {}

/// Level 4 of the verdict (tool parameters only): `State<S>` or `ToolContext`.
pub trait ViaInjected {
    /// The verdict.
    fn verdict(&self) -> InjectedVerdict {
        InjectedVerdict
    }
}

impl<S> ViaInjected for &&&&Probe<State<S>> {}
impl ViaInjected for &&&&Probe<ToolContext> {}

/// Level 3 of the verdict: `Deserialize` and `JsonSchema`.
pub trait ViaJsonForm {
    /// The verdict.
    fn verdict(&self) -> Verdict<DeserializeAndJsonSchema> {
        Verdict::new()
    }
}

impl<T: DeserializeOwned + JsonSchema> ViaJsonForm for &&&Probe<T> {}

/// Level 2 of the verdict: `Deserialize` only.
pub trait ViaDeserialize {
    /// The verdict.
    fn verdict(&self) -> Verdict<MissingJsonSchema> {
        Verdict::new()
    }
}

impl<T: DeserializeOwned> ViaDeserialize for &&Probe<T> {}

/// Level 1 of the verdict: `JsonSchema` only.
pub trait ViaJsonSchema {
    /// The verdict.
    fn verdict(&self) -> Verdict<MissingDeserialize> {
        Verdict::new()
    }
}

impl<T: JsonSchema> ViaJsonSchema for &Probe<T> {}

/// Level 0 of the verdict: neither.
pub trait ViaNeither {
    /// The verdict.
    fn verdict(&self) -> Verdict<MissingDeserializeAndJsonSchema> {
        Verdict::new()
    }
}

impl<T: ?Sized> ViaNeither for Probe<T> {}

/// The generated impls' use of a struct that has `Deserialize` and `JsonSchema`.
pub trait Ready<T> {
    /// The struct's parameter schema ([`parameters_for`]).
    fn parameters(&self) -> Value;

    /// The `submit_output` definition of the struct.
    fn output_tool(&self, description: &str) -> ToolDefinition;

    /// See [`output_from_arguments`](super::output_from_arguments).
    ///
    /// # Errors
    /// Every schema violation, or serde's error.
    fn output_from_arguments(
        &self,
        cell: &ValidatorCell,
        arguments: &Value,
    ) -> Result<T, ValidationErrors>;

    /// See [`tool_arguments`](super::tool_arguments).
    ///
    /// # Errors
    /// A [`ToolError`] naming what did not deserialize.
    fn tool_arguments(&self, arguments: &Value) -> Result<T, ToolError>;
}

impl<T: DeserializeOwned + JsonSchema> Ready<T> for Probe<T> {
    fn parameters(&self) -> Value {
        parameters_for::<T>()
    }

    fn output_tool(&self, description: &str) -> ToolDefinition {
        super::output_tool::<T>(description)
    }

    fn output_from_arguments(
        &self,
        cell: &ValidatorCell,
        arguments: &Value,
    ) -> Result<T, ValidationErrors> {
        super::output_from_arguments::<T>(cell, arguments)
    }

    fn tool_arguments(&self, arguments: &Value) -> Result<T, ToolError> {
        super::tool_arguments::<T>(arguments)
    }
}

/// The same calls on a struct that lacks `Deserialize` or `JsonSchema`. Only a program
/// that already fails to compile (a field check reported the bad field type) selects
/// these; were one ever selected in a program that compiles, building it would fail
/// with [`Unreachable::REACHED`]'s message, so none of them runs.
pub trait NotReady<T> {
    /// Unreachable; see the trait.
    fn parameters(&self) -> Value {
        let () = Unreachable::<T>::REACHED;
        Value::Null
    }

    /// Unreachable; see the trait.
    fn output_tool(&self, description: &str) -> ToolDefinition {
        let () = Unreachable::<T>::REACHED;
        ToolDefinition::new(SUBMIT_OUTPUT, description, Value::Null)
    }

    /// Unreachable; see the trait.
    ///
    /// # Errors
    /// Always.
    fn output_from_arguments(
        &self,
        _cell: &ValidatorCell,
        _arguments: &Value,
    ) -> Result<T, ValidationErrors> {
        let () = Unreachable::<T>::REACHED;
        Err(ValidationErrors::one("/: the output type has no JSON form"))
    }

    /// Unreachable; see the trait.
    ///
    /// # Errors
    /// Always.
    fn tool_arguments(&self, _arguments: &Value) -> Result<T, ToolError> {
        let () = Unreachable::<T>::REACHED;
        Err(ToolError::new("the tool's arguments have no JSON form"))
    }
}

impl<T> NotReady<T> for &Probe<T> {}

/// A compile-time guard on the [`NotReady`] paths.
pub struct Unreachable<T>(PhantomData<T>);

impl<T> Unreachable<T> {
    /// Evaluated only when a [`NotReady`] method is instantiated for `T`, which a
    /// program that compiles never does: a compile-time failure, never a runtime panic.
    pub const REACHED: () = panic!(
        "agent-core internal error: a `#[agent_output]` or `#[tool]` struct without Deserialize or JsonSchema passed its field checks; please report it"
    );
}
