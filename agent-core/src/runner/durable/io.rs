//! One store call, bounded and reported: the timeout and catch boundary every
//! checkpoint-store call goes through, and how a failed one is reported.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;

use crate::error::panic_message;
use crate::observe::RunEvent;
use crate::runner::emit::Observers;
use crate::store::{StoreError, StoreKind};

/// Runs one store call under the timeout and a catch boundary.
pub(crate) async fn bounded<'f, T, F>(
    limit: Duration,
    call: impl FnOnce() -> F,
) -> Result<T, StoreError>
where
    F: Future<Output = Result<T, StoreError>> + Send + 'f,
{
    let call = AssertUnwindSafe(async move { tokio::time::timeout(limit, call()).await });
    match call.catch_unwind().await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_elapsed)) => Err(StoreError::Timeout { limit }),
        Err(payload) => Err(StoreError::Panicked {
            message: panic_message(payload.as_ref()),
        }),
    }
}

/// Reports one checkpoint-store failure: a warning and an observer event.
pub(crate) fn report(
    observers: &Observers,
    trace_id: &str,
    operation: &'static str,
    error: &StoreError,
) {
    tracing::warn!(store = "checkpoint", operation, error = %error, "checkpoint store call failed; the run goes on");
    observers.notify(&RunEvent::StoreFailed {
        trace_id,
        store: StoreKind::Checkpoint,
        operation,
        error,
    });
}
