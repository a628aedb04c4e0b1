//! [`VertexClient`]: Google Cloud Vertex AI, for Gemini models (the Google publisher,
//! the Gemini API's request and response bodies) and Claude models (the Anthropic
//! publisher, the Messages API's bodies), authorized with an OAuth 2.0 access token.
//!
//! Sources: the REST reference (`projects.locations.publishers.models.generateContent`
//! and `streamGenerateContent`),
//! <https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest-rpc>, and the
//! method's page (`POST https://{service-endpoint}/v1/{model}:generateContent`, scope
//! `cloud-platform`),
//! <https://cloud.google.com/vertex-ai/docs/reference/rest/v1beta1/projects.locations.endpoints/generateContent>;
//! "Request predictions with Claude models",
//! <https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude>
//! (`rawPredict` / `streamRawPredict`, `anthropic_version: vertex-2023-10-16`, no
//! `model` in the body); the rules that matter here are in `docs/providers.md`,
//! "Vertex AI".

mod auth;
mod env;

use std::borrow::Cow;
use std::fmt;

use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::Value;

use crate::error::ConfigError;
use crate::llm::{
    LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, OutputCapabilities, StreamSink,
};
use crate::providers::glue::{self, Streams, Wire};
use crate::providers::http::{Reply, Transport, parse_url, traced};
use crate::providers::sse::{Assembler, Framing};
use crate::providers::{AnthropicClient, ApiKey, GeminiClient, ProviderOptions};

pub use auth::GcpServiceAccount;
use auth::TokenSource;
pub(crate) use env::{Unresolved, resolve};

/// The `anthropic_version` a Claude request on Vertex AI carries in its body (source:
/// "Use Anthropic's Claude models", Vertex AI documentation).
pub const ANTHROPIC_VERTEX_VERSION: &str = "vertex-2023-10-16";

/// The `gen_ai.provider.name` of Vertex AI in the OpenTelemetry GenAI conventions.
const PROVIDER: &str = "gcp.vertex_ai";

/// Which publisher serves a model on Vertex AI, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Publisher {
    /// `gemini-*`: `publishers/google`.
    Google,
    /// `claude-*`: `publishers/anthropic`.
    Anthropic,
}

fn publisher(model: &str) -> Option<Publisher> {
    if model.starts_with("gemini-") {
        Some(Publisher::Google)
    } else if model.starts_with("claude-") {
        Some(Publisher::Anthropic)
    } else {
        None
    }
}

/// Whether the `vertex/` route serves a model name (`gemini-*` or `claude-*`).
pub(crate) fn serves(model: &str) -> bool {
    publisher(model).is_some()
}

/// A client of Vertex AI's model endpoints in one project and location.
///
/// - `gemini-*` models: `POST {base}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent`
///   (`:streamGenerateContent?alt=sse` when streaming), with the body and reply of
///   [`GeminiClient`].
/// - `claude-*` models (`claude-sonnet-4-5@20250929`, ...): `POST
///   .../publishers/anthropic/models/{model}:rawPredict` (`:streamRawPredict`), with
///   the body of [`AnthropicClient`] less `model`, plus `"anthropic_version":
///   "vertex-2023-10-16"`, and its reply.
///
/// `base` is `https://{location}-aiplatform.googleapis.com`, or
/// `https://aiplatform.googleapis.com` for the `global` location. Every request carries
/// `Authorization: Bearer TOKEN`: a token given directly, or one obtained from a
/// service-account key (an RS256-signed JWT, scope
/// `https://www.googleapis.com/auth/cloud-platform`, exchanged at the key's
/// `token_uri`) and reused until 60 s before it expires. No request carries a key
/// header. Errors are classified as the publisher's API's (`docs/providers.md`).
pub struct VertexClient {
    gemini: GeminiClient,
    anthropic: VertexAnthropic,
    tokens: TokenSource,
    project: String,
    location: String,
}

impl fmt::Debug for VertexClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match &self.tokens {
            TokenSource::Fixed(_) => "access token",
            TokenSource::ServiceAccount { .. } => "service account",
        };
        f.debug_struct("VertexClient")
            .field("project", &self.project)
            .field("location", &self.location)
            .field("auth", &auth)
            .finish_non_exhaustive()
    }
}

