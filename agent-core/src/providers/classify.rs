//! Failure classification: an HTTP status, headers and body become an [`LlmError`] that
//! is transient or permanent (rules in `docs/providers.md`, "Error classification";
//! header conventions from the official anthropic-sdk-python and openai-python clients).

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use crate::llm::{LlmError, LlmErrorCause, LlmErrorKind};
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
                Some(Self {
                    google: status
                        .is_some()
                        .then(|| GoogleDetails::parse(map.get("details"))),
                    kind: text(map.get("type")).or(status),
                    code: text(map.get("code")),
                    message: text(map.get("message")),
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
/// most proxies).
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    ["request-id", "x-request-id"]
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok())
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
    let parsed = ErrorBody::parse(body);
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
fn documented_status(label: &str) -> Option<u16> {
    let status = match label.to_ascii_lowercase().as_str() {
        "invalid_request_error"
        | "context_length_exceeded"
        | "invalid_argument"
        | "failed_precondition"
        | "out_of_range"
        | "invalid_prompt" => 400,
        "authentication_error" | "invalid_api_key" | "unauthenticated" => 401,
        "billing_error" => 402,
        "permission_error" | "permission_denied" => 403,
        "not_found_error" | "model_not_found" | "not_found" => 404,
        "aborted" => 409,
        "request_too_large" => 413,
        "rate_limit_error" | "rate_limit_exceeded" | "resource_exhausted" => 429,
        "api_error" | "server_error" | "internal" => 500,
        "unavailable" => 503,
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn classify(status: u16, pairs: &[(&'static str, &str)], body: &str) -> LlmError {
        status_error("test", status, &headers(pairs), body.as_bytes(), None)
    }

    #[test]
    fn statuses_follow_the_design_table() {
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(classify(status, &[], "").is_transient(), "{status}");
        }
        for status in [400, 401, 402, 403, 404, 413, 422] {
            assert!(!classify(status, &[], "").is_transient(), "{status}");
        }
    }

    // C15: 429 insufficient_quota is permanent.
    #[test]
    fn c15_insufficient_quota_is_permanent() {
        let body = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let e = classify(429, &[("x-should-retry", "true")], body);
        assert_eq!(e.kind, LlmErrorKind::Permanent);
        assert!(e.message.contains("insufficient_quota"), "{}", e.message);
        // A plain rate limit stays transient.
        let body = r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
        assert!(classify(429, &[], body).is_transient());
    }

    // C16 / C17: x-should-retry overrides the status.
    #[test]
    fn c16_c17_should_retry_header_overrides_the_status() {
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert!(classify(529, &[("x-should-retry", "true")], overloaded).is_transient());
        assert!(!classify(500, &[("x-should-retry", "false")], "").is_transient());
        assert!(classify(400, &[("x-should-retry", "true")], "").is_transient());
        assert!(classify(500, &[("x-should-retry", "maybe")], "").is_transient());
    }

    // C18: retry-after-ms wins over retry-after; seconds and HTTP dates are read.
    #[test]
    fn c18_retry_after_headers_are_read() {
        let h = headers(&[("retry-after-ms", "20"), ("retry-after", "7")]);
        assert_eq!(retry_after(&h), Some(Duration::from_millis(20)));
        let h = headers(&[("retry-after", "7")]);
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        let h = headers(&[("retry-after", "1.5")]);
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
        let later = SystemTime::now() + Duration::from_secs(30);
        let h = headers(&[("retry-after", &httpdate::fmt_http_date(later))]);
        let d = retry_after(&h).unwrap();
        assert!(
            d > Duration::from_secs(27) && d <= Duration::from_secs(30),
            "{d:?}"
        );
        let h = headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]);
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        for junk in ["-3", "soon", "1e400", "NaN"] {
            assert_eq!(
                retry_after(&headers(&[("retry-after", junk)])),
                None,
                "{junk}"
            );
        }
        let e = classify(429, &[("retry-after-ms", "20")], "");
        assert_eq!(e.retry_after, Some(Duration::from_millis(20)));
    }

    // C19: an HTML 413 from a proxy is permanent, with the status in the message.
    #[test]
    fn c19_html_413_is_permanent_with_status() {
        let e = classify(
            413,
            &[("content-type", "text/html")],
            "<html>\n<head><title>413 Request Entity Too Large</title></head>\n<body>nginx</body></html>",
        );
        assert_eq!(e.kind, LlmErrorKind::Permanent);
        assert_eq!(e.status, Some(413));
        assert!(e.message.contains("HTTP 413"), "{}", e.message);
        assert!(
            e.message.contains("413 Request Entity Too Large"),
            "{}",
            e.message
        );
    }

    // C35: an error inside a 2xx body or stream is classified by its type or code.
    #[test]
    fn c35_embedded_errors_are_classified_by_their_type() {
        let embedded = |error: Value| {
            let body = ErrorBody::from_value(error).unwrap();
            embedded_error("test", 200, &HeaderMap::new(), body, None)
        };
        for permanent in [
            "invalid_request_error",
            "authentication_error",
            "permission_error",
            "not_found_error",
            "request_too_large",
            "INVALID_ARGUMENT",
        ] {
            let e = embedded(serde_json::json!({"type": permanent, "message": "no"}));
            assert_eq!(e.kind, LlmErrorKind::Permanent, "{permanent}");
            assert!(e.message.contains(permanent), "{}", e.message);
        }
        for transient in [
            "overloaded_error",
            "api_error",
            "rate_limit_error",
            "server_error",
            "UNAVAILABLE",
            "something_new",
        ] {
            let e = embedded(serde_json::json!({"type": transient, "message": "later"}));
            assert!(e.is_transient(), "{transient}");
        }
        // OpenAI's codes, a Google status, and a numeric code that wins over the type.
        let e = embedded(serde_json::json!({"type": null, "code": "invalid_api_key"}));
        assert_eq!(e.kind, LlmErrorKind::Permanent);
        let e = embedded(serde_json::json!({"status": "PERMISSION_DENIED", "code": 403}));
        assert_eq!(e.kind, LlmErrorKind::Permanent);
        let e = embedded(serde_json::json!({"type": "invalid_request_error", "code": 503}));
        assert!(e.is_transient());
    }

    #[test]
    fn request_ids_are_kept() {
        let e = classify(500, &[("request-id", "req_011")], "");
        assert_eq!(e.request_id.as_deref(), Some("req_011"));
        let e = classify(500, &[("x-request-id", "abc")], "");
        assert_eq!(e.request_id.as_deref(), Some("abc"));
    }

    #[test]
    fn error_bodies_in_every_shape_are_read() {
        let ollama = ErrorBody::parse(br#"{"error":"model 'x' not found"}"#).unwrap();
        assert_eq!(ollama.message.as_deref(), Some("model 'x' not found"));
        let llama = ErrorBody::parse(
            br#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#,
        )
        .unwrap();
        assert_eq!(llama.code.as_deref(), Some("503"));
        assert!(ErrorBody::parse(b"<html>").is_none());
        let anthropic_billing = ErrorBody::parse(br#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#).unwrap();
        assert!(anthropic_billing.is_exhausted());
    }

    #[test]
    fn google_errors_are_judged_by_their_details() {
        let per_minute = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash\nPlease retry in 37.4s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}"#;
        let e = classify(429, &[], per_minute);
        assert!(e.is_transient(), "{e}");
        assert_eq!(e.retry_after, Some(Duration::from_secs(37)));
        assert!(e.message.contains("RESOURCE_EXHAUSTED"), "{}", e.message);
        let per_day = per_minute.replace("PerMinute", "PerDay");
        assert_eq!(classify(429, &[], &per_day).kind, LlmErrorKind::Permanent);
        let zero = per_minute.replace("limit: 10,", "limit: 0,");
        assert_eq!(classify(429, &[], &zero).kind, LlmErrorKind::Permanent);
        assert!(zero_limit("limit: 0"));
        assert!(!zero_limit("limit: 0.5, limit: 05"));
        assert_eq!(proto_duration("0.5s"), Some(Duration::from_millis(500)));
        assert_eq!(proto_duration("soon"), None);
        let unavailable = r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#;
        assert!(classify(503, &[], unavailable).is_transient());
    }

    #[test]
    fn keys_are_redacted_from_messages() {
        let key = ApiKey::new("sk-secret-123456");
        let e = status_error(
            "openai",
            401,
            &HeaderMap::new(),
            br#"{"error":{"message":"Incorrect API key provided: sk-secret-123456."}}"#,
            Some(&key),
        );
        assert!(!e.message.contains("sk-secret-123456"), "{}", e.message);
        assert!(e.message.contains("<redacted>"), "{}", e.message);
    }

    #[test]
    fn excerpts_are_short_and_single_line() {
        let long = "word ".repeat(500);
        let e = excerpt(long.as_bytes());
        assert!(e.len() <= EXCERPT_CHARS + 4, "{}", e.len());
        assert!(!e.contains('\n'));
    }
}
