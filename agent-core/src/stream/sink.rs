//! The runner's [`StreamSink`] for one LLM call: turns deltas into [`StreamEvent`]s,
//! and follows the structured answer as it arrives.

use serde_json::Value;

use super::{EventSender, StreamDelta, StreamEvent, StreamSink, parse_partial};
use crate::output::SUBMIT_OUTPUT;

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
}

impl<T> TurnSink<T> {
    pub(crate) fn new(tx: EventSender<T>, llm_call: u32, kind: PartialKind) -> Self {
        Self {
            tx,
            llm_call,
            kind,
            answer: String::new(),
            submit_index: None,
            last: None,
            dirty: false,
        }
    }

    fn send(&self, event: StreamEvent<T>) {
        self.tx.send(event);
    }

    /// Sends the answer so far when it parses to an object that changed (at a flush:
    /// once per batch of pieces, not per fragment).
    fn partial(&mut self) {
        let json = match self.kind {
            PartialKind::Text => match self.answer.find('{') {
                Some(at) => &self.answer[at..],
                None => return,
            },
            _ => &self.answer,
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
        match delta {
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
}
