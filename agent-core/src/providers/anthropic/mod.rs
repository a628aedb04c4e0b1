//! [`AnthropicClient`]: the Anthropic Messages API (`POST /v1/messages`).
//!
//! Wire format from the Messages API reference (<https://docs.anthropic.com/en/api/messages>)
//! and anthropic-sdk-python; the rules that matter here are in `docs/providers.md`.

pub(crate) mod batch;
mod response;
mod stream;
mod wire;

use std::fmt;

use reqwest::header::{HeaderMap, HeaderValue};

use crate::error::ConfigError;
use crate::llm::{
    LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, OutputCapabilities, StreamSink,
};
use crate::providers::ProviderOptions;
use crate::providers::encoded::WireCache;
use crate::providers::glue::{self, Streams, Wire};
use crate::providers::http::{Reply, Transport};
use response::Assembled;
use stream::EventAssembler;

/// A client of the Anthropic Messages API.
///
/// Sends `x-api-key`, `anthropic-version: 2023-06-01` and a JSON body: `system` at the
/// top level; the conversation as `user` / `assistant` messages of content blocks;
/// every tool result of a turn in the one `user` message after it, tool results first,
/// `is_error` set on failures; no empty or whitespace-only text block (an empty turn is
/// sent as `(empty)`); each tool's parameters through [`schema::for_anthropic`](crate::schema::for_anthropic);
/// `tool_choice` auto → `auto`, required → `any`, a named tool → `tool`, none → `none`;
/// `temperature` clamped to Anthropic's 0.0..=1.0.
///
/// Responses: text blocks joined, `tool_use` blocks as calls (in order, ids kept,
/// missing ones synthesised), other block types (thinking, ...) ignored; usage with
/// `input_tokens` = uncached + cache reads + cache writes; `request-id` kept.
pub struct AnthropicClient {
    transport: Transport,
    cache: WireCache,
}

impl fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("transport", &self.transport)
            .finish()
    }
}

impl AnthropicClient {
    /// The API root used when no base URL is given.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The `anthropic-version` header sent.
    pub const API_VERSION: &'static str = "2023-06-01";

    /// A client from explicit options; reads no environment variable. Needs
    /// `options.api_key`; `options.base_url` is the API root (default
    /// [`DEFAULT_BASE_URL`](Self::DEFAULT_BASE_URL); `/v1/messages` is appended, or
    /// `/messages` to a root ending in `/v1`).
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `"anthropic"`) when the key
    /// is missing or unusable in a header, or the base URL is invalid.
    pub fn new(options: &ProviderOptions) -> Result<Self, ConfigError> {
        glue::built("anthropic", Self::build(options))
    }

    pub(crate) fn build(options: &ProviderOptions) -> Result<Self, String> {
        let key = options
            .api_key
            .clone()
            .ok_or("an API key is required (ANTHROPIC_API_KEY)")?;
        let base = options
            .base_url
            .as_deref()
            .unwrap_or(Self::DEFAULT_BASE_URL)
            .trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        let mut headers = HeaderMap::new();
        Transport::insert_header(
            &mut headers,
            "x-api-key",
            Transport::secret_header(key.expose())?,
        );
        Transport::insert_header(
            &mut headers,
            "anthropic-version",
            HeaderValue::from_static(Self::API_VERSION),
        );
        let transport = Transport::new("anthropic", &url, headers, Some(key), options)?;
        Ok(Self {
            transport,
            cache: WireCache::default(),
        })
    }

    /// A client over a transport made elsewhere (Vertex AI: no key header, a bearer
    /// token added per request, the URL per model).
    #[cfg(feature = "vertex")]
    pub(crate) fn with_transport(transport: Transport) -> Self {
        Self {
            transport,
            cache: WireCache::default(),
        }
    }
}

impl Wire for AnthropicClient {
    fn transport(&self) -> &Transport {
        &self.transport
    }

    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<Vec<u8>, LlmError> {
        wire::encode_body(request, &self.cache, stream)
    }

    /// `anthropic-beta: files-api-2025-04-14` when a part is a Files API id (source:
    /// <https://docs.anthropic.com/en/docs/build-with-claude/files>), and
    /// `advanced-tool-use-2025-11-20` with the tool search tool (see
    /// [`LlmRequest::native_tool_search`]), comma-separated when both.
    fn content_headers(&self, request: &LlmRequest, headers: &mut HeaderMap) {
        let files = wire::names_a_file(request);
        let search = request.native_tool_search.is_some() && !request.tools.is_empty();
        let value = match (files, search) {
            (true, true) => {
                HeaderValue::from_str(&format!("{},{}", wire::FILES_BETA, wire::search::BETA)).ok()
            }
            (true, false) => Some(HeaderValue::from_static(wire::FILES_BETA)),
            (false, true) => Some(HeaderValue::from_static(wire::search::BETA)),
            (false, false) => None,
        };
        if let Some(value) = value {
            headers.insert("anthropic-beta", value);
        }
    }

