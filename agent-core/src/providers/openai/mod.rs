//! [`OpenAiClient`]: OpenAI Chat Completions (`POST /chat/completions`), Azure OpenAI
//! deployments (the same wire; [`OpenAiClient::azure`]) and the servers that copy it
//! (Ollama, llama.cpp's llama-server, vLLM, TGI, routers).
//!
//! Wire format from the Chat Completions reference
//! (<https://platform.openai.com/docs/api-reference/chat>) and openai-python; the quirks of
//! compatible servers are listed in `docs/providers.md`.

pub(crate) mod batch;
mod caps;
mod parts;
mod response;
mod responses;
mod stream;
mod wire;

use std::fmt;

use reqwest::header::{AUTHORIZATION, HeaderMap};

use crate::error::ConfigError;
use crate::llm::{
    ContentCapabilities, LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse,
    OutputCapabilities, StreamSink,
};
use crate::providers::encoded::WireCache;
use crate::providers::glue::{self, Streams, Wire};
use crate::providers::http::{Reply, Transport, parse_url};
use crate::providers::{ApiKey, ProviderOptions};
use response::WireResponse;
pub use responses::OpenAiResponsesClient;
use stream::ChunkAssembler;
use wire::accepts_temperature;

/// The `gen_ai.provider.name` of Azure OpenAI, as the OpenTelemetry GenAI conventions
/// spell it (<https://opentelemetry.io/docs/specs/semconv/registry/attributes/gen-ai/>).
pub(crate) const AZURE_PROVIDER: &str = "azure.ai.openai";

/// Azure OpenAI's authentication headers: `options.bearer_token` as
/// `Authorization: Bearer TOKEN` when set, else `options.api_key` as `api-key`; and the
/// secret to redact from messages.
///
/// # Errors
/// A message when neither is set, or the secret is unusable in a header.
fn azure_auth(options: &ProviderOptions) -> Result<(HeaderMap, ApiKey), String> {
    let mut headers = HeaderMap::new();
    let key = match (&options.bearer_token, &options.api_key) {
        (Some(token), _) => {
            let bearer = Transport::secret_header(&format!("Bearer {}", token.expose()))?;
            headers.insert(AUTHORIZATION, bearer);
            token.clone()
        }
        (None, Some(key)) => {
            let value = Transport::secret_header(key.expose())?;
            Transport::insert_header(&mut headers, "api-key", value);
            key.clone()
        }
        (None, None) => {
            return Err(
                "an API key (AZURE_OPENAI_API_KEY) or a bearer token is required".to_owned(),
            );
        }
    };
    Ok((headers, key))
}

/// Which server the client talks to; the quirks differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavor {
    /// api.openai.com (or a faithful proxy).
    OpenAi,
    /// An OpenAI-compatible server.
    Compatible,
    /// Azure OpenAI: OpenAI's wire, a deployment in the URL, the `api-key` header.
    Azure,
}

/// A client of OpenAI Chat Completions, or of an OpenAI-compatible server.
///
/// Requests: `Authorization: Bearer KEY` (when there is a key); the system prompt as the
/// first `system` message; an assistant turn echoed with its calls, `arguments` always a
/// JSON **string** of an object (never the invalid text a model sent: `from_wire`
/// already replaced it with `{}`), content `null` when it has calls and no text, and
/// `(empty)` when it has neither; then one `tool` message per call, in call order (a
/// failed result's content starts with `Error: `, since the format has no error flag);
/// each tool's parameters through [`schema::for_openai`](crate::schema::for_openai); `tool_choice` auto / required /
/// none / `{"type":"function",..}`. A user message with parts has its content as an
/// array of `text`, `image_url`, `file` and `input_audio` parts (one without parts keeps
/// a string; see `docs/providers.md`, "Content parts: OpenAI, Azure and compatible
/// servers").
///
/// Differences of [`compatible`](Self::compatible) servers from
/// [`openai`](Self::openai):
/// - the output cap is sent as `max_tokens` (OpenAI: `max_completion_tokens`, which its
///   reasoning models require), and `temperature` always as set (OpenAI: left out for
///   its reasoning models, which reject it);
/// - a named tool choice is sent as `"required"` when that tool is the only one offered
///   (the same constraint, and the form llama.cpp and older vLLM understand);
/// - tool calls written as `<tool_call>{..}</tool_call>` text with an empty `tool_calls`
///   list are recovered into calls (see `normalize::recover_tool_calls`); JSON text
///   without those tags stays text (case C5).
///
/// [`azure`](Self::azure) deployments get OpenAI's body, with the deployment and
/// `api-version` in the URL and the key as the `api-key` header (see
/// `docs/providers.md`, "Azure OpenAI").
///
/// Responses: `choices[0]`; the turn is classified by its content, never by
/// `finish_reason` (case C5); `arguments` as a string, an object, `""`, `null` or cut-off
/// JSON are read by [`ToolCall::from_wire`](crate::llm::ToolCall::from_wire) (cases C6-C8); missing or repeated call ids
/// are synthesised (case C9); usage with cached prompt tokens as cache reads;
/// `x-request-id` kept (else the body's `id`).
pub struct OpenAiClient {
    transport: Transport,
    flavor: Flavor,
    cache: WireCache,
    /// [`ProviderOptions::content_capabilities`], when set.
    content: Option<ContentCapabilities>,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("flavor", &self.flavor)
            .field("transport", &self.transport)
            .finish()
    }
}

