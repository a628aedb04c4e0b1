//! Prefix routing: a model name and the options become a client and a wire model name.

use std::sync::Arc;

use crate::error::ConfigError;
use crate::llm::LlmClient;
#[cfg(feature = "anthropic")]
use crate::providers::AnthropicClient;
#[cfg(feature = "bedrock")]
use crate::providers::BedrockClient;
#[cfg(feature = "gemini")]
use crate::providers::GeminiClient;
#[cfg(feature = "vertex")]
use crate::providers::VertexClient;
use crate::providers::batch::BatchWire;
use crate::providers::http::HttpPool;
#[cfg(feature = "vertex")]
use crate::providers::vertex::Unresolved;
use crate::providers::{ApiKey, AwsCredentials, ProviderOptions};
#[cfg(feature = "openai")]
use crate::providers::{OpenAiClient, OpenAiResponsesClient};

/// The routable prefixes, for error messages.
pub const PREFIXES: &str = "claude-, gpt-, o1, o3, o4, chatgpt-, gemini-, ollama/, dispatch/, \
     azure/, openai-responses/, azure-responses/, bedrock/, vertex/";

/// The host Ollama listens on when `OLLAMA_HOST` is not set.
const OLLAMA_DEFAULT_HOST: &str = "http://127.0.0.1:11434";

/// A routed model: the client and the model name to send.
pub(crate) struct Route {
    pub(crate) client: Arc<dyn LlmClient>,
    pub(crate) wire_model: String,
    /// The connection pool the client uses (`None` for a client without one).
    pub(crate) pool: Option<HttpPool>,
    /// The provider's batch endpoints, beside the client (OpenAI Chat Completions and
    /// Anthropic only; see `.provider_batch(..)`).
    pub(crate) batch: Option<Arc<dyn BatchWire>>,
}

/// Routes a model name to a client, reading the provider's environment variables for
/// what the options do not set.
///
/// # Errors
/// [`ConfigError::UnknownModel`] for a name with no known prefix,
/// [`ConfigError::MissingEnv`] when the provider's key or URL is not set,
/// [`ConfigError::InvalidProvider`] for an empty name after `ollama/` or `dispatch/`, a
/// malformed URL, or a key that cannot be sent in a header,
/// [`ConfigError::ProviderFeatureOff`] for a provider whose Cargo feature is off.
pub(crate) fn route(model: &str, options: &ProviderOptions) -> Result<Route, ConfigError> {
    route_with(model, options, &|var| {
        std::env::var(var).ok().filter(|v| !v.trim().is_empty())
    })
}

