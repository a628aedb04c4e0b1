//! The HTTP calls of the batch endpoints: GET and POST over an adapter's transport
//! (its pool, headers and key), each body read up to a cap.

use reqwest::header::{CONTENT_TYPE, HeaderValue};
use reqwest::{Method, Url};

use crate::llm::LlmError;
use crate::providers::classify::{redact, status_error};
use crate::providers::http::Transport;

/// Batch endpoint calls over one adapter's transport.
pub(crate) struct Fetcher<'t> {
    pub(crate) transport: &'t Transport,
}

impl Fetcher<'_> {
    /// GETs `url` and returns a 2xx body of at most `cap` bytes.
    ///
    /// # Errors
    /// A non-2xx status as [`status_error`] classifies it; a connection failure or a
    /// timeout as transient; a body over `cap` as permanent.
    pub(crate) async fn get(&self, url: &Url, cap: usize) -> Result<Vec<u8>, LlmError> {
        self.call(Method::GET, url, None, cap).await
    }

    /// POSTs `body` (JSON unless `content_type` says otherwise) to `url`.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub(crate) async fn post(
        &self,
        url: &Url,
        body: Vec<u8>,
        content_type: Option<HeaderValue>,
        cap: usize,
    ) -> Result<Vec<u8>, LlmError> {
        self.call(Method::POST, url, Some((body, content_type)), cap)
            .await
    }

    async fn call(
        &self,
        method: Method,
        url: &Url,
        body: Option<(Vec<u8>, Option<HeaderValue>)>,
        cap: usize,
    ) -> Result<Vec<u8>, LlmError> {
        let t = self.transport;
        let mut builder = t
            .client()
            .request(method, url.clone())
            .headers(t.headers().clone());
        if let Some((body, content_type)) = body {
            if let Some(content_type) = content_type {
                builder = builder.header(CONTENT_TYPE, content_type);
            }
            builder = builder.body(body);
        }
        let path = url.path().to_owned();
        let failed = |what: &str, e: reqwest::Error| {
            let message = format!(
                "{} batch API at {path}: {what}: {}",
                t.provider(),
                e.without_url()
            );
            LlmError::transient(redact(message, t.key()))
        };
        let mut response = builder
            .send()
            .await
            .map_err(|e| failed("the request failed", e))?;
        let status = response.status().as_u16();
        let headers = std::mem::take(response.headers_mut());
        let success = (200..300).contains(&status);
        let mut out = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if out.len() + chunk.len() > cap {
                        if success {
                            let message = format!(
                                "{} batch API at {path} returned more than {cap} bytes",
                                t.provider()
                            );
                            return Err(LlmError::permanent(message).with_status(status));
                        }
                        break;
                    }
                    out.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(_) if !success => break,
                Err(e) => return Err(failed("the connection failed while reading", e)),
            }
        }
        if success {
            Ok(out)
        } else {
            Err(status_error(t.provider(), status, &headers, &out, t.key()))
        }
    }
}

/// The non-blank lines of a JSONL body.
pub(crate) fn jsonl_lines(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    body.split(|b| *b == b'\n')
        .filter(|line| line.iter().any(|b| !b.is_ascii_whitespace()))
}
