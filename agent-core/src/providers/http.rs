//! One HTTP LLM call: POST a JSON body, read a capped response body, turn transport
//! failures into [`LlmError`]s.

use std::error::Error as _;
use std::fmt;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Url};

use crate::llm::LlmError;
use crate::providers::classify::{redact, request_id, status_error};
use crate::providers::{ApiKey, ProviderOptions};

/// How much of a non-2xx body is read for the error message (bytes); the rest is
/// dropped, so a huge error page never decides the classification.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// A 2xx response, its body read whole.
pub(crate) struct Reply {
    /// The status (200..=299).
    pub(crate) status: u16,
    /// The response headers.
    pub(crate) headers: HeaderMap,
    /// The body.
    pub(crate) body: Vec<u8>,
}

/// A 2xx response whose body (server-sent events) is still to be read.
pub(crate) struct Streaming {
    /// The status (200..=299).
    pub(crate) status: u16,
    /// The response headers.
    pub(crate) headers: HeaderMap,
    /// The response, its body unread.
    pub(crate) response: reqwest::Response,
}

/// A configured endpoint: the reqwest client, the URL, the headers of every request
/// (the key among them, marked sensitive), and the body cap.
pub(crate) struct Transport {
    provider: String,
    client: Client,
    url: Url,
    headers: HeaderMap,
    key: Option<ApiKey>,
    max_response_bytes: usize,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("provider", &self.provider)
            .field("url", &self.url.as_str())
            .field("api_key", &self.key)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// Parses an endpoint URL (`http` or `https`).
///
/// # Errors
/// A message naming the URL and what is wrong with it.
pub(crate) fn parse_url(url: &str) -> Result<Url, String> {
    let parsed = Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
    match parsed.scheme() {
        "http" | "https" if parsed.has_host() => Ok(parsed),
        _ => Err(format!(
            "invalid URL {url:?}: it must be http:// or https:// with a host"
        )),
    }
}

impl Transport {
    /// A transport for `url`, sending `headers` (plus `content-type: application/json`)
    /// with every request.
    ///
    /// # Errors
    /// A message when the URL is invalid or the HTTP client cannot be built.
    pub(crate) fn new(
        provider: impl Into<String>,
        url: &str,
        mut headers: HeaderMap,
        key: Option<ApiKey>,
        options: &ProviderOptions,
    ) -> Result<Self, String> {
        let url = parse_url(url)?;
        let client = match &options.pool {
            Some(pool) if pool.fits(options) => pool.client.clone(),
            _ => HttpPool::new(options)?.client,
        };
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(Self {
            provider: provider.into(),
            client,
            url,
            headers,
            key,
            max_response_bytes: options.max_response_bytes,
        })
    }

    /// A header value holding a secret: never shown in `Debug` output.
    ///
    /// # Errors
    /// A message (without the key) when the key is not a legal header value.
    pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, String> {
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| "the API key contains characters not allowed in an HTTP header")?;
        value.set_sensitive(true);
        Ok(value)
    }

    /// Adds a header to every request.
    pub(crate) fn insert_header(headers: &mut HeaderMap, name: &'static str, value: HeaderValue) {
        headers.insert(HeaderName::from_static(name), value);
    }

    /// The provider name used in messages.
    pub(crate) fn provider(&self) -> &str {
        &self.provider
    }

    /// The key, for redacting messages.
    pub(crate) fn key(&self) -> Option<&ApiKey> {
        self.key.as_ref()
    }

    /// The pooled HTTP client (for a provider's side calls, such as Vertex AI's token
    /// exchange).
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The endpoint URL.
    pub(crate) fn url(&self) -> &Url {
        &self.url
    }

    /// The headers of every request (the key among them, marked sensitive).
    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// POSTs `body` and returns a 2xx reply with its body.
    ///
    /// # Errors
    /// A non-2xx status, classified by [`status_error`]; connect errors, timeouts and a
    /// connection lost while reading the body as transient; a body over the cap as
    /// permanent.
    pub(crate) async fn post(&self, body: Vec<u8>) -> Result<Reply, LlmError> {
        self.post_to(&self.url, body).await
    }

    /// POSTs `body` to `url` (an endpoint that depends on the request, such as Gemini's
    /// `.../models/{model}:generateContent`), with this transport's headers and caps.
    ///
    /// # Errors
    /// As [`post`](Self::post).
    pub(crate) async fn post_to(&self, url: &Url, body: Vec<u8>) -> Result<Reply, LlmError> {
        self.post_with(url, body, HeaderMap::new()).await
    }

