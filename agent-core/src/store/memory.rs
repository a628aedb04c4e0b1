//! [`Memory`]: conversation threads across runs, and the window that trims them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::message::Message;
use crate::store::StoreFuture;

/// Conversation threads: a run that names a thread
/// ([`RunOptions::thread`](crate::RunOptions::thread)) starts from the thread's earlier
/// messages and adds its own after it.
///
/// Before the run, the runner calls [`load`](Self::load) with the window's
/// `max_messages`, trims the messages with the config's [`MemoryWindow`] and sends them
/// first: thread messages, then any
/// [`RunOptions::history`](crate::RunOptions::history), then the input. It also compares
/// [`ThreadState::llm_calls`] with the config's `max_thread_llm_calls`: at or over it,
/// the run ends at once with `budget_exhausted`
/// ([`Budget::ThreadLlmCalls`](crate::error::Budget::ThreadLlmCalls)), before any request.
///
/// After the run, the runner calls [`append`](Self::append) with the run's LLM calls
/// and, for a run that ended answered or escalated, its messages from the input on; a
/// run that ended otherwise adds only its LLM calls (its input and half-finished turns
/// would confuse the next run). A run refused by the cap adds nothing.
pub trait Memory: Send + Sync {
    /// The thread's totals and at most `max_messages` of its newest messages, oldest
    /// first; with a stored [`ThreadSummary`], the summary and only messages after what
    /// it covers. An unknown thread is empty (not an error).
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the store cannot be read.
    fn load<'a>(&'a self, thread: &'a str, max_messages: usize) -> StoreFuture<'a, ThreadState>;

    /// Adds one run to the thread: its messages (appended in order), its LLM calls
    /// (added to the thread's total) and its [`ThreadSummary`], if any (replacing the
    /// stored one). Idempotent per `entry.trace_id`: a second append of
    /// the same run changes nothing, so a retried append never duplicates.
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the store cannot be written.
    fn append<'a>(&'a self, thread: &'a str, entry: &'a ThreadEntry) -> StoreFuture<'a, ()>;

    /// Claims `thread` for the run `run` (its trace id) for at most `lease`, so that two
    /// runs on one thread go one after the other, each seeing the other's turns (case
    /// C38). `true`: the run holds the thread now (it was free, the holder's lease ran
    /// out, or this run held it already); `false`: another run holds it. The runner
    /// claims before [`load`](Self::load), waits (polling) while another run holds the
    /// thread, and [`release`](Self::release)s after [`append`](Self::append).
    ///
    /// The default holds claims in this process only (per store value): runs of one
    /// process on one store are serialized, runs of other processes are not. A store
    /// shared by processes overrides both methods with a claim in the store itself
    /// (`agent-store` does, on SQLite and PostgreSQL).
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the claim cannot be made; the
    /// runner then goes on without it (a store never changes a run's outcome).
    fn claim<'a>(
        &'a self,
        thread: &'a str,
        run: &'a str,
        lease: Duration,
    ) -> StoreFuture<'a, bool> {
        let key = (
            std::ptr::from_ref(self).cast::<()>() as usize,
            thread.to_owned(),
        );
        Box::pin(async move { Ok(local_claims::claim(key, run, lease)) })
    }

    /// Gives up the claim of [`claim`](Self::claim) (nothing when `run` does not hold
    /// `thread`).
    ///
    /// # Errors
    /// A [`StoreError`](crate::store::StoreError) when the store cannot be written; the
    /// claim then runs out with its lease.
    fn release<'a>(&'a self, thread: &'a str, run: &'a str) -> StoreFuture<'a, ()> {
        let key = (
            std::ptr::from_ref(self).cast::<()>() as usize,
            thread.to_owned(),
        );
        Box::pin(async move {
            local_claims::release(&key, run);
            Ok(())
        })
    }
}

