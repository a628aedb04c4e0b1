//! Waiting on a run's cancellation tokens.

use tokio_util::sync::CancellationToken;

/// Resolves when any of the tokens is cancelled; never, when there is none. A token's
/// wait is boxed, so that the futures holding this one keep no room for it.
pub(crate) async fn any_cancelled(tokens: &[CancellationToken]) {
    match tokens {
        [] => std::future::pending().await,
        [one] => Box::pin(one.cancelled()).await,
        many => {
            let waits = many.iter().map(|t| Box::pin(t.cancelled()));
            futures::future::select_all(waits).await;
        }
    }
}
