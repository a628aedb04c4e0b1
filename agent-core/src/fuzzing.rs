//! The fuzz targets' entry points (feature `fuzzing`; not part of the API, no stability
//! promise): every decoder of bytes from outside, run over one input. The `fuzz/` crate
//! at the workspace root turns each [`Target`] into a libFuzzer target, and the test
//! `fuzz_smoke` runs each over its seed corpus and a few thousand mutations.
//!
//! A target returns `Ok(())` whatever the decoder made of the input (an answer, a
//! typed error): every input has a typed outcome. `Err` is a broken promise, a
//! finding: the decoder waited on a body that was all there, read a body differently
//! when it came in other chunks, handed over more than it read, or (the partial JSON
//! parser) disagreed with the whole-text parse. A panic is a finding too.
//!
//! Input layouts: the stream readers and stream decoders take the chunk size of the
//! body in the first byte (0: the body in one chunk), the body after it; the event-stream
//! reader's first byte is `size << 1 | repair`, where `repair` set rewrites each
//! message's two CRCs so that the fuzzer reaches the headers; the partial JSON target's
//! first byte is the size of the pieces pushed (0: one piece). The reply decoders and
//! the answer extraction take the input as it is.

use crate::partial_json::{IncrementalJson, parse_partial};
use crate::providers::fuzzing::{self as harness, Framing, WireKind};

/// One fuzz target: its name (the `fuzz/` binary and the seed folder
/// `fuzz/seeds/NAME/`) and its function.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The name, as in `cargo fuzz run NAME`.
    pub name: &'static str,
    /// Runs one input: `Err` names the broken promise.
    pub run: fn(&[u8]) -> Result<(), String>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "sse_reader",
        run: sse_reader,
    },
    Target {
        name: "eventstream_reader",
        run: eventstream_reader,
    },
    Target {
        name: "chat_reply",
        run: |d| reply(WireKind::Chat { compatible: false }, d),
    },
    Target {
        name: "chat_stream",
        run: |d| stream(WireKind::Chat { compatible: false }, d),
    },
    Target {
        name: "compatible_reply",
        run: |d| reply(WireKind::Chat { compatible: true }, d),
    },
    Target {
        name: "compatible_stream",
        run: |d| stream(WireKind::Chat { compatible: true }, d),
    },
    Target {
        name: "responses_reply",
        run: |d| reply(WireKind::Responses, d),
    },
    Target {
        name: "responses_stream",
        run: |d| stream(WireKind::Responses, d),
    },
    Target {
        name: "anthropic_reply",
        run: |d| reply(WireKind::Anthropic, d),
    },
    Target {
        name: "anthropic_stream",
        run: |d| stream(WireKind::Anthropic, d),
    },
    Target {
        name: "gemini_reply",
        run: |d| reply(WireKind::Gemini, d),
    },
    Target {
        name: "gemini_stream",
        run: |d| stream(WireKind::Gemini, d),
    },
    Target {
        name: "bedrock_reply",
        run: |d| reply(WireKind::Bedrock, d),
    },
    Target {
        name: "bedrock_stream",
        run: |d| stream(WireKind::Bedrock, d),
    },
    Target {
        name: "partial_json",
        run: partial_json,
    },
    Target {
        name: "answer_text",
        run: answer_text,
    },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().copied().find(|t| t.name == name)
}

/// The first byte and the rest (an empty input: 0 and nothing).
fn split_first(data: &[u8]) -> (usize, &[u8]) {
    match data.split_first() {
        Some((first, rest)) => (usize::from(*first), rest),
        None => (0, data),
    }
}

/// The server-sent events reader: the same events in any chunking, no more data than
/// the body holds.
pub fn sse_reader(data: &[u8]) -> Result<(), String> {
    let (split, body) = split_first(data);
    same_events(Framing::Sse, body, split)
}

/// The AWS event-stream reader: the same events in any chunking, no more data than the
/// body holds.
pub fn eventstream_reader(data: &[u8]) -> Result<(), String> {
    let (first, body) = split_first(data);
    let mut body = body.to_vec();
    if first & 1 == 1 {
        repair_crcs(&mut body);
    }
    same_events(Framing::EventStream, &body, first >> 1)
}

