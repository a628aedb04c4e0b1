//! [`OpenAiResponsesClient`]: the OpenAI Responses API (`POST /v1/responses`), on
//! OpenAI and on Azure OpenAI's v1 API (`{endpoint}/openai/v1/responses`).
//!
//! Wire format from the Responses API reference
//! (<https://platform.openai.com/docs/api-reference/responses>); the rules are in
//! `docs/providers.md`, "OpenAI Responses API".

mod stream;
mod wire;

use std::fmt;

use reqwest::header::{AUTHORIZATION, HeaderMap};

use super::AZURE_PROVIDER;
use crate::error::ConfigError;
use crate::llm::{
    ContentCapabilities, LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse,
    OutputCapabilities, StreamSink,
};
use crate::providers::ProviderOptions;
use crate::providers::encoded::WireCache;
use crate::providers::glue::{self, Streams, Wire};
use crate::providers::http::{Reply, Transport, parse_url};
use stream::EventAssembler;
use wire::WireResponse;

/// A client of the OpenAI Responses API (routes `openai-responses/MODEL` and
/// `azure-responses/DEPLOYMENT`).
///
/// Requests (`POST {base}/responses`, `Authorization: Bearer KEY`; on Azure the
/// `api-key` header or a bearer token): the system prompt as `instructions`; the
/// conversation as `input` items: user and assistant text as
/// `{"type": "message", "role", "content"}`, each tool call as
/// `{"type": "function_call", "call_id", "name", "arguments"}` (`arguments` a JSON
/// string of an object), each answer as
/// `{"type": "function_call_output", "call_id", "output"}` (every call answered; a
/// failed result's output starts with `Error: `); a user message or an answer with parts
/// has its content or output as an array of `input_text`, `input_image`, `input_file`
/// and `input_audio` parts; tools as
/// `{"type": "function", "name", "description", "parameters", "strict": false}`;
/// `tool_choice` auto / required / none / `{"type": "function", "name"}` (the forced
/// `submit_output`); native output as
/// `text.format = {"type": "json_schema", "name", "schema", "strict"}` (strict when
/// the schema qualifies for OpenAI's strict mode); `max_output_tokens`; `temperature`
/// except for reasoning models, as on Chat Completions.
///
/// State: stateless by default, `store: false` with
/// `include: ["reasoning.encrypted_content"]`; the `reasoning` items of a turn are kept
/// with its tool calls ([`ToolCall::provider_data`](crate::llm::ToolCall::provider_data))
/// and sent back ahead of them, as the API asks for function calling with reasoning
/// models. With [`ProviderOptions::store_responses`], `store: true` and, when the
/// last model turn holds its response id, `previous_response_id` with only the items
/// after that turn.
///
/// Responses: the `output` items (`message` with `output_text` and `refusal` parts,
/// `function_call`, `reasoning`); `status: "incomplete"` with
/// `incomplete_details.reason` `max_output_tokens` / `content_filter` as
/// [`StopReason::MaxTokens`](crate::llm::StopReason::MaxTokens) /
/// [`StopReason::ContentFilter`](crate::llm::StopReason::ContentFilter); a refusal as
/// [`StopReason::Refusal`](crate::llm::StopReason::Refusal); `status: "failed"` as the
/// error its `error` object states; usage `input_tokens` (with
/// `input_tokens_details.cached_tokens` as cache reads) and `output_tokens` (reasoning
/// tokens included). HTTP errors are classified as for Chat Completions.
pub struct OpenAiResponsesClient {
    transport: Transport,
    store: bool,
    cache: WireCache,
    /// [`ProviderOptions::content_capabilities`], when set.
    content: Option<ContentCapabilities>,
}

impl fmt::Debug for OpenAiResponsesClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiResponsesClient")
            .field("store", &self.store)
            .field("transport", &self.transport)
            .finish()
    }
}

