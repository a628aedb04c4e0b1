//! Cross-crate tests live in `tests/tests/`; this library only compiles the README's
//! example as a doctest, so the README cannot drift from the API.

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