impl VertexClient {
    /// The API root of a location: `https://{location}-aiplatform.googleapis.com`, or
    /// `https://aiplatform.googleapis.com` for `global` (source: "Vertex AI locations",
    /// <https://cloud.google.com/vertex-ai/generative-ai/docs/learn/locations>).
    pub fn default_base_url(location: &str) -> String {
        if location == "global" {
            "https://aiplatform.googleapis.com".to_owned()
        } else {
            format!("https://{location}-aiplatform.googleapis.com")
        }
    }

    /// A client from explicit options; reads no environment variable and sends no
    /// request. Needs `options.gcp_project`, `options.gcp_location`, and
    /// `options.bearer_token` (an access token) or `options.gcp_service_account`;
    /// `options.base_url` replaces the location's API root (see
    /// [`default_base_url`](Self::default_base_url)).
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `"vertex"`) naming what is
    /// missing (the project, the location or the credentials) or malformed. No message
    /// holds a secret.
    pub fn new(options: &ProviderOptions) -> Result<Self, ConfigError> {
        glue::built("vertex", Self::build(options))
    }

    pub(crate) fn build(options: &ProviderOptions) -> Result<Self, String> {
        let project = setting(
            options.gcp_project.as_deref(),
            "a Google Cloud project is required (GOOGLE_CLOUD_PROJECT)",
            "project",
        )?;
        let location = setting(
            options.gcp_location.as_deref(),
            "a Vertex AI location is required (GOOGLE_CLOUD_LOCATION, such as us-central1 \
             or global)",
            "location",
        )?;
        let base = options
            .base_url
            .clone()
            .unwrap_or_else(|| Self::default_base_url(&location));
        let base = base.trim_end_matches('/');
        let models = |publisher: &str| {
            parse_url(&format!(
                "{base}/v1/projects/{project}/locations/{location}/publishers/{publisher}/models"
            ))
        };
        let (google, anthropic) = (models("google")?, models("anthropic")?);
        let (tokens, key) = match (&options.bearer_token, &options.gcp_service_account) {
            (Some(token), _) => {
                // Checked now, so that a token that cannot be a header fails the build.
                Transport::secret_header(&format!("Bearer {}", token.expose()))?;
                (TokenSource::Fixed(token.clone()), Some(token.clone()))
            }
            (None, Some(account)) => {
                let transport = Transport::new("vertex", base, HeaderMap::new(), None, options)?;
                let source = TokenSource::ServiceAccount {
                    account: account.clone(),
                    client: transport.client().clone(),
                    cached: tokio::sync::Mutex::new(None),
                };
                (source, None)
            }
            (None, None) => {
                return Err("Google Cloud credentials are required \
                            (GOOGLE_APPLICATION_CREDENTIALS, a service-account key file, \
                            or GOOGLE_OAUTH_ACCESS_TOKEN)"
                    .to_owned());
            }
        };
        let transport = |url: &Url| {
            Transport::new(
                "vertex",
                url.as_str(),
                HeaderMap::new(),
                key.clone(),
                options,
            )
        };
        let gemini = GeminiClient::with_transport(transport(&google)?, google);
        let anthropic = VertexAnthropic {
            inner: AnthropicClient::with_transport(transport(&anthropic)?),
            models: anthropic,
        };
        Ok(Self {
            gemini,
            anthropic,
            tokens,
            project,
            location,
        })
    }

    /// The endpoint a request for `model` is posted to (`...:generateContent` for a
    /// Gemini model, `...:rawPredict` for a Claude model).
    ///
    /// # Errors
    /// A permanent [`LlmError`] for a name that is neither `gemini-*` nor `claude-*`.
    pub fn endpoint(&self, model: &str) -> Result<Url, LlmError> {
        match which(model)? {
            Publisher::Google => self.gemini.endpoint(model),
            Publisher::Anthropic => self.anthropic.method_url(model, "rawPredict"),
        }
    }

    /// The endpoint a streamed request for `model` is posted to
    /// (`...:streamGenerateContent?alt=sse`, `...:streamRawPredict`).
    ///
    /// # Errors
    /// As [`endpoint`](Self::endpoint).
    pub fn stream_endpoint(&self, model: &str) -> Result<Url, LlmError> {
        match which(model)? {
            Publisher::Google => self.gemini.stream_endpoint(model),
            Publisher::Anthropic => self.anthropic.method_url(model, "streamRawPredict"),
        }
    }

    /// The `Authorization` header of the next request.
    async fn authorization(&self) -> Result<(HeaderValue, ApiKey), LlmError> {
        let token = self.tokens.token().await?;
        let value = Transport::secret_header(&format!("Bearer {}", token.expose()))
            .map_err(|_| LlmError::permanent("vertex: the access token is not a header value"))?;
        Ok((value, token))
    }

    async fn call(
        &self,
        request: &LlmRequest,
        sink: Option<&mut dyn StreamSink>,
    ) -> Result<LlmResponse, LlmError> {
        let publisher = which(&request.model)?;
        let (authorization, token) = self.authorization().await?;
        let outcome = match (publisher, sink) {
            (Publisher::Google, None) => {
                glue::round_trip(&Authorized::new(&self.gemini, authorization), request).await
            }
            (Publisher::Google, Some(sink)) => {
                let wire = Authorized::new(&self.gemini, authorization);
                glue::streamed_round_trip(&wire, request, sink).await
            }
            (Publisher::Anthropic, None) => {
                glue::round_trip(&Authorized::new(&self.anthropic, authorization), request).await
            }
            (Publisher::Anthropic, Some(sink)) => {
                let wire = Authorized::new(&self.anthropic, authorization);
                glue::streamed_round_trip(&wire, request, sink).await
            }
        };
        // A server that echoed the token would not have it shown.
        outcome.map_err(|mut error| {
            if !token.expose().is_empty() && error.message.contains(token.expose()) {
                error.message = error.message.replace(token.expose(), "<redacted>");
            }
            error
        })
    }
}