impl OpenAiResponsesClient {
    /// A client of OpenAI's Responses API, from explicit options; reads no environment
    /// variable. Needs `options.api_key`; `options.base_url` is the API root, ending in
    /// `/v1` (default [`OpenAiClient::DEFAULT_BASE_URL`](super::OpenAiClient::DEFAULT_BASE_URL));
    /// `/responses` is appended. `options.store_responses` selects the stateful mode.
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `"openai"`) when the key is
    /// missing or unusable in a header, or the base URL is invalid.
    pub fn openai(options: &ProviderOptions) -> Result<Self, ConfigError> {
        glue::built("openai", Self::build_openai(options))
    }

    /// A client of the Responses API of an Azure OpenAI resource, from explicit
    /// options; reads no environment variable. `options.base_url` is the resource
    /// endpoint (`https://RESOURCE.openai.azure.com`); requests go to
    /// `{endpoint}/openai/v1/responses` (Azure's v1 API, which takes no `api-version`),
    /// with the deployment name as the body's `model` (route
    /// `azure-responses/DEPLOYMENT`). Authentication as for
    /// [`OpenAiClient::azure`](super::OpenAiClient::azure): `options.bearer_token` as
    /// `Authorization: Bearer TOKEN`, else `options.api_key` as `api-key` (source:
    /// <https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/responses>).
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `"azure.ai.openai"`) when
    /// the endpoint is missing or invalid, neither a key nor a token is set, or either
    /// is unusable in a header.
    pub fn azure(options: &ProviderOptions) -> Result<Self, ConfigError> {
        glue::built(AZURE_PROVIDER, Self::build_azure(options))
    }

    pub(crate) fn build_openai(options: &ProviderOptions) -> Result<Self, String> {
        let Some(key) = &options.api_key else {
            return Err("an API key is required (OPENAI_API_KEY)".to_owned());
        };
        let base = options
            .base_url
            .as_deref()
            .unwrap_or(super::OpenAiClient::DEFAULT_BASE_URL);
        let url = format!("{}/responses", base.trim_end_matches('/'));
        let mut headers = HeaderMap::new();
        let bearer = Transport::secret_header(&format!("Bearer {}", key.expose()))?;
        headers.insert(AUTHORIZATION, bearer);
        let transport = Transport::new("openai", &url, headers, Some(key.clone()), options)?;
        Ok(Self::with(transport, options))
    }

    pub(crate) fn build_azure(options: &ProviderOptions) -> Result<Self, String> {
        let endpoint = options
            .base_url
            .as_deref()
            .ok_or("an endpoint is required for Azure OpenAI (AZURE_OPENAI_ENDPOINT)")?;
        let endpoint = endpoint.trim().trim_end_matches('/');
        let endpoint = endpoint.strip_suffix("/openai/v1").unwrap_or(endpoint);
        let endpoint = endpoint.strip_suffix("/openai").unwrap_or(endpoint);
        let mut url = parse_url(endpoint)?;
        url.path_segments_mut()
            .map_err(|()| format!("invalid URL {endpoint:?}: it cannot take a path"))?
            .pop_if_empty()
            .extend(["openai", "v1", "responses"]);
        let (headers, key) = super::azure_auth(options)?;
        let transport = Transport::new(AZURE_PROVIDER, url.as_str(), headers, Some(key), options)?;
        Ok(Self::with(transport, options))
    }

    fn with(transport: Transport, options: &ProviderOptions) -> Self {
        Self {
            transport,
            store: options.store_responses,
            cache: WireCache::default(),
            content: options.content_capabilities,
        }
    }

    /// The endpoint this client posts to.
    pub fn endpoint(&self) -> &str {
        self.transport.url().as_str()
    }
}

impl Wire for OpenAiResponsesClient {
    fn transport(&self) -> &Transport {
        &self.transport
    }

    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<Vec<u8>, LlmError> {
        wire::encode_body(request, self.store, &self.cache, stream)
    }

    fn decode(&self, reply: &Reply) -> Result<LlmResponse, LlmError> {
        wire::decode(reply, self.transport.provider(), self.transport.key())
    }
}

impl Streams for OpenAiResponsesClient {
    type Assembler = EventAssembler;

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
        wire::decode_wire(
            assembled,
            &reply,
            self.transport.provider(),
            self.transport.key(),
        )
    }
}

