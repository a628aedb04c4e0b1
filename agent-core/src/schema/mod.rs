//! JSON Schemas for tool parameters: how they are generated, the per-provider
//! transforms, and checkers for each provider's rules.
//!
//! [`parameters_for`] makes the *canonical* schema of a type (draft 2020-12, object
//! root, no `$schema`, every type inlined except truly recursive ones, documented unit
//! enums folded into a plain `enum`). That schema is what the runner validates arguments
//! against. The provider adapters send a transformed copy:
//!
//! | function | provider | what changes |
//! |---|---|---|
//! | [`for_anthropic`] | Anthropic `input_schema` | `$schema` dropped, root `type: object` ensured |
//! | [`for_anthropic_output`] | Anthropic `output_config.format` (native output) | as above, plus every object closed, constraints moved into descriptions |
//! | [`for_openai`] | OpenAI and compatible servers | as above, plus `properties: {}` on an empty root |
//! | [`for_compatible_output`] | OpenAI-compatible servers' tool parameters and `response_format` (native output) | as `for_openai`, plus `\d`/`\w` in patterns spelled out and nullable optional properties listed in `required`, for grammar-based decoders |
//! | [`for_openai_strict`] | OpenAI with `strict: true` | every object closed and fully required, `oneOf` to `anyOf`, `$ref` siblings, `default` and unsupported `format`s dropped, `minLength`/`maxLength`-like keywords moved into descriptions |
//! | [`for_gemini`] | Gemini function declarations | every `$ref` inlined, type arrays, null branches and `null` enum values to `nullable`, `const` to `enum`, an `anyOf`'s sibling keys moved into its branches, unknown keywords dropped |
//!
//! Every transform only tightens the canonical schema or drops annotations, except where
//! a provider cannot express a constraint at all (Gemini: `additionalProperties`,
//! `patternProperties`); then a value the provider accepts may still fail the runner's
//! validation, and the model gets that error back. The checkers
//! ([`anthropic_violations`], [`openai_violations`], [`openai_strict_violations`],
//! [`gemini_violations`]) state each provider's rules (`docs/providers.md`); an adapter can
//! use [`openai_strict_violations`] to fall back to `strict: false` for a schema that strict
//! mode cannot express (maps, `serde_json::Value`, tuples).

pub use crate::validate::{SchemaValidator, ValidationErrors, whole_numbers_as_integers};
mod compatible;
mod generate;
mod rules;
mod transform;
mod walk;

pub use compatible::for_compatible_output;
pub use generate::{normalize, parameters_for};
pub use rules::{
    anthropic_violations, gemini_violations, openai_strict_violations, openai_violations,
};
pub use transform::{
    for_anthropic, for_anthropic_output, for_gemini, for_openai, for_openai_strict,
};
