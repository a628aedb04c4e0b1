//! Failure classification: an HTTP status, headers and body become an [`LlmError`] that
//! is transient or permanent (rules in `docs/providers.md`, "Error classification";
//! header conventions from the official anthropic-sdk-python and openai-python clients).

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use crate::llm::{LlmError, LlmErrorCause, LlmErrorKind, RefusalReason};
use crate::providers::ApiKey;

/// Error `type` / `code` values that mean the account cannot pay: retrying cannot help.
/// OpenAI: `insufficient_quota` (429); Anthropic: `billing_error` (402); others seen on
/// OpenAI-compatible routers.
const EXHAUSTED_CODES: [&str; 4] = [
    "insufficient_quota",
    "billing_error",
    "billing_hard_limit_reached",
    "billing_not_active",
];

/// Phrases in an error message that mean the quota or credit is exhausted.
const EXHAUSTED_PHRASES: [&str; 3] = [
    "exceeded your current quota",
    "credit balance is too low",
    "insufficient credits",
];

/// Longest body excerpt quoted in a message (characters).
const EXCERPT_CHARS: usize = 300;

/// Keys shorter than this are not searched for in messages (a placeholder such as
/// `none` for a local server would otherwise mangle every message).
const MIN_REDACTED_KEY: usize = 6;

/// What a provider's error body says, in the shapes Anthropic
/// (`{"type":"error","error":{"type","message"}}`), OpenAI
/// (`{"error":{"message","type","param","code"}}`), llama.cpp (same, numeric `code`),
/// Ollama (`{"error":"text"}`) and Google (`{"error":{"code","message","status","details"}}`)
/// use.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ErrorBody {
    /// The error's `type` (Google: its `status`, such as `RESOURCE_EXHAUSTED`), if any.
    pub(crate) kind: Option<String>,
    /// The error's `code` as text, if any.
    pub(crate) code: Option<String>,
    /// The error's message, if any.
    pub(crate) message: Option<String>,
    /// What a Google API error's `details` say, when the body is one (it has a `status`).
    pub(crate) google: Option<GoogleDetails>,
    /// The categories Azure OpenAI's content filter marked `filtered: true` in the
    /// error's `innererror.content_filter_result` (a filtered prompt), in the order sent.
    pub(crate) filtered: Vec<String>,
}

/// The parts of a Google API error's `details` that decide a retry (the `google.rpc`
/// error model, <https://cloud.google.com/apis/design/errors#error_details>).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct GoogleDetails {
    /// `google.rpc.RetryInfo.retryDelay` (`"37s"`), when given.
    pub(crate) retry_delay: Option<Duration>,
    /// The `quotaId` of every `google.rpc.QuotaFailure` violation
    /// (`GenerateRequestsPerMinutePerProjectPerModel-FreeTier`, ...).
    pub(crate) quota_ids: Vec<String>,
}

impl GoogleDetails {
    fn parse(details: Option<&Value>) -> Self {
        let mut out = Self::default();
        let Some(Value::Array(details)) = details else {
            return out;
        };
        for detail in details {
            let kind = detail.get("@type").and_then(Value::as_str).unwrap_or("");
            if kind.ends_with("google.rpc.RetryInfo") {
                out.retry_delay = detail
                    .get("retryDelay")
                    .and_then(Value::as_str)
                    .and_then(proto_duration);
            } else if kind.ends_with("google.rpc.QuotaFailure")
                && let Some(Value::Array(violations)) = detail.get("violations")
            {
                out.quota_ids.extend(
                    violations
                        .iter()
                        .filter_map(|v| v.get("quotaId").and_then(Value::as_str))
                        .map(str::to_owned),
                );
            }
        }
        out
    }

    /// Whether a quota that retrying within minutes cannot help is exhausted: a daily
    /// quota (`...PerDay...`).
    fn daily_quota(&self) -> bool {
        self.quota_ids.iter().any(|id| id.contains("PerDay"))
    }
}