impl LlmClient for OpenAiResponsesClient {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        glue::complete(self, request)
    }

    /// Streams with `stream: true`, reading the semantic events up to
    /// `response.completed` or `response.incomplete` (see the module
    /// `stream`; source: <https://platform.openai.com/docs/api-reference/responses-streaming>).
    /// The turn is normalized as a non-streamed one; a stream cut before its end event
    /// is a transient error.
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

    /// As OpenAI's Chat Completions: `tool_choice` is enforced, so `Auto` is tool mode;
    /// `text.format` json_schema is taken by the models the Responses API serves.
    fn output_capabilities(&self, _model: &str) -> OutputCapabilities {
        OutputCapabilities::new(true, true)
    }

    /// [`ProviderOptions::content_capabilities`] when set; else, by model family (see
    /// `docs/providers.md`, "Content parts"): on OpenAI, vision models take images by
    /// URL, bytes or file id and documents (PDF, text, Markdown, CSV, JSON, HTML, Office)
    /// by bytes, file id or URL, up to 20 MB a part and 500 a request, in user messages
    /// and in function call outputs (source:
    /// <https://platform.openai.com/docs/guides/images-vision>,
    /// <https://platform.openai.com/docs/guides/file-inputs>); on Azure, images and
    /// PDFs in user messages only, 50 a request (source:
    /// <https://learn.microsoft.com/en-us/azure/ai-foundry/openai/quotas-limits>).
    fn content_capabilities(&self, model: &str) -> ContentCapabilities {
        if let Some(caps) = self.content {
            return caps;
        }
        if self.transport.provider() == AZURE_PROVIDER {
            super::caps::azure_responses(model)
        } else {
            super::caps::responses(model)
        }
    }

    /// No temperature for OpenAI's reasoning models, which reject it (as on Chat
    /// Completions).
    fn effective_temperature(&self, model: &str, requested: f32) -> Option<f32> {
        super::wire::accepts_temperature(model).then_some(requested)
    }

    /// `reasoning.effort` for reasoning models, as on Chat Completions.
    fn check_reasoning(
        &self,
        model: &str,
        reasoning: &crate::llm::Reasoning,
        _max_tokens: u32,
    ) -> Result<(), &'static str> {
        super::wire::check_reasoning(model, reasoning)
    }

    /// `5m` (`prompt_cache_retention: "in_memory"`) and `24h` (`"24h"`), on OpenAI and
    /// Azure alike.
    fn prompt_cache_ttls(&self, _model: &str) -> &'static [crate::output::PromptCacheTtl] {
        super::wire::CACHE_TTLS
    }

    /// `tool_search` on OpenAI (not Azure, whose pages do not list it) for `gpt-5.4`
    /// and later, the models its page names (source:
    /// <https://developers.openai.com/api/docs/guides/tools-tool-search>): sent as
    /// `{"type": "tool_search"}` with the functions to find `defer_loading: true`.
    fn native_tool_search(&self, model: &str) -> bool {
        self.transport.provider() != AZURE_PROVIDER && takes_tool_search(model)
    }
}

/// Whether an OpenAI model name is `gpt-5.4` or later (`gpt-5.4`, `gpt-5.4-mini`,
/// `gpt-5.5`, `gpt-6`, ...).
fn takes_tool_search(model: &str) -> bool {
    let Some(rest) = model.strip_prefix("gpt-") else {
        return false;
    };
    let version = rest.split('-').next().unwrap_or_default();
    let mut numbers = version.split('.').map(str::parse::<u32>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(major)), minor) => {
            let minor = match minor {
                Some(Ok(minor)) => minor,
                Some(Err(_)) => return false,
                None => 0,
            };
            major > 5 || (major == 5 && minor >= 4)
        }
        _ => false,
    }
}

#[cfg(test)]
mod search_tests {
    #[test]
    fn tool_search_is_for_gpt_5_4_and_later() {
        for (model, takes) in [
            ("gpt-5.4", true),
            ("gpt-5.4-mini", true),
            ("gpt-5.10", true),
            ("gpt-6", true),
            ("gpt-5", false),
            ("gpt-5.1", false),
            ("gpt-5-mini", false),
            ("gpt-4o", false),
            ("o3", false),
            ("gpt-x.4", false),
        ] {
            assert_eq!(super::takes_tool_search(model), takes, "{model}");
        }
    }
}
