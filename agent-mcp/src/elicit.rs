//! An MCP server's `elicitation/create` that no handler answers: the tool call ends,
//! the run pauses with the question as a pending call, and the call is made again on
//! resume with the answer ready (see `docs/interop.md`, "Elicitation that pauses").
//!
//! An MCP session does not outlive the process (and a server's request cannot wait
//! for days), so a paused call is not kept open: it is cancelled, and on resume the
//! same `tools/call` is sent again. The server asks again, and each question is answered
//! from the decisions at once, matched by its place in the call (first, second, ..)
//! and by a fingerprint of its message and schema: the pending call's id is
//! `elicit-N-FFFFFFFF`. A server that asks a second question pauses the run again; the
//! first answer is kept in the calling run's checkpoint (with
//! [`ChildPause::with_decided`]) and given again on the next resume.

use std::sync::{Arc, Mutex, PoisonError};

use agent_core::ToolError;
use agent_core::durable::{ChildPause, Decision, Decisions, PauseReason, PendingCall};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// The tool name of an elicitation's pending call.
pub(crate) const PENDING_TOOL: &str = "elicitation";

/// A question the server asked that nobody answered yet: the call pauses on it.
#[derive(Debug)]
pub(crate) struct Question {
    pub(crate) id: String,
    pub(crate) message: String,
    pub(crate) schema: Value,
}

impl Question {
    /// The pending call the run lists: tool `elicitation`, arguments `{"message"}`,
    /// reason `input`, the requested schema as its parameters.
    pub(crate) fn pending(&self) -> PendingCall {
        PendingCall::new(
            &self.id,
            PENDING_TOOL,
            json!({ "message": self.message }),
            PauseReason::Input {
                message: self.message.clone(),
            },
        )
        .with_parameters(self.schema.clone())
    }
}

/// What a question gets from the call's decisions.
#[derive(Debug, PartialEq)]
pub(crate) enum Ready {
    /// The decision for it (given on resume).
    Answer(Decision),
    /// None: a handler answers, or the call pauses.
    None,
}

/// The elicitation state of one tool call in flight: the answers it was resumed with,
/// the answers used so far, and where to say that it must pause.
pub(crate) struct Asking {
    answers: Decisions,
    state: Mutex<State>,
}

/// Counts only: the answers are a person's words.
impl std::fmt::Debug for Asking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asking")
            .field("answers", &self.answers.len())
            .finish_non_exhaustive()
    }
}

struct State {
    asked: u32,
    used: Decisions,
    pause: Option<oneshot::Sender<Question>>,
}

impl Asking {
    /// A call resumed with `answers` (empty for a first call), and the receiver its
    /// pause comes on.
    pub(crate) fn new(answers: Decisions) -> (Arc<Self>, oneshot::Receiver<Question>) {
        let (sender, receiver) = oneshot::channel();
        let asking = Self {
            answers,
            state: Mutex::new(State {
                asked: 0,
                used: Decisions::new(),
                pause: Some(sender),
            }),
        };
        (Arc::new(asking), receiver)
    }

    /// The next question of this call: its id and the decision ready for it, if any.
    pub(crate) fn next(&self, message: &str, schema: &Value) -> (String, Ready) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.asked += 1;
        let id = question_id(state.asked, message, schema);
        match self.answers.get(&id) {
            Some(decision) => {
                state.used = std::mem::take(&mut state.used).with(&id, decision.clone());
                (id, Ready::Answer(decision.clone()))
            }
            None => (id, Ready::None),
        }
    }

    /// Ends the call on `question`: `false` when it already paused on another one.
    pub(crate) fn pause(&self, question: Question) -> bool {
        let sender = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pause
            .take();
        sender.is_some_and(|s| s.send(question).is_ok())
    }

    /// The answers this call used (kept by the calling run for the next resume).
    pub(crate) fn used(&self) -> Decisions {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .used
            .clone()
    }
}

