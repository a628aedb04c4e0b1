//! What every handler shares: the store, the settings and the sessions.

use std::sync::Arc;

use agent_store::Store;

use crate::auth::Auth;
use crate::cli::Config;

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) store: Store,
    pub(crate) config: Config,
    pub(crate) auth: Auth,
}

pub(crate) type State = axum::extract::State<Arc<App>>;
