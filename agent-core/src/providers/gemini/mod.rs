//! [`GeminiClient`]: Google's Generative Language API (the Gemini API),
//! `POST {base}/v1beta/models/{model}:generateContent`, streamed with
//! `:streamGenerateContent?alt=sse`.
//!
//! Wire format from the API reference (<https://ai.google.dev/api/generate-content>), the
//! function calling guide (<https://ai.google.dev/gemini-api/docs/function-calling>), the
//! structured output guide (<https://ai.google.dev/gemini-api/docs/structured-output>) and
//! the thought signatures guide (<https://ai.google.dev/gemini-api/docs/thought-signatures>);
//! the rules that matter here are in `docs/providers.md`, "Google Gemini".

mod response;
mod stream;
mod wire;

use std::borrow::Cow;
use std::fmt;

use reqwest::Url;
use reqwest::header::HeaderMap;

use crate::error::ConfigError;
use crate::llm::{
    LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, OutputCapabilities, StreamSink,
};
use crate::providers::ProviderOptions;
use crate::providers::encoded::WireCache;
use crate::providers::glue::{self, Streams, Wire};
use crate::providers::http::{Reply, Transport, parse_url};
use response::WireResponse;
use stream::ChunkAssembler;

/// The `thoughtSignature` sent on a function call the model did not sign (a call from
/// another provider's history, or one the runner rebuilt): the value Google documents
/// for history it did not produce, which its validator accepts.
pub(crate) const UNSIGNED_CALL: &str = "skip_thought_signature_validator";

/// A client of the Gemini API (Google AI Studio keys, `GEMINI_API_KEY`).
///
/// Requests: the key in the `x-goog-api-key` header (never in the URL, where it would
/// reach logs); the system prompt as `systemInstruction`; the conversation as `contents`
/// with roles `user` and `model`; a model turn as its text part (when not blank) then one
/// `functionCall {id, name, args}` part per call, `args` always an object, the first
/// call carrying its `thoughtSignature` (the one the model sent, else
/// `skip_thought_signature_validator`); the results of a turn in the one `user` content
/// after it, as `functionResponse {id, name, response}` parts in call order, before any
/// text, with `response` `{"output": text}` or `{"error": text}`; no blank text part (an
/// empty turn is sent as `(empty)`); each tool as a function declaration whose
/// `parameters` come from [`schema::for_gemini`](crate::schema::for_gemini) (left out for a tool without
/// parameters, which Gemini rejects as an empty object); `toolConfig` mode `AUTO`,
/// `ANY` (required), `ANY` with `allowedFunctionNames` (a named tool) or `NONE`;
/// `generationConfig` with `maxOutputTokens`, `temperature` clamped to 0.0..=2.0, and in
/// native output mode `responseMimeType: application/json` with `responseSchema` from
/// [`schema::for_gemini`](crate::schema::for_gemini).
///
/// Gemini before 3 (`gemini-1.x`, `gemini-2.x`) rejects a response schema together with
/// function declarations; for those models a native-mode request that offers tools sends
/// the tools without the schema (which the runner then puts in the system prompt), and
/// one with tool choice none sends the schema without the tools.
///
/// Responses: `candidates[0]`; text parts joined (parts marked `thought` go to
/// [`LlmResponse::reasoning`]); `functionCall` parts as calls, in order, with their ids
/// (missing ones synthesised) and `thoughtSignature`s kept; `finishReason` and
/// `promptFeedback.blockReason` mapped as `docs/providers.md`, "Stop reasons", states;
/// usage with input = `promptTokenCount` + `toolUsePromptTokenCount`, output =
/// `candidatesTokenCount` + `thoughtsTokenCount`, cache reads =
/// `cachedContentTokenCount`; `responseId` as the request id when no header has one.
///
/// Streamed calls go to `:streamGenerateContent?alt=sse` and give the same turn as a
/// plain call (see the stream module; case C61).
pub struct GeminiClient {
    transport: Transport,
    models: Url,
    cache: WireCache,
}

