//! [`RefusalReason`]: why a provider refused, as structured as the provider says it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The structured reason a provider gave with a refusal or a content filter (case C58),
/// beside or instead of any text. Carried by [`LlmResponse::refusal`](crate::llm::LlmResponse::refusal),
/// [`LlmError::refusal`](crate::llm::LlmError::refusal) and the run's
/// [`AgentError::Refused`](crate::AgentError::Refused). Where each provider puts it
/// (the table is in `docs/providers.md`, "Stop reasons"):
///
/// - Anthropic: `stop_details: {type: "refusal", category, explanation}` on the message
///   (streamed: on `message_delta`'s `delta`), both fields nullable (source: Messages
///   API reference, <https://docs.anthropic.com/en/api/messages>, `stop_details`);
/// - Gemini: a blocked prompt's `promptFeedback.blockReason` (category) and
///   `blockReasonMessage` (explanation); a filtered candidate's blocked safety rating
///   (its `category`, else the `finishReason`) and `finishMessage` (source:
///   <https://ai.google.dev/api/generate-content#PromptFeedback>);
/// - Azure OpenAI: the categories its content filter marked `filtered: true`
///   (`content_filter_results` on the choice, or the 400 error's
///   `innererror.content_filter_result`), joined with `, ` (source:
///   <https://learn.microsoft.com/en-us/azure/ai-services/openai/concepts/content-filter>).
///
/// The text is the provider's, never the conversation's content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RefusalReason {
    /// The policy category that triggered it, as the provider spells it (`cyber`,
    /// `HARM_CATEGORY_HARASSMENT`, `PROHIBITED_CONTENT`, `violence`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// The provider's human-readable explanation, when given (not guaranteed stable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

impl RefusalReason {
    /// A reason with neither field set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the category; a blank one is none.
    #[must_use]
    pub fn with_category(mut self, category: impl Into<String>) -> Self {
        self.category = Some(category.into()).filter(|c| !c.trim().is_empty());
        self
    }

    /// Sets the explanation; a blank one is none.
    #[must_use]
    pub fn with_explanation(mut self, explanation: impl Into<String>) -> Self {
        self.explanation = Some(explanation.into()).filter(|e| !e.trim().is_empty());
        self
    }

    /// Whether neither field is set.
    pub fn is_empty(&self) -> bool {
        self.category.is_none() && self.explanation.is_none()
    }

    /// `Some(self)` unless it is empty.
    pub(crate) fn non_empty(self) -> Option<Self> {
        (!self.is_empty()).then_some(self)
    }
}

impl fmt::Display for RefusalReason {
    /// `category: explanation`, or whichever part is present.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.category, &self.explanation) {
            (Some(c), Some(e)) => write!(f, "{c}: {e}"),
            (Some(c), None) => f.write_str(c),
            (None, Some(e)) => f.write_str(e),
            (None, None) => f.write_str("no reason given"),
        }
    }
}