/// A protobuf JSON `Duration` (`"37s"`, `"0.5s"`).
fn proto_duration(text: &str) -> Option<Duration> {
    let seconds = text.trim().strip_suffix('s')?.parse::<f64>().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// Whether a Google quota message names a limit of zero (`"..., limit: 0, model: ..."`):
/// the project has no quota at all for that model (a free tier without the model), which
/// no wait can fix.
fn zero_limit(message: &str) -> bool {
    message.match_indices("limit: 0").any(|(at, m)| {
        !message[at + m.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
    })
}

#[derive(Deserialize)]
struct Envelope {
    error: Option<Value>,
}

impl ErrorBody {
    /// Reads an error body; `None` when the body is not JSON or has no `error`.
    pub(crate) fn parse(body: &[u8]) -> Option<Self> {
        let envelope: Envelope = serde_json::from_slice(body).ok()?;
        Self::from_value(envelope.error?)
    }

    /// Reads an AWS error (Bedrock, <https://docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html>):
    /// the type in the `x-amzn-errortype` header (`ThrottlingException:http://...`, the
    /// part before `:`), the text in the body's `message` (or `Message`). `None` without
    /// the header.
    pub(crate) fn aws(headers: &HeaderMap, body: &[u8]) -> Option<Self> {
        let kind = headers.get("x-amzn-errortype")?.to_str().ok()?;
        let kind = kind.split(':').next().unwrap_or(kind).trim();
        let message = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
            ["message", "Message"]
                .iter()
                .find_map(|k| v.get(*k)?.as_str().map(str::to_owned))
        });
        Some(Self {
            kind: (!kind.is_empty()).then(|| kind.to_owned()),
            message,
            ..Self::default()
        })
    }

    /// Reads the value of an `error` field.
    pub(crate) fn from_value(error: Value) -> Option<Self> {
        let text = |v: Option<&Value>| match v {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        match error {
            Value::String(message) => Some(Self {
                message: Some(message),
                ..Self::default()
            }),
            Value::Object(map) => {
                // Google's `status` is a string (`NOT_FOUND`); Azure sends a numeric one.
                let status = match map.get("status") {
                    Some(Value::String(s)) => Some(s.clone()),
                    _ => None,
                };
                let filtered = match map
                    .get("innererror")
                    .and_then(|e| e.get("content_filter_result"))
                {
                    Some(Value::Object(results)) => results
                        .iter()
                        .filter(|(_, r)| r.get("filtered") == Some(&Value::Bool(true)))
                        .map(|(category, _)| category.clone())
                        .collect(),
                    _ => Vec::new(),
                };
                Some(Self {
                    google: status
                        .is_some()
                        .then(|| GoogleDetails::parse(map.get("details"))),
                    kind: text(map.get("type")).or(status),
                    code: text(map.get("code")),
                    message: text(map.get("message")),
                    filtered,
                })
            }
            _ => None,
        }
    }

    /// Whether the body says the quota or credit is exhausted.
    ///
    /// A Google error is judged by its details alone: Gemini's per-minute rate limits
    /// also say "You exceeded your current quota", so only a daily quota or a limit of
    /// zero counts as exhausted there.
    pub(crate) fn is_exhausted(&self) -> bool {
        if let Some(google) = &self.google {
            return google.daily_quota() || self.message.as_deref().is_some_and(zero_limit);
        }
        let listed = |v: &Option<String>| {
            v.as_deref()
                .is_some_and(|s| EXHAUSTED_CODES.iter().any(|c| s.eq_ignore_ascii_case(c)))
        };
        let phrased = self.message.as_deref().is_some_and(|m| {
            let m = m.to_ascii_lowercase();
            EXHAUSTED_PHRASES.iter().any(|p| m.contains(p))
        });
        listed(&self.kind) || listed(&self.code) || phrased
    }

    /// `type: message` (or whichever parts are present).
    fn describe(&self) -> String {
        let label = self.kind.as_deref().or(self.code.as_deref());
        match (label, self.message.as_deref()) {
            (Some(label), Some(message)) => format!("{label}: {message}"),
            (Some(label), None) => label.to_owned(),
            (None, Some(message)) => message.to_owned(),
            (None, None) => "no error details".to_owned(),
        }
    }
}

/// Whether a status is worth retrying when nothing else says otherwise:
/// 408, 409, 429 and every 5xx (529 included).
pub(crate) fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// What an error says about its cause (`docs/providers.md`, "Fallback models"): the
/// quota or credit spent; Azure's `content_filter` code; a model that does not exist
/// (404); the key or account refused (401, 402, 403). `status` is the response's, or
/// for an error inside a 2xx body the status its type or code stands for.
fn cause_of(status: Option<u16>, error: Option<&ErrorBody>) -> Option<LlmErrorCause> {
    let filtered = |e: &ErrorBody| e.code.as_deref() == Some("content_filter");
    if error.is_some_and(ErrorBody::is_exhausted) {
        Some(LlmErrorCause::QuotaExhausted)
    } else if error.is_some_and(filtered) {
        Some(LlmErrorCause::ContentFilter)
    } else {
        match status? {
            404 => Some(LlmErrorCause::ModelNotFound),
            401..=403 => Some(LlmErrorCause::AccessDenied),
            _ => None,
        }
    }
}

/// A content filter's reason (C58): the categories Azure marked filtered, when the
/// error is a content filter's and names any.
fn refusal_of(
    cause: Option<LlmErrorCause>,
    error: Option<&ErrorBody>,
) -> Option<Box<RefusalReason>> {
    if cause != Some(LlmErrorCause::ContentFilter) {
        return None;
    }
    RefusalReason::new()
        .with_category(error?.filtered.join(", "))
        .non_empty()
        .map(Box::new)
}

/// The `x-should-retry` header, when it is `true` or `false`.
fn should_retry(headers: &HeaderMap) -> Option<bool> {
    let value = headers.get("x-should-retry")?.to_str().ok()?.trim();
    if value.eq_ignore_ascii_case("true") {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// The delay the server asked for: `retry-after-ms` (milliseconds), else `retry-after`
/// (seconds, or an HTTP date). Any positive delay is reported; the runner's backoff
/// decides whether to honour it (up to 60 s by default).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && let Ok(delay) = Duration::try_from_secs_f64(ms / 1000.0)
    {
        return Some(delay);
    }
    let value = header("retry-after")?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// The provider's request id: `request-id` (Anthropic), else `x-request-id` (OpenAI and
/// most proxies), else `x-amzn-requestid` (AWS).
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    // A blank header is none (C57's kind), so the next one, or the body's id, is taken.
    ["request-id", "x-request-id", "x-amzn-requestid"]
        .iter()
        .find_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            (!value.trim().is_empty()).then_some(value)
        })
        .map(str::to_owned)
}