/// `elicit-N-FFFFFFFF`: the question's place in the call and 32 bits of FNV-1a over
/// its message and schema (stable across processes and builds).
fn question_id(place: u32, message: &str, schema: &Value) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let schema = schema.to_string();
    for byte in message
        .bytes()
        .chain(std::iter::once(0))
        .chain(schema.bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("elicit-{place}-{:08x}", hash & 0xffff_ffff)
}

/// The tool error a call that paused on `question` ends with: a child "run" of server
/// `label` (id `run_id`) waiting on the question, with the answers used so far kept.
pub(crate) fn paused(
    label: &str,
    run_id: String,
    question: &Question,
    used: Decisions,
) -> ToolError {
    let child = ChildPause::new(run_id, label, vec![question.pending()]).with_decided(used);
    ToolError::paused_inside(child)
}

/// A fresh id for the paused call (`mcp-` and 16 hex digits): what the calling run's
/// [`Via`](agent_core::durable::Via) names as the child run.
pub(crate) fn fresh_run_id() -> String {
    format!("mcp-{:016x}", fastrand::u64(..))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"guests": {"type": "integer"}}})
    }

    #[test]
    fn question_ids_name_the_place_and_the_question() {
        let first = question_id(1, "How many?", &schema());
        assert!(first.starts_with("elicit-1-"), "{first}");
        assert_eq!(first.len(), "elicit-1-".len() + 8);
        assert_eq!(first, question_id(1, "How many?", &schema()));
        assert_ne!(first, question_id(1, "How many guests?", &schema()));
        assert_ne!(
            first,
            question_id(1, "How many?", &json!({"type": "object"}))
        );
        assert_eq!(
            question_id(2, "How many?", &schema())[9..],
            first[9..],
            "the place changes the prefix only"
        );
    }

    #[test]
    fn answers_are_found_by_place_and_fingerprint_and_remembered() {
        let id = question_id(1, "How many?", &schema());
        let (asking, _pause) = Asking::new(Decisions::new().result(&id, json!({"guests": 2})));
        // A different first question finds nothing.
        let (other, _) = Asking::new(Decisions::new().result(&id, json!({"guests": 2})));
        assert_eq!(other.next("Which day?", &schema()).1, Ready::None);
        let (got, ready) = asking.next("How many?", &schema());
        assert_eq!(got, id);
        assert_eq!(
            ready,
            Ready::Answer(Decision::Result {
                value: json!({"guests": 2})
            })
        );
        // The second question of the call has no answer yet.
        let (second, ready) = asking.next("Which day?", &schema());
        assert!(second.starts_with("elicit-2-"));
        assert_eq!(ready, Ready::None);
        assert_eq!(
            asking.used(),
            Decisions::new().result(&id, json!({"guests": 2}))
        );
    }

    #[test]
    fn a_call_pauses_once_with_the_question_as_a_pending_input() {
        let (asking, mut receiver) = Asking::new(Decisions::new());
        let question = Question {
            id: "elicit-1-0000abcd".into(),
            message: "How many?".into(),
            schema: schema(),
        };
        assert!(asking.pause(question));
        let again = Question {
            id: "elicit-2-0000abcd".into(),
            message: "Again?".into(),
            schema: schema(),
        };
        assert!(!asking.pause(again));
        let question = receiver.try_recv().unwrap();
        let pending = question.pending();
        assert_eq!(pending.call_id, "elicit-1-0000abcd");
        assert_eq!(pending.tool, PENDING_TOOL);
        assert_eq!(
            pending.reason,
            PauseReason::Input {
                message: "How many?".into()
            }
        );
        assert_eq!(pending.parameters, Some(schema()));
        let error = paused("srv", "mcp-1".into(), &question, Decisions::new());
        assert!(error.is_deferred());
        let child = error.child_pause().unwrap();
        assert_eq!(
            (child.run_id.as_str(), child.agent.as_str()),
            ("mcp-1", "srv")
        );
        assert_eq!(child.pending, [pending]);
    }
}