/// The claims of [`Memory`]'s default [`claim`](Memory::claim): per store value (its
/// address) and thread, the run holding it and when its lease runs out.
mod local_claims {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock, PoisonError};
    use std::time::{Duration, Instant};

    type Key = (usize, String);

    fn claims() -> &'static Mutex<HashMap<Key, (String, Instant)>> {
        static CLAIMS: OnceLock<Mutex<HashMap<Key, (String, Instant)>>> = OnceLock::new();
        CLAIMS.get_or_init(Mutex::default)
    }

    pub(super) fn claim(key: Key, run: &str, lease: Duration) -> bool {
        let now = Instant::now();
        let until = now.checked_add(lease).unwrap_or(now);
        let mut claims = claims().lock().unwrap_or_else(PoisonError::into_inner);
        match claims.get(&key) {
            Some((holder, expires)) if holder != run && *expires > now => false,
            _ => {
                claims.insert(key, (run.to_owned(), until));
                true
            }
        }
    }

    pub(super) fn release(key: &Key, run: &str) {
        let mut claims = claims().lock().unwrap_or_else(PoisonError::into_inner);
        if claims.get(key).is_some_and(|(holder, _)| holder == run) {
            claims.remove(key);
        }
    }
}

/// What [`Memory::load`] returns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ThreadState {
    /// The newest messages of the thread, oldest first (at most the `max_messages`
    /// asked for).
    pub messages: Vec<Message>,
    /// LLM calls over every run of the thread so far.
    pub llm_calls: u64,
    /// Runs appended to the thread so far.
    pub runs: u64,
    /// The thread's summary (see [`ThreadSummary`]), when a run stored one: it covers
    /// every message before `messages`, which are then only the newer ones.
    #[serde(default)]
    pub summary: Option<String>,
}

impl ThreadState {
    /// A thread state.
    pub fn new(messages: Vec<Message>, llm_calls: u64, runs: u64) -> Self {
        Self {
            messages,
            llm_calls,
            runs,
            summary: None,
        }
    }

    /// The same, with the thread's summary.
    #[must_use]
    pub fn with_summary(mut self, summary: Option<String>) -> Self {
        self.summary = summary;
        self
    }
}

/// A summary of a thread's older messages, written by a run whose config has a
/// summarizing compaction ([`Compaction::summarize`](crate::config::Compaction::summarize),
/// `summarize_with_model` or `summarize_with`) when the thread no longer fits its
/// memory window.
///
/// It replaces the thread's summary and covers every message stored before the entry
/// that carries it except the newest `kept`: from then on [`Memory::load`] returns it
/// with only the messages after what it covers (the `kept` ones and every later one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ThreadSummary {
    /// The summary's text (no system prompt, no call ids).
    pub text: String,
    /// How many messages, counted back from just before this entry, the summary does
    /// not cover (messages): they are still loaded word for word, after the summary.
    pub kept: usize,
}

impl ThreadSummary {
    /// A summary that covers all but the newest `kept` messages before its entry.
    pub fn new(text: impl Into<String>, kept: usize) -> Self {
        Self {
            text: text.into(),
            kept,
        }
    }
}

/// What [`Memory::append`] adds: one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ThreadEntry {
    /// The run's trace id (the idempotency key).
    pub trace_id: String,
    /// The run's messages from its input on (empty for a run that did not end answered
    /// or escalated).
    pub messages: Vec<Message>,
    /// The run's LLM calls.
    pub llm_calls: u64,
    /// A new summary of the thread's older messages, when the run wrote one (stored
    /// whatever the run's ending).
    #[serde(default)]
    pub summary: Option<ThreadSummary>,
}

impl ThreadEntry {
    /// An entry.
    pub fn new(trace_id: impl Into<String>, messages: Vec<Message>, llm_calls: u64) -> Self {
        Self {
            trace_id: trace_id.into(),
            messages,
            llm_calls,
            summary: None,
        }
    }

    /// The same, with a new summary of the thread.
    #[must_use]
    pub fn with_summary(mut self, summary: Option<ThreadSummary>) -> Self {
        self.summary = summary;
        self
    }
}

/// How much of a thread a run sees: the newest messages that fit both caps, starting at
/// a user message.
///
/// The rule ([`trim`](Self::trim)): take the longest run of newest messages with at most
/// `max_messages` messages and at most `max_tokens` estimated tokens
/// ([`estimate_tokens`]: bytes / 4, rounded up), then drop messages from its front until
/// it starts with a user message. An assistant turn and the tool results that answer it
/// are therefore kept or dropped together: the results always directly follow their
/// turn, and a cut never starts after a user message. A single exchange larger than the
/// window is dropped whole, never cut in half. Defaults: 40 messages, 8,000 tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemoryWindow {
    /// The most messages loaded (messages; at least 1).
    pub max_messages: usize,
    /// The most estimated tokens loaded (tokens; at least 1).
    pub max_tokens: u64,
}

