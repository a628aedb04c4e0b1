//! Trace ids: the run's, and the finish reasons recorded on a `chat` span.

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