fn same_events(framing: Framing, body: &[u8], split: usize) -> Result<(), String> {
    let whole = harness::read_events(framing, body, 0)?;
    if let Ok(events) = &whole {
        let bytes: usize = events.iter().map(|(n, d)| n.len() + d.len()).sum();
        if bytes > body.len() {
            return Err(format!(
                "{bytes} bytes of events out of a {}-byte body",
                body.len()
            ));
        }
    }
    if split > 0 {
        let chunked = harness::read_events(framing, body, split)?;
        if chunked != whole {
            return Err(format!(
                "in chunks of {split} bytes: {chunked:?}, whole: {whole:?}"
            ));
        }
    }
    Ok(())
}

/// Rewrites the prelude and message CRCs of each event-stream message whose total
/// length fits in what is left.
fn repair_crcs(body: &mut [u8]) {
    let mut at = 0;
    while let Some(prelude) = body.get(at..at + 8) {
        let total = u32::from_be_bytes([prelude[0], prelude[1], prelude[2], prelude[3]]) as usize;
        if total < 16 || at + total > body.len() {
            return;
        }
        let crc = crc32fast::hash(&body[at..at + 8]).to_be_bytes();
        body[at + 8..at + 12].copy_from_slice(&crc);
        let end = at + total;
        let crc = crc32fast::hash(&body[at..end - 4]).to_be_bytes();
        body[end - 4..end].copy_from_slice(&crc);
        at = end;
    }
}

/// A wire's reply decoder: any outcome.
fn reply(wire: WireKind, data: &[u8]) -> Result<(), String> {
    harness::decode_reply(wire, data).map(drop)
}

/// A wire's stream decoder: the same outcome in any chunking, pieces no larger than
/// the body.
fn stream(wire: WireKind, data: &[u8]) -> Result<(), String> {
    let (split, body) = split_first(data);
    // Ids missing from the wire are made up at random (`call_` and 16 hex digits): the
    // same ones in both readings.
    fastrand::seed(0);
    let (whole, received) = harness::decode_stream(wire, body, 0)?;
    // Each piece is text read out of the body (a JSON string, unescaped); Responses may
    // repeat a call's arguments in its `.done` event, so twice the body at most.
    if received.bytes > 2 * body.len() {
        return Err(format!(
            "{} bytes in {} pieces out of a {}-byte body",
            received.bytes,
            received.pieces,
            body.len()
        ));
    }
    if split > 0 {
        fastrand::seed(0);
        let (chunked, _) = harness::decode_stream(wire, body, split)?;
        let (whole, chunked) = (format!("{whole:?}"), format!("{chunked:?}"));
        if whole != chunked {
            return Err(format!(
                "in chunks of {split} bytes: {chunked}, whole: {whole}"
            ));
        }
    }
    Ok(())
}

/// The incremental partial JSON parser, fed in pieces: after each piece its value is
/// what the whole-text parser gives for the text so far.
pub fn partial_json(data: &[u8]) -> Result<(), String> {
    let (size, text) = split_first(data);
    let text = String::from_utf8_lossy(text);
    let size = if size == 0 { text.len().max(1) } else { size };
    let mut parser = IncrementalJson::new();
    let mut at = 0;
    // At most 32 comparisons besides the last (each parses the whole prefix).
    let every = (text.len() / size / 32).max(1);
    let mut pieces = 0;
    while at < text.len() {
        let mut end = (at + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        parser.push(&text[at..end]);
        at = end;
        pieces += 1;
        if pieces % every == 0 || at == text.len() {
            let incremental = parser.value().map(std::borrow::Cow::into_owned);
            let whole = parse_partial(&text[..at]);
            if incremental != whole {
                return Err(format!(
                    "after {at} bytes: incremental {incremental:?}, whole {whole:?}"
                ));
            }
        }
    }
    Ok(())
}

/// The answer read out of a reply's text: any outcome.
pub fn answer_text(data: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(data);
    let _ = crate::output::extract_json(&text);
    Ok(())
}
