//! Compaction of a long conversation (see [`Compaction`]): the policy a config sets,
//! the model's context window, and the plan `build()` derives from them.

use std::sync::Arc;

use crate::error::ConfigError;
use crate::llm::LlmClient;
use crate::pricing::ContextWindow;

use super::AgentConfigBuilder;

/// What a run does when its conversation grows toward the model's context window.
///
/// Before each LLM call the runner counts the tokens of the request's history (the
/// provider's reported input tokens of the last call plus an estimate of the messages
/// added since, bytes / 4; the estimate alone before the first reported count) and
/// compacts the run's own messages once they pass the trigger: by default 80 % of the
/// input room of the model's context window (the window's tokens minus the config's
/// `max_tokens`), or a fixed history budget ([`max_history_tokens`](Self::max_history_tokens)).
///
/// - [`clear_tool_results`](Self::clear_tool_results): the content of older tool
///   results is replaced by a short marker (which tool, how many bytes were removed);
///   each call keeps its result, so the history stays valid on every wire.
/// - [`summarize`](Self::summarize): older turns are replaced by one user message that
///   summarizes them, written by a model (the run's own, or
///   [`summarize_with`](Self::summarize_with) a cheaper one). Its tokens and cost count
///   in the run's usage and caps; when it fails (a provider error, an empty summary, or
///   a token or cost cap that would not allow it) the run clears tool results instead and
///   counts the failure in [`Usage::compaction_failures`](crate::usage::Usage::compaction_failures).
/// - [`none`](Self::none) (the default): nothing; a request past the window ends the run
///   with `context_window_exceeded`.
///
/// A compaction never touches the system prompt, the thread's earlier messages or the
/// run's input, never separates an assistant turn's calls from their results, and
/// leaves no call id in a summary that the history no longer has. The newest
/// [`keep_recent_turns`](Self::keep_recent_turns) assistant turns (default 2) are kept
/// as they are. Each compaction is a `RunEvent::Compacted`, a `compaction` tracing
/// event, and counted in [`Usage::compactions`](crate::usage::Usage::compactions).
#[derive(Clone)]
pub struct Compaction {
    pub(crate) strategy: Strategy,
    pub(crate) trigger: Trigger,
    pub(crate) keep_recent_turns: usize,
}

#[derive(Clone)]
pub(crate) enum Strategy {
    None,
    ClearToolResults,
    Summarize(SummaryModel),
}

/// Who writes a summary.
#[derive(Clone)]
pub(crate) enum SummaryModel {
    /// The run's own model (the one the turn goes to).
    Own,
    /// A model name, routed at `build()` like the config's.
    Named(String),
    /// A client, with the model name it is sent.
    Client(Arc<dyn LlmClient>, String),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Trigger {
    /// A share of the window's input room.
    Share(f64),
    /// A history budget (tokens).
    Tokens(u64),
}

impl std::fmt::Debug for Compaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let strategy = match &self.strategy {
            Strategy::None => "none",
            Strategy::ClearToolResults => "clear_tool_results",
            Strategy::Summarize(SummaryModel::Own) => "summarize",
            Strategy::Summarize(SummaryModel::Named(_)) => "summarize_with_model",
            Strategy::Summarize(SummaryModel::Client(..)) => "summarize_with",
        };
        f.debug_struct("Compaction")
            .field("strategy", &strategy)
            .field("trigger", &self.trigger)
            .field("keep_recent_turns", &self.keep_recent_turns)
            .finish()
    }
}

impl Default for Compaction {
    fn default() -> Self {
        Self::none()
    }
}

impl Compaction {
    fn with(strategy: Strategy) -> Self {
        Self {
            strategy,
            trigger: Trigger::Share(0.8),
            keep_recent_turns: 2,
        }
    }

    /// No compaction (the default): a request past the window ends the run with
    /// `context_window_exceeded`.
    pub fn none() -> Self {
        Self::with(Strategy::None)
    }

    /// Replace the content of older tool results by a marker such as
    /// `[compacted: 18432 bytes of lookup_order output removed]`.
    pub fn clear_tool_results() -> Self {
        Self::with(Strategy::ClearToolResults)
    }

    /// Replace older turns by a summary the run's own model writes.
    pub fn summarize() -> Self {
        Self::with(Strategy::Summarize(SummaryModel::Own))
    }

    /// Replace older turns by a summary `model` writes (a cheaper one, such as
    /// `gpt-5-nano`), routed by `build()` like the config's model, with the config's
    /// provider options and pricing table.
    pub fn summarize_with_model(model: impl Into<String>) -> Self {
        Self::with(Strategy::Summarize(SummaryModel::Named(model.into())))
    }

    /// Replace older turns by a summary `client` writes, sent as `model` (priced by the
    /// config's pricing table under that name).
    pub fn summarize_with(client: impl LlmClient + 'static, model: impl Into<String>) -> Self {
        Self::with(Strategy::Summarize(SummaryModel::Client(
            Arc::new(client),
            model.into(),
        )))
    }

