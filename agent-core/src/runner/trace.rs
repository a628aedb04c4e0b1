//! Trace ids, panic messages, and observer calls behind a catch boundary.

use std::fmt::Write;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crate::error::panic_message;
use crate::observe::{Observer, RunEvent};

/// The run's trace id: with the `otel` feature and a tracing-opentelemetry layer
/// exporting `span`, the OpenTelemetry trace id of that span; else a random one.
pub(crate) fn trace_id_of(span: &tracing::Span) -> String {
    #[cfg(feature = "otel")]
    if let Some(id) = crate::otel::trace_id(span) {
        return id;
    }
    let _ = span;
    new_trace_id()
}

/// Records `gen_ai.response.finish_reasons` on a `chat` span: a string array on an
/// exported OpenTelemetry span (as the conventions type it), else the `tracing` field
/// (`["stop"]`).
pub(crate) fn record_finish_reasons(span: &tracing::Span, reason: &str) {
    #[cfg(feature = "otel")]
    if crate::otel::record_finish_reasons(span, &[reason]) {
        return;
    }
    span.record(
        "gen_ai.response.finish_reasons",
        tracing::field::debug([reason]),
    );
}

/// A random W3C-style trace id: 32 lowercase hex digits.
pub(crate) fn new_trace_id() -> String {
    let mut id = String::with_capacity(32);
    let value = fastrand::u128(1..);
    let _ = write!(id, "{value:032x}");
    id
}

/// Calls the observer, if any; a panic in it is caught and traced.
pub(crate) fn notify(observer: Option<&dyn Observer>, event: &RunEvent<'_>) {
    if let Some(observer) = observer
        && let Err(payload) =
            std::panic::catch_unwind(AssertUnwindSafe(|| observer.on_event(event)))
    {
        tracing::warn!(panic = %panic_message(payload.as_ref()), "observer panicked; event dropped");
    }
}

/// The observers of one run: the config's, then the run's own.
#[derive(Clone, Default)]
pub(crate) struct Observers {
    pub(crate) config: Option<Arc<dyn Observer>>,
    pub(crate) run: Option<Arc<dyn Observer>>,
}

impl Observers {
    /// Calls each observer in turn, each behind its own catch boundary.
    pub(crate) fn notify(&self, event: &RunEvent<'_>) {
        notify(self.config.as_deref(), event);
        notify(self.run.as_deref(), event);
    }
}