/// Replaces every occurrence of the key in `text` with `<redacted>`.
pub(crate) fn redact(text: String, key: Option<&ApiKey>) -> String {
    match key.map(ApiKey::expose) {
        Some(key) if key.len() >= MIN_REDACTED_KEY && text.contains(key) => {
            text.replace(key, "<redacted>")
        }
        _ => text,
    }
}

/// A short, single-line excerpt of a body, for messages.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out = String::new();
    for (i, word) in text.split_whitespace().enumerate() {
        if out.len() + word.len() > EXCERPT_CHARS {
            out.push_str(" ...");
            break;
        }
        if i > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The failure for a non-2xx response.
///
/// Order: a body saying the quota or credit is exhausted is permanent (retrying cannot
/// help, whatever `x-should-retry` says); then `x-should-retry: true|false`; then the
/// status (see [`is_transient_status`]). A body that is not JSON (an HTML page from a
/// proxy, case C19) is quoted briefly; it never fails the classification.
pub(crate) fn status_error(
    provider: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    key: Option<&ApiKey>,
) -> LlmError {
    let parsed = ErrorBody::parse(body).or_else(|| ErrorBody::aws(headers, body));
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let detail = match &parsed {
        Some(error) => error.describe(),
        None if body.is_empty() => "empty body".to_owned(),
        None => format!("body is not a JSON error: {}", excerpt(body)),
    };
    let exhausted = parsed.as_ref().is_some_and(ErrorBody::is_exhausted);
    let kind = if exhausted {
        LlmErrorKind::Permanent
    } else {
        match should_retry(headers) {
            Some(true) => LlmErrorKind::Transient,
            Some(false) => LlmErrorKind::Permanent,
            None if is_transient_status(status) => LlmErrorKind::Transient,
            None => LlmErrorKind::Permanent,
        }
    };
    let mut message = format!("{provider} returned HTTP {status} {reason}: {detail}");
    if exhausted {
        message.push_str(" (quota or credit exhausted; not retried)");
    }
    let mut error = LlmError::new(kind, redact(message, key)).with_status(status);
    error.cause = cause_of(Some(status), parsed.as_ref());
    error.refusal = refusal_of(error.cause, parsed.as_ref());
    let google_delay = parsed
        .as_ref()
        .and_then(|p| p.google.as_ref())
        .and_then(|g| g.retry_delay);
    if let Some(delay) = retry_after(headers).or(google_delay) {
        error = error.with_retry_after(delay);
    }
    if let Some(id) = request_id(headers) {
        error = error.with_request_id(id);
    }
    error
}

/// The HTTP status a provider documents for an error `type` (or `code`, or Google
/// `status`), so that an error that arrives without its status (in a 200 body, or as an
/// event in a 200 stream) is classified as the same error with its status would be.
///
/// - Anthropic (<https://docs.anthropic.com/en/api/errors>): `invalid_request_error`
///   400, `authentication_error` 401, `billing_error` 402, `permission_error` 403,
///   `not_found_error` 404, `request_too_large` 413, `rate_limit_error` 429, `api_error`
///   500, `timeout_error` 504, `overloaded_error` 529. The same page says an error can
///   arrive in an SSE stream after a 200 ("error handling wouldn't follow these
///   standard mechanisms"): that is the case this table is for (C35).
/// - OpenAI (<https://platform.openai.com/docs/guides/error-codes>): `invalid_request_error`
///   400, `invalid_api_key` 401, `model_not_found` 404, `context_length_exceeded` 400,
///   `server_error` 500, `rate_limit_exceeded` 429; the Responses API's `invalid_prompt`
///   (a prompt flagged by its usage policies, sent as a stream's `error` event) 400
///   (<https://platform.openai.com/docs/api-reference/responses-streaming>).
/// - Google (the `google.rpc.Code` mapping, <https://cloud.google.com/apis/design/errors#handling_errors>):
///   `INVALID_ARGUMENT`, `FAILED_PRECONDITION`, `OUT_OF_RANGE` 400, `UNAUTHENTICATED` 401,
///   `PERMISSION_DENIED` 403, `NOT_FOUND` 404, `ABORTED` 409, `RESOURCE_EXHAUSTED` 429,
///   `INTERNAL` 500, `UNAVAILABLE` 503, `DEADLINE_EXCEEDED` 504.
/// - AWS Bedrock (Converse, <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_Errors>,
///   and the ConverseStream events, <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStreamOutput.html>):
///   `ValidationException` 400, `AccessDeniedException` 403, `ResourceNotFoundException`
///   404, `ModelTimeoutException` 408, `ThrottlingException` and `ModelNotReadyException`
///   429, `ModelErrorException` 424, `InternalServerException` 500,
///   `ServiceUnavailableException` 503. `modelStreamErrorException` is 424 on the wire
///   but documented "A streaming error occurred. Retry your request.": read as 503.
fn documented_status(label: &str) -> Option<u16> {
    let status = match label.to_ascii_lowercase().as_str() {
        "invalid_request_error"
        | "context_length_exceeded"
        | "invalid_argument"
        | "failed_precondition"
        | "out_of_range"
        | "invalid_prompt"
        | "validationexception" => 400,
        "authentication_error" | "invalid_api_key" | "unauthenticated" => 401,
        "billing_error" => 402,
        "permission_error" | "permission_denied" | "accessdeniedexception" => 403,
        "not_found_error" | "model_not_found" | "not_found" | "resourcenotfoundexception" => 404,
        "modeltimeoutexception" => 408,
        "aborted" => 409,
        "request_too_large" => 413,
        "modelerrorexception" => 424,
        "rate_limit_error"
        | "rate_limit_exceeded"
        | "resource_exhausted"
        | "throttlingexception"
        | "modelnotreadyexception" => 429,
        "api_error" | "server_error" | "internal" | "internalserverexception" => 500,
        "unavailable" | "serviceunavailableexception" | "modelstreamerrorexception" => 503,
        "timeout_error" | "deadline_exceeded" => 504,
        "overloaded_error" => 529,
        _ => return None,
    };
    Some(status)
}

/// The failure for a 2xx response whose body is an `error` object instead of a result
/// (some OpenAI-compatible routers do this), or for an error event in a 2xx stream:
/// classified by the error's numeric `code` when it is an HTTP status, else by the
/// status its `type` or `code` stands for ([`documented_status`]: `overloaded_error`
/// and `api_error` transient, `invalid_request_error` and `authentication_error`
/// permanent), else transient.
pub(crate) fn embedded_error(
    provider: &str,
    status: u16,
    headers: &HeaderMap,
    error: ErrorBody,
    key: Option<&ApiKey>,
) -> LlmError {
    let code = error
        .code
        .as_deref()
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|c| (400..600).contains(c))
        .or_else(|| error.kind.as_deref().and_then(documented_status))
        .or_else(|| error.code.as_deref().and_then(documented_status));
    let kind = if error.is_exhausted() || code.is_some_and(|c| !is_transient_status(c)) {
        LlmErrorKind::Permanent
    } else {
        LlmErrorKind::Transient
    };
    let message = format!(
        "{provider} returned HTTP {status} with an error instead of a result: {}",
        error.describe()
    );
    let mut out = LlmError::new(kind, redact(message, key)).with_status(status);
    out.cause = cause_of(code, Some(&error));
    out.refusal = refusal_of(out.cause, Some(&error));
    if let Some(id) = request_id(headers) {
        out = out.with_request_id(id);
    }
    out
}

/// The failure for a 2xx response whose body does not decode (case C20): transient,
/// since a cut-off or garbled body is a transport accident.
pub(crate) fn undecodable(
    provider: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    error: &serde_json::Error,
    key: Option<&ApiKey>,
) -> LlmError {
    let what = if error.is_eof() {
        "is cut off"
    } else if error.is_syntax() {
        "is not JSON"
    } else {
        "does not have the expected shape"
    };
    let message = format!(
        "{provider} returned HTTP {status} but the body {what} ({error}): {}",
        excerpt(body)
    );
    let mut out = LlmError::transient(redact(message, key)).with_status(status);
    if let Some(id) = request_id(headers) {
        out = out.with_request_id(id);
    }
    out
}

#[cfg(test)]
mod tests;