impl fmt::Debug for GeminiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiClient")
            .field("transport", &self.transport)
            .finish()
    }
}

impl GeminiClient {
    /// The API root used when no base URL is given.
    pub const DEFAULT_BASE_URL: &'static str = "https://generativelanguage.googleapis.com";

    /// A client from explicit options; reads no environment variable. Needs
    /// `options.api_key`; `options.base_url` is the API root (default
    /// [`DEFAULT_BASE_URL`](Self::DEFAULT_BASE_URL); `/v1beta/models/{model}:generateContent`
    /// is appended, or `/models/{model}:generateContent` to a root that already ends in an
    /// API version such as `/v1beta` or `/v1`).
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `"gemini"`) when the key is
    /// missing or unusable in a header, or the base URL is invalid.
    pub fn new(options: &ProviderOptions) -> Result<Self, ConfigError> {
        glue::built("gemini", Self::build(options))
    }

    pub(crate) fn build(options: &ProviderOptions) -> Result<Self, String> {
        let key = options
            .api_key
            .clone()
            .ok_or("an API key is required (GEMINI_API_KEY)")?;
        let base = options
            .base_url
            .as_deref()
            .unwrap_or(Self::DEFAULT_BASE_URL)
            .trim_end_matches('/');
        let versioned = base
            .rsplit('/')
            .next()
            .is_some_and(|last| last.starts_with('v') && last[1..].starts_with(char::is_numeric));
        let models = if versioned {
            format!("{base}/models")
        } else {
            format!("{base}/v1beta/models")
        };
        let models = parse_url(&models)?;
        let mut headers = HeaderMap::new();
        Transport::insert_header(
            &mut headers,
            "x-goog-api-key",
            Transport::secret_header(key.expose())?,
        );
        let transport = Transport::new("gemini", models.as_str(), headers, Some(key), options)?;
        Ok(Self {
            transport,
            models,
            cache: WireCache::default(),
        })
    }

    /// A client over a transport made elsewhere (Vertex AI: no key header, a bearer
    /// token added per request), posting to `{models}/{model}:generateContent`.
    #[cfg(feature = "vertex")]
    pub(crate) fn with_transport(transport: Transport, models: Url) -> Self {
        Self {
            transport,
            models,
            cache: WireCache::default(),
        }
    }

    /// The endpoint a request for `model` is posted to
    /// (`.../v1beta/models/{model}:generateContent`; a leading `models/` in the name is
    /// dropped, and characters that would change the path are percent-encoded).
    ///
    /// # Errors
    /// A permanent [`LlmError`] when the model name is empty.
    pub fn endpoint(&self, model: &str) -> Result<Url, LlmError> {
        self.method_url(model, "generateContent")
    }

    /// The endpoint a streamed request for `model` is posted to
    /// (`.../v1beta/models/{model}:streamGenerateContent?alt=sse`: server-sent events,
    /// source: <https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent>).
    ///
    /// # Errors
    /// As [`endpoint`](Self::endpoint).
    pub fn stream_endpoint(&self, model: &str) -> Result<Url, LlmError> {
        let mut url = self.method_url(model, "streamGenerateContent")?;
        url.set_query(Some("alt=sse"));
        Ok(url)
    }

    /// `.../models/{model}:{method}`.
    fn method_url(&self, model: &str, method: &str) -> Result<Url, LlmError> {
        let name = model.strip_prefix("models/").unwrap_or(model);
        if name.trim().is_empty() {
            return Err(LlmError::permanent("gemini: the model name is empty"));
        }
        let mut url = self.models.clone();
        url.path_segments_mut()
            .map_err(|()| LlmError::permanent("gemini: the base URL cannot take a path"))?
            .pop_if_empty()
            .push(&format!("{name}:{method}"));
        Ok(url)
    }
}

impl Wire for GeminiClient {
    fn transport(&self) -> &Transport {
        &self.transport
    }

    fn url(&self, request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        self.endpoint(&request.model).map(Cow::Owned)
    }

