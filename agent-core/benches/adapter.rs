//! Adapter benchmark (filled in below).
fn main() {}
