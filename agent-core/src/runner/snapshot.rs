//! The texts of a checkpoint (see `checkpoint.rs`): the header, fixed for a run; the
//! state of a running run at a boundary, with the boundary's phase; and a finished
//! run's result. Serialized as JSON; [`FORMAT`] is their version.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{AgentError, Attempt};
use crate::handover::{CallRecord, Handover};
use crate::llm::LlmError;
use crate::message::Message;
use crate::output::OutputMode;
use crate::pause::{Decisions, PendingCall};
use crate::scores::Scores;
use crate::usage::Usage;

use super::guard::GuardState;

/// The version of the header and state texts this runner writes.
pub(super) const FORMAT: u32 = 1;

/// What does not change during a run: written with every save, read on resume.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Header {
    pub(super) format: u32,
    pub(super) run_id: String,
    pub(super) trace_id: String,
    pub(super) agent: String,
    pub(super) fingerprint: String,
    pub(super) output_mode: OutputMode,
    pub(super) output_schema: Option<Value>,
    /// The user tools: name and parameter schema, in the config's order.
    pub(super) tools: Vec<(String, Value)>,
    pub(super) thread: Option<String>,
    pub(super) input: String,
    /// The system prompt as sent (retrieved context included).
    pub(super) system: Option<String>,
    /// Messages before the input (the thread's and `RunOptions::history`).
    pub(super) history_len: usize,
    /// The run's deadline (ms), when it had one.
    pub(super) deadline_ms: Option<u64>,
}

/// Which boundary a running checkpoint was saved at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub(super) enum Phase {
    /// Before an LLM call: the previous transition is complete.
    BeforeCall,
    /// The last message is a turn of ordinary tool calls, none answered yet; `offered`
    /// names the tools that turn was offered; `decisions` are those a resume of a paused
    /// run brought (edits already applied to the turn).
    ToolsPending {
        offered: Vec<String>,
        #[serde(default, skip_serializing_if = "Decisions::is_empty")]
        decisions: Decisions,
    },
    /// As `ToolsPending`, and the run paused: `pending` wait for a decision (the turn's
    /// other calls completed in the ledger); `decisions` recorded so far.
    Paused {
        offered: Vec<String>,
        pending: Vec<PendingCall>,
        #[serde(default, skip_serializing_if = "Decisions::is_empty")]
        decisions: Decisions,
    },
}

/// A running run's state (the `state` text of an unfinished checkpoint). `messages`
/// comes right after `format`: [`EncodedTranscript::state_text`] writes it in place from
/// its cache.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Snapshot<'a> {
    pub(super) format: u32,
    pub(super) messages: Cow<'a, [Message]>,
    pub(super) phase: Phase,
    pub(super) usage: Usage,
    pub(super) cost_usd: f64,
    pub(super) last_call_tokens: u64,
    pub(super) last_call_cost: f64,
    pub(super) attempts: Cow<'a, [Attempt]>,
    pub(super) failures: Cow<'a, [LlmError]>,
    pub(super) force_answer: bool,
    pub(super) last_text: Cow<'a, str>,
    pub(super) output: Cow<'a, str>,
    pub(super) guard: GuardState<'a>,
    pub(super) calls: Cow<'a, [CallRecord]>,
    pub(super) last_correction: Option<Cow<'a, str>>,
    pub(super) model_summary: Option<Cow<'a, str>>,
    pub(super) fatal: Option<(String, String)>,
    /// Time spent toward the deadline so far (ms).
    pub(super) elapsed_ms: u64,
    /// Store failures counted so far.
    pub(super) store_failures: u32,
}

/// A finished run's result (the `state` text of a finished checkpoint).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Finished<'a> {
    pub(super) format: u32,
    pub(super) ok: bool,
    pub(super) error: Option<Cow<'a, AgentError>>,
    pub(super) output: Cow<'a, str>,
    pub(super) trace_id: Cow<'a, str>,
    pub(super) usage: Usage,
    pub(super) scores: Option<Cow<'a, Scores>>,
    pub(super) duration_ms: u64,
    pub(super) transcript: Cow<'a, [Message]>,
    pub(super) handover: Option<Cow<'a, Handover>>,
    pub(super) partial: bool,
    pub(super) customer_message: Cow<'a, str>,
    pub(super) store_failures: u32,
}

/// The transcript's JSON as the checkpoints of one run write it, kept between saves so
/// that a save encodes only the messages new since the last one (each save writes the
/// whole state: without it, a save encoded the whole transcript again).
///
/// It keeps a copy of the messages it encoded: a save compares them with the
/// transcript's and encodes again from the first that differs, so a message edited in
/// place (compaction, the edits of a resumed pause's decisions, a fallback stripping
/// provider parts) is never written stale. A comparison is a walk of the strings, far
/// cheaper than escaping them into JSON.
#[derive(Debug, Default)]
pub(super) struct EncodedTranscript {
    /// The messages encoded so far.
    messages: Vec<Message>,
    /// Where each message's JSON ends in `text` (bytes).
    ends: Vec<usize>,
    /// The messages' JSON, comma-separated, without the brackets.
    text: String,
}