    fn decode(&self, reply: &Reply) -> Result<LlmResponse, LlmError> {
        response::decode(reply, self.transport.key())
    }
}

impl Streams for AnthropicClient {
    type Assembler = EventAssembler;

    fn decode_streamed(
        &self,
        assembled: Assembled,
        _status: u16,
        headers: HeaderMap,
    ) -> Result<LlmResponse, LlmError> {
        Ok(response::decode_assembled(assembled, &headers))
    }
}

impl LlmClient for AnthropicClient {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        glue::complete(self, request)
    }

    /// Streams with `stream: true`, reading the message events up to `message_stop`
    /// (source: Messages API, "Streaming Messages",
    /// <https://docs.anthropic.com/en/docs/build-with-claude/streaming>). The turn is
    /// normalized as a non-streamed one.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a LlmRequest,
        sink: &'a mut dyn StreamSink,
    ) -> LlmFuture<'a> {
        glue::complete_streaming(self, request, sink)
    }

    fn provider(&self) -> &str {
        "anthropic"
    }

    /// Anthropic enforces `tool_choice` (`any`, `tool`), so `Auto` is tool mode. Native
    /// structured output (`output_config.format`) is generally available on Claude
    /// Opus 4.5, Sonnet 4.5, Haiku 4.5 and later (4.6, ...); older models reject the
    /// field (source: <https://platform.claude.com/docs/en/build-with-claude/structured-outputs>,
    /// read 2026-12-01). A model name is judged by its version: `claude-<family>-4-5...`
    /// and newer take it; `claude-3-...`, `claude-<family>-4-<date>`, `-4-1` do not.
    fn output_capabilities(&self, model: &str) -> OutputCapabilities {
        OutputCapabilities::new(true, anthropic_native_output(model))
    }

    /// Anthropic takes a temperature from 0.0 to 1.0 (source: Messages API reference,
    /// `temperature`); a higher one is clamped to 1.0.
    fn effective_temperature(&self, _model: &str, requested: f32) -> Option<f32> {
        Some(clamp_temperature(requested))
    }

    /// Extended thinking for Claude 3.7 Sonnet and the Claude 4 models (see
    /// [`Reasoning`](crate::llm::Reasoning)). With it, a forced tool choice is sent as
    /// `auto` and the temperature is left out, as the API requires.
    fn check_reasoning(
        &self,
        model: &str,
        reasoning: &crate::llm::Reasoning,
        max_tokens: u32,
    ) -> Result<(), &'static str> {
        wire::check_reasoning(model, reasoning, max_tokens)
    }

    /// Claude 3 and later take images, Claude 3.5 and later PDF and plain-text
    /// documents too, as bytes, a URL (plain text: not by URL) or a Files API id, in
    /// user messages and tool results; limits as the Vision and PDF pages give them
    /// (see `docs/providers.md`, "Content parts").
    fn content_capabilities(&self, model: &str) -> crate::llm::ContentCapabilities {
        wire::capabilities(crate::providers::inline::claude_version(model))
    }

    /// `5m` and `1h`, the `cache_control.ttl` values (source:
    /// <https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching>, "Cache
    /// duration").
    fn prompt_cache_ttls(&self, _model: &str) -> &'static [crate::output::PromptCacheTtl] {
        wire::CACHE_TTLS
    }

    /// The tool search tool, for Claude 4.5 and later (Opus 4.5, Sonnet 4.5, Haiku 4.5,
    /// 4.6, 5, ...; the models its page lists; source:
    /// <https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool>).
    /// Sent as `tool_search_tool_bm25_20251119` with `defer_loading` and the beta
    /// header `advanced-tool-use-2025-11-20` (see `docs/providers.md`).
    fn native_tool_search(&self, model: &str) -> bool {
        anthropic_native_output(model)
    }
}

fn clamp_temperature(t: f32) -> f32 {
    t.clamp(0.0, 1.0)
}

/// Whether a Claude model takes `output_config.format`: version 4.5 or newer, read from
/// names like `claude-sonnet-4-5-20250929`, `claude-opus-4-6`, `claude-haiku-4-5`
/// (a number of 100 or more after the major version is a date, i.e. minor 0).
fn anthropic_native_output(model: &str) -> bool {
    crate::providers::inline::claude_version(model).is_some_and(|version| version >= (4, 5))
}
