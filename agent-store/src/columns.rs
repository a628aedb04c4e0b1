//! Values as they go into columns: milliseconds as integers, text without NUL, keys
//! checked.

use agent_core::store::StoreError;

/// Milliseconds as a database integer (saturating).
pub(crate) fn db_ms(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A column copy of text: PostgreSQL text cannot hold NUL, so it becomes U+FFFD there
/// (the JSON body keeps the exact text).
pub(crate) fn column(text: &str) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text.to_owned()
    }
}

/// A key (trace id, thread id, document id) must be usable as is on both backends.
pub(crate) fn check_key(kind: &str, key: &str) -> Result<(), StoreError> {
    if key.is_empty() {
        return Err(StoreError::invalid(format!("an empty {kind}")));
    }
    if key.contains('\0') {
        return Err(StoreError::invalid(format!("a {kind} with a NUL byte")));
    }
    Ok(())
}
