//! The fuzz targets' shared body: each target of `fuzz_targets/` runs the function
//! `agent_core::fuzzing` has under its name on libFuzzer's input.

/// Runs the target `name` on `data`; a broken promise (see `agent_core::fuzzing`) is a
/// panic, which libFuzzer reports as a crash with the input.
///
/// # Panics
/// When the target finds a broken promise, or when no target has that name.
pub fn check(name: &str, data: &[u8]) {
    let Some(target) = agent_core::fuzzing::target(name) else {
        panic!("no fuzz target named {name}");
    };
    if let Err(broken) = (target.run)(data) {
        panic!("{name}: {broken}");
    }
}
