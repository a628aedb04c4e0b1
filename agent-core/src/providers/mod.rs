//! Provider adapters and routing: `.model(name)` picks an adapter by the name's prefix.
//!
//! | prefix | provider | endpoint and key |
//! |---|---|---|
//! | `claude-` | Anthropic Messages API ([`AnthropicClient`]) | `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL` optional |
//! | `gpt-`, `o1`, `o3`, `o4`, `chatgpt-` | OpenAI Chat Completions ([`OpenAiClient::openai`]) | `OPENAI_API_KEY`, `OPENAI_BASE_URL` optional |
//! | `gemini-` | Google Gemini API ([`GeminiClient`]) | `GEMINI_API_KEY`, `GEMINI_BASE_URL` optional |
//! | `ollama/NAME` | OpenAI-compatible ([`OpenAiClient::compatible`]) | `OLLAMA_HOST`, default `http://127.0.0.1:11434` |
//! | `dispatch/NAME` | OpenAI-compatible fleet (vLLM, llama.cpp, TGI behind a load balancer) | `AGENT_DISPATCH_URL` (ends in `/v1`), `AGENT_DISPATCH_API_KEY` optional |
//! | `azure/DEPLOYMENT` | Azure OpenAI Chat Completions ([`OpenAiClient::azure`]) | `AZURE_OPENAI_ENDPOINT`, `AZURE_OPENAI_API_KEY` (the `api-key` header) or a bearer token, `AZURE_OPENAI_API_VERSION` optional (default `2024-10-21`) |
//! | `openai-responses/NAME`; the Responses-only `-pro`, `-codex`, `-deep-research` OpenAI names | OpenAI Responses API ([`OpenAiResponsesClient::openai`]) | as `gpt-` |
//! | `azure-responses/DEPLOYMENT` | Azure OpenAI Responses API, v1 ([`OpenAiResponsesClient::azure`]) | as `azure/`, no API version |
//! | `vertex/gemini-*`, `vertex/claude-*` | Google Cloud Vertex AI ([`VertexClient`]): Gemini (Google publisher) or Claude (Anthropic publisher) | `GOOGLE_CLOUD_PROJECT`, `GOOGLE_CLOUD_LOCATION`; `GOOGLE_OAUTH_ACCESS_TOKEN` (an access token), else `GOOGLE_APPLICATION_CREDENTIALS` (a service-account key file) |
//! | `bedrock/MODEL_ID` | AWS Bedrock Converse API (`BedrockClient`, with the `bedrock` feature) | `AWS_REGION` (else `AWS_DEFAULT_REGION`); `AWS_BEARER_TOKEN_BEDROCK` (a Bedrock API key), else `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` optional (SigV4) |
//!
//! Each provider builds with its Cargo feature: `openai` (the OpenAI, Azure and
//! OpenAI-compatible rows, and [`EmbeddingClient`]), `anthropic`, `gemini`, `vertex` (Google Cloud Vertex AI: Gemini and Claude there;
//! it turns `gemini` and `anthropic` on; these four on by default) and `bedrock` (off by default: it adds the AWS signing and
//! event-stream crates). A name whose provider's feature is off is recognized and
//! rejected when the config is built, with
//! [`ConfigError::ProviderFeatureOff`](crate::ConfigError::ProviderFeatureOff) naming
//! the feature; the `test` model routes in every build.
//!
//! `o1`, `o3` and `o4` match the bare name or the name followed by `-` (`o3`, `o4-mini`).
//! For `ollama/`, `dispatch/`, `azure/`, `openai-responses/`, `azure-responses/` and
//! `bedrock/`, `NAME` is sent as the request's `model` (Bedrock: in the URL); the other
//! names are sent whole. The builder's `api_key` and `base_url` replace the environment
//! variables; a base URL has the variable's meaning (`OLLAMA_HOST` is a host, the other
//! URLs are API roots: `https://api.anthropic.com`, `https://api.openai.com/v1`,
//! `https://generativelanguage.googleapis.com`).
//!
//! Every adapter makes exactly one HTTP LLM call per
//! [`complete`](crate::llm::LlmClient::complete) call and never retries: the runner re-sends
//! on a transient [`LlmError`](crate::llm::LlmError), after its backoff. Failures are
//! classified as `docs/providers.md` ("Error classification") states it: transient for
//! connect errors and timeouts, 408, 409, 429, 5xx and 529, and for a 2xx whose body is
//! not the expected JSON; permanent for the other statuses and for a 429 (or any status)
//! whose body says the quota or credit is exhausted; an `x-should-retry: true|false`
//! header decides otherwise. The
//! server's `retry-after-ms` / `retry-after` (seconds or an HTTP date) is reported in
//! [`LlmError::retry_after`](crate::llm::LlmError::retry_after).
//!
//! HTTP is reqwest with its standard rustls TLS (the aws-lc-rs provider, built with the
//! C compiler alone; no OpenSSL, no cmake) and the platform's certificate verifier. No
//! process-wide state is touched: other reqwest or rustls users in the same program are
//! unaffected.

