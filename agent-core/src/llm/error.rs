//! [`LlmError`]: a failed LLM call, transient or permanent, and what it says about its
//! cause (which decides whether a fallback model may serve the same turn).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::TokenUsage;

/// Whether a provider failure may go away if the same request is sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmErrorKind {
    /// Retry after backoff: connect errors, timeouts, 408, 409, 429 (rate limit), 5xx,
    /// 529, a 200 whose body does not decode.
    Transient,
    /// Do not retry: 400, 401, 403, 404, 413, 422, 429 with exhausted quota or credit.
    Permanent,
}

/// A failed LLM call.
///
/// Never contains an API key: adapters build messages from status, error type and the
/// provider's message only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LlmError {
    /// Transient or permanent.
    pub kind: LlmErrorKind,
    /// A human-readable description (status, the provider's error type and message).
    pub message: String,
    /// The HTTP status, when there was a response.
    pub status: Option<u16>,
    /// The delay the server asked for (`retry-after-ms` / `retry-after`), when it did.
    pub retry_after: Option<Duration>,
    /// The provider's request id, when sent.
    pub request_id: Option<String>,
    /// The tokens the failed call cost, when the provider reported them (a 200 whose
    /// body says the generation failed, with its `usage`); the runner counts them, or an
    /// estimate where a failed call was accepted and none came (see
    /// [`Usage::estimated_llm_calls`](crate::usage::Usage::estimated_llm_calls)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// What the provider's error says about its cause, when the adapter can tell
    /// (see [`LlmErrorCause`]); `None` otherwise. It decides whether a fallback model
    /// may serve the same turn ([`falls_back`](Self::falls_back)), and a
    /// [`ContentFilter`](LlmErrorCause::ContentFilter) ends the run `refused`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<LlmErrorCause>,
    /// The structured reason of a content filter that refused the request (with
    /// [`LlmErrorCause::ContentFilter`]: Azure's filtered categories), when the error
    /// body gives one; the run's [`AgentError::Refused`](crate::AgentError::Refused)
    /// carries it (case C58). Boxed: an `LlmError` is returned by every LLM call and
    /// stays small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Box<super::RefusalReason>>,
}

/// What a failed LLM call's error says about its cause, as the adapters read it from
/// the status and the error body (the rules are in `docs/providers.md`, "Error
/// classification" and "Fallback models").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LlmErrorCause {
    /// The model (or Azure deployment) does not exist at this provider: HTTP 404, or an
    /// error whose type or code is `model_not_found` / `not_found_error` / `NOT_FOUND`.
    ModelNotFound,
    /// The account's quota or credit is spent (OpenAI `insufficient_quota`, Anthropic
    /// `billing_error`, a Gemini daily quota, ...; any status).
    QuotaExhausted,
    /// The provider refused this key or account: HTTP 401, 402 or 403. Another
    /// provider has its own key and account.
    AccessDenied,
    /// The provider's content filter blocked the prompt or the answer: Azure OpenAI's
    /// HTTP 400 with error code `content_filter` (source:
    /// <https://learn.microsoft.com/en-us/azure/ai-services/openai/concepts/content-filter>).
    /// The run ends `refused`, as with a `content_filter` finish reason; never retried,
    /// never sent to a fallback model.
    ContentFilter,
}

impl LlmErrorCause {
    /// The stable snake-case name (`model_not_found`, `quota_exhausted`,
    /// `access_denied`, `content_filter`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ModelNotFound => "model_not_found",
            Self::QuotaExhausted => "quota_exhausted",
            Self::AccessDenied => "access_denied",
            Self::ContentFilter => "content_filter",
        }
    }
}

impl LlmError {
    /// A transient failure.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(LlmErrorKind::Transient, message)
    }

    /// A permanent failure.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(LlmErrorKind::Permanent, message)
    }

    /// A failure of the given kind.
    pub fn new(kind: LlmErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            status: None,
            retry_after: None,
            request_id: None,
            usage: None,
            cause: None,
            refusal: None,
        }
    }

    /// Sets the HTTP status.
    #[must_use]
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets the server-requested delay.
    #[must_use]
    pub fn with_retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }

    /// Sets the provider request id.
    #[must_use]
    pub fn with_request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }

    /// Sets the tokens the failed call cost (see [`usage`](Self::usage)).
    #[must_use]
    pub fn with_usage(mut self, usage: TokenUsage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets the cause (see [`cause`](Self::cause)).
    #[must_use]
    pub fn with_cause(mut self, cause: LlmErrorCause) -> Self {
        self.cause = Some(cause);
        self
    }

    /// Whether the same request may succeed if sent again.
    pub fn is_transient(&self) -> bool {
        self.kind == LlmErrorKind::Transient
    }

    /// Whether another provider may serve the same request at once: a permanent
    /// failure caused by this provider, model or account
    /// ([`ModelNotFound`](LlmErrorCause::ModelNotFound),
    /// [`QuotaExhausted`](LlmErrorCause::QuotaExhausted),
    /// [`AccessDenied`](LlmErrorCause::AccessDenied)). A transient failure falls back
    /// too, but only once `max_llm_retries` of them in a row were spent on the model.
    /// Every other permanent failure (a 400 or 422 about the request itself, a 413, a
    /// content filter) does not: the next provider would reject the same request for
    /// the same reason.
    pub fn falls_back(&self) -> bool {
        self.kind == LlmErrorKind::Permanent
            && matches!(
                self.cause,
                Some(
                    LlmErrorCause::ModelNotFound
                        | LlmErrorCause::QuotaExhausted
                        | LlmErrorCause::AccessDenied
                )
            )
    }
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            LlmErrorKind::Transient => "transient",
            LlmErrorKind::Permanent => "permanent",
        };
        write!(f, "{kind} provider error")?;
        if let Some(status) = self.status {
            write!(f, " (HTTP {status})")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(id) = &self.request_id {
            write!(f, " [request id {id}]")?;
        }
        Ok(())
    }
}

impl std::error::Error for LlmError {}
