//! Benchmarks of the run loop (filled in below).
fn main() {}