/// A required text setting, trimmed, without characters that would change the URL.
fn setting(value: Option<&str>, missing: &str, what: &str) -> Result<String, String> {
    let value = value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or(missing)?;
    if value
        .chars()
        .any(|c| matches!(c, '/' | '?' | '#' | '%') || c.is_whitespace() || c.is_control())
    {
        return Err(format!("{value:?} is not a Google Cloud {what} name"));
    }
    Ok(value.to_owned())
}

fn which(model: &str) -> Result<Publisher, LlmError> {
    publisher(model).ok_or_else(|| {
        LlmError::permanent(format!(
            "vertex: {model:?} is neither a gemini-* nor a claude-* model"
        ))
    })
}

/// Claude on Vertex AI: the Anthropic adapter's body and reply, Vertex's URL.
struct VertexAnthropic {
    inner: AnthropicClient,
    models: Url,
}

impl VertexAnthropic {
    /// `{models}/{model}:{method}`.
    fn method_url(&self, model: &str, method: &str) -> Result<Url, LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::permanent("vertex: the model name is empty"));
        }
        let mut url = self.models.clone();
        url.path_segments_mut()
            .map_err(|()| LlmError::permanent("vertex: the base URL cannot take a path"))?
            .pop_if_empty()
            .push(&format!("{model}:{method}"));
        Ok(url)
    }
}

impl Wire for VertexAnthropic {
    fn transport(&self) -> &Transport {
        self.inner.transport()
    }

    fn url(&self, request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        self.method_url(&request.model, "rawPredict")
            .map(Cow::Owned)
    }

    fn content_headers(&self, request: &LlmRequest, headers: &mut HeaderMap) {
        self.inner.content_headers(request, headers);
    }

    /// The Messages body without `model` (it is in the URL), with `anthropic_version`.
    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<Vec<u8>, LlmError> {
        let body = self.inner.encode(request, stream)?;
        let mut body: serde_json::Map<String, Value> = serde_json::from_slice(&body)
            .map_err(|e| LlmError::permanent(format!("vertex: the body is not an object: {e}")))?;
        body.remove("model");
        body.insert(
            "anthropic_version".to_owned(),
            Value::from(ANTHROPIC_VERTEX_VERSION),
        );
        serde_json::to_vec(&body)
            .map_err(|e| LlmError::permanent(format!("vertex: the body cannot be written: {e}")))
    }

    fn decode(&self, reply: &Reply) -> Result<LlmResponse, LlmError> {
        self.inner.decode(reply)
    }
}

impl Streams for VertexAnthropic {
    type Assembler = <AnthropicClient as Streams>::Assembler;

    fn stream_url(&self, request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        self.method_url(&request.model, "streamRawPredict")
            .map(Cow::Owned)
    }

    fn decode_streamed(
        &self,
        assembled: <Self::Assembler as Assembler>::Output,
        status: u16,
        headers: HeaderMap,
    ) -> Result<LlmResponse, LlmError> {
        self.inner.decode_streamed(assembled, status, headers)
    }
}

