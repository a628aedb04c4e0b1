//! Lenient parsing of a JSON object that is still arriving: the longest prefix that
//! makes a value once its open strings and brackets are closed ([`parse_partial`]), and
//! the same kept up to date piece by piece (`incremental`), for a streamed answer.

pub(crate) mod incremental;
mod whole;

pub(crate) use incremental::IncrementalJson;
pub use whole::parse_partial;