    /// POSTs `body` to `url` with `extra` headers besides this transport's (a
    /// signature over the URL and body, such as AWS SigV4).
    ///
    /// # Errors
    /// As [`post`](Self::post).
    pub(crate) async fn post_with(
        &self,
        url: &Url,
        body: Vec<u8>,
        extra: HeaderMap,
    ) -> Result<Reply, LlmError> {
        let mut response = match self.send(url, body, extra, None).await {
            Ok(response) => response,
            Err(e) => return Err(self.transport_error(url, e, None)),
        };
        let status = response.status().as_u16();
        let headers = std::mem::take(response.headers_mut());
        let success = (200..300).contains(&status);
        let cap = if success {
            self.max_response_bytes
        } else {
            ERROR_BODY_BYTES.min(self.max_response_bytes)
        };
        if success
            && let Some(length) = response.content_length()
            && length > cap as u64
        {
            return Err(self.too_large(status, &headers, length));
        }
        let mut body = Vec::with_capacity(
            response
                .content_length()
                .map_or(8 * 1024, |n| usize::try_from(n).unwrap_or(cap).min(cap)),
        );
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = cap - body.len();
                    if chunk.len() > room {
                        if success {
                            return Err(self.too_large(
                                status,
                                &headers,
                                (body.len() + chunk.len()) as u64,
                            ));
                        }
                        body.extend_from_slice(&chunk[..room]);
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                // A cut-off error body still has a status to classify by.
                Err(_) if !success => break,
                Err(e) => return Err(self.transport_error(url, e, Some((status, &headers)))),
            }
        }
        if success {
            Ok(Reply {
                status,
                headers,
                body,
            })
        } else {
            Err(status_error(
                &self.provider,
                status,
                &headers,
                &body,
                self.key.as_ref(),
            ))
        }
    }

    /// Sends one POST: this transport's headers, then `extra` (a name in both takes
    /// `extra`'s values), then `accept` when given.
    ///
    /// The request is put together directly, its header map a clone of the
    /// transport's, rather than through reqwest's builder, which would copy each header
    /// into a new map. A URL with a user name or password still goes through the
    /// builder, which turns them into basic authentication.
    async fn send(
        &self,
        url: &Url,
        body: Vec<u8>,
        extra: HeaderMap,
        accept: Option<HeaderValue>,
    ) -> Result<reqwest::Response, reqwest::Error> {
        if !url.username().is_empty() || url.password().is_some() {
            let mut builder = self
                .client
                .post(url.clone())
                .headers(self.headers.clone())
                .headers(extra);
            if let Some(accept) = accept {
                builder = builder.header(ACCEPT, accept);
            }
            return builder.body(body).send().await;
        }
        let mut request = reqwest::Request::new(reqwest::Method::POST, url.clone());
        let headers = request.headers_mut();
        headers.clone_from(&self.headers);
        if !extra.is_empty() {
            headers.extend(extra);
        }
        if let Some(accept) = accept {
            headers.append(ACCEPT, accept);
        }
        *request.body_mut() = Some(body.into());
        self.client.execute(request).await
    }

    /// POSTs `body` to `url` for a streamed reply, with `extra` headers (see
    /// [`post_with`](Self::post_with)) and the stream's media type in `accept`: a 2xx
    /// response whose body is still to be read, or the classified error of any other
    /// status.
    ///
    /// # Errors
    /// As [`post`](Self::post), for everything before the body.
    pub(crate) async fn post_streaming_with(
        &self,
        url: &Url,
        body: Vec<u8>,
        extra: HeaderMap,
        accept: HeaderValue,
    ) -> Result<Streaming, LlmError> {
        let mut response = match self.send(url, body, extra, Some(accept)).await {
            Ok(response) => response,
            Err(e) => return Err(self.transport_error(url, e, None)),
        };
        let status = response.status().as_u16();
        let headers = std::mem::take(response.headers_mut());
        if (200..300).contains(&status) {
            return Ok(Streaming {
                status,
                headers,
                response,
            });
        }
        let cap = ERROR_BODY_BYTES.min(self.max_response_bytes);
        let mut text = Vec::new();
        // A cut-off error body still has a status to classify by.
        while let Ok(Some(chunk)) = response.chunk().await {
            let room = cap - text.len();
            if chunk.len() >= room {
                text.extend_from_slice(&chunk[..room]);
                break;
            }
            text.extend_from_slice(&chunk);
        }
        Err(status_error(
            &self.provider,
            status,
            &headers,
            &text,
            self.key.as_ref(),
        ))
    }

    /// The failure of reading a streamed body: transient (the connection was lost).
    pub(crate) fn stream_error(
        &self,
        error: reqwest::Error,
        status: u16,
        headers: &HeaderMap,
    ) -> LlmError {
        self.transport_error(&self.url, error, Some((status, headers)))
    }

    /// The cap on a response body (bytes): `ProviderOptions::max_response_bytes`.
    pub(crate) fn max_response_bytes(&self) -> usize {
        self.max_response_bytes
    }

    /// A body over the cap: permanent (see [`post`](Self::post)).
    pub(crate) fn body_too_large(&self, status: u16, headers: &HeaderMap, length: u64) -> LlmError {
        self.too_large(status, headers, length)
    }

    fn too_large(&self, status: u16, headers: &HeaderMap, length: u64) -> LlmError {
        let message = format!(
            "{} returned HTTP {status} with a body of at least {length} bytes, over max_response_bytes ({} bytes)",
            self.provider, self.max_response_bytes
        );
        let mut error = LlmError::permanent(message).with_status(status);
        if let Some(id) = request_id(headers) {
            error = error.with_request_id(id);
        }
        error
    }

    /// A failure without a usable status: transient (connect errors, timeouts, a body cut
    /// off mid-read), or permanent when the request could not even be built.
    fn transport_error(
        &self,
        url: &Url,
        error: reqwest::Error,
        response: Option<(u16, &HeaderMap)>,
    ) -> LlmError {
        let error = error.without_url();
        let what = if error.is_timeout() {
            "the request timed out"
        } else if error.is_connect() {
            "cannot connect"
        } else if response.is_some() || error.is_body() || error.is_decode() {
            "the connection failed while reading the response body"
        } else if error.is_builder() {
            "the request could not be built"
        } else {
            "the request failed"
        };
        let message = redact(
            format!(
                "{} at {}: {what}: {}",
                self.provider,
                url_for_messages(url),
                chain(&error)
            ),
            self.key.as_ref(),
        );
        let mut out = if error.is_builder() {
            LlmError::permanent(message)
        } else {
            LlmError::transient(message)
        };
        if let Some((status, headers)) = response {
            out = out.with_status(status);
            if let Some(id) = request_id(headers) {
                out = out.with_request_id(id);
            }
        }
        out
    }
}

