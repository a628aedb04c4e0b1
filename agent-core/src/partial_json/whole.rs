//! [`parse_partial`]: the value a prefix of a JSON document holds so far, worked out from
//! the whole prefix.

use serde_json::Value;

/// Parses `text`, a prefix of a JSON document, into the value it holds so far.
///
/// An open string is closed where it stops (a half-written escape dropped); open
/// objects and arrays are closed; a member whose value has not started yet (`"a":`), a
/// half-written key, number or literal (`tru`) is left out by falling back to the last
/// point where a value was complete. `None` when nothing usable has arrived (empty
/// text, or text that is not JSON at all).
pub fn parse_partial(text: &str) -> Option<Value> {
    let text = text.trim_start();
    if text.is_empty() {
        return None;
    }
    let bytes = text.as_bytes();
    // The closers of the open containers, innermost last.
    let mut stack: Vec<u8> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    // The last prefix end where every value was complete, with its closers (one
    // buffer, overwritten at each such point: no allocation per bracket or comma).
    let mut safe_end: Option<usize> = None;
    let mut safe_closers: Vec<u8> = Vec::new();
    let mut mark = |end: usize, stack: &[u8]| {
        safe_end = Some(end);
        safe_closers.clear();
        safe_closers.extend_from_slice(stack);
    };
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => {
                stack.push(b'}');
                mark(i + 1, &stack);
            }
            b'[' => {
                stack.push(b']');
                mark(i + 1, &stack);
            }
            b'}' | b']' => {
                if stack.pop() != Some(b) {
                    return None;
                }
                mark(i + 1, &stack);
            }
            b',' => mark(i, &stack),
            _ => {}
        }
    }
    if !in_string && stack.is_empty() {
        // Nothing open: a whole document, or not JSON.
        return serde_json::from_str::<Value>(text).ok();
    }
    // First try: close what is open where the text stops.
    let mut closed = String::with_capacity(text.len() + stack.len() + 1);
    closed.push_str(text);
    if in_string {
        trim_open_escape(&mut closed);
        closed.push('"');
    }
    closed.extend(stack.iter().rev().map(|&c| c as char));
    if let Ok(value) = serde_json::from_str::<Value>(&closed) {
        return Some(value);
    }
    // Else: the last point where every value was complete.
    let end = safe_end?;
    let mut fallback = String::with_capacity(end + safe_closers.len());
    fallback.push_str(text.get(..end)?);
    fallback.extend(safe_closers.iter().rev().map(|&c| c as char));
    serde_json::from_str::<Value>(&fallback).ok()
}

/// Drops a half-written escape at the end of an open string (`\` or `\u12`).
fn trim_open_escape(s: &mut String) {
    let bytes = s.as_bytes();
    // Count the backslashes before the tail to know whether the last one escapes.
    let tail_start = bytes
        .iter()
        .rposition(|&b| b == b'\\')
        .filter(|&at| bytes.len() - at <= 5);
    let Some(at) = tail_start else { return };
    let run = bytes[..=at]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count();
    if run % 2 == 0 {
        return;
    }
    let rest = &bytes[at + 1..];
    let open = rest.is_empty()
        || (rest[0] == b'u' && rest.len() < 5 && rest[1..].iter().all(u8::is_ascii_hexdigit));
    if open {
        s.truncate(at);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::parse_partial;
    use serde_json::json;

    #[test]
    fn open_strings_and_brackets_are_closed() {
        assert_eq!(parse_partial(r#"{"a": "hel"#), Some(json!({"a": "hel"})));
        assert_eq!(parse_partial(r#"{"a": [1, 2"#), Some(json!({"a": [1, 2]})));
        assert_eq!(parse_partial(r#"{"a": 12"#), Some(json!({"a": 12})));
        assert_eq!(
            parse_partial(r#"{"a": {"b": ["x", "y"#),
            Some(json!({"a": {"b": ["x", "y"]}}))
        );
    }

    #[test]
    fn unfinished_members_fall_back_to_the_last_complete_value() {
        assert_eq!(parse_partial(r#"{"a": 1, "ke"#), Some(json!({"a": 1})));
        assert_eq!(parse_partial(r#"{"a": 1,"#), Some(json!({"a": 1})));
        assert_eq!(parse_partial(r#"{"a": "#), Some(json!({})));
        assert_eq!(parse_partial(r#"{"a": tr"#), Some(json!({})));
        assert_eq!(
            parse_partial(r#"{"a": [true, fa"#),
            Some(json!({"a": [true]}))
        );
        assert_eq!(parse_partial("{"), Some(json!({})));
    }

    #[test]
    fn half_written_escapes_are_dropped() {
        assert_eq!(parse_partial(r#"{"a": "x\"#), Some(json!({"a": "x"})));
        assert_eq!(parse_partial(r#"{"a": "x\u00"#), Some(json!({"a": "x"})));
        assert_eq!(parse_partial(r#"{"a": "x\\"#), Some(json!({"a": "x\\"})));
        assert_eq!(parse_partial(r#"{"a": "x\n"#), Some(json!({"a": "x\n"})));
    }

    #[test]
    fn nothing_usable_is_none() {
        assert_eq!(parse_partial(""), None);
        assert_eq!(parse_partial("   "), None);
        assert_eq!(parse_partial("hello"), None);
        assert_eq!(parse_partial("{]"), None);
    }

    #[test]
    fn complete_documents_parse_as_they_are() {
        assert_eq!(parse_partial(r#"{"a": [1]}"#), Some(json!({"a": [1]})));
    }
}