/// Which provider a name routes to.
#[derive(Debug, PartialEq, Eq)]
enum Target<'m> {
    Anthropic,
    OpenAi,
    Gemini,
    Ollama(&'m str),
    Dispatch(&'m str),
    Azure(&'m str),
    /// The OpenAI Responses API: `openai-responses/NAME`, or an OpenAI name that only
    /// the Responses API serves (see [`responses_only`]).
    Responses(&'m str),
    AzureResponses(&'m str),
    /// AWS Bedrock Converse: `bedrock/MODEL_ID`.
    Bedrock(&'m str),
    /// Google Cloud Vertex AI: `vertex/gemini-*` or `vertex/claude-*`.
    Vertex(&'m str),
}

/// Whether an OpenAI model is served by the Responses API alone, so that its bare name
/// routes there: the `-pro` reasoning models (`o1-pro`, `o3-pro`, `gpt-5-pro`, ...),
/// the `-codex` models and the `-deep-research` models (source: each model's page,
/// "Endpoints", <https://platform.openai.com/docs/models>). Every other OpenAI name
/// stays on Chat Completions (`docs/providers.md`, "OpenAI Responses API").
impl Target<'_> {
    /// The provider, as an error names it, and the Cargo feature that builds its
    /// adapter.
    fn feature(&self) -> (&'static str, &'static str) {
        match self {
            Self::Anthropic => ("Anthropic", "anthropic"),
            Self::Gemini => ("Google Gemini", "gemini"),
            Self::Bedrock(_) => ("AWS Bedrock", "bedrock"),
            Self::Vertex(_) => ("Google Vertex AI", "vertex"),
            Self::OpenAi | Self::Responses(_) => ("OpenAI", "openai"),
            Self::Azure(_) | Self::AzureResponses(_) => ("Azure OpenAI", "openai"),
            Self::Ollama(_) => ("Ollama (OpenAI-compatible)", "openai"),
            Self::Dispatch(_) => ("an OpenAI-compatible server", "openai"),
        }
    }
}

/// Whether this build of agent-core has the provider feature `feature` (`openai`,
/// `anthropic`, `gemini`, `bedrock`, `vertex`).
pub(crate) fn built(feature: &str) -> bool {
    const BUILT: [(&str, bool); 5] = [
        ("openai", cfg!(feature = "openai")),
        ("anthropic", cfg!(feature = "anthropic")),
        ("gemini", cfg!(feature = "gemini")),
        ("bedrock", cfg!(feature = "bedrock")),
        ("vertex", cfg!(feature = "vertex")),
    ];
    BUILT.iter().any(|&(name, on)| on && name == feature)
}

fn responses_only(model: &str) -> bool {
    let has = |segment: &str| model.ends_with(segment) || model.contains(&format!("{segment}-"));
    has("-pro") || has("-codex") || has("-deep-research")
}

fn target(model: &str) -> Option<Target<'_>> {
    if let Some(name) = model.strip_prefix("ollama/") {
        return Some(Target::Ollama(name));
    }
    if let Some(name) = model.strip_prefix("dispatch/") {
        return Some(Target::Dispatch(name));
    }
    if let Some(name) = model.strip_prefix("azure/") {
        return Some(Target::Azure(name));
    }
    if let Some(name) = model.strip_prefix("openai-responses/") {
        return Some(Target::Responses(name));
    }
    if let Some(name) = model.strip_prefix("azure-responses/") {
        return Some(Target::AzureResponses(name));
    }
    if let Some(name) = model.strip_prefix("bedrock/") {
        return Some(Target::Bedrock(name));
    }
    if let Some(name) = model.strip_prefix("vertex/") {
        return Some(Target::Vertex(name));
    }
    if model.starts_with("claude-") {
        return Some(Target::Anthropic);
    }
    if model.starts_with("gemini-") {
        return Some(Target::Gemini);
    }
    let o_series = ["o1", "o3", "o4"].iter().any(|p| {
        model
            .strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    });
    if o_series || model.starts_with("gpt-") || model.starts_with("chatgpt-") {
        if responses_only(model) {
            return Some(Target::Responses(model));
        }
        return Some(Target::OpenAi);
    }
    None
}

/// [`route`] with an injectable environment (for tests).
pub(crate) fn route_with(
    model: &str,
    options: &ProviderOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Route, ConfigError> {
    route_built(model, options, env, &built)
}

/// [`route_with`] with an injectable set of built provider features (for tests: a
/// provider whose feature is off).
#[cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "bedrock"
    )),
    allow(unused_variables, unused_mut, unreachable_code)
)]
fn route_built(
    model: &str,
    options: &ProviderOptions,
    env: &dyn Fn(&str) -> Option<String>,
    built: &dyn Fn(&str) -> bool,
) -> Result<Route, ConfigError> {
    let Some(target) = target(model) else {
        return Err(ConfigError::UnknownModel {
            model: model.to_owned(),
            prefixes: PREFIXES.to_owned(),
        });
    };
    let (provider, feature) = target.feature();
    let off = || ConfigError::ProviderFeatureOff {
        model: model.to_owned(),
        provider,
        feature,
    };
    if !built(feature) {
        return Err(off());
    }
    let settings = Settings {
        model,
        options,
        env,
    };
    let invalid = |message: String| settings.invalid(message);
    let url_or_env = |var: &str| settings.url_or_env(var);
    let mut resolved = options.clone();
    // Reuse the pool handed down from a parent config, else start one (HTTP routes only).
    let pool = match options.pool.as_ref().filter(|p| p.fits(options)) {
        Some(pool) => Some(pool.clone()),
        None => Some(HttpPool::new(options).map_err(invalid)?),
    };
    resolved.pool.clone_from(&pool);
    // Set by the routes with a batch API; with only those routes built (feature
    // `anthropic` alone) every arm sets it, and the `None` is never read.
    #[allow(unused_assignments)]
    let mut batch: Option<Arc<dyn BatchWire>> = None;
    let (client, wire_model): (Arc<dyn LlmClient>, &str) = match target {
        #[cfg(feature = "anthropic")]
        Target::Anthropic => {
            resolved.api_key = Some(settings.required_key("ANTHROPIC_API_KEY")?);
            resolved.base_url = url_or_env("ANTHROPIC_BASE_URL");
            let client = Arc::new(AnthropicClient::build(&resolved).map_err(invalid)?);
            let wire = crate::providers::anthropic::batch::AnthropicBatch::new(Arc::clone(&client));
            batch = Some(Arc::new(wire.map_err(invalid)?));
            (client, model)
        }
        #[cfg(feature = "openai")]
        Target::OpenAi => {
            resolved.api_key = Some(settings.required_key("OPENAI_API_KEY")?);
            resolved.base_url = url_or_env("OPENAI_BASE_URL");
            let client = Arc::new(OpenAiClient::build_openai(&resolved).map_err(invalid)?);
            let wire = crate::providers::openai::batch::OpenAiBatch::new(Arc::clone(&client));
            batch = Some(Arc::new(wire.map_err(invalid)?));
            (client, model)
        }
        #[cfg(feature = "gemini")]
        Target::Gemini => {
            resolved.api_key = Some(settings.required_key("GEMINI_API_KEY")?);
            resolved.base_url = url_or_env("GEMINI_BASE_URL");
            (
                Arc::new(GeminiClient::build(&resolved).map_err(invalid)?),
                model,
            )
        }
        #[cfg(feature = "openai")]
        Target::Ollama(name) => {
            let name = non_empty_name(name, "ollama/").map_err(invalid)?;
            resolved.base_url = Some(settings.ollama_base_url());
            let client = OpenAiClient::build_compatible("ollama", &resolved).map_err(invalid)?;
            (Arc::new(client), name)
        }
        #[cfg(feature = "openai")]
        Target::Dispatch(name) => {
            let name = non_empty_name(name, "dispatch/").map_err(invalid)?;
            let (base, key) = settings.dispatch()?;
            resolved.base_url = Some(base);
            resolved.api_key = key;
            let client = OpenAiClient::build_compatible("dispatch", &resolved).map_err(invalid)?;
            (Arc::new(client), name)
        }
        #[cfg(feature = "openai")]
        Target::Azure(name) => {
            let name = non_empty_name(name, "azure/").map_err(invalid)?;
            resolved.base_url = Some(
                url_or_env("AZURE_OPENAI_ENDPOINT")
                    .ok_or_else(|| settings.missing("AZURE_OPENAI_ENDPOINT"))?,
            );
            if resolved.bearer_token.is_none() {
                resolved.api_key = Some(settings.required_key("AZURE_OPENAI_API_KEY")?);
            }
            resolved.api_version = options
                .api_version
                .clone()
                .or_else(|| env("AZURE_OPENAI_API_VERSION"));
            let client = OpenAiClient::build_azure(name, &resolved).map_err(invalid)?;
            (Arc::new(client), name)
        }
        #[cfg(feature = "openai")]
        Target::Responses(name) => {
            let name = non_empty_name(name, "openai-responses/").map_err(invalid)?;
            resolved.api_key = Some(settings.required_key("OPENAI_API_KEY")?);
            resolved.base_url = url_or_env("OPENAI_BASE_URL");
            let client = OpenAiResponsesClient::build_openai(&resolved).map_err(invalid)?;
            (Arc::new(client), name)
        }
        #[cfg(feature = "openai")]
        Target::AzureResponses(name) => {
            let name = non_empty_name(name, "azure-responses/").map_err(invalid)?;
            resolved.base_url = Some(
                url_or_env("AZURE_OPENAI_ENDPOINT")
                    .ok_or_else(|| settings.missing("AZURE_OPENAI_ENDPOINT"))?,
            );
            if resolved.bearer_token.is_none() {
                resolved.api_key = Some(settings.required_key("AZURE_OPENAI_API_KEY")?);
            }
            let client = OpenAiResponsesClient::build_azure(&resolved).map_err(invalid)?;
            (Arc::new(client), name)
        }
        #[cfg(feature = "bedrock")]
        Target::Bedrock(name) => {
            let name = non_empty_name(name, "bedrock/").map_err(invalid)?;
            settings.bedrock(&mut resolved)?;
            let client = BedrockClient::build(&resolved).map_err(invalid)?;
            (Arc::new(client), name)
        }
        #[cfg(feature = "vertex")]
        Target::Vertex(name) => {
            let name = non_empty_name(name, "vertex/").map_err(invalid)?;
            if !crate::providers::vertex::serves(name) {
                return Err(invalid(format!(
                    "vertex/ serves gemini-* (Google) and claude-* (Anthropic) models, \
                     not {name:?}"
                )));
            }
            crate::providers::vertex::resolve(options, &mut resolved, env).map_err(
                |e| match e {
                    Unresolved::Missing(var) => settings.missing(var),
                    Unresolved::Invalid(message) => settings.invalid(message),
                },
            )?;
            let client = VertexClient::build(&resolved).map_err(invalid)?;
            (Arc::new(client), name)
        }
        // A provider whose feature is off (answered above, before the pool).
        #[allow(unreachable_patterns)]
        _ => return Err(off()),
    };
    Ok(Route {
        client,
        wire_model: wire_model.to_owned(),
        pool,
        batch,
    })
}

/// Where a route's settings come from: the options first, then the environment. The
/// model and embedding routes share it, so both read the same variables.
pub(crate) struct Settings<'a> {
    pub(crate) model: &'a str,
    pub(crate) options: &'a ProviderOptions,
    pub(crate) env: &'a dyn Fn(&str) -> Option<String>,
}