impl OpenAiClient {
    /// The API root used when no base URL is given.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A client of OpenAI itself, from explicit options; reads no environment variable.
    /// Needs `options.api_key`; `options.base_url` is the API root, ending in `/v1`
    /// (default [`DEFAULT_BASE_URL`](Self::DEFAULT_BASE_URL)); `/chat/completions` is
    /// appended.
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `"openai"`) when the key is
    /// missing or unusable in a header, or the base URL is invalid.
    pub fn openai(options: &ProviderOptions) -> Result<Self, ConfigError> {
        glue::built("openai", Self::build_openai(options))
    }

    /// A client of an OpenAI-compatible server called `provider` (reported as
    /// `gen_ai.provider.name`, e.g. `"ollama"`), from explicit options; reads no
    /// environment variable. Needs `options.base_url`, the API root ending in `/v1`
    /// (`/chat/completions` is appended); the key is optional.
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `provider`) when the base
    /// URL is missing or invalid, or the key is unusable in a header.
    pub fn compatible(
        provider: impl Into<String>,
        options: &ProviderOptions,
    ) -> Result<Self, ConfigError> {
        let provider = provider.into();
        glue::built(&provider, Self::build_compatible(&provider, options))
    }

    /// The Azure OpenAI `api-version` sent when none is set: `2024-10-21`, the latest
    /// generally available (non-preview) version of the data-plane inference API
    /// (source: "Azure OpenAI REST API reference", API specs table,
    /// <https://learn.microsoft.com/en-us/azure/ai-services/openai/reference>).
    pub const AZURE_API_VERSION: &'static str = "2024-10-21";

    /// A client of an Azure OpenAI deployment, from explicit options; reads no
    /// environment variable. `options.base_url` is the resource endpoint
    /// (`https://RESOURCE.openai.azure.com`); requests go to
    /// `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version={v}`,
    /// `v` from `options.api_version` (default [`AZURE_API_VERSION`](Self::AZURE_API_VERSION)).
    /// Authentication: `options.bearer_token` as `Authorization: Bearer TOKEN` when set,
    /// else `options.api_key` as the `api-key` header (source:
    /// <https://learn.microsoft.com/en-us/azure/ai-services/openai/reference#authentication>).
    /// The body is OpenAI's Chat Completions (the deployment decides the model).
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `"azure.ai.openai"`) when
    /// the endpoint is missing or invalid, the deployment is empty, neither a key nor a
    /// token is set, or either is unusable in a header.
    pub fn azure(deployment: &str, options: &ProviderOptions) -> Result<Self, ConfigError> {
        glue::built(AZURE_PROVIDER, Self::build_azure(deployment, options))
    }

    pub(crate) fn build_azure(deployment: &str, options: &ProviderOptions) -> Result<Self, String> {
        if deployment.trim().is_empty() {
            return Err("the Azure deployment name is empty (write azure/DEPLOYMENT)".to_owned());
        }
        let endpoint = options
            .base_url
            .as_deref()
            .ok_or("an endpoint is required for Azure OpenAI (AZURE_OPENAI_ENDPOINT)")?;
        let endpoint = endpoint.trim().trim_end_matches('/');
        let endpoint = endpoint.strip_suffix("/openai").unwrap_or(endpoint);
        let mut url = parse_url(endpoint)?;
        url.path_segments_mut()
            .map_err(|()| format!("invalid URL {endpoint:?}: it cannot take a path"))?
            .pop_if_empty()
            .extend(["openai", "deployments", deployment, "chat", "completions"]);
        let version = options
            .api_version
            .as_deref()
            .unwrap_or(Self::AZURE_API_VERSION);
        url.query_pairs_mut().append_pair("api-version", version);
        let (headers, key) = azure_auth(options)?;
        let transport = Transport::new(AZURE_PROVIDER, url.as_str(), headers, Some(key), options)?;
        Ok(Self {
            transport,
            flavor: Flavor::Azure,
            cache: WireCache::default(),
            content: options.content_capabilities,
        })
    }

    pub(crate) fn build_openai(options: &ProviderOptions) -> Result<Self, String> {
        if options.api_key.is_none() {
            return Err("an API key is required (OPENAI_API_KEY)".to_owned());
        }
        let base = options
            .base_url
            .as_deref()
            .unwrap_or(Self::DEFAULT_BASE_URL);
        Self::build("openai", base, options, Flavor::OpenAi)
    }

    pub(crate) fn build_compatible(
        provider: &str,
        options: &ProviderOptions,
    ) -> Result<Self, String> {
        let base = options
            .base_url
            .as_deref()
            .ok_or("a base URL is required for an OpenAI-compatible server")?;
        Self::build(provider, base, options, Flavor::Compatible)
    }

    fn build(
        provider: &str,
        base: &str,
        options: &ProviderOptions,
        flavor: Flavor,
    ) -> Result<Self, String> {
        let url = format!("{}/chat/completions", base.trim_end_matches('/'));
        let mut headers = HeaderMap::new();
        if let Some(key) = &options.api_key {
            let bearer = Transport::secret_header(&format!("Bearer {}", key.expose()))?;
            headers.insert(AUTHORIZATION, bearer);
        }
        let transport = Transport::new(provider, &url, headers, options.api_key.clone(), options)?;
        Ok(Self {
            transport,
            flavor,
            cache: WireCache::default(),
            content: options.content_capabilities,
        })
    }

    /// The endpoint this client posts to.
    pub fn endpoint(&self) -> &str {
        self.transport.url().as_str()
    }
}

