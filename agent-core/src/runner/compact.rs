//! Compaction of a long conversation before an LLM call (see `Compaction`): the count
//! that decides it, clearing old tool results, and summaries of older turns.

use std::sync::Arc;

use foldhash::HashSet;

use crate::config::{CompactionPlan, ModelEntry};
use crate::content::TokenRule;
use crate::limits::Limits;
use crate::llm::{LlmRequest, TokenUsage, ToolChoice, message_bytes_with};
use crate::message::{Message, json_text};
use crate::pricing::ModelPrice;

use super::state::RunState;

/// What a run knows for its compaction decisions.
#[derive(Debug, Default)]
pub(crate) struct Compactor {
    /// The input tokens the provider reported for the last call, and how many messages
    /// that call sent: the history's tokens are those plus an estimate of the messages
    /// added since. `None` before a reported count and after a compaction.
    basis: Option<(u64, usize)>,
    /// The index of the first message of the run's own (after its input): summaries
    /// never reach the thread's earlier messages or the input.
    pub(crate) own_start: usize,
}

/// The prefix of a cleared tool result: a result that starts with it is not cleared
/// again.
const CLEARED: &str = "[compacted: ";

/// The prefix of the message that holds a summary.
pub(crate) const SUMMARY_PREFIX: &str = "Summary of the earlier turns of this run (compacted):";

/// Results this short are left as they are (bytes): a marker would not be shorter.
const KEEP_SHORT: usize = 160;

/// The bytes of a cut result's note (see `tools::truncate`), with a margin.
const NOTE_BYTES: usize = 280;

/// The fewest bytes of a result a cut to fit the context window keeps.
pub(crate) const KEEP_AT_LEAST: usize = 400;

/// The longest text of one message the summarizer is shown (bytes; the rest is cut).
const SHOWN_PER_MESSAGE: usize = 4_000;

const SUMMARY_PROMPT: &str = "You compact the history of an agent's run. Summarize the \
conversation below for the agent that continues it: what was asked, what each tool \
returned that still matters (facts, numbers, names, ids of records), what was decided, and \
what is left to do. Do not mention tool call ids. Be brief: at most 300 words.";

fn estimate(messages: &[Message], rule: TokenRule) -> u64 {
    (messages
        .iter()
        .map(|m| message_bytes_with(m, rule))
        .sum::<usize>() as u64)
        .div_ceil(4)
}

impl Compactor {
    /// A run whose own messages start at `own_start` (after its input).
    pub(crate) fn new(own_start: usize) -> Self {
        Self {
            basis: None,
            own_start,
        }
    }

    /// Records a call's reported input tokens, for `messages` messages sent.
    pub(crate) fn reported(&mut self, input_tokens: u64, messages: usize) {
        self.basis = (input_tokens > 0).then_some((input_tokens, messages));
    }
}

/// What a compaction needs of the run besides its state.
pub(crate) struct Context<'a> {
    /// The config's compaction.
    pub(crate) plan: &'a CompactionPlan,
    pub(crate) limits: &'a Limits,
    /// The next call's request (its messages are the state's): its system prompt,
    /// tools and output schema count in the history's estimate.
    pub(crate) request: &'a LlmRequest,
    /// The model the run is on: the summarizer when the plan names none.
    pub(crate) model: &'a ModelEntry,
    /// Every call id the run has seen (a summary names none of them).
    pub(crate) seen_ids: &'a HashSet<String>,
}

/// What [`Compactor::compact_if_needed`] did.
#[derive(Default)]
pub(crate) struct Outcome {
    /// A summary call's tokens at its price (it cost them whether it worked or not): the
    /// run counts them in its usage and its tree.
    pub(crate) spent: Option<(TokenUsage, Option<ModelPrice>)>,
    /// The compaction, when the history changed: its strategy, the history's tokens
    /// before and after, and why a summary fell back to clearing, if it did.
    pub(crate) done: Option<(&'static str, u64, u64, Option<String>)>,
}

impl Compactor {
    /// The history's tokens: the last call's reported input tokens plus an estimate of
    /// the messages added since, else the estimate of the whole request (bytes / 4).
    fn history_tokens(&self, request: &LlmRequest, messages: &[Message]) -> u64 {
        match self.basis {
            Some((reported, sent)) if sent <= messages.len() => {
                reported.saturating_add(estimate(&messages[sent..], request.token_rule))
            }
            _ => request.estimated_input_tokens_with(messages),
        }
    }

