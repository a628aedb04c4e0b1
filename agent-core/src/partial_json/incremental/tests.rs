//! Tests of the incremental parser against `parse_partial`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::IncrementalJson;
use crate::partial_json::parse_partial;
use proptest::prelude::*;
use serde_json::{Value, json};

/// The value of an incremental parser fed `pieces`, checked against
/// `parse_partial` after each piece.
fn check_pieces(pieces: &[&str]) {
    let mut parser = IncrementalJson::new();
    let mut text = String::new();
    for piece in pieces {
        parser.push(piece);
        text.push_str(piece);
        assert_eq!(
            parser.value().map(|v| v.into_owned()),
            parse_partial(&text),
            "after {text:?} (pieces {pieces:?})"
        );
    }
}

/// Checks every prefix of `text`, char by char, and every split in two.
fn check_prefixes(text: &str) {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let pieces: Vec<&str> = bounds.windows(2).map(|w| &text[w[0]..w[1]]).collect();
    check_pieces(&pieces);
    for &at in &bounds {
        check_pieces(&[&text[..at], &text[at..]]);
    }
}

#[test]
fn the_partial_parser_cases_hold_for_every_prefix() {
    for text in [
        r#"{"a": "hello", "b": [1, 2, {"c": "x"}], "d": {"e": {"f": [ ]}}}"#,
        r#"{"a": 1, "key": true, "k2": false, "k3": null}"#,
        r#"{"a": [true, false, null, -0, 0, 12, -3.25, 1e5, 1E+2, 2.5e-3, 1.50]}"#,
        r#"{"a": "x\"y\\z\/\b\f\n\r\t\u00e9\u20AC", "b": "\ud83d\ude00!"}"#,
        r#"{"\u0041b\n": "k", "emoji\ud83d\ude00": 1}"#,
        "  \n{ \"a\" :\t[ [ ], { } , [[1]] ] ,\r\n \"b\":{} }  \n",
        r#"[1, "two", {"three": [3]}]"#,
        r#"{"a": {}, "b": [], "c": [{}], "d": [[]]}"#,
        "{\"héllo\": \"wörld ✓\", \"z\": \"\u{1F600}\"}",
    ] {
        check_prefixes(text);
    }
}

