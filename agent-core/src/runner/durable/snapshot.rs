//! The texts of a checkpoint (see `checkpoint.rs`): the header, fixed for a run; the
//! state of a running run at a boundary, with the boundary's phase; and a finished
//! run's result. Serialized as JSON; [`FORMAT`] is their version.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::AgentError;
use crate::handover::Handover;
use crate::message::Message;
use crate::output::OutputMode;
use crate::pause::{Decisions, PendingCall};
use crate::runner::state::RunState;
use crate::scores::Scores;
use crate::usage::Usage;

/// The version of the header and finished texts this runner writes.
pub(crate) const FORMAT: u32 = 1;

/// The version of the running state's text this runner writes (2: a [`RunState`] and
/// the phase; 1, before it: the same fields flat, still read).
pub(crate) const STATE_FORMAT: u32 = 2;

/// What does not change during a run: written with every save, read on resume.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Header {
    pub(crate) format: u32,
    pub(crate) run_id: String,
    pub(crate) trace_id: String,
    pub(crate) agent: String,
    pub(crate) fingerprint: String,
    pub(crate) output_mode: OutputMode,
    pub(crate) output_schema: Option<Value>,
    /// The user tools: name and parameter schema, in the config's order.
    pub(crate) tools: Vec<(String, Value)>,
    pub(crate) thread: Option<String>,
    pub(crate) input: String,
    /// The system prompt as sent (retrieved context included).
    pub(crate) system: Option<String>,
    /// Messages before the input (the thread's and `RunOptions::history`).
    pub(crate) history_len: usize,
    /// The run's deadline (ms), when it had one.
    pub(crate) deadline_ms: Option<u64>,
}

/// Which boundary a running checkpoint was saved at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub(crate) enum Phase {
    /// Before an LLM call: the previous transition is complete.
    BeforeCall,
    /// The last message is a turn of ordinary tool calls, none answered yet; `offered`
    /// names the tools that turn was offered; `decisions` are those a resume of a paused
    /// run brought (edits already applied to the turn).
    ToolsPending {
        offered: Vec<String>,
        #[serde(default, skip_serializing_if = "Decisions::is_empty")]
        decisions: Decisions,
        /// The calls of the turn whose child run paused, with that run's id: each runs
        /// again to resume it with its decisions (C64).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        inside: Vec<(String, String)>,
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

/// A running run's checkpoint (the `state` text of an unfinished checkpoint): the run's
/// [`RunState`] and the boundary it was saved at. Written as
/// `{"format":2,"state":{"messages":[..],..},"phase":{..}}`; `state.messages` comes
/// first: [`EncodedTranscript::state_text`] writes it in place from its cache.
#[derive(Debug, Deserialize)]
pub(crate) struct Snapshot {
    pub(crate) state: RunState,
    pub(crate) phase: Phase,
}

/// A snapshot as written: the state and the phase borrowed.
#[derive(Serialize)]
struct SnapshotOut<'a> {
    format: u32,
    state: &'a RunState,
    phase: &'a Phase,
}

impl Snapshot {
    /// The snapshot's text, written whole (without the transcript cache).
    ///
    /// # Errors
    /// When it does not encode.
    pub(crate) fn to_text(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(&SnapshotOut {
            format: STATE_FORMAT,
            state: &self.state,
            phase: &self.phase,
        })
    }

    /// Reads a snapshot's text: this version's (format 2), or one written before
    /// [`RunState`] (format 1: the same fields, flat beside the phase), whose model
    /// route, models tried and handoffs read as none (that version did not keep them).
    ///
    /// # Errors
    /// Why it does not decode, or its format is unknown.
    pub(crate) fn from_text(text: &str) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Format {
            format: u32,
        }
        /// Format 1: `{"format":1,"messages":..,"phase":..,"usage":..,..}`.
        #[derive(Deserialize)]
        struct Flat {
            phase: Phase,
            #[serde(flatten)]
            state: RunState,
        }
        let format = serde_json::from_str::<Format>(text)
            .map_err(|e| format!("the state does not decode: {e}"))?
            .format;
        match format {
            STATE_FORMAT => {
                serde_json::from_str(text).map_err(|e| format!("the state does not decode: {e}"))
            }
            1 => {
                let flat: Flat = serde_json::from_str(text)
                    .map_err(|e| format!("the state (format 1) does not decode: {e}"))?;
                Ok(Self {
                    state: flat.state,
                    phase: flat.phase,
                })
            }
            other => Err(format!(
                "state format {other} (this version reads 1 and {STATE_FORMAT})"
            )),
        }
    }
}

/// A finished run's result (the `state` text of a finished checkpoint).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Finished<'a> {
    pub(crate) format: u32,
    pub(crate) ok: bool,
    pub(crate) error: Option<Cow<'a, AgentError>>,
    pub(crate) output: Cow<'a, str>,
    pub(crate) trace_id: Cow<'a, str>,
    pub(crate) usage: Usage,
    pub(crate) scores: Option<Cow<'a, Scores>>,
    pub(crate) duration_ms: u64,
    pub(crate) transcript: Cow<'a, [Message]>,
    pub(crate) handover: Option<Cow<'a, Handover>>,
    pub(crate) partial: bool,
    pub(crate) customer_message: Cow<'a, str>,
    pub(crate) store_failures: u32,
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
pub(crate) struct EncodedTranscript {
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