    /// Compact once the history passes `share` of the window's input room (default
    /// 0.8; between 0.05 and 1.0, else `build()` returns
    /// [`ConfigError::InvalidSetting`]).
    #[must_use]
    pub fn at_share(mut self, share: f64) -> Self {
        self.trigger = Trigger::Share(share);
        self
    }

    /// Compact once the history passes `tokens` (tokens), whatever the window: for a
    /// model the table does not know, or to keep requests small and cheap.
    #[must_use]
    pub fn max_history_tokens(mut self, tokens: u64) -> Self {
        self.trigger = Trigger::Tokens(tokens);
        self
    }

    /// How many of the newest assistant turns (with their tool results) a compaction
    /// keeps as they are (default 2; at least 1).
    #[must_use]
    pub fn keep_recent_turns(mut self, turns: usize) -> Self {
        self.keep_recent_turns = turns;
        self
    }
}

/// What `build()` derives from a config's compaction: the trigger in tokens, and who
/// writes summaries.
#[derive(Clone)]
pub(crate) struct Plan {
    /// `None`: clear tool results; `Some(None)`: summaries by the run's own model.
    pub(crate) summarize: Option<Option<Summarizer>>,
    /// Compact when the history's tokens pass this (tokens).
    pub(crate) trigger_tokens: u64,
    pub(crate) keep_recent_turns: usize,
}

/// A model other than the run's that writes summaries.
#[derive(Clone)]
pub(crate) struct Summarizer {
    pub(crate) client: Arc<dyn LlmClient>,
    pub(crate) wire_model: String,
    pub(crate) price: Option<crate::pricing::ModelPrice>,
}

/// The plan of a config's compaction, `None` for none.
///
/// # Errors
/// [`ConfigError::InvalidSetting`] for a share out of range, a zero budget or
/// `keep_recent_turns` of 0, or a share trigger for a model whose window is unknown
/// (set one with `context_window`, or use `max_history_tokens`); the routing error of
/// a summarizing model's name.
pub(crate) fn plan<T>(
    settings: &super::builder::Settings<T>,
    model: &str,
) -> Result<Option<Plan>, ConfigError> {
    let compaction = &settings.compaction;
    let window = settings.context_window;
    let max_tokens = settings.limits.max_tokens;
    let invalid = |value: String, reason: &'static str| ConfigError::InvalidSetting {
        setting: "compaction",
        value,
        reason,
    };
    let summarize = match &compaction.strategy {
        Strategy::None => return Ok(None),
        Strategy::ClearToolResults => None,
        Strategy::Summarize(SummaryModel::Own) => Some(None),
        Strategy::Summarize(SummaryModel::Named(name)) => {
            let route = super::route::route(name, &settings.provider)?;
            Some(Some(Summarizer {
                client: route.client,
                wire_model: route.wire_model,
                price: settings.pricing.price_of(name),
            }))
        }
        Strategy::Summarize(SummaryModel::Client(client, name)) => Some(Some(Summarizer {
            client: Arc::clone(client),
            wire_model: name.clone(),
            price: settings.pricing.price_of(name),
        })),
    };
    if compaction.keep_recent_turns == 0 {
        return Err(invalid(
            "keep_recent_turns(0)".into(),
            "a compaction keeps at least the newest turn",
        ));
    }
    let trigger_tokens = match compaction.trigger {
        Trigger::Tokens(0) => {
            return Err(invalid(
                "max_history_tokens(0)".into(),
                "a history needs some tokens",
            ));
        }
        Trigger::Tokens(tokens) => tokens,
        Trigger::Share(share) if !(0.05..=1.0).contains(&share) => {
            return Err(invalid(
                format!("at_share({share})"),
                "the share must be between 0.05 and 1.0",
            ));
        }
        Trigger::Share(share) => {
            let Some(window) = window.or_else(|| ContextWindow::of(model)) else {
                let model = if model.is_empty() {
                    "a config with no model name".to_owned()
                } else {
                    model.to_owned()
                };
                return Err(invalid(
                    format!("at_share({share}) for {model}"),
                    "the model's context window is unknown: set it with context_window(..) \
                     or use max_history_tokens(..)",
                ));
            };
            let room = window.tokens.saturating_sub(u64::from(max_tokens));
            (room as f64 * share) as u64
        }
    };
    Ok(Some(Plan {
        summarize,
        trigger_tokens: trigger_tokens.max(1),
        keep_recent_turns: compaction.keep_recent_turns,
    }))
}

impl<T> AgentConfigBuilder<T> {
    /// What a run does when its conversation grows toward the model's context window
    /// (default [`Compaction::none`]); see [`Compaction`].
    #[must_use]
    pub fn compaction(mut self, compaction: Compaction) -> Self {
        self.settings.compaction = compaction;
        self
    }

    /// The model's context window, for a model the table of
    /// [`ContextWindow::of`] does not know (local and compatible servers, Azure
    /// deployments), or to override it. Used by [`Compaction::at_share`].
    #[must_use]
    pub fn context_window(mut self, window: ContextWindow) -> Self {
        self.settings.context_window = Some(window);
        self
    }
}
