//! The runner's [`StreamSink`] for one LLM call: turns deltas into [`StreamEvent`]s,
//! and follows the structured answer as it arrives.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::llm::{StreamDelta, StreamSink, TokenUsage};
use crate::output::{SUBMIT_OUTPUT, reasoning_open, without_reasoning};
use crate::partial_json::{IncrementalJson, parse_partial};
use crate::runner::emit::{EventSender, StreamEvent};

/// Where the structured answer arrives in a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PartialKind {
    /// Plain-text output: no structured answer.
    None,
    /// In the arguments of a `submit_output` call.
    Tool,
    /// As JSON in the text (native and prompted modes).
    Text,
}

/// Sends one LLM call's deltas as events.
pub(crate) struct TurnSink<T> {
    tx: EventSender<T>,
    llm_call: u32,
    kind: PartialKind,
    /// The answer's JSON so far.
    answer: String,
    /// In tool mode, the index of the turn's `submit_output` call.
    submit_index: Option<usize>,
    /// On the whole-text path: the last partial value sent, so an unchanged one is not
    /// sent again.
    last: Option<Value>,
    /// Whether `answer` grew since the last partial value was worked out.
    dirty: bool,
    /// The answer's JSON parsed as it arrives (the incremental path), or `None` on the
    /// whole-text path (each flush parses the whole answer again, as `parse_partial`).
    /// The sink leaves the incremental path for good when the parser is poisoned, and,
    /// in text, when the answer may hold reasoning (see [`may_hold_reasoning`]).
    parser: Option<IncrementalJson>,
    /// In text, where the answer's JSON starts (its first `{`), once it has.
    json_at: Option<usize>,
    /// The answer's length when the last partial value was sent.
    sent_at: Option<usize>,
    /// What the call received so far, shared with the run: a call cut off before its
    /// end is counted from it.
    meter: Arc<Meter>,
}

/// What a streamed LLM call received so far: the bytes of its turn (text, reasoning,
/// call names and arguments) and the usage the provider reported mid-stream (zero when
/// none). Atomics, so that the run reads them after the call's future is gone.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    received: AtomicU64,
    input: AtomicU64,
    output: AtomicU64,
    cache_read: AtomicU64,
    cache_write: AtomicU64,
}