    /// The text of a snapshot of `state` at `phase`: the snapshot encoded without its
    /// messages, and the cached messages' JSON put in their place.
    ///
    /// # Errors
    /// When a message or the snapshot does not encode.
    pub(crate) fn state_text(
        &mut self,
        state: &mut RunState,
        phase: &Phase,
    ) -> Result<String, serde_json::Error> {
        self.update(&state.messages)?;
        let messages = std::mem::take(&mut state.messages);
        let rest = serde_json::to_string(&SnapshotOut {
            format: STATE_FORMAT,
            state,
            phase,
        });
        state.messages = messages;
        let rest = rest?;
        let plain = |state: &RunState| {
            serde_json::to_string(&SnapshotOut {
                format: STATE_FORMAT,
                state,
                phase,
            })
        };
        let Some(text) = self.splice(&rest) else {
            // Not the shape written above (cannot happen while `messages` is the state's
            // first field): the whole snapshot, encoded the plain way.
            return plain(state);
        };
        // Every debug build (the tests) checks the cache against the plain encoding,
        // byte for byte: a change to the transcript it missed fails there.
        #[cfg(debug_assertions)]
        debug_assert_eq!(text, plain(state)?, "a stale transcript");
        Ok(text)
    }
}

impl EncodedTranscript {
    /// `bare`, a snapshot's text encoded with no messages (`{"format":2,"state":
    /// {"messages":[],..},..}`), with the cached messages put in their place; `None`
    /// when `bare` is not of that shape.
    pub(crate) fn splice(&self, bare: &str) -> Option<String> {
        let head = format!("{{\"format\":{STATE_FORMAT},\"state\":{{\"messages\":[");
        let tail = bare.strip_prefix(head.as_str())?.strip_prefix(']')?;
        let mut text = String::with_capacity(bare.len() + self.text.len());
        text.push_str(&head);
        text.push_str(&self.text);
        text.push(']');
        text.push_str(tail);
        Some(text)
    }
}

/// The text of a snapshot of `state` at `phase` without its messages and its batched
/// call (both put back after): what [`EncodedTranscript::splice`] takes.
///
/// # Errors
/// When the snapshot does not encode.
pub(crate) fn bare_text(state: &mut RunState, phase: &Phase) -> Result<String, serde_json::Error> {
    let messages = std::mem::take(&mut state.messages);
    let call = state.batch_call.take();
    let text = serde_json::to_string(&SnapshotOut {
        format: STATE_FORMAT,
        state,
        phase,
    });
    state.messages = messages;
    state.batch_call = call;
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Attempt, AttemptKind};
    use crate::message::{ToolCall, ToolResult};
    use serde_json::Value;

    fn state(messages: &[Message]) -> RunState {
        RunState {
            messages: messages.to_vec(),
            cost_usd: 0.25,
            last_call_tokens: 12,
            last_call_cost: 0.5,
            attempts: vec![Attempt::new(AttemptKind::SchemaValidation, 1, "no")],
            last_text: "said \"this\"".to_owned(),
            model_summary: Some("messages".to_owned()),
            elapsed_ms: 7,
            ..RunState::default()
        }
    }

    fn phase() -> Phase {
        Phase::ToolsPending {
            offered: vec!["lookup".into()],
            decisions: Decisions::default(),
            inside: Vec::new(),
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
            let mut run = state(messages);
            let text = cache.state_text(&mut run, &phase()).unwrap();
            assert_eq!(run.messages, messages, "the state keeps its messages");
            let plain = Snapshot {
                state: state(messages),
                phase: phase(),
            }
            .to_text()
            .unwrap();
            assert_eq!(
                serde_json::from_str::<Value>(&text).unwrap(),
                serde_json::from_str::<Value>(&plain).unwrap()
            );
            let back = Snapshot::from_text(&text).unwrap();
            assert_eq!(back.state.messages.as_slice(), messages);
            assert_eq!(back.phase, phase());
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

    /// A state written before `RunState` (format 1: its fields flat beside the phase)
    /// reads as the same state, with no model route, models tried or handoffs.
    #[test]
    fn a_format_1_state_reads_as_the_same_state() {
        let text = r#"{"format":1,"messages":[{"role":"user","content":"hi"}],
            "phase":{"at":"before_call"},"usage":{"llm_calls":2,"tool_calls":1,
            "input_tokens":220,"output_tokens":22,"cache_read_tokens":0,
            "cache_write_tokens":0,"cost_usd":null,"estimated_llm_calls":0},
            "cost_usd":0.0,"last_call_tokens":132,"last_call_cost":0.0,"attempts":[],
            "failures":[],"force_answer":true,"last_text":"t","output":"",
            "guard":{"calls":[["lookup","{}","x",false,1,0]],"seen_results":[["lookup","x"]],
            "idle_turns":1},"calls":[],"last_correction":"fix","model_summary":null,
            "fatal":null,"elapsed_ms":40,"store_failures":1}"#;
        let snapshot = Snapshot::from_text(text).unwrap();
        assert_eq!(snapshot.phase, Phase::BeforeCall);
        let s = snapshot.state;
        assert_eq!(s.messages, vec![Message::user("hi")]);
        assert_eq!((s.usage.llm_calls, s.usage.input_tokens), (2, 220));
        assert_eq!(s.last_call_tokens, 132);
        assert!(s.force_answer);
        assert_eq!(s.last_correction.as_deref(), Some("fix"));
        assert_eq!((s.elapsed_ms, s.store_failures), (40, 1));
        assert_eq!((s.route, s.tried.len(), s.handoffs.len()), (0, 0, 0));
        // The guard's counters came back: written again, they are the same.
        let guard = serde_json::to_value(&s.guard).unwrap();
        assert_eq!(guard["idle_turns"], 1);
        assert_eq!(guard["calls"][0][0], "lookup");
        assert!(Snapshot::from_text(r#"{"format":9}"#).is_err());
    }
}