// Each provider's adapter builds with its Cargo feature (docs/providers.md, "Cargo
// features"); the shared parts always build, some unused when a provider is off.
#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg_attr(not(all(feature = "openai", feature = "anthropic")), allow(dead_code))]
pub(crate) mod batch;
#[cfg(feature = "bedrock")]
mod bedrock;
#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(dead_code)
)]
mod classify;
#[cfg(feature = "openai")]
mod embeddings;
#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(dead_code)
)]
mod encoded;
#[cfg(feature = "bedrock")]
mod eventstream;

#[cfg(feature = "fuzzing")]
pub(crate) mod fuzzing;
#[cfg(feature = "gemini")]
mod gemini;
#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(dead_code)
)]
mod glue;
#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(dead_code)
)]
mod history;
#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(dead_code)
)]
pub(crate) mod http;
#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(dead_code)
)]
mod inline;
#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(dead_code)
)]
mod normalize;
#[cfg(feature = "openai")]
mod openai;

#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(dead_code)
)]
mod routing;
#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(dead_code)
)]
mod sse;
#[cfg(feature = "vertex")]
mod vertex;

use std::fmt;
use std::time::Duration;

#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
pub use anthropic::AnthropicClient;
pub use batch::{BatchFallback, BatchGate, BatchReport, BatchSeat, ProviderBatch};
#[cfg(feature = "bedrock")]
#[cfg_attr(docsrs, doc(cfg(feature = "bedrock")))]
pub use bedrock::BedrockClient;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use embeddings::EmbeddingClient;
#[cfg(feature = "gemini")]
#[cfg_attr(docsrs, doc(cfg(feature = "gemini")))]
pub use gemini::GeminiClient;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use openai::{OpenAiClient, OpenAiResponsesClient};
pub use routing::PREFIXES;
pub(crate) use routing::{Route, route};
#[cfg(feature = "vertex")]
#[cfg_attr(docsrs, doc(cfg(feature = "vertex")))]
pub use vertex::{ANTHROPIC_VERTEX_VERSION, GcpServiceAccount, VertexClient};

/// An API key. Its `Debug` and `Display` never show the key, and the adapters remove it
/// from every error message they build.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, for building a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// AWS credentials for SigV4 signing (the `bedrock/` route): an access key id, its
/// secret, and the session token of temporary credentials. `Debug` shows the key id
/// alone, never the secret or the token.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    access_key_id: String,
    secret_access_key: ApiKey,
    session_token: Option<ApiKey>,
}