impl Meter {
    /// Starts a new call: nothing received.
    pub(crate) fn reset(&self) {
        for counter in [
            &self.received,
            &self.input,
            &self.output,
            &self.cache_read,
            &self.cache_write,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// The bytes of the turn received.
    pub(crate) fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// The usage the provider reported so far (zero when none).
    pub(crate) fn reported(&self) -> TokenUsage {
        TokenUsage::new(
            self.input.load(Ordering::Relaxed),
            self.output.load(Ordering::Relaxed),
        )
        .with_cache(
            self.cache_read.load(Ordering::Relaxed),
            self.cache_write.load(Ordering::Relaxed),
        )
    }
}

impl<T> TurnSink<T> {
    pub(crate) fn new(
        tx: EventSender<T>,
        llm_call: u32,
        kind: PartialKind,
        meter: Arc<Meter>,
    ) -> Self {
        Self {
            tx,
            llm_call,
            kind,
            answer: String::new(),
            submit_index: None,
            last: None,
            dirty: false,
            parser: (kind != PartialKind::None).then(IncrementalJson::new),
            json_at: None,
            sent_at: None,
            meter,
        }
    }

    /// The turn ended (the call returned its response): the last batch, and the final
    /// partial value if it changed since the last one sent (the incremental path may
    /// have held it back, see [`EVERY_FLUSH_BELOW`]).
    pub(crate) fn finish(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        if dirty || self.parser.is_some() {
            self.partial(true);
        }
    }

    /// The answer grew from `old_len` bytes: feeds the new text to the parser, or
    /// leaves the incremental path.
    fn feed(&mut self, old_len: usize) {
        let Some(parser) = self.parser.as_mut() else {
            return;
        };
        let start = if self.kind == PartialKind::Text {
            // The marks of reasoning are short: looking back 2 bytes catches one
            // split between deltas.
            let tail = self.answer.as_bytes().get(old_len.saturating_sub(2)..);
            if tail.is_some_and(may_hold_reasoning) {
                self.leave_incremental();
                return;
            }
            match self.json_at {
                Some(_) => old_len,
                None => match self.answer.get(old_len..).and_then(|new| new.find('{')) {
                    Some(at) => {
                        self.json_at = Some(old_len + at);
                        old_len + at
                    }
                    None => return,
                },
            }
        } else {
            old_len
        };
        if let Some(new) = self.answer.get(start..) {
            parser.push(new);
        }
        if parser.is_poisoned() {
            self.leave_incremental();
        }
    }

    /// Goes on with the whole-text path, comparing with the last value sent (worked
    /// out again from the answer as it was then: one whole parse, once).
    fn leave_incremental(&mut self) {
        self.parser = None;
        self.last = self
            .sent_at
            .and_then(|at| self.answer.get(..at))
            .and_then(|sent| self.whole_value(sent));
    }

    /// The whole-text path: the partial value of `answer` (an object), if any.
    fn whole_value(&self, answer: &str) -> Option<Value> {
        // In text, reasoning the model writes (a `<think>` block and its drafts) is
        // never the answer, not even a partial one.
        let visible = match self.kind {
            PartialKind::Text if reasoning_open(answer) => return None,
            PartialKind::Text => without_reasoning(answer),
            _ => std::borrow::Cow::Borrowed(answer),
        };
        let json = match self.kind {
            PartialKind::Text => &visible[visible.find('{')?..],
            _ => &visible,
        };
        parse_partial(json).filter(Value::is_object)
    }

    fn send(&self, event: StreamEvent<T>) {
        self.tx.send(event);
    }

    /// Sends the answer so far when it parses to an object that changed (at a flush:
    /// once per batch of pieces, not per fragment; `end`: the turn ended).
    ///
    /// On the incremental path the parser tells whether the value changed, and the
    /// value is cloned only to be sent: at every flush while the answer is under
    /// [`EVERY_FLUSH_BELOW`], then once it grew by a sixteenth since the last value
    /// sent (so the copying per byte received stays constant), and at the end of the
    /// turn.
    fn partial(&mut self, end: bool) {
        let Some(parser) = self.parser.as_mut() else {
            let Some(value) = self.whole_value(&self.answer) else {
                return;
            };
            if self.last.as_ref() == Some(&value) {
                return;
            }
            self.last = Some(value.clone());
            self.send(StreamEvent::PartialOutput {
                llm_call: self.llm_call,
                value,
            });
            return;
        };
        if !parser.changed() {
            return;
        }
        let len = self.answer.len();
        if !end && len >= EVERY_FLUSH_BELOW && self.sent_at.is_some_and(|at| len - at < len / 16) {
            return;
        }
        parser.mark_seen();
        let Some(value) = parser.value().filter(|v| v.is_object()) else {
            return;
        };
        let value = value.into_owned();
        self.sent_at = Some(len);
        self.send(StreamEvent::PartialOutput {
            llm_call: self.llm_call,
            value,
        });
    }
}

/// Below this answer length (bytes) a changed partial value is sent at every flush;
/// above it, once the answer grew by a sixteenth since the last one sent.
pub(crate) const EVERY_FLUSH_BELOW: usize = 4096;

/// Whether `bytes` (the new text of an answer, with the 2 bytes before it) hold
/// the start of something [`without_reasoning`] or [`reasoning_open`] acts on: `<`
/// before `/`, `|` or the first letter of a reasoning tag (`t`, `r`), or a fence
/// (`` ``` ``). Cautious: a false alarm only costs the whole-text path.
fn may_hold_reasoning(bytes: &[u8]) -> bool {
    bytes
        .windows(2)
        .any(|pair| pair[0] == b'<' && matches!(pair[1], b'/' | b'|' | b't' | b'T' | b'r' | b'R'))
        || bytes.windows(3).any(|w| w == b"```")
}

impl<T: Send> StreamSink for TurnSink<T> {
    fn on_delta(&mut self, delta: StreamDelta<'_>) {
        let llm_call = self.llm_call;
        let bytes = match delta {
            StreamDelta::Text(t) | StreamDelta::Reasoning(t) => t.len(),
            StreamDelta::ToolCallStarted { name, .. } => name.len(),
            StreamDelta::ToolCallArguments { json, .. } => json.len(),
        };
        self.meter
            .received
            .fetch_add(bytes as u64, Ordering::Relaxed);
        match delta {
            StreamDelta::Reasoning(text) => {
                if !text.is_empty() {
                    self.send(StreamEvent::ReasoningDelta {
                        llm_call,
                        text: text.to_owned(),
                    });
                }
            }
            StreamDelta::Text(text) => {
                if text.is_empty() {
                    return;
                }
                self.send(StreamEvent::TextDelta {
                    llm_call,
                    text: text.to_owned(),
                });
                if self.kind == PartialKind::Text {
                    let old_len = self.answer.len();
                    crate::llm::push_piece(&mut self.answer, text);
                    self.dirty = true;
                    self.feed(old_len);
                }
            }
            StreamDelta::ToolCallStarted { index, id, name } => {
                if self.kind == PartialKind::Tool
                    && name == SUBMIT_OUTPUT
                    && self.submit_index.is_none()
                {
                    self.submit_index = Some(index);
                }
                self.send(StreamEvent::ToolCallStarted {
                    llm_call,
                    index,
                    id: id.to_owned(),
                    name: name.to_owned(),
                });
            }
            StreamDelta::ToolCallArguments { index, json } => {
                if self.submit_index == Some(index) && !json.is_empty() {
                    let old_len = self.answer.len();
                    crate::llm::push_piece(&mut self.answer, json);
                    self.dirty = true;
                    self.feed(old_len);
                }
            }
        }
    }

    fn flush(&mut self) {
        if std::mem::take(&mut self.dirty) {
            self.partial(false);
        }
    }

    fn on_usage(&mut self, usage: TokenUsage) {
        let m = &self.meter;
        m.input.store(usage.input_tokens, Ordering::Relaxed);
        m.output.store(usage.output_tokens, Ordering::Relaxed);
        m.cache_read
            .store(usage.cache_read_tokens, Ordering::Relaxed);
        m.cache_write
            .store(usage.cache_write_tokens, Ordering::Relaxed);
    }
}

/// Benchmark support for `agent-core/benches/partial_output.rs`, not a public API:
/// sends a `submit_output` call's arguments through the runner's sink, `prefix` as one
/// delta and then each of `deltas`, with a flush after each, then ends the turn, taking
/// the events out as a consumer would. `whole_text`: the sink starts on the whole-text
/// path (parsing the whole answer at each flush, the path before the incremental
/// parser). Returns the number of `PartialOutput` events sent.
#[doc(hidden)]
pub fn bench_partial_output(prefix: &str, deltas: &[&str], whole_text: bool) -> usize {
    let queue = Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
    let tx: EventSender<()> = EventSender(Arc::clone(&queue));
    let mut sink = TurnSink::new(tx, 1, PartialKind::Tool, Arc::new(Meter::default()));
    if whole_text {
        sink.leave_incremental();
    }
    let mut sent = 0;
    let take = |sent: &mut usize| {
        for event in crate::runner::emit::lock(&queue).drain(..) {
            if matches!(event, StreamEvent::PartialOutput { .. }) {
                *sent += 1;
            }
        }
    };
    sink.on_delta(StreamDelta::ToolCallStarted {
        index: 0,
        id: "call_1",
        name: SUBMIT_OUTPUT,
    });
    for piece in std::iter::once(prefix).chain(deltas.iter().copied()) {
        sink.on_delta(StreamDelta::ToolCallArguments {
            index: 0,
            json: piece,
        });
        sink.flush();
        take(&mut sent);
    }
    sink.finish();
    take(&mut sent);
    sent
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::{EventSender, Meter, PartialKind, TurnSink};
    use crate::llm::{StreamDelta, StreamSink};
    use crate::output::SUBMIT_OUTPUT;
    use crate::partial_json::incremental::tests::{arb_value, write};
    use crate::runner::emit::StreamEvent;

    /// The partial values a sink sends for `pieces` (a flush after each batch of
    /// `batch` pieces, then the end of the turn); `whole_text`: the path before the
    /// incremental parser.
    fn partials(kind: PartialKind, pieces: &[&str], batch: usize, whole_text: bool) -> Vec<Value> {
        let queue = Arc::new(Mutex::new(VecDeque::new()));
        let tx: EventSender<()> = EventSender(Arc::clone(&queue));
        let mut sink = TurnSink::new(tx, 1, kind, Arc::new(Meter::default()));
        if whole_text {
            sink.leave_incremental();
        }
        if kind == PartialKind::Tool {
            sink.on_delta(StreamDelta::ToolCallStarted {
                index: 0,
                id: "c",
                name: SUBMIT_OUTPUT,
            });
        }
        for (n, piece) in pieces.iter().enumerate() {
            sink.on_delta(match kind {
                PartialKind::Tool => StreamDelta::ToolCallArguments {
                    index: 0,
                    json: piece,
                },
                _ => StreamDelta::Text(piece),
            });
            if (n + 1) % batch.max(1) == 0 {
                sink.flush();
            }
        }
        sink.flush();
        sink.finish();
        let events: Vec<_> = queue.lock().unwrap().drain(..).collect();
        events
            .into_iter()
            .filter_map(|e| match e {
                StreamEvent::PartialOutput { value, .. } => Some(value),
                _ => None,
            })
            .collect()
    }

    /// `text` in pieces of 1 to 8 bytes (on char boundaries).
    fn split(text: &str, rng: &mut fastrand::Rng) -> Vec<String> {
        let mut pieces = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + 1 + rng.usize(..8)).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            pieces.push(text[at..end].to_owned());
            at = end;
        }
        pieces
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Under 4 KiB the incremental path sends exactly what the whole-text path
        /// sends, in text (with prose or reasoning around the JSON) and in tool mode.
        #[test]
        fn small_answers_send_what_the_whole_text_path_sends(
            entries in prop::collection::vec(("[a-z]{1,4}", arb_value()), 0..5),
            seed in any::<u64>(),
            around in 0usize..6,
            batch in 1usize..4,
        ) {
            let doc = Value::Object(entries.into_iter().collect());
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut json = String::new();
            write(&doc, &mut rng, &mut json);
            let (before, after) = [
                ("", ""),
                ("Here it is: ", ""),
                ("<think>a draft {\"x\": 1}</think>\n", ""),
                ("```json\n", "\n```"),
                ("", " hope this helps {"),
                ("drafts {\"x\":", "</think>"),
            ][around];
            let text = format!("{before}{json}{after}");
            prop_assume!(text.len() < super::EVERY_FLUSH_BELOW);
            let pieces = split(&text, &mut rng);
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            prop_assert_eq!(
                partials(PartialKind::Text, &pieces, batch, false),
                partials(PartialKind::Text, &pieces, batch, true)
            );
            let pieces = split(&json, &mut rng);
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            prop_assert_eq!(
                partials(PartialKind::Tool, &pieces, batch, false),
                partials(PartialKind::Tool, &pieces, batch, true)
            );
        }
    }