    /// Cuts the newest turn's tool results, longest first, so that the history fits
    /// `room` (the model's input tokens): one oversized result would otherwise end the
    /// run `context_window_exceeded` (or be rejected by the provider). Each cut result
    /// keeps its head and a note of its full size (see `tools::truncate`); at least
    /// [`KEEP_AT_LEAST`] bytes of each stay. Returns the history's tokens before and
    /// after when it cut anything.
    pub(crate) fn fit_tool_results(
        &mut self,
        request: &LlmRequest,
        messages: &mut [Message],
        room: u64,
    ) -> Option<(u64, u64)> {
        // Only a turn of tool results is cut (and only then is the history counted).
        if !matches!(messages.last(), Some(Message::Tool { .. })) {
            return None;
        }
        let before = self.history_tokens(request, messages);
        if before <= room {
            return None;
        }
        let Some(Message::Tool { results }) = messages.last_mut() else {
            return None;
        };
        // Bytes to take out, with room for each note (about 240 bytes).
        let mut over = ((before - room) as usize).saturating_mul(4);
        let mut order: Vec<usize> = (0..results.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(results[i].content.len()));
        let mut cut_any = false;
        for i in order {
            if over == 0 {
                break;
            }
            let result = &mut results[i];
            let len = result.content.len();
            let keep = len
                .saturating_sub(over.saturating_add(NOTE_BYTES))
                .max(KEEP_AT_LEAST);
            if keep >= len {
                continue;
            }
            let text = std::mem::take(&mut result.content);
            result.content = super::tools::truncate(text, keep);
            over = over.saturating_sub(len.saturating_sub(result.content.len()));
            cut_any = true;
        }
        if !cut_any {
            return None;
        }
        Some((before, self.history_tokens(request, messages)))
    }

    /// Compacts the conversation when the history passes the plan's trigger:
    /// summarizes older turns (with a summarizing policy), else, or when the summary
    /// fails, clears older tool results. Never fails the run; counts compactions and
    /// failed summaries in `state.usage`.
    pub(crate) async fn compact_if_needed(
        &mut self,
        cx: Context<'_>,
        state: &mut RunState,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        let before = self.history_tokens(cx.request, &state.messages);
        if before <= cx.plan.trigger_tokens {
            return outcome;
        }
        let mut fallback_reason = None;
        let mut strategy = "clear_tool_results";
        if cx.plan.summarize.is_some() {
            match self.summarize(&cx, state, &mut outcome.spent).await {
                Ok(true) => strategy = "summarize",
                Ok(false) => {}
                Err(reason) => {
                    state.usage.compaction_failures =
                        state.usage.compaction_failures.saturating_add(1);
                    tracing::warn!(reason = %reason, "compaction: the summary failed; clearing tool results instead");
                    fallback_reason = Some(reason);
                }
            }
        }
        let changed = strategy == "summarize"
            || clear_tool_results(&mut state.messages, cx.plan.keep_recent_turns) > 0;
        if !changed {
            return outcome;
        }
        self.basis = None;
        state.usage.compactions = state.usage.compactions.saturating_add(1);
        let after = cx.request.estimated_input_tokens_with(&state.messages);
        tracing::info!(
            strategy,
            before_tokens = before,
            after_tokens = after,
            "compaction"
        );
        outcome.done = Some((strategy, before, after, fallback_reason));
        outcome
    }

