//! [`EmbeddingClient`]: OpenAI-compatible `POST /embeddings`, routed like models.
//!
//! Wire format from the Embeddings reference
//! (<https://platform.openai.com/docs/api-reference/embeddings/create>): the request is
//! `{"model", "input": [texts], "dimensions"?}`, the response `{"data": [{"index",
//! "embedding": [floats]}], "usage"}`. Ollama (`/v1/embeddings`) and llama.cpp's server
//! answer the same shape.

use std::fmt;

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::{Deserialize, Serialize};

use crate::backoff::Backoff;
use crate::error::ConfigError;
use crate::llm::LlmError;
use crate::providers::ProviderOptions;
use crate::providers::classify::{redact, undecodable};
use crate::providers::http::Transport;
use crate::providers::routing::{Settings, non_empty_name};
use crate::store::{EmbedFuture, Embedder};

/// An [`Embedder`] over an OpenAI-compatible `/embeddings` endpoint, routed like
/// models:
///
/// | name | provider | key and endpoint |
/// |---|---|---|
/// | `text-embedding-...` | OpenAI | `OPENAI_API_KEY`; `OPENAI_BASE_URL` optional |
/// | `ollama/NAME` | Ollama | `OLLAMA_HOST`, default `http://127.0.0.1:11434` |
/// | `dispatch/NAME` | an OpenAI-compatible fleet (llama.cpp, vLLM, TGI) | `AGENT_DISPATCH_URL` (ends in `/v1`); `AGENT_DISPATCH_API_KEY` optional |
///
/// Texts are sent in batches of at most 64 per request; a transient failure (connect
/// error, timeout, 408/409/429/5xx) is retried up to 3 times with the default
/// [`Backoff`], then returned. It shares the adapters' connection pool.
pub struct EmbeddingClient {
    transport: Transport,
    model: String,
    wire_model: String,
    dimensions: Option<u32>,
    batch: usize,
    retries: u32,
    backoff: Backoff,
}

impl fmt::Debug for EmbeddingClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddingClient")
            .field("model", &self.model)
            .field("dimensions", &self.dimensions)
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

impl EmbeddingClient {
    /// Routes `model` (see the table above), reading the provider's environment
    /// variables.
    ///
    /// # Errors
    /// [`ConfigError::UnknownModel`] for another name, [`ConfigError::MissingEnv`] for a
    /// missing key or URL, [`ConfigError::InvalidProvider`] for an empty name after the
    /// prefix, a malformed URL or an unusable key.
    pub fn route(model: &str) -> Result<Self, ConfigError> {
        Self::route_with(model, &ProviderOptions::default())
    }

    /// Routes `model` with explicit options (a key or base URL set there replaces the
    /// environment variable).
    ///
    /// # Errors
    /// As [`route`](Self::route).
    pub fn route_with(model: &str, options: &ProviderOptions) -> Result<Self, ConfigError> {
        route_with_env(model, options, &|var| {
            std::env::var(var).ok().filter(|v| !v.trim().is_empty())
        })
    }

    /// A client of the OpenAI-compatible server at `options.base_url` (the API root,
    /// ending in `/v1`; `/embeddings` is appended), sending `model` as is. Reads no
    /// environment variable.
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] when the base URL is missing or invalid or the
    /// key is unusable in a header.
    pub fn compatible(
        provider: &str,
        model: &str,
        options: &ProviderOptions,
    ) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::InvalidProvider {
            model: model.to_owned(),
            message,
        };
        let base = options
            .base_url
            .as_deref()
            .ok_or_else(|| invalid("a base URL is required".to_owned()))?;
        Self::build(provider, model, model, base, options).map_err(invalid)
    }

    fn build(
        provider: &str,
        model: &str,
        wire_model: &str,
        base: &str,
        options: &ProviderOptions,
    ) -> Result<Self, String> {
        let url = format!("{}/embeddings", base.trim_end_matches('/'));
        let mut headers = HeaderMap::new();
        if let Some(key) = &options.api_key {
            headers.insert(
                AUTHORIZATION,
                Transport::secret_header(&format!("Bearer {}", key.expose()))?,
            );
        }
        let transport = Transport::new(provider, &url, headers, options.api_key.clone(), options)?;
        Ok(Self {
            transport,
            model: model.to_owned(),
            wire_model: wire_model.to_owned(),
            dimensions: None,
            batch: 64,
            retries: 3,
            backoff: Backoff::default(),
        })
    }

    /// Asks for vectors of `n` dimensions (OpenAI's `text-embedding-3-*` shorten them;
    /// other servers may ignore or reject it).
    #[must_use]
    pub fn dimensions(mut self, n: u32) -> Self {
        self.dimensions = Some(n);
        self
    }

    /// The backoff between retries of a transient failure.
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The endpoint this client posts to.
    pub fn endpoint(&self) -> &str {
        self.transport.url().as_str()
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let body = serde_json::to_vec(&Request {
            model: &self.wire_model,
            input: texts,
            dimensions: self.dimensions,
        })
        .map_err(|e| LlmError::permanent(format!("cannot encode the request: {e}")))?;
        let mut failures = 0u32;
        let reply = loop {
            match self.transport.post(body.clone()).await {
                Ok(reply) => break reply,
                Err(error) if error.is_transient() && failures < self.retries => {
                    let delay = self.backoff.delay(failures, error.retry_after);
                    failures += 1;
                    tokio::time::sleep(delay).await;
                }
                Err(error) => return Err(error),
            }
        };
        let provider = self.transport.provider();
        let decoded: Response = serde_json::from_slice(&reply.body).map_err(|e| {
            undecodable(
                provider,
                reply.status,
                &reply.headers,
                &reply.body,
                &e,
                self.transport.key(),
            )
        })?;
        let mut data = decoded.data;
        data.sort_by_key(|d| d.index);
        let mismatch = |what: String| {
            LlmError::permanent(redact(
                format!("{provider} embeddings: {what}"),
                self.transport.key(),
            ))
            .with_status(reply.status)
        };
        if data.len() != texts.len() || data.iter().enumerate().any(|(i, d)| d.index != i) {
            return Err(mismatch(format!(
                "sent {} texts, got {} vectors",
                texts.len(),
                data.len()
            )));
        }
        let vectors: Vec<Vec<f32>> = data.into_iter().map(|d| d.embedding).collect();
        if let Some(first) = vectors.first()
            && (first.is_empty() || vectors.iter().any(|v| v.len() != first.len()))
        {
            return Err(mismatch("vectors of different or zero lengths".to_owned()));
        }
        Ok(vectors)
    }
}

