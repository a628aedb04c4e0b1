//! Testing a store: [`CrashAt`] and [`HangAt`] wrap any checkpoint store to make a run
//! "die" or hang at a chosen write (always built), and, with the `conformance` feature,
//! the store trait tests as async functions any backend of
//! [`CheckpointStore`](crate::store::CheckpointStore) or [`Memory`](crate::store::Memory)
//! can run, with [`checkpoint_conformance!`](crate::checkpoint_conformance) and
//! [`memory_conformance!`](crate::memory_conformance) to write one test per function
//! (`docs/stores.md`, "Testing a store of your own"). It runs the loop, so it sits above
//! the runner (docs/architecture.md, layer 13).

mod faults;
#[cfg(feature = "conformance")]
mod suite;

pub use faults::{CrashAt, HangAt};
#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub use suite::*;

// The macros live here, beside the re-export they name (`$crate::conformance::..`).
/// Writes one `#[tokio::test]` per [`CheckpointStore`](crate::store::CheckpointStore) conformance function, each on
/// the backend `$fresh` evaluates to (an expression awaited once per test: a fresh,
/// empty store each time). Needs tokio with `macros` and `rt-multi-thread` in the
/// calling crate.
#[macro_export]
macro_rules! checkpoint_conformance {
    ($fresh:expr) => {
        $crate::__conformance_tests!($fresh;
            checkpoints_and_the_ledger_round_trip,
            a_boundary_is_one_write,
            fenced_writes_keep_one_writer,
        );
    };
}

/// Writes one `#[tokio::test]` per [`Memory`](crate::store::Memory) conformance function, as
/// [`checkpoint_conformance!`](crate::checkpoint_conformance).
#[macro_export]
macro_rules! memory_conformance {
    ($fresh:expr) => {
        $crate::__conformance_tests!($fresh;
            memory_across_runs,
            appends_are_idempotent_and_ordered_under_concurrency,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($fresh:expr; $($check:ident),* $(,)?) => {$(
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $check() {
            let backend = $fresh.await;
            $crate::conformance::$check(&backend).await;
        }
    )*};
}
