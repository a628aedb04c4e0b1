//! The runner's [`StreamSink`] for one LLM call: turns deltas into [`StreamEvent`]s,
//! and follows the structured answer as it arrives.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::{EventSender, StreamDelta, StreamEvent, StreamSink, parse_partial};
use crate::llm::TokenUsage;
use crate::output::{SUBMIT_OUTPUT, reasoning_open, without_reasoning};

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
    /// The last partial value sent, so an unchanged one is not sent again.
    last: Option<Value>,
    /// Whether `answer` grew since the last partial value was worked out.
    dirty: bool,
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
            meter,
        }
    }

    fn send(&self, event: StreamEvent<T>) {
        self.tx.send(event);
    }

    /// Sends the answer so far when it parses to an object that changed (at a flush:
    /// once per batch of pieces, not per fragment).
    fn partial(&mut self) {
        // In text, reasoning the model writes (a `<think>` block and its drafts) is
        // never the answer, not even a partial one.
        let visible = match self.kind {
            PartialKind::Text if reasoning_open(&self.answer) => return,
            PartialKind::Text => without_reasoning(&self.answer),
            _ => std::borrow::Cow::Borrowed(self.answer.as_str()),
        };
        let json = match self.kind {
            PartialKind::Text => match visible.find('{') {
                Some(at) => &visible[at..],
                None => return,
            },
            _ => &visible,
        };
        let Some(value) = parse_partial(json).filter(Value::is_object) else {
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
    }
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
                    self.answer.push_str(text);
                    self.dirty = true;
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
                    self.answer.push_str(json);
                    self.dirty = true;
                }
            }
        }
    }

    fn flush(&mut self) {
        if std::mem::take(&mut self.dirty) {
            self.partial();
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