/// The URL without user info, query or fragment.
fn url_for_messages(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(port) => format!("{}://{host}:{port}{}", url.scheme(), url.path()),
        None => format!("{}://{host}{}", url.scheme(), url.path()),
    }
}

/// An HTTP connection pool (a reqwest `Client`, which serves any host) and the
/// timeouts it was built with.
///
/// A config routed to an HTTP provider keeps its pool in its settings, so every `with_`
/// variant derived from it reuses the same warm connections (and TLS sessions), even
/// with another model or base URL; a variant with other timeouts gets a pool of its
/// own. Keys and headers are per request, never part of the pool. A pool is not a
/// setting: options that differ only in their pool compare equal.
#[derive(Clone)]
pub(crate) struct HttpPool {
    client: Client,
    connect: Duration,
    total: Duration,
    /// Identifies the pool (clones share it); read by tests.
    #[cfg_attr(not(test), allow(dead_code))]
    id: std::sync::Arc<()>,
}

impl HttpPool {
    /// A new pool for these options' timeouts.
    ///
    /// # Errors
    /// A message when the HTTP client cannot be built.
    pub(crate) fn new(options: &ProviderOptions) -> Result<Self, String> {
        let client = Client::builder()
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {}", chain(&e)))?;
        Ok(Self {
            client,
            connect: options.connect_timeout,
            total: options.request_timeout,
            id: std::sync::Arc::new(()),
        })
    }

    /// Whether `other` is this very pool (or a clone of it).
    #[cfg(test)]
    pub(crate) fn is_same(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.id, &other.id)
    }

    /// Whether this pool has the options' timeouts.
    pub(crate) fn fits(&self, options: &ProviderOptions) -> bool {
        self.connect == options.connect_timeout && self.total == options.request_timeout
    }
}

impl PartialEq for HttpPool {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl fmt::Debug for HttpPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HttpPool")
    }
}

/// An error and its sources, joined by `: ` (reqwest's own message alone is vague).
/// Pass errors through `without_url` first: a URL may hold credentials.
fn chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

/// Awaits one LLM call and traces it if it failed (see [`trace_failure`]).
///
/// A combinator, not an `async fn`: an `async fn` would keep the call's future twice
/// (its argument and the future it awaits), and this one is boxed for every LLM call
/// (about 750 bytes per run parked on its call).
pub(crate) fn traced<'a>(
    provider: &'a str,
    round_trip: impl std::future::Future<Output = Result<crate::llm::LlmResponse, LlmError>> + 'a,
) -> impl std::future::Future<Output = Result<crate::llm::LlmResponse, LlmError>> + 'a {
    futures::FutureExt::inspect(round_trip, move |outcome| {
        if let Err(error) = outcome {
            trace_failure(provider, error);
        }
    })
}