    fn encode(&self, request: &LlmRequest, _stream: bool) -> Result<Vec<u8>, LlmError> {
        wire::encode(request, &self.cache)
    }

    fn decode(&self, reply: &Reply) -> Result<LlmResponse, LlmError> {
        response::decode(reply, self.transport.key())
    }
}

impl Streams for GeminiClient {
    type Assembler = ChunkAssembler;

    fn stream_url(&self, request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        self.stream_endpoint(&request.model).map(Cow::Owned)
    }

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
        response::decode_wire(assembled, &reply, self.transport.key())
    }
}

impl LlmClient for GeminiClient {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        glue::complete(self, request)
    }

    /// Streams with `streamGenerateContent` (server-sent events), read until the body
    /// ends after the chunk with the finish reason (see the stream module). The turn
    /// is normalized as a non-streamed one.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a LlmRequest,
        sink: &'a mut dyn StreamSink,
    ) -> LlmFuture<'a> {
        glue::complete_streaming(self, request, sink)
    }

    /// `"gemini"`, the GenAI conventions' name for the Gemini API
    /// (`gen_ai.provider.name`).
    fn provider(&self) -> &str {
        "gemini"
    }

    /// Gemini enforces `toolConfig` mode `ANY` (with `allowedFunctionNames` for a named
    /// tool), so `Auto` is tool mode; every Gemini model takes a response schema. Before
    /// Gemini 3 the schema cannot come with tools, so in native mode those models also
    /// see the schema in the system prompt (see the type's docs).
    fn output_capabilities(&self, model: &str) -> OutputCapabilities {
        OutputCapabilities::new(true, true).with_native_schema_seen(schema_with_tools(model))
    }

    /// Gemini takes a temperature from 0.0 to 2.0 (source: API reference,
    /// `GenerationConfig.temperature`); a higher one is clamped to 2.0.
    fn effective_temperature(&self, _model: &str, requested: f32) -> Option<f32> {
        Some(clamp_temperature(requested))
    }

    /// `thinkingConfig` for Gemini 2.5 (a budget) and 3 (a level).
    fn check_reasoning(
        &self,
        model: &str,
        reasoning: &crate::llm::Reasoning,
        _max_tokens: u32,
    ) -> Result<(), &'static str> {
        wire::check_reasoning(model, reasoning)
    }

    /// Gemini 1.5 and later: images, documents and audio as bytes or a Files API URI
    /// (an external URL from Gemini 2.5), in user contents; parts tools return go in
    /// the user content after the responses. Limits as the file input page gives them
    /// (see `docs/providers.md`, "Content parts").
    fn content_capabilities(&self, model: &str) -> crate::llm::ContentCapabilities {
        wire::capabilities(version(model))
    }
}

/// The (major, minor) version in a Gemini model name (`gemini-1.5-pro` → (1, 5),
/// `gemini-3-pro-preview` → (3, 0)); `None` for an alias without one.
fn version(model: &str) -> Option<(u32, u32)> {
    let major = major_version(model)?;
    let name = model.strip_prefix("models/").unwrap_or(model);
    let rest = name.strip_prefix("gemini-")?;
    let after_major = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let minor = after_major
        .strip_prefix('.')
        .map(|m| {
            m.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    Some((major, minor))
}

fn clamp_temperature(t: f32) -> f32 {
    t.clamp(0.0, 2.0)
}

/// The major version in a Gemini model name (`gemini-2.5-flash` → 2,
/// `gemini-3-pro-preview` → 3); `None` for an alias without one (`gemini-flash-latest`).
fn major_version(model: &str) -> Option<u32> {
    let name = model.strip_prefix("models/").unwrap_or(model);
    let rest = name.strip_prefix("gemini-")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether a model takes a response schema together with function declarations:
/// Gemini 3 and later, and aliases without a version (they name current models).
/// Earlier models answer 400 "Function calling with a response mime type:
/// 'application/json' is unsupported".
fn schema_with_tools(model: &str) -> bool {
    major_version(model).is_none_or(|major| major >= 3)
}
