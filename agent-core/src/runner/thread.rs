//! A memory thread's history as a run starts from it: the newest messages that fit the
//! memory window, after the thread's summary, which a summarizing compaction keeps up
//! to date (see `Compaction` and `store::Memory`).

use std::sync::Arc;

use crate::llm::TokenUsage;
use crate::message::Message;

use super::compact::{call_ids, complete_summary, scrub_ids, summary_request};

/// The prefix of the message that holds a thread's summary.
pub(crate) const THREAD_SUMMARY_PREFIX: &str =
    "Summary of the earlier messages of this conversation:";

/// What summarizing a thread's older messages gave: the summary to store, and the
/// call's tokens at its price; or why it failed.
pub(crate) struct ThreadSummarized {
    pub(crate) summary: Result<String, String>,
    pub(crate) tokens: Option<(TokenUsage, Option<crate::pricing::ModelPrice>)>,
}

/// Summarizes a thread's `older` messages (after its `earlier` summary), which its
/// memory window no longer holds, with the config's summarizer; `kept` are the newer
/// messages the run sees as they are (their call ids stay, every other is scrubbed).
pub(crate) async fn summarize_thread<T>(
    cfg: &crate::config::Compiled<T>,
    summarizer: Option<&crate::config::Summarizer>,
    earlier: Option<&str>,
    older: &[Message],
    kept: &[Message],
) -> ThreadSummarized {
    let (client, model, price) = match summarizer {
        Some(s) => (Arc::clone(&s.client), s.wire_model.as_str(), s.price),
        None => {
            let primary = cfg.primary();
            (
                Arc::clone(&primary.client),
                primary.wire_model.as_str(),
                primary.price,
            )
        }
    };
    let b = &cfg.limits;
    if b.max_cost_usd.is_some() && price.is_none() {
        return ThreadSummarized {
            summary: Err("the summarizing model has no price and the run caps its cost".into()),
            tokens: None,
        };
    }
    let request = summary_request(model, b.max_tokens, earlier, older);
    let (text, tokens) = complete_summary(client.as_ref(), &request, b.llm_timeout).await;
    let keep: std::collections::HashSet<&str> = call_ids(kept).collect();
    let ids: Vec<String> = call_ids(older)
        .filter(|id| !keep.contains(id))
        .map(str::to_owned)
        .collect();
    ThreadSummarized {
        summary: text.map(|t| scrub_ids(&t, &ids)),
        tokens: tokens.map(|t| (t, price)),
    }
}

/// The config's summarizer, when its compaction summarizes (`Some(None)`: the run's
/// own model).
pub(crate) fn summarizes<T>(
    cfg: &crate::config::Compiled<T>,
) -> Option<Option<&crate::config::Summarizer>> {
    let plan = cfg.compaction.as_ref()?;
    plan.summarize.as_ref().map(Option::as_ref)
}

/// The thread's start for a run: its messages, and what summarizing it did.
#[derive(Default)]
pub(crate) struct ThreadStart {
    /// The messages the run starts from: the thread's summary, then the newest that fit
    /// the memory window.
    pub(crate) history: Vec<Message>,
    /// The thread's new summary, for the run's entry to store.
    pub(crate) summary: Option<crate::store::ThreadSummary>,
    /// The summary call's tokens, at the summarizer's price.
    pub(crate) tokens: Option<(TokenUsage, Option<crate::pricing::ModelPrice>)>,
    /// Whether the summary failed (the stored one is kept).
    pub(crate) failed: bool,
}

/// The thread's messages a run starts from: the newest that fit the memory window,
/// after the thread's summary. With a summarizing compaction, the older messages the
/// window drops are summarized (with the stored summary) into a new one, which the
/// run's entry stores; a failed summary keeps the stored one, counted.
pub(crate) async fn thread_history<T>(
    cfg: &crate::config::Compiled<T>,
    state: crate::store::ThreadState,
) -> ThreadStart {
    let mut start = ThreadStart::default();
    let window = cfg.stores.window;
    let mut summary = state.summary;
    let mut messages = state.messages;
    let kept = window.trim(messages.clone());
    let older = messages.len() - kept.len();
    if let (true, Some(summarizer)) = (older > 0, summarizes(cfg)) {
        messages.truncate(older);
        let done = summarize_thread(cfg, summarizer, summary.as_deref(), &messages, &kept).await;
        start.tokens = done.tokens;
        match done.summary {
            Ok(text) => {
                start.summary = Some(crate::store::ThreadSummary::new(text.clone(), kept.len()));
                summary = Some(text);
            }
            Err(reason) => {
                tracing::warn!(reason = %reason, "compaction: the thread's summary failed");
                start.failed = true;
            }
        }
    }
    let prefix = THREAD_SUMMARY_PREFIX;
    start.history = summary
        .map(|text| Message::user(format!("{prefix}\n{text}")))
        .into_iter()
        .chain(kept)
        .collect();
    start
}
