//! Trace ids, panic messages, and observer calls behind a catch boundary.

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
    hex32(fastrand::u128(1..))
}

/// `value` as 32 lowercase hex digits, most significant first: what `{:032x}` writes,
/// without going through a formatter.
fn hex32(value: u128) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 32];
    for (i, digit) in digits.iter_mut().enumerate() {
        *digit = DIGITS[(value >> (4 * (31 - i))) as usize & 0xf];
    }
    String::from_utf8(digits.to_vec()).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_are_32_lowercase_hex_digits_as_format_writes_them() {
        for value in [
            1,
            0xabc,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        ] {
            assert_eq!(hex32(value), format!("{value:032x}"));
        }
        let id = new_trace_id();
        assert_eq!(id.len(), 32);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_ne!(id, "0".repeat(32));
    }
}