impl Settings<'_> {
    pub(crate) fn invalid(&self, message: String) -> ConfigError {
        ConfigError::InvalidProvider {
            model: self.model.to_owned(),
            message,
        }
    }

    pub(crate) fn missing(&self, var: &str) -> ConfigError {
        ConfigError::MissingEnv {
            model: self.model.to_owned(),
            var: var.to_owned(),
        }
    }

    /// The key set on the options, else `var` from the environment.
    pub(crate) fn key_or_env(&self, var: &str) -> Option<ApiKey> {
        self.options
            .api_key
            .clone()
            .or_else(|| (self.env)(var).map(ApiKey::new))
    }

    /// The base URL set on the options, else `var` from the environment.
    pub(crate) fn url_or_env(&self, var: &str) -> Option<String> {
        self.options.base_url.clone().or_else(|| (self.env)(var))
    }

    /// The key set on the options, else `var`; missing is an error.
    pub(crate) fn required_key(&self, var: &str) -> Result<ApiKey, ConfigError> {
        self.key_or_env(var).ok_or_else(|| self.missing(var))
    }

    /// Ollama's API root: the base URL, else `OLLAMA_HOST`, else the default host.
    pub(crate) fn ollama_base_url(&self) -> String {
        let host = self
            .url_or_env("OLLAMA_HOST")
            .unwrap_or_else(|| OLLAMA_DEFAULT_HOST.to_owned());
        ollama_base(&host)
    }

    /// The dispatch fleet's base URL (`AGENT_DISPATCH_URL`, required) and optional key
    /// (`AGENT_DISPATCH_API_KEY`).
    pub(crate) fn dispatch(&self) -> Result<(String, Option<ApiKey>), ConfigError> {
        let base = self
            .url_or_env("AGENT_DISPATCH_URL")
            .ok_or_else(|| self.missing("AGENT_DISPATCH_URL"))?;
        Ok((base, self.key_or_env("AGENT_DISPATCH_API_KEY")))
    }
}