impl AwsCredentials {
    /// Long-term credentials: an access key id and its secret.
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        Self {
            access_key_id: access_key_id.into(),
            secret_access_key: ApiKey::new(secret_access_key),
            session_token: None,
        }
    }

    /// Adds the session token of temporary credentials (STS).
    #[must_use]
    pub fn with_session_token(mut self, token: impl Into<String>) -> Self {
        self.session_token = Some(ApiKey::new(token));
        self
    }

    /// The access key id (not a secret: it names the key).
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The secret access key.
    pub fn secret_access_key(&self) -> &ApiKey {
        &self.secret_access_key
    }

    /// The session token, for temporary credentials.
    pub fn session_token(&self) -> Option<&ApiKey> {
        self.session_token.as_ref()
    }
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &self.secret_access_key)
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Transport settings shared by the HTTP adapters; set through the config builder, or
/// with the `with_` methods when building an adapter by hand.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ProviderOptions {
    /// An explicit API key (else the provider's environment variable).
    pub api_key: Option<ApiKey>,
    /// An explicit base URL (else the provider's environment variable or default). For
    /// `azure/` it is the resource endpoint, `https://RESOURCE.openai.azure.com`
    /// (else `AZURE_OPENAI_ENDPOINT`).
    pub base_url: Option<String>,
    /// A bearer token sent as `Authorization: Bearer TOKEN` instead of the key: for
    /// Azure OpenAI, a Microsoft Entra ID token (scope
    /// `https://cognitiveservices.azure.com/.default`; source:
    /// <https://learn.microsoft.com/en-us/azure/ai-services/openai/reference#authentication>).
    /// For `bedrock/`, a Bedrock API key (else `AWS_BEARER_TOKEN_BEDROCK`; source:
    /// <https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html>).
    /// For `vertex/`, a Google OAuth 2.0 access token (else `GOOGLE_OAUTH_ACCESS_TOKEN`),
    /// used as given, never refreshed.
    /// Only the `azure/`, `bedrock/` and `vertex/` routes read it; `None` by default.
    pub bearer_token: Option<ApiKey>,
    /// The Azure OpenAI `api-version` query parameter (else `AZURE_OPENAI_API_VERSION`,
    /// else [`OpenAiClient::AZURE_API_VERSION`], `2024-10-21`). Only the `azure/` route
    /// reads it.
    pub api_version: Option<String>,
    /// OpenAI Responses API only ([`OpenAiResponsesClient`]): store each response on
    /// OpenAI's side (`store: true`) and send only the new items with
    /// `previous_response_id` when the history's last model turn came from this API;
    /// `false` by default: stateless, `store: false`, the encrypted reasoning items
    /// sent back in `input` (see `docs/providers.md`, "OpenAI Responses API").
    pub store_responses: bool,
    /// AWS Bedrock only (`bedrock/`): the region (else `AWS_REGION`, else
    /// `AWS_DEFAULT_REGION`).
    pub aws_region: Option<String>,
    /// AWS Bedrock only (`bedrock/`): the credentials SigV4 signs with (else
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`). A
    /// [`bearer_token`](Self::bearer_token) (a Bedrock API key, else
    /// `AWS_BEARER_TOKEN_BEDROCK`) is used instead when set.
    pub aws_credentials: Option<AwsCredentials>,
    /// Vertex AI only (`vertex/`): the Google Cloud project id (else
    /// `GOOGLE_CLOUD_PROJECT`).
    pub gcp_project: Option<String>,
    /// Vertex AI only (`vertex/`): the location, such as `us-central1` or `global`
    /// (else `GOOGLE_CLOUD_LOCATION`).
    pub gcp_location: Option<String>,
    /// Vertex AI only (`vertex/`): the service-account key access tokens are obtained
    /// with (else the file `GOOGLE_APPLICATION_CREDENTIALS` names). A
    /// [`bearer_token`](Self::bearer_token) (an access token, else
    /// `GOOGLE_OAUTH_ACCESS_TOKEN`) is used instead when set.
    #[cfg(feature = "vertex")]
    pub gcp_service_account: Option<GcpServiceAccount>,
    /// The whole-request timeout, connect to last body byte (default 600 s, as the
    /// official SDKs).
    pub request_timeout: Duration,
    /// The connect timeout (default 5 s, as the official SDKs).
    pub connect_timeout: Duration,
    /// The largest response body accepted (bytes, default 32 MiB); a larger one is a
    /// permanent error, never an out-of-memory.
    pub max_response_bytes: usize,
    /// What the models routed with these options take beside text (images, documents,
    /// audio; see [`ContentCapabilities`](crate::llm::ContentCapabilities)), in place of
    /// the built-in table; `None` (the default): the table. For a model the table does
    /// not know (an OpenAI-compatible server's, which takes text alone by default, or
    /// an Azure deployment not named after its model). Read by the OpenAI-family routes
    /// (`gpt-`/`o*` names, `openai-responses/`, `azure/`, `azure-responses/`,
    /// `ollama/`, `dispatch/`) and by [`OpenAiClient`] and [`OpenAiResponsesClient`]
    /// built by hand; the parts are sent in OpenAI's shape (see `docs/providers.md`,
    /// "Content parts").
    pub content_capabilities: Option<crate::llm::ContentCapabilities>,
    /// The connection pool a config shares with its `with_` variants (set when a
    /// config is built; not a setting).
    pub(crate) pool: Option<http::HttpPool>,
}

impl Default for ProviderOptions {
    fn default() -> Self {
        Self {
            api_key: None,
            base_url: None,
            bearer_token: None,
            api_version: None,
            store_responses: false,
            aws_region: None,
            aws_credentials: None,
            gcp_project: None,
            gcp_location: None,
            #[cfg(feature = "vertex")]
            gcp_service_account: None,
            request_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(5),
            max_response_bytes: 32 * 1024 * 1024,
            content_capabilities: None,
            pool: None,
        }
    }
}

impl ProviderOptions {
    /// Sets the API key.
    #[must_use]
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }

    /// Sets the base URL (see the module docs for its meaning per provider).
    #[must_use]
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Sets the bearer token (see [`bearer_token`](Self::bearer_token)).
    #[must_use]
    pub fn with_bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(ApiKey::new(token));
        self
    }

    /// Sets the Azure OpenAI `api-version` (see [`api_version`](Self::api_version)).
    #[must_use]
    pub fn with_api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = Some(version.into());
        self
    }

    /// Sets [`store_responses`](Self::store_responses) (OpenAI Responses API).
    #[must_use]
    pub fn with_store_responses(mut self, store: bool) -> Self {
        self.store_responses = store;
        self
    }

    /// Sets the AWS region (see [`aws_region`](Self::aws_region)).
    #[must_use]
    pub fn with_aws_region(mut self, region: impl Into<String>) -> Self {
        self.aws_region = Some(region.into());
        self
    }

    /// Sets the AWS credentials (see [`aws_credentials`](Self::aws_credentials)).
    #[must_use]
    pub fn with_aws_credentials(mut self, credentials: AwsCredentials) -> Self {
        self.aws_credentials = Some(credentials);
        self
    }

    /// Sets the Google Cloud project (see [`gcp_project`](Self::gcp_project)).
    #[must_use]
    pub fn with_gcp_project(mut self, project: impl Into<String>) -> Self {
        self.gcp_project = Some(project.into());
        self
    }

    /// Sets the Vertex AI location (see [`gcp_location`](Self::gcp_location)).
    #[must_use]
    pub fn with_gcp_location(mut self, location: impl Into<String>) -> Self {
        self.gcp_location = Some(location.into());
        self
    }

    /// Sets the service-account key (see [`gcp_service_account`](Self::gcp_service_account)).
    #[cfg(feature = "vertex")]
    #[must_use]
    pub fn with_gcp_service_account(mut self, account: GcpServiceAccount) -> Self {
        self.gcp_service_account = Some(account);
        self
    }

    /// Sets the whole-request timeout.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the connect timeout.
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the largest response body accepted (bytes).
    #[must_use]
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Declares what the models routed with these options take beside text (see
    /// [`content_capabilities`](Self::content_capabilities)), e.g. images for a vision
    /// model on an OpenAI-compatible server:
    ///
    /// ```
    /// use agent_core::llm::{COMMON_IMAGES, ContentCapabilities};
    /// use agent_core::providers::ProviderOptions;
    ///
    /// let mut vision = ContentCapabilities::TEXT_ONLY;
    /// vision.image_types = COMMON_IMAGES;
    /// let options = ProviderOptions::default().with_content_capabilities(vision);
    /// assert_eq!(options.content_capabilities, Some(vision));
    /// ```
    #[must_use]
    pub fn with_content_capabilities(mut self, caps: crate::llm::ContentCapabilities) -> Self {
        self.content_capabilities = Some(caps);
        self
    }
}