impl Default for MemoryWindow {
    fn default() -> Self {
        Self {
            max_messages: 40,
            max_tokens: 8_000,
        }
    }
}

impl MemoryWindow {
    /// A window of at most `max_messages` messages and `max_tokens` estimated tokens.
    pub fn new(max_messages: usize, max_tokens: u64) -> Self {
        Self {
            max_messages,
            max_tokens,
        }
    }

    /// Keeps the newest messages that fit the window, starting at a user message (see
    /// the type's docs for the rule).
    pub fn trim(&self, mut messages: Vec<Message>) -> Vec<Message> {
        let mut tokens = 0u64;
        let mut start = messages.len();
        while start > 0 && messages.len() - start < self.max_messages {
            let cost = estimate_tokens(&messages[start - 1]);
            if tokens.saturating_add(cost) > self.max_tokens {
                break;
            }
            tokens = tokens.saturating_add(cost);
            start -= 1;
        }
        let first_user = messages[start..]
            .iter()
            .position(|m| matches!(m, Message::User { .. }))
            .map_or(messages.len(), |i| start + i);
        messages.drain(..first_user);
        messages
    }
}

/// The estimated tokens of a message: its bytes (text, tool call names and arguments,
/// tool result contents) divided by 4, rounded up, at least 1.
pub fn estimate_tokens(message: &Message) -> u64 {
    (crate::llm::message_bytes(message) as u64)
        .div_ceil(4)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolCall, ToolResult};
    use serde_json::json;

    fn exchange(n: usize) -> Vec<Message> {
        vec![
            Message::user(format!("question {n}")),
            Message::assistant("", vec![ToolCall::new(format!("c{n}"), "t", json!({}))]),
            Message::tool_results(vec![ToolResult::ok(format!("c{n}"), "t", "result")]),
            Message::assistant(format!("answer {n}"), vec![]),
        ]
    }

    fn thread(n: usize) -> Vec<Message> {
        (0..n).flat_map(exchange).collect()
    }

    #[test]
    fn a_window_that_fits_everything_keeps_everything() {
        let messages = thread(3);
        assert_eq!(MemoryWindow::default().trim(messages.clone()), messages);
    }

    #[test]
    fn the_message_cap_cuts_at_a_user_message() {
        // 12 messages; a cap of 6 would start at exchange 1's tool result: the cut moves
        // on to exchange 2's question, so calls and results stay together.
        let kept = MemoryWindow::new(6, 10_000).trim(thread(3));
        assert_eq!(kept, exchange(2));
        let kept = MemoryWindow::new(8, 10_000).trim(thread(3));
        assert_eq!(kept, [exchange(1), exchange(2)].concat());
    }

    #[test]
    fn the_token_cap_counts_bytes_over_four() {
        let messages = thread(2);
        let per_exchange: u64 = exchange(1).iter().map(estimate_tokens).sum();
        let kept = MemoryWindow::new(100, per_exchange).trim(messages.clone());
        assert_eq!(kept, exchange(1));
        let kept = MemoryWindow::new(100, per_exchange - 1).trim(messages);
        assert!(
            kept.is_empty(),
            "an exchange over the window is dropped whole"
        );
    }

    #[test]
    fn a_tool_call_is_never_separated_from_its_result() {
        for max in 1..=13 {
            let kept = MemoryWindow::new(max, 10_000).trim(thread(3));
            assert!(kept.len() <= max);
            assert!(kept.is_empty() || matches!(kept[0], Message::User { .. }));
            for (i, m) in kept.iter().enumerate() {
                if let Message::Assistant { tool_calls, .. } = m
                    && !tool_calls.is_empty()
                {
                    assert!(
                        matches!(kept.get(i + 1), Some(Message::Tool { .. })),
                        "{max}"
                    );
                }
                if let Message::Tool { .. } = m {
                    assert!(i > 0, "{max}: a result without its call");
                }
            }
        }
    }

    #[test]
    fn tokens_are_estimated_from_bytes() {
        assert_eq!(estimate_tokens(&Message::user("12345678")), 2);
        assert_eq!(estimate_tokens(&Message::user("123456789")), 3);
        assert_eq!(estimate_tokens(&Message::user("")), 1);
    }
}