impl Embedder for EmbeddingClient {
    fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(texts.len());
            for chunk in texts.chunks(self.batch) {
                out.extend(self.embed_batch(chunk).await?);
            }
            Ok(out)
        })
    }

    fn model(&self) -> &str {
        &self.model
    }
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    input: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    #[serde(default)]
    index: usize,
    embedding: Vec<f32>,
}

/// [`EmbeddingClient::route_with`] with an injectable environment.
pub(crate) fn route_with_env(
    model: &str,
    options: &ProviderOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<EmbeddingClient, ConfigError> {
    let settings = Settings {
        model,
        options,
        env,
    };
    let invalid = |message: String| settings.invalid(message);
    let mut resolved = options.clone();
    if let Some(name) = model.strip_prefix("ollama/") {
        let name = non_empty_name(name, "ollama/").map_err(invalid)?;
        let base = settings.ollama_base_url();
        return EmbeddingClient::build("ollama", model, name, &base, &resolved).map_err(invalid);
    }
    if let Some(name) = model.strip_prefix("dispatch/") {
        let name = non_empty_name(name, "dispatch/").map_err(invalid)?;
        let (base, key) = settings.dispatch()?;
        resolved.api_key = key;
        return EmbeddingClient::build("dispatch", model, name, &base, &resolved).map_err(invalid);
    }
    if model.starts_with("text-embedding-") {
        resolved.api_key = Some(settings.required_key("OPENAI_API_KEY")?);
        let base = settings
            .url_or_env("OPENAI_BASE_URL")
            .unwrap_or_else(|| super::OpenAiClient::DEFAULT_BASE_URL.to_owned());
        return EmbeddingClient::build("openai", model, model, &base, &resolved).map_err(invalid);
    }
    Err(ConfigError::UnknownModel {
        model: model.to_owned(),
        prefixes: "text-embedding-, ollama/, dispatch/".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |var| {
            pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn names_route_like_models() {
        let env = env_of(&[
            ("OPENAI_API_KEY", "sk-test"),
            ("AGENT_DISPATCH_URL", "http://127.0.0.1:8080/v1"),
        ]);
        let o = ProviderOptions::default();
        let c = route_with_env("text-embedding-3-small", &o, &env).unwrap();
        assert_eq!(c.endpoint(), "https://api.openai.com/v1/embeddings");
        assert_eq!(c.model(), "text-embedding-3-small");
        let c = route_with_env("dispatch/gemma", &o, &env).unwrap();
        assert_eq!(c.endpoint(), "http://127.0.0.1:8080/v1/embeddings");
        assert_eq!(c.wire_model, "gemma");
        let c = route_with_env("ollama/nomic-embed-text", &o, &env).unwrap();
        assert_eq!(c.endpoint(), "http://127.0.0.1:11434/v1/embeddings");
        assert!(matches!(
            route_with_env("gpt-5", &o, &env),
            Err(ConfigError::UnknownModel { .. })
        ));
        assert!(matches!(
            route_with_env("text-embedding-3-small", &o, &env_of(&[])),
            Err(ConfigError::MissingEnv { var, .. }) if var == "OPENAI_API_KEY"
        ));
        assert!(matches!(
            route_with_env("dispatch/", &o, &env),
            Err(ConfigError::InvalidProvider { .. })
        ));
    }

    #[test]
    fn the_key_never_shows_in_debug() {
        let o = ProviderOptions::default().with_api_key("sk-secret-123");
        let c = route_with_env("text-embedding-3-small", &o, &env_of(&[])).unwrap();
        assert!(!format!("{c:?}").contains("sk-secret-123"));
    }
}
