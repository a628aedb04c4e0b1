//! A test's own `tracing` subscriber, set for its thread, that sees every span and event
//! of the code it runs even while other test threads hit the same callsites first.
//!
//! `tracing` caches each callsite's interest process-wide when the callsite is first hit.
//! When at most one dispatcher is registered, that first hit asks only the *hitting
//! thread's* default, so another test's thread (no subscriber: "never") can cache a
//! callsite as uninteresting while this test's subscriber is the only one alive, and the
//! test's own spans at that callsite then go unrecorded (seen in CI as a flaky
//! `observe_spans::spans`, 0 chat spans captured). With a second dispatcher kept alive for
//! the whole process, interest is always computed over every live dispatcher, ours
//! included, so no callsite is cached as "never" while a test subscriber lives.

use std::sync::OnceLock;

use tracing::Dispatch;
use tracing::subscriber::DefaultGuard;

/// A registry with no layers: interested in everything, records nothing, never the
/// default of any thread. Its only job is to keep two dispatchers registered.
fn keep_two_dispatchers() {
    static KEEP: OnceLock<Dispatch> = OnceLock::new();
    KEEP.get_or_init(|| Dispatch::new(tracing_subscriber::registry()));
}

/// Sets `subscriber` as this thread's default until the guard drops, with every callsite's
/// interest recomputed so none cached before (while no subscriber was live) is skipped.
pub(crate) fn set_default(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
) -> DefaultGuard {
    keep_two_dispatchers();
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    guard
}