/// Records a failed LLM call as a `tracing` debug event with the provider's request
/// id (the runner's `chat` span, the parent, records the error type and a warning).
pub(crate) fn trace_failure(provider: &str, error: &LlmError) {
    tracing::debug!(
        gen_ai.provider.name = provider,
        http.response.status_code = error.status,
        request_id = error.request_id.as_deref(),
        transient = error.is_transient(),
        retry_after_ms = error.retry_after.map(|d| d.as_millis() as u64),
        error = %error.message,
        "provider request failed"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_for_an_https_url_builds_without_any_setup() {
        let transport = Transport::new(
            "test",
            "https://example.invalid/v1/x",
            HeaderMap::new(),
            None,
            &ProviderOptions::default(),
        );
        assert!(transport.is_ok());
    }

    #[tokio::test]
    async fn an_https_endpoint_that_does_not_speak_tls_is_a_typed_error() {
        // A plain TCP listener that closes every connection: the TLS handshake fails.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                drop(socket);
            }
        });
        let transport = Transport::new(
            "test",
            &format!("https://127.0.0.1:{port}/v1/x"),
            HeaderMap::new(),
            None,
            &ProviderOptions::default(),
        )
        .unwrap();
        let Err(error) = transport.post(b"{}".to_vec()).await else {
            panic!("the handshake cannot succeed")
        };
        assert!(error.is_transient(), "{error}");
        assert!(error.status.is_none());
    }

    /// The headers a request carries: the transport's, `extra`'s in place of the same
    /// names, `accept` for a streamed reply; a URL's user name and password become
    /// basic authentication and leave the URL.
    #[tokio::test]
    async fn a_request_carries_the_transports_headers_with_extra_in_place_of_the_same_names() {
        use wiremock::matchers::{method, path};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/x"))
            .respond_with(ResponseTemplate::new(200).set_body_string("{}"))
            .mount(&server)
            .await;
        let mut headers = HeaderMap::new();
        headers.insert("x-a", HeaderValue::from_static("transport"));
        headers.insert("x-keep", HeaderValue::from_static("kept"));
        let transport = Transport::new(
            "test",
            &format!("{}/v1/x", server.uri()),
            headers.clone(),
            None,
            &ProviderOptions::default(),
        )
        .unwrap();
        let mut extra = HeaderMap::new();
        extra.insert("x-a", HeaderValue::from_static("extra-1"));
        extra.append("x-a", HeaderValue::from_static("extra-2"));
        extra.insert("x-b", HeaderValue::from_static("b"));
        let reply = transport
            .post_with(transport.url(), b"{\"k\":1}".to_vec(), extra.clone())
            .await
            .unwrap();
        assert_eq!(reply.body, b"{}");
        let streamed = transport
            .post_streaming_with(
                transport.url(),
                b"{}".to_vec(),
                extra,
                HeaderValue::from_static("text/event-stream"),
            )
            .await
            .unwrap();
        assert_eq!(streamed.status, 200);
        let user = format!(
            "{}/v1/x",
            server.uri().replace("http://", "http://us%20er:p%40ss@")
        );
        let with_user =
            Transport::new("test", &user, headers, None, &ProviderOptions::default()).unwrap();
        with_user.post(b"{}".to_vec()).await.unwrap();

        let received = server.received_requests().await.unwrap();
        assert_eq!(received.len(), 3);
        let values = |i: usize, name: &str| -> Vec<String> {
            received[i]
                .headers
                .get_all(name)
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect()
        };
        for i in 0..2 {
            assert_eq!(values(i, "x-a"), ["extra-1", "extra-2"]);
            assert_eq!(values(i, "x-b"), ["b"]);
            assert_eq!(values(i, "x-keep"), ["kept"]);
            assert_eq!(values(i, "content-type"), ["application/json"]);
            assert!(values(i, "authorization").is_empty());
        }
        assert_eq!(received[0].body, b"{\"k\":1}");
        assert!(values(0, "accept").iter().all(|v| v != "text/event-stream"));
        assert_eq!(values(1, "accept"), ["text/event-stream"]);
        // "us er:p@ss", percent-decoded, in base64.
        assert_eq!(values(2, "authorization"), ["Basic dXMgZXI6cEBzcw=="]);
        assert_eq!(values(2, "x-a"), ["transport"]);
        assert_eq!(received[2].url.path(), "/v1/x");
        assert_eq!(received[2].url.username(), "");
    }
}
