//! [`sweep`]: the same samples through named variants of a config, compared.

pub(crate) mod stats;