    /// Replaces the run's older turns by one summary message. `Ok(false)`: nothing old
    /// enough to summarize; `Err`: why the summary failed. A call that cost tokens
    /// leaves them in `spent`.
    async fn summarize(
        &mut self,
        cx: &Context<'_>,
        state: &mut RunState,
        spent: &mut Option<(TokenUsage, Option<ModelPrice>)>,
    ) -> Result<bool, String> {
        let messages = &state.messages;
        let start = self.own_start.min(messages.len());
        let Some(cut) = cut_point(messages, start, cx.plan.keep_recent_turns) else {
            return Ok(false);
        };
        // A summary made earlier is summarized again with the rest.
        let mut request = summary_request(
            &cx.request.model,
            cx.limits.max_tokens,
            None,
            &messages[start..cut],
        );
        let (client, price) = match cx.plan.summarize.as_ref().and_then(Option::as_ref) {
            Some(s) => {
                request.model.clone_from(&s.wire_model);
                (Arc::clone(&s.client), s.price)
            }
            None => (Arc::clone(&cx.model.client), cx.model.price),
        };
        let tokens = TokenUsage::new(
            request.estimated_input_tokens(),
            u64::from(request.max_tokens),
        );
        state.check_summary(cx.limits, tokens, price.as_ref())?;
        let outcome = complete_summary(client.as_ref(), &request, cx.limits.llm_timeout).await;
        if let Some(tokens) = outcome.1 {
            *spent = Some((tokens, price));
        }
        let text = outcome.0?;
        let messages = &mut state.messages;
        // Every id the run's turns had, and the summarized ones, but those still in
        // the kept turns: an earlier summary's ids are gone too.
        let kept: std::collections::HashSet<&str> = call_ids(&messages[cut..]).collect();
        let ids: Vec<String> = call_ids(&messages[start..cut])
            .chain(cx.seen_ids.iter().map(String::as_str))
            .filter(|id| !kept.contains(id))
            .map(str::to_owned)
            .collect();
        let text = scrub_ids(&text, &ids);
        let summary = Message::user(format!("{SUMMARY_PREFIX}\n{text}"));
        messages.splice(start..cut, [summary]);
        Ok(true)
    }
}

/// The request that asks for a summary of `messages` (after an `earlier` summary):
/// the summary prompt, the messages as text, no tools, at most 1,024 output tokens.
pub(super) fn summary_request(
    model: &str,
    max_tokens: u32,
    earlier: Option<&str>,
    messages: &[Message],
) -> LlmRequest {
    let mut request = LlmRequest::new(model);
    request.system = Some(SUMMARY_PROMPT.to_owned());
    let mut text = String::new();
    if let Some(earlier) = earlier {
        text.push_str(&format!("summary of what came before: {earlier}\n"));
    }
    text.push_str(&render(messages));
    request.messages = vec![Message::user(text)];
    request.tools = Arc::from(Vec::new());
    request.tool_choice = ToolChoice::None;
    request.max_tokens = max_tokens.min(1024);
    request
}

/// One summary call under `limit`: the trimmed summary text (an empty one is an
/// error), and the call's tokens when it cost any (reported, else estimated).
pub(super) async fn complete_summary(
    client: &dyn crate::llm::LlmClient,
    request: &LlmRequest,
    limit: std::time::Duration,
) -> (Result<String, String>, Option<TokenUsage>) {
    let response = match tokio::time::timeout(limit, client.complete(request)).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => {
            return (
                Err(format!("the summary call failed: {error}")),
                error.usage,
            );
        }
        Err(_) => {
            return (
                Err("the summary call timed out (llm_timeout)".to_owned()),
                None,
            );
        }
    };
    let mut tokens = response.usage;
    if tokens.input_tokens == 0 && tokens.output_tokens == 0 {
        tokens = TokenUsage::new(
            request.estimated_input_tokens(),
            response.estimated_output_tokens(),
        );
    }
    let text = response.text.trim();
    if text.is_empty() {
        return (Err("the summary was empty".to_owned()), Some(tokens));
    }
    (Ok(text.to_owned()), Some(tokens))
}

/// Where the kept part of the run's own messages starts: the newest
/// `keep_recent_turns` assistant turns (each with its results) are kept, so the cut is at
/// an assistant message and no call is separated from its results. `None` when nothing
/// before them is the run's own.
fn cut_point(messages: &[Message], start: usize, keep_recent_turns: usize) -> Option<usize> {
    let turns: Vec<usize> = (start..messages.len())
        .filter(|&i| matches!(messages[i], Message::Assistant { .. }))
        .collect();
    let cut = *turns.get(turns.len().checked_sub(keep_recent_turns)?)?;
    // At least one whole turn, or an earlier summary with one turn after it, to replace.
    (cut > start + 1).then_some(cut)
}

/// Replaces the content of every tool result but those of the newest
/// `keep_recent_turns` tool messages by a marker; returns the bytes removed.
pub(crate) fn clear_tool_results(messages: &mut [Message], keep_recent_turns: usize) -> usize {
    let tool_messages: Vec<usize> = (0..messages.len())
        .filter(|&i| matches!(messages[i], Message::Tool { .. }))
        .collect();
    let old = tool_messages.len().saturating_sub(keep_recent_turns);
    let mut removed = 0;
    for &i in &tool_messages[..old] {
        let Message::Tool { results } = &mut messages[i] else {
            continue;
        };
        for r in results.iter_mut() {
            if r.content.len() <= KEEP_SHORT || r.content.starts_with(CLEARED) {
                continue;
            }
            let marker = format!(
                "{CLEARED}{} bytes of {} {} removed to fit the context window]",
                r.content.len(),
                r.name,
                if r.is_error { "error" } else { "output" },
            );
            removed += r.content.len() - marker.len().min(r.content.len());
            r.content = marker;
        }
    }
    removed
}