    #[test]
    fn long_answers_send_fewer_values_and_always_the_last() {
        let items: Vec<Value> = (0..400)
            .map(|n| json!({"id": n, "note": format!("item {n} \u{e9}\"quoted\""), "ok": n % 2 == 0}))
            .collect();
        let doc = json!({"summary": "x".repeat(20_000), "items": items});
        let text = doc.to_string();
        assert!(text.len() > 40_000);
        // 4 bytes a piece, or a little more to end on a char boundary.
        let mut pieces: Vec<&str> = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + 4).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            pieces.push(&text[at..end]);
            at = end;
        }
        for kind in [PartialKind::Tool, PartialKind::Text] {
            let old = partials(kind, &pieces, 1, true);
            let new = partials(kind, &pieces, 1, false);
            assert_eq!(old.last(), Some(&doc));
            assert_eq!(new.last(), Some(&doc));
            // Every value sent is one the whole-text path sends, in the same order.
            let mut rest = old.iter();
            assert!(new.iter().all(|v| rest.any(|o| o == v)));
            // Every flush under 4 KiB (about 1,000 of them), then about 16 per
            // doubling of the answer.
            assert!(new.len() < 1_200, "{} values sent", new.len());
            assert!(
                new.len() * 5 < old.len(),
                "{} against {}",
                new.len(),
                old.len()
            );
        }
    }

    #[test]
    fn the_last_value_is_sent_when_the_turn_ends() {
        // One batch over 4 KiB after a value was sent: held back by the rule, then
        // sent at the end of the turn.
        let head = format!("{{\"a\": \"{}", "y".repeat(5000));
        let pieces = [head.as_str(), "z", "\"}"];
        let new = partials(PartialKind::Tool, &pieces, 1, false);
        assert_eq!(new.len(), 2);
        assert_eq!(
            new.last(),
            Some(&json!({"a": format!("{}z", "y".repeat(5000))}))
        );
    }

    #[test]
    fn text_that_is_not_json_goes_on_with_the_whole_text_path() {
        for text in [
            r#"{"a": 1} and {"b": 2}"#,
            r#"{"a": 1, "a": 2, "b": [1}"#,
            r#"prose {"a": "x"} <think>{"a": "y"}</think>"#,
        ] {
            let pieces: Vec<String> = text.chars().map(String::from).collect();
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            for kind in [PartialKind::Tool, PartialKind::Text] {
                assert_eq!(
                    partials(kind, &pieces, 1, false),
                    partials(kind, &pieces, 1, true),
                    "{text}"
                );
            }
        }
    }
}