impl EncodedTranscript {
    /// Brings the cache up to `messages`: keeps the longest unchanged prefix and encodes
    /// the rest.
    fn update(&mut self, messages: &[Message]) -> Result<(), serde_json::Error> {
        let same = self
            .messages
            .iter()
            .zip(messages)
            .take_while(|(kept, now)| kept == now)
            .count();
        if same < self.messages.len() {
            self.messages.truncate(same);
            self.ends.truncate(same);
            self.text.truncate(self.ends.last().copied().unwrap_or(0));
        }
        for message in messages.get(same..).unwrap_or_default() {
            if !self.text.is_empty() {
                self.text.push(',');
            }
            self.text.push_str(&serde_json::to_string(message)?);
            self.ends.push(self.text.len());
            self.messages.push(message.clone());
        }
        Ok(())
    }

    /// The state text of `snapshot` with `messages` as its transcript: the snapshot
    /// encoded without its messages, and the cached messages' JSON put in their place.
    ///
    /// # Errors
    /// When a message or the snapshot does not encode.
    pub(super) fn state_text(
        &mut self,
        snapshot: &Snapshot<'_>,
        messages: &[Message],
    ) -> Result<String, serde_json::Error> {
        self.update(messages)?;
        let rest = serde_json::to_string(snapshot)?;
        let head = format!("{{\"format\":{},\"messages\":[", snapshot.format);
        let Some(tail) = rest
            .strip_prefix(head.as_str())
            .and_then(|tail| tail.strip_prefix(']'))
        else {
            // Not the shape written above (cannot happen while `messages` follows
            // `format`): the whole snapshot, encoded the plain way.
            let whole = Snapshot {
                messages: Cow::Borrowed(messages),
                ..snapshot.clone()
            };
            return serde_json::to_string(&whole);
        };
        let mut text = String::with_capacity(rest.len() + self.text.len());
        text.push_str(&head);
        text.push_str(&self.text);
        text.push(']');
        text.push_str(tail);
        // Every debug build (the tests) checks the cache against the plain encoding,
        // byte for byte: a change to the transcript it missed fails there.
        #[cfg(debug_assertions)]
        {
            let whole = Snapshot {
                messages: Cow::Borrowed(messages),
                ..snapshot.clone()
            };
            debug_assert_eq!(text, serde_json::to_string(&whole)?, "a stale transcript");
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::AttemptKind;
    use crate::message::{ToolCall, ToolResult};

    fn snapshot<'a>(messages: &'a [Message]) -> Snapshot<'a> {
        Snapshot {
            format: FORMAT,
            messages: Cow::Borrowed(messages),
            phase: Phase::ToolsPending {
                offered: vec!["lookup".into()],
                decisions: Decisions::default(),
            },
            usage: Usage::default(),
            cost_usd: 0.25,
            last_call_tokens: 12,
            last_call_cost: 0.5,
            attempts: Cow::Owned(vec![Attempt::new(AttemptKind::SchemaValidation, 1, "no")]),
            failures: Cow::Borrowed(&[]),
            force_answer: false,
            last_text: Cow::Borrowed("said \"this\""),
            output: Cow::Borrowed(""),
            guard: GuardState::default(),
            calls: Cow::Borrowed(&[]),
            last_correction: None,
            model_summary: Some(Cow::Borrowed("messages")),
            fatal: None,
            elapsed_ms: 7,
            store_failures: 0,
        }
    }

    /// The cached text, through every kind of change to the transcript, reads back as
    /// the plain encoding of the same snapshot.
    #[test]
    fn the_cached_text_is_the_plain_encoding_through_appends_edits_and_cuts() {
        let call = ToolCall::new("c1", "lookup", serde_json::json!({"q": "a\"b"}));
        let mut messages = vec![Message::user("ticket \u{e9}")];
        let mut cache = EncodedTranscript::default();
        let check = |messages: &[Message], cache: &mut EncodedTranscript| {
            let empty = Snapshot {
                messages: Cow::Borrowed(&[]),
                ..snapshot(messages)
            };
            let text = cache.state_text(&empty, messages).unwrap();
            let plain = serde_json::to_string(&snapshot(messages)).unwrap();
            assert_eq!(
                serde_json::from_str::<Value>(&text).unwrap(),
                serde_json::from_str::<Value>(&plain).unwrap()
            );
            let back: Snapshot<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(back.messages.as_ref(), messages);
        };
        check(&messages, &mut cache);
        check(&[], &mut cache);
        messages.push(Message::assistant("", vec![call]));
        messages.push(Message::tool_results(vec![ToolResult::ok(
            "c1", "lookup", "found",
        )]));
        check(&messages, &mut cache);
        // Edited in place, in the middle (as compaction clears a tool result).
        messages[2] = Message::tool_results(vec![ToolResult::ok("c1", "lookup", "")]);
        messages.push(Message::user("more"));
        check(&messages, &mut cache);
        assert_eq!(cache.messages, messages);
        // Cut (as a summary replaces older turns).
        messages.splice(0..2, [Message::user("summary")]);
        check(&messages, &mut cache);
        assert_eq!(cache.ends.len(), messages.len());
    }
}