#[test]
fn the_documented_leniency_matches() {
    let mut p = IncrementalJson::new();
    p.push(r#"{"a": 12"#);
    assert_eq!(p.value().unwrap().into_owned(), json!({"a": 12}));
    p.push(".");
    assert_eq!(p.value().unwrap().into_owned(), json!({}));
    p.push("5, \"b\": tr");
    assert_eq!(p.value().unwrap().into_owned(), json!({"a": 12.5}));
    p.push("ue, \"c\": \"x\\u00");
    assert_eq!(
        p.value().unwrap().into_owned(),
        json!({"a": 12.5, "b": true, "c": "x"})
    );
    p.push("e9\\ud83d");
    // A lone high surrogate cannot be closed: the member is left out for now.
    assert_eq!(
        p.value().unwrap().into_owned(),
        json!({"a": 12.5, "b": true})
    );
    p.push("\\ude00");
    assert_eq!(
        p.value().unwrap().into_owned(),
        json!({"a": 12.5, "b": true, "c": "xé😀"})
    );
    assert!(!p.is_poisoned());
}

#[test]
fn invalid_text_poisons_and_gives_what_parse_partial_gives() {
    for text in [
        "{]",
        "hello",
        r#"{"a" 1}"#,
        r#"{"a": 01}"#,
        r#"{"a": 1.}"#,
        r#"{"a": truex}"#,
        r#"{"a": 1} trailing"#,
        r#"{"a": 1} "x"#,
        r#"{"a": 1, "a": 2}"#,
        r#"{"a": "\ud83d"}"#,
        r#"{"a": "\ud83dx"}"#,
        r#"{"a": "\ud83d\u0041"}"#,
        r#"{"a": "\ude00"}"#,
        r#"{"a": "\q"}"#,
        "{\"a\": \"tab\there\"}",
        r#"{"a": 1e400, "b": 2}"#,
        r#"{"a": 1,}"#,
        r#"{"a": [1,]}"#,
        "\"just a string",
        "42",
        "\u{a0}{\"a\": 1}",
    ] {
        check_prefixes(text);
    }
    let mut p = IncrementalJson::new();
    p.push(r#"{"a": 1, "a": "#);
    assert!(p.is_poisoned());
}

#[test]
fn nesting_beyond_serde_json_s_limit_poisons() {
    for depth in [126, 127, 128, 129] {
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        check_pieces(&[&text[..depth], &text[depth..]]);
        let mut p = IncrementalJson::new();
        p.push(&text);
        assert_eq!(p.is_poisoned(), depth >= 128, "depth {depth}");
    }
}

#[test]
fn changed_is_exact() {
    let mut p = IncrementalJson::new();
    assert!(!p.changed());
    p.push("  ");
    assert!(!p.changed());
    p.push("{");
    assert!(p.changed());
    p.mark_seen();
    p.push(r#""a": "#);
    assert!(!p.changed(), "a member without a value yet");
    p.push("1.5");
    assert!(p.changed());
    p.mark_seen();
    p.push("0");
    assert!(!p.changed(), "1.50 is 1.5");
    p.push(".");
    // Invalid now, but `changed` stays exact up to the poisoning.
    assert!(p.is_poisoned());
    let mut p = IncrementalJson::new();
    p.push(r#"{"a": -0"#);
    p.mark_seen();
    p.push(".");
    assert!(p.changed(), "-0. is no number: the member is gone");
    p.push("0");
    assert!(!p.changed(), "-0.0 is -0 again");
    p.push(r#", "b": "x\"#);
    assert!(p.changed());
    p.mark_seen();
    p.push(r#"ud83d\ude0"#);
    assert!(p.changed(), "the string is out of the tree");
    p.push("0");
    assert!(p.changed());
    p.mark_seen();
    p.push(r#"", "c"#);
    assert!(!p.changed());
    p.push(r#"": t"#);
    assert!(!p.changed());
    p.push("rue");
    assert!(p.changed());
}

/// A JSON value for the property test.
pub(crate) fn arb_value() -> impl Strategy<Value = Value> {
    let string = prop_oneof![
        "[a-z ]{0,8}",
        "[\"\\\\/\u{8}\u{c}\n\r\t\u{1}\u{1f} a-z]{0,8}",
        "[é€✓😀\u{10FFFF}\u{FFFF}a-z]{0,6}",
    ];
    let number = prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number,
        string.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(string.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Writes `value` as JSON, escaping characters in strings at random (`\n`,
/// `\uXXXX`, surrogate pairs) with whitespace at random between tokens.
pub(crate) fn write(value: &Value, rng: &mut fastrand::Rng, out: &mut String) {
    let ws = |rng: &mut fastrand::Rng, out: &mut String| {
        if rng.u8(..4) == 0 {
            out.push_str([" ", "\n", "\t", "\r\n  "][rng.usize(..4)]);
        }
    };
    ws(rng, out);
    match value {
        Value::String(s) => write_str(s, rng, out),
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write(item, rng, out);
            }
            ws(rng, out);
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (n, (key, item)) in map.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                ws(rng, out);
                write_str(key, rng, out);
                ws(rng, out);
                out.push(':');
                write(item, rng, out);
            }
            ws(rng, out);
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
    ws(rng, out);
}

fn write_str(s: &str, rng: &mut fastrand::Rng, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        let escape = matches!(c, '"' | '\\' | '\u{0}'..='\u{1f}') || rng.u8(..4) == 0;
        if !escape {
            out.push(c);
            continue;
        }
        match (c, rng.bool()) {
            ('"', _) => out.push_str("\\\""),
            ('\\', _) => out.push_str("\\\\"),
            ('/', true) => out.push_str("\\/"),
            ('\n', true) => out.push_str("\\n"),
            ('\t', true) => out.push_str("\\t"),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    if rng.bool() {
                        out.push_str(&format!("\\u{unit:04x}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
            }
        }
    }
    out.push('"');
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_prefix_in_random_pieces_matches_parse_partial(
        entries in prop::collection::vec(("[a-z]{1,4}", arb_value()), 0..6),
        seed in any::<u64>(),
    ) {
        let doc = Value::Object(entries.into_iter().collect());
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut text = String::new();
        write(&doc, &mut rng, &mut text);
        // The whole text is the document.
        prop_assert_eq!(parse_partial(&text), Some(doc));
        let mut parser = IncrementalJson::new();
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + 1 + rng.usize(..8)).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            parser.push(&text[at..end]);
            at = end;
            prop_assert!(!parser.is_poisoned(), "poisoned at {:?}", &text[..at]);
            prop_assert_eq!(
                parser.value().map(|v| v.into_owned()),
                parse_partial(&text[..at]),
                "prefix {:?}", &text[..at]
            );
        }
    }
}