/// The messages as plain text for the summarizer, without call ids.
fn render(messages: &[Message]) -> String {
    let cut = |text: &str| -> String {
        if text.len() <= SHOWN_PER_MESSAGE {
            return text.to_owned();
        }
        let mut end = SHOWN_PER_MESSAGE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} bytes cut)", &text[..end], text.len() - end)
    };
    let mut out = String::new();
    for m in messages {
        match m {
            Message::User { content, parts } => {
                out.push_str(&format!("user: {}\n", cut(content)));
                // A summarizer is sent text alone: a part stays a note of what was there.
                for part in parts {
                    out.push_str(&format!("user attached: {}\n", part.describe()));
                }
            }
            Message::Assistant {
                text, tool_calls, ..
            } => {
                if !text.is_empty() {
                    out.push_str(&format!("assistant: {}\n", cut(text)));
                }
                for c in tool_calls {
                    out.push_str(&format!(
                        "assistant called {} with {}\n",
                        c.name,
                        cut(&json_text(&c.arguments))
                    ));
                }
            }
            Message::Tool { results } => {
                for r in results {
                    let what = if r.is_error { "failed" } else { "returned" };
                    out.push_str(&format!("tool {} {what}: {}\n", r.name, cut(&r.content)));
                    for part in &r.parts {
                        out.push_str(&format!("tool {} attached: {}\n", r.name, part.describe()));
                    }
                }
            }
            Message::Paused { text, .. } => out.push_str(&format!("assistant: {}\n", cut(text))),
        }
    }
    out
}

/// The call ids of the assistant turns among `messages`.
pub(super) fn call_ids(messages: &[Message]) -> impl Iterator<Item = &str> {
    messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(|c| c.id.as_str())
}

/// `text` with every id of `ids` replaced by `[call]`: a summary names no call the
/// history no longer has.
pub(super) fn scrub_ids(text: &str, ids: &[String]) -> String {
    let mut out = text.to_owned();
    // Longer ids first, so that `call_12` is not left as `[call]2`.
    let mut ids: Vec<&String> = ids.iter().filter(|id| id.len() >= 3).collect();
    ids.sort_by_key(|id| std::cmp::Reverse(id.len()));
    for id in ids {
        out = out.replace(id.as_str(), "[call]");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolCall, ToolResult};
    use serde_json::json;

    fn turn(id: &str, result: &str) -> [Message; 2] {
        [
            Message::assistant("", vec![ToolCall::new(id, "lookup", json!({"q": "order"}))]),
            Message::Tool {
                results: vec![ToolResult::ok(id, "lookup", result)],
            },
        ]
    }

    #[test]
    fn clearing_keeps_every_pair_and_the_newest_results() {
        let big = "x".repeat(1000);
        let mut messages = vec![Message::user("ticket")];
        for id in ["a", "b", "c"] {
            messages.extend(turn(id, &big));
        }
        let removed = clear_tool_results(&mut messages, 1);
        assert!(removed > 1500, "{removed}");
        let contents: Vec<&str> = messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { results } => Some(results[0].content.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            contents[0],
            "[compacted: 1000 bytes of lookup output removed to fit the context window]"
        );
        assert!(contents[1].starts_with(CLEARED));
        assert_eq!(contents[2], big);
        // Done once: nothing more to clear.
        assert_eq!(clear_tool_results(&mut messages, 1), 0);
    }

    #[test]
    fn the_cut_is_at_an_assistant_turn_after_the_input() {
        let mut messages = vec![Message::user("ticket")];
        for id in ["a", "b", "c", "d"] {
            messages.extend(turn(id, "r"));
        }
        // Keep 2 turns: summarize turns a and b (messages 1..5).
        assert_eq!(cut_point(&messages, 1, 2), Some(5));
        assert!(matches!(messages[5], Message::Assistant { .. }));
        // Nothing older than the kept turns.
        assert_eq!(cut_point(&messages, 1, 4), None);
        assert_eq!(cut_point(&messages, 1, 9), None);
    }

    #[test]
    fn summaries_name_no_call_id() {
        let text = scrub_ids(
            "lookup call_123 found the order; call_123 again",
            &["call_123".into()],
        );
        assert_eq!(text, "lookup [call] found the order; [call] again");
        let shown = render(&turn("call_9", "shipped"));
        assert!(!shown.contains("call_9"), "{shown}");
        assert!(shown.contains("tool lookup returned: shipped"), "{shown}");
    }
}
