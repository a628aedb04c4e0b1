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
//! - [`CopyReady`]/[`CopyNotReady`] let an output struct's (or a tool's arguments')
//!   `Deserialize` and `JsonSchema` impls compile whatever its field types: they
//!   delegate to a copy of the struct whose derived impls carry where clauses on the
//!   field types, so a bad field type makes the copy's impls not apply instead of
//!   failing inside them; the field check has reported the mistake already, and no
//!   second error follows.

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Deserializer;
use serde::de::DeserializeOwned;

use crate::tool::{State, ToolContext};

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

/// What the `Deserialize` and `JsonSchema` impls of an `#[agent_output]` struct or a
/// tool's arguments use of their copy `T`, which derives both under where clauses on
/// the field types (see the macro crate's docs). Dispatching to the copy keeps the
/// struct's own impls unconditional: a bad field type fails only its field check, and
/// structs that contain each other do not make the compiler's proof recurse.
pub trait CopyReady<T> {
    /// `T::deserialize`.
    ///
    /// # Errors
    /// The deserializer's error.
    fn deserialize_copy<'de, D: Deserializer<'de>>(&self, deserializer: D) -> Result<T, D::Error>;
    /// `T::schema_name`.
    fn schema_name(&self) -> Cow<'static, str>;
    /// `T::schema_id`.
    fn schema_id(&self) -> Cow<'static, str>;
    /// `T::inline_schema`.
    fn inline_schema(&self) -> bool;
    /// `T::json_schema`.
    fn json_schema(&self, generator: &mut SchemaGenerator) -> Schema;
}

impl<T: DeserializeOwned + JsonSchema> CopyReady<T> for Probe<T> {
    fn deserialize_copy<'de, D: Deserializer<'de>>(&self, deserializer: D) -> Result<T, D::Error> {
        T::deserialize(deserializer)
    }

    fn schema_name(&self) -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id(&self) -> Cow<'static, str> {
        T::schema_id()
    }

    fn inline_schema(&self) -> bool {
        T::inline_schema()
    }

    fn json_schema(&self, generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

/// The same calls on a copy whose field types lack `Deserialize` or `JsonSchema`. Only a
/// program that already fails to compile (the field check reported the bad type)
/// selects these; were one ever selected in a program that compiles, building it would
/// fail with [`Unreachable::REACHED`]'s message, so none of them runs.
pub trait CopyNotReady<T> {
    /// Unreachable; see the trait.
    ///
    /// # Errors
    /// Always.
    fn deserialize_copy<'de, D: Deserializer<'de>>(&self, _deserializer: D) -> Result<T, D::Error> {
        let () = Unreachable::<T>::REACHED;
        Err(serde::de::Error::custom("this type has no JSON form"))
    }

    /// Unreachable; see the trait.
    fn schema_name(&self) -> Cow<'static, str> {
        let () = Unreachable::<T>::REACHED;
        Cow::Borrowed("unreachable")
    }

    /// Unreachable; see the trait.
    fn schema_id(&self) -> Cow<'static, str> {
        let () = Unreachable::<T>::REACHED;
        Cow::Borrowed("unreachable")
    }

    /// Unreachable; see the trait.
    fn inline_schema(&self) -> bool {
        let () = Unreachable::<T>::REACHED;
        false
    }

    /// Unreachable; see the trait.
    fn json_schema(&self, _generator: &mut SchemaGenerator) -> Schema {
        let () = Unreachable::<T>::REACHED;
        Schema::default()
    }
}

impl<T> CopyNotReady<T> for &Probe<T> {}

/// A compile-time guard on the [`CopyNotReady`] paths.
pub struct Unreachable<T>(PhantomData<T>);

impl<T> Unreachable<T> {
    /// Evaluated only when a [`CopyNotReady`] method is instantiated for `T`, which a
    /// program that compiles never does: a compile-time failure, never a runtime panic.
    pub const REACHED: () = panic!(
        "agent-core internal error: the copy of an `#[agent_output]` or `#[tool]` arguments struct lacks Deserialize or JsonSchema although its field checks passed; please report it"
    );
}