/// A publisher's wire for one call, with the call's `Authorization` header.
struct Authorized<'w, W> {
    wire: &'w W,
    authorization: HeaderValue,
}

impl<'w, W> Authorized<'w, W> {
    fn new(wire: &'w W, authorization: HeaderValue) -> Self {
        Self {
            wire,
            authorization,
        }
    }
}

impl<W: Wire> Wire for Authorized<'_, W> {
    fn transport(&self) -> &Transport {
        self.wire.transport()
    }

    fn url(&self, request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        self.wire.url(request)
    }

    fn signed_headers(&self, url: &Url, body: &[u8]) -> Result<HeaderMap, LlmError> {
        let mut headers = self.wire.signed_headers(url, body)?;
        headers.insert(AUTHORIZATION, self.authorization.clone());
        Ok(headers)
    }

    fn content_headers(&self, request: &LlmRequest, headers: &mut HeaderMap) {
        self.wire.content_headers(request, headers);
    }

    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<Vec<u8>, LlmError> {
        self.wire.encode(request, stream)
    }

    fn decode(&self, reply: &Reply) -> Result<LlmResponse, LlmError> {
        self.wire.decode(reply)
    }
}

impl<W: Streams> Streams for Authorized<'_, W> {
    type Assembler = W::Assembler;
    const FRAMING: Framing = W::FRAMING;

    fn stream_url(&self, request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        self.wire.stream_url(request)
    }

    fn decode_streamed(
        &self,
        assembled: <Self::Assembler as Assembler>::Output,
        status: u16,
        headers: HeaderMap,
    ) -> Result<LlmResponse, LlmError> {
        self.wire.decode_streamed(assembled, status, headers)
    }
}

impl LlmClient for VertexClient {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        Box::pin(traced(PROVIDER, self.call(request, None)))
    }

    /// Streams with the publisher's streaming method (`streamGenerateContent?alt=sse`,
    /// `streamRawPredict`, both server-sent events); the turn is normalized as a
    /// non-streamed one.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a LlmRequest,
        sink: &'a mut dyn StreamSink,
    ) -> LlmFuture<'a> {
        Box::pin(traced(PROVIDER, self.call(request, Some(sink))))
    }

    /// `"gcp.vertex_ai"`, the GenAI conventions' name for Vertex AI
    /// (`gen_ai.provider.name`).
    fn provider(&self) -> &str {
        PROVIDER
    }

    /// The publisher's: as [`GeminiClient`] for `gemini-*`, [`AnthropicClient`] for
    /// `claude-*`.
    fn output_capabilities(&self, model: &str) -> OutputCapabilities {
        match publisher(model) {
            Some(Publisher::Anthropic) => self.anthropic.inner.output_capabilities(model),
            _ => self.gemini.output_capabilities(model),
        }
    }

    /// The publisher's (Gemini: 0.0..=2.0, Claude: 0.0..=1.0).
    fn effective_temperature(&self, model: &str, requested: f32) -> Option<f32> {
        match publisher(model) {
            Some(Publisher::Anthropic) => {
                self.anthropic.inner.effective_temperature(model, requested)
            }
            _ => self.gemini.effective_temperature(model, requested),
        }
    }

    /// The publisher's (Gemini's `thinkingConfig`, Claude's extended thinking).
    fn check_reasoning(
        &self,
        model: &str,
        reasoning: &crate::llm::Reasoning,
        max_tokens: u32,
    ) -> Result<(), &'static str> {
        match publisher(model) {
            Some(Publisher::Anthropic) => self
                .anthropic
                .inner
                .check_reasoning(model, reasoning, max_tokens),
            _ => self.gemini.check_reasoning(model, reasoning, max_tokens),
        }
    }

    /// The publisher's (see `docs/providers.md`, "Content parts").
    fn content_capabilities(&self, model: &str) -> crate::llm::ContentCapabilities {
        match publisher(model) {
            Some(Publisher::Anthropic) => self.anthropic.inner.content_capabilities(model),
            _ => self.gemini.content_capabilities(model),
        }
    }

    /// The publisher's (Claude: `5m` and `1h`; Gemini: none to choose).
    fn prompt_cache_ttls(&self, model: &str) -> &'static [crate::output::PromptCacheTtl] {
        match publisher(model) {
            Some(Publisher::Anthropic) => self.anthropic.inner.prompt_cache_ttls(model),
            _ => self.gemini.prompt_cache_ttls(model),
        }
    }
}
