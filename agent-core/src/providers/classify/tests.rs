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
