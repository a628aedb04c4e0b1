//! The trybuild suite of the macros: every compile error has a case with its `.stderr`,
//! and the pass cases show what must compile (C24 among them).
//!
//! `ui/fail/` holds the errors the macros themselves raise: their text and spans are ours
//! and do not change with the compiler. `ui/typeck/` holds errors rustc's type checker
//! raises on the generated code (a field type without `JsonSchema`, a `validate` fn of the
//! wrong signature, ...): their text changes between rustc releases, so they are checked
//! on the pinned toolchain only (`PINNED_RUSTC`, the one CI uses) and skipped, with a
//! note, elsewhere. Regenerate `.stderr` files with `TRYBUILD=overwrite`.

#![allow(missing_docs)]

use std::process::Command;

/// The rustc release whose messages `ui/typeck/*.stderr` hold.
const PINNED_RUSTC: &str = "rustc 1.95.";

fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    Command::new(rustc)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
    let version = rustc_version();
    if version.starts_with(PINNED_RUSTC) {
        cases.compile_fail("ui/typeck/*.rs");
    } else {
        eprintln!(
            "note: ui/typeck skipped: its messages are pinned to {PINNED_RUSTC}x, this is {}",
            version.trim()
        );
    }
}