impl Wire for OpenAiClient {
    fn transport(&self) -> &Transport {
        &self.transport
    }

    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<Vec<u8>, LlmError> {
        wire::encode_body(
            request,
            self.flavor == Flavor::Compatible,
            &self.cache,
            stream,
        )
    }

    fn decode(&self, reply: &Reply) -> Result<LlmResponse, LlmError> {
        let compatible = self.flavor == Flavor::Compatible;
        response::decode(
            reply,
            self.transport.provider(),
            compatible,
            self.transport.key(),
        )
    }
}

impl Streams for OpenAiClient {
    type Assembler = ChunkAssembler;

    fn decode_streamed(
        &self,
        assembled: WireResponse,
        status: u16,
        headers: HeaderMap,
    ) -> Result<LlmResponse, LlmError> {
        let reply = Reply {
            status,
            headers,
            body: Vec::new(),
        };
        let compatible = self.flavor == Flavor::Compatible;
        response::decode_wire(
            assembled,
            &reply,
            self.transport.provider(),
            compatible,
            self.transport.key(),
        )
    }
}

impl LlmClient for OpenAiClient {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        glue::complete(self, request)
    }

    /// Streams with `stream: true` and `stream_options: {"include_usage": true}` (the
    /// usage comes in a last chunk with no choices), reading `chat.completion.chunk`
    /// events up to `data: [DONE]` (source: Chat Completions API reference,
    /// "The chat completion chunk object",
    /// <https://platform.openai.com/docs/api-reference/chat-streaming>). The turn is
    /// normalized as a non-streamed one.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a LlmRequest,
        sink: &'a mut dyn StreamSink,
    ) -> LlmFuture<'a> {
        glue::complete_streaming(self, request, sink)
    }

    fn provider(&self) -> &str {
        self.transport.provider()
    }

    /// OpenAI enforces `tool_choice`, so `Auto` is tool mode; every current chat model
    /// takes `response_format: json_schema` except `gpt-3.5-*`, `gpt-4`, `gpt-4-*`
    /// (gpt-4-turbo), `o1-mini` and `o1-preview` (source: OpenAI structured outputs
    /// guide, "Supported models", <https://platform.openai.com/docs/guides/structured-outputs>).
    ///
    /// Compatible servers (llama.cpp, vLLM, Ollama's `/v1`) apply `response_format` as a
    /// grammar or guided decoding, while whether they enforce `tool_choice` depends on
    /// the server and on the model's chat template (llama.cpp does not for templates it
    /// cannot render tools into), so `Auto` is native mode there. These servers turn the
    /// schema into a grammar without showing it to the model, so native mode also puts
    /// it in the system prompt there; and the grammar covers the whole reply, so a turn
    /// that offers tools goes without it (`native_blocks_tools`).
    fn output_capabilities(&self, model: &str) -> OutputCapabilities {
        match self.flavor {
            Flavor::OpenAi | Flavor::Azure => {
                let old = model.starts_with("gpt-3.5")
                    || model == "gpt-4"
                    || model.starts_with("gpt-4-")
                    || model.starts_with("o1-mini")
                    || model.starts_with("o1-preview");
                OutputCapabilities::new(true, !old)
            }
            Flavor::Compatible => OutputCapabilities::new(false, true)
                .with_native_schema_seen(false)
                .with_native_blocks_tools(true),
        }
    }

    /// [`ProviderOptions::content_capabilities`] when set; else, by model family (see
    /// `docs/providers.md`, "Content parts"): on OpenAI, vision models (gpt-4o, gpt-4.1,
    /// gpt-4.5, gpt-5, gpt-4-turbo, o1, o3, o4-mini) take PNG, JPEG, GIF and WebP
    /// images by URL or bytes and PDFs by bytes or file id, up to 20 MB a part and 500
    /// a request (source: <https://platform.openai.com/docs/guides/images-vision>,
    /// <https://platform.openai.com/docs/guides/file-inputs>), the audio models
    /// (gpt-4o-audio-preview, gpt-audio) wav and mp3 bytes (source:
    /// <https://platform.openai.com/docs/guides/audio>); on Azure, the same families
    /// by deployment name, images by URL or bytes only, 50 a request (source:
    /// <https://learn.microsoft.com/en-us/azure/ai-foundry/openai/quotas-limits>);
    /// compatible servers text alone. Tool messages take text alone, so
    /// `parts_in_tool_results` is false.
    fn content_capabilities(&self, model: &str) -> ContentCapabilities {
        if let Some(caps) = self.content {
            return caps;
        }
        match self.flavor {
            Flavor::OpenAi => caps::chat(model),
            Flavor::Azure => caps::azure_chat(model),
            Flavor::Compatible => ContentCapabilities::TEXT_ONLY,
        }
    }

    /// OpenAI's reasoning models (o1, o3, o4, gpt-5 except `-chat`) reject any
    /// temperature but the default, so none is sent for them; compatible servers get it
    /// as set.
    fn effective_temperature(&self, model: &str, requested: f32) -> Option<f32> {
        (self.flavor == Flavor::Compatible || accepts_temperature(model)).then_some(requested)
    }

    /// OpenAI and Azure: `reasoning_effort` for reasoning models (see
    /// [`Reasoning`](crate::llm::Reasoning)); compatible servers: none is sent, so none is
    /// accepted.
    fn check_reasoning(
        &self,
        model: &str,
        reasoning: &crate::llm::Reasoning,
        _max_tokens: u32,
    ) -> Result<(), &'static str> {
        match self.flavor {
            Flavor::Compatible => {
                Err("compatible servers take no reasoning setting from agent-core")
            }
            Flavor::OpenAi | Flavor::Azure => wire::check_reasoning(model, reasoning),
        }
    }

    /// OpenAI and Azure: `5m` (`prompt_cache_retention: "in_memory"`) and `24h`
    /// (`"24h"`); compatible servers take none.
    fn prompt_cache_ttls(&self, _model: &str) -> &'static [crate::output::PromptCacheTtl] {
        match self.flavor {
            Flavor::OpenAi | Flavor::Azure => wire::CACHE_TTLS,
            Flavor::Compatible => &[],
        }
    }
}
