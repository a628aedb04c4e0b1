//! The pages: one module per page, and the layout they share.

pub(crate) mod blobs;
pub(crate) mod layout;
pub(crate) mod login;
pub(crate) mod overview;
pub(crate) mod pending;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod scope;
pub(crate) mod sweeps;
pub(crate) mod turns;