impl Settings<'_> {
    /// Bedrock's settings: the region (`AWS_REGION`, else `AWS_DEFAULT_REGION`), the
    /// endpoint (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, the AWS SDKs' variable, optional),
    /// and a Bedrock API key (the options' bearer token or API key, else
    /// `AWS_BEARER_TOKEN_BEDROCK`) or else SigV4 credentials (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` optional). Source: "Environment
    /// variables", <https://docs.aws.amazon.com/sdkref/latest/guide/environment-variables.html>,
    /// and "Use an Amazon Bedrock API key",
    /// <https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html>.
    fn bedrock(&self, resolved: &mut ProviderOptions) -> Result<(), ConfigError> {
        let env = self.env;
        resolved.aws_region = Some(
            self.options
                .aws_region
                .clone()
                .or_else(|| env("AWS_REGION"))
                .or_else(|| env("AWS_DEFAULT_REGION"))
                .ok_or_else(|| self.missing("AWS_REGION"))?,
        );
        resolved.base_url = self.url_or_env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME");
        // Explicit settings first (a token, else credentials), then the environment's.
        resolved.bearer_token = self
            .options
            .bearer_token
            .clone()
            .or_else(|| self.options.api_key.clone());
        if resolved.bearer_token.is_none() && resolved.aws_credentials.is_none() {
            resolved.bearer_token = env("AWS_BEARER_TOKEN_BEDROCK").map(ApiKey::new);
        }
        if resolved.bearer_token.is_none() && resolved.aws_credentials.is_none() {
            let id = env("AWS_ACCESS_KEY_ID").ok_or_else(|| self.missing("AWS_ACCESS_KEY_ID"))?;
            let secret = env("AWS_SECRET_ACCESS_KEY")
                .ok_or_else(|| self.missing("AWS_SECRET_ACCESS_KEY"))?;
            let mut credentials = AwsCredentials::new(id, secret);
            if let Some(token) = env("AWS_SESSION_TOKEN") {
                credentials = credentials.with_session_token(token);
            }
            resolved.aws_credentials = Some(credentials);
        }
        Ok(())
    }
}

pub(crate) fn non_empty_name<'m>(name: &'m str, prefix: &str) -> Result<&'m str, String> {
    if name.trim().is_empty() {
        Err(format!(
            "the model name after {prefix} is empty (write {prefix}NAME)"
        ))
    } else {
        Ok(name)
    }
}

/// The API root for an `OLLAMA_HOST` value: `http://` added when no scheme is given,
/// `/v1` appended unless present (`0.0.0.0:11434` → `http://0.0.0.0:11434/v1`).
pub(crate) fn ollama_base(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    let with_scheme = if host.contains("://") {
        host.to_owned()
    } else {
        format!("http://{host}")
    };
    if with_scheme.ends_with("/v1") {
        with_scheme
    } else {
        format!("{with_scheme}/v1")
    }
}

#[cfg(test)]
mod tests;
