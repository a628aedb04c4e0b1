//! [`GeminiClient`]: Google's Generative Language API (the Gemini API),
//! `POST {base}/v1beta/models/{model}:generateContent`.
//!
//! Wire format from the API reference (<https://ai.google.dev/api/generate-content>), the
//! function calling guide (<https://ai.google.dev/gemini-api/docs/function-calling>), the
//! structured output guide (<https://ai.google.dev/gemini-api/docs/structured-output>) and
//! the thought signatures guide (<https://ai.google.dev/gemini-api/docs/thought-signatures>);
//! the rules that matter here are in `docs/providers.md`, "Google Gemini".

use std::fmt;

use reqwest::Url;
use reqwest::header::HeaderMap;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::ConfigError;
use crate::llm::{
    LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, OutputCapabilities, StopReason,
    TokenUsage, ToolChoice,
};
use crate::message::{Message, ToolCall};
use crate::providers::classify::{ErrorBody, embedded_error, request_id, undecodable};
use crate::providers::encoded::{WireCache, raw};
use crate::providers::history::{self, Turn};
use crate::providers::http::{Reply, Transport, parse_url, traced};
use crate::providers::normalize::fill_ids;
use crate::providers::{ApiKey, ProviderOptions};
use crate::schema;
use crate::tool::ToolDefinition;

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
/// `parameters` come from [`schema::for_gemini`] (left out for a tool without
/// parameters, which Gemini rejects as an empty object); `toolConfig` mode `AUTO`,
/// `ANY` (required), `ANY` with `allowedFunctionNames` (a named tool) or `NONE`;
/// `generationConfig` with `maxOutputTokens`, `temperature` clamped to 0.0..=2.0, and in
/// native output mode `responseMimeType: application/json` with `responseSchema` from
/// [`schema::for_gemini`].
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
        Self::build(options).map_err(|message| ConfigError::InvalidProvider {
            model: "gemini".to_owned(),
            message,
        })
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

    /// The endpoint a request for `model` is posted to
    /// (`.../v1beta/models/{model}:generateContent`; a leading `models/` in the name is
    /// dropped, and characters that would change the path are percent-encoded).
    ///
    /// # Errors
    /// A permanent [`LlmError`] when the model name is empty.
    pub fn endpoint(&self, model: &str) -> Result<Url, LlmError> {
        let name = model.strip_prefix("models/").unwrap_or(model);
        if name.trim().is_empty() {
            return Err(LlmError::permanent("gemini: the model name is empty"));
        }
        let mut url = self.models.clone();
        url.path_segments_mut()
            .map_err(|()| LlmError::permanent("gemini: the base URL cannot take a path"))?
            .pop_if_empty()
            .push(&format!("{name}:generateContent"));
        Ok(url)
    }

    async fn round_trip(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let url = self.endpoint(&request.model)?;
        let body = encode(request, &self.cache)?;
        let reply = self.transport.post_to(&url, body).await?;
        decode(&reply, self.transport.key())
    }
}

impl LlmClient for GeminiClient {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        Box::pin(traced(self.transport.provider(), self.round_trip(request)))
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

// ---- request ----

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<SystemInstruction<'a>>,
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    generation_config: GenerationConfig<'a>,
}

#[derive(Serialize)]
struct SystemInstruction<'a> {
    parts: [Part<'a>; 1],
}

#[derive(Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: Vec<Part<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Part<'a> {
    Text {
        text: &'a str,
    },
    Call {
        #[serde(rename = "functionCall")]
        function_call: WireCall<'a>,
        #[serde(rename = "thoughtSignature", skip_serializing_if = "Option::is_none")]
        thought_signature: Option<&'a str>,
    },
    Response {
        #[serde(rename = "functionResponse")]
        function_response: WireFunctionResponse<'a>,
    },
}

#[derive(Serialize)]
struct WireCall<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    id: &'a str,
    name: &'a str,
    args: Args<'a>,
}

/// Call arguments: the object, or `{}` for anything else (the API takes a `Struct`).
struct Args<'a>(&'a Value);

impl Serialize for Args<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => map.serialize(serializer),
            _ => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

#[derive(Serialize)]
struct WireFunctionResponse<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    id: &'a str,
    name: &'a str,
    response: Outcome<'a>,
}

/// `{"output": text}` or `{"error": text}`: the keys the API reference names for a
/// function's output and its error (`FunctionResponse.response`).
struct Outcome<'a> {
    content: &'a str,
    is_error: bool,
}

impl Serialize for Outcome<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        let key = if self.is_error { "error" } else { "output" };
        map.serialize_entry(key, self.content)?;
        map.end()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    function_calling_config: FunctionCallingConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCallingConfig<'a> {
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_function_names: Option<[&'a str; 1]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig<'a> {
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_schema: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct Declarations<'a> {
    #[serde(rename = "functionDeclarations")]
    function_declarations: Vec<Declaration<'a>>,
}

#[derive(Serialize)]
struct Declaration<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
}

/// The `tools` array: one `functionDeclarations` entry holding every definition.
fn wire_tools(defs: &[ToolDefinition]) -> [Declarations<'_>; 1] {
    [Declarations {
        function_declarations: defs
            .iter()
            .map(|def| {
                let parameters = schema::for_gemini(&def.parameters);
                let empty = parameters
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_none_or(serde_json::Map::is_empty)
                    && parameters.get("anyOf").is_none();
                Declaration {
                    name: &def.name,
                    description: &def.description,
                    parameters: (!empty).then_some(parameters),
                }
            })
            .collect(),
    }]
}

/// The JSON body for a request. Tool declarations and the response schema come from
/// `cache`, encoded once per tool set and output spec.
///
/// # Errors
/// A permanent [`LlmError`] if serialization fails (it does not for these types).
pub(crate) fn encode(request: &LlmRequest, cache: &WireCache) -> Result<Vec<u8>, LlmError> {
    let failed = |e: serde_json::Error| {
        LlmError::permanent(format!("cannot serialize the gemini request: {e}"))
    };
    let native = request.output.as_ref().filter(|spec| spec.is_native());
    let mut send_tools = !request.tools.is_empty();
    let mut send_schema = native.is_some();
    if send_tools && send_schema && !schema_with_tools(&request.model) {
        // Before Gemini 3: the schema only where no tool may be called.
        if request.tool_choice == ToolChoice::None {
            send_tools = false;
        } else {
            send_schema = false;
        }
    }
    let tools = if send_tools {
        Some(
            cache
                .tools
                .get_or_encode(&request.tools, |defs| raw(&wire_tools(defs)))
                .map_err(failed)?,
        )
    } else {
        None
    };
    let response_schema = match native.filter(|_| send_schema) {
        Some(spec) => Some(
            cache
                .output
                .get_or_encode(spec, |spec| raw(&schema::for_gemini(&spec.schema)))
                .map_err(failed)?,
        ),
        None => None,
    };
    let tool_config = send_tools.then_some(ToolConfig {
        function_calling_config: match &request.tool_choice {
            ToolChoice::Required => FunctionCallingConfig {
                mode: "ANY",
                allowed_function_names: None,
            },
            ToolChoice::Tool(name) => FunctionCallingConfig {
                mode: "ANY",
                allowed_function_names: Some([name.as_str()]),
            },
            ToolChoice::None => FunctionCallingConfig {
                mode: "NONE",
                allowed_function_names: None,
            },
            _ => FunctionCallingConfig {
                mode: "AUTO",
                allowed_function_names: None,
            },
        },
    });
    let body = Body {
        system_instruction: request
            .system
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(|text| SystemInstruction {
                parts: [Part::Text { text }],
            }),
        contents: contents(&request.messages),
        tools: tools.as_deref(),
        tool_config,
        generation_config: GenerationConfig {
            max_output_tokens: request.max_tokens,
            temperature: request.temperature.map(clamp_temperature),
            response_mime_type: response_schema.is_some().then_some("application/json"),
            response_schema: response_schema.as_deref(),
        },
    };
    serde_json::to_vec(&body).map_err(failed)
}

/// The conversation as Gemini contents: user-side turns (text and function responses)
/// that follow each other are merged into one `user` content, responses first.
fn contents(messages: &[Message]) -> Vec<Content<'_>> {
    let mut out: Vec<Content<'_>> = Vec::new();
    let mut last_calls: &[ToolCall] = &[];
    for turn in history::turns(messages) {
        match turn {
            Turn::User(text) => user_parts(&mut out).push(Part::Text { text }),
            Turn::Results(answers) => {
                // The answers are the preceding model turn's calls, in its call order.
                let responses: Vec<Part<'_>> = answers
                    .iter()
                    .zip(last_calls)
                    .map(|(answer, call)| Part::Response {
                        function_response: WireFunctionResponse {
                            id: answer.call_id,
                            name: &call.name,
                            response: Outcome {
                                content: answer.content,
                                is_error: answer.is_error,
                            },
                        },
                    })
                    .collect();
                let parts = user_parts(&mut out);
                let at = parts
                    .iter()
                    .position(|p| !matches!(p, Part::Response { .. }))
                    .unwrap_or(parts.len());
                parts.splice(at..at, responses);
            }
            Turn::Assistant { text, calls } => {
                last_calls = calls;
                let mut parts = Vec::with_capacity(calls.len() + 1);
                if !text.trim().is_empty() {
                    parts.push(Part::Text { text });
                }
                parts.extend(calls.iter().enumerate().map(|(i, call)| {
                    Part::Call {
                        function_call: WireCall {
                            id: &call.id,
                            name: &call.name,
                            args: Args(&call.arguments),
                        },
                        thought_signature: call
                            .thought_signature
                            .as_deref()
                            .or((i == 0).then_some(UNSIGNED_CALL)),
                    }
                }));
                if parts.is_empty() {
                    parts.push(Part::Text {
                        text: history::EMPTY_TURN,
                    });
                }
                out.push(Content {
                    role: "model",
                    parts,
                });
            }
        }
    }
    out
}

/// The parts of the trailing `user` content, starting one if the last is the model's.
fn user_parts<'m, 'a>(out: &'m mut Vec<Content<'a>>) -> &'m mut Vec<Part<'a>> {
    if out.last().is_none_or(|c| c.role != "user") {
        out.push(Content {
            role: "user",
            parts: Vec::new(),
        });
    }
    let last = out.len() - 1;
    &mut out[last].parts
}

// ---- response ----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    candidates: Option<Vec<WireCandidate>>,
    prompt_feedback: Option<PromptFeedback>,
    usage_metadata: Option<UsageMetadata>,
    model_version: Option<String>,
    response_id: Option<String>,
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCandidate {
    content: Option<WireContent>,
    finish_reason: Option<String>,
    finish_message: Option<String>,
}

#[derive(Deserialize)]
struct WireContent {
    parts: Option<Vec<WirePart>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePart {
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    thought_signature: Option<String>,
    function_call: Option<WireFunctionCall>,
}

#[derive(Deserialize)]
struct WireFunctionCall {
    id: Option<String>,
    name: Option<String>,
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    tool_use_prompt_token_count: Option<u64>,
}

/// A candidate's `finishReason` as a stop reason (`docs/providers.md`, "Stop reasons";
/// values from the API reference, `Candidate.FinishReason`). Filters of every kind
/// (safety, recitation, blocklists, prohibited content, personal data, an unsupported
/// language, image filters) are `ContentFilter`; a malformed or unexpected function call
/// and unknown values are kept as `Other`, so the turn is judged by its content.
fn stop_reason(finish: Option<&str>, has_calls: bool) -> StopReason {
    match finish {
        None | Some("STOP" | "FINISH_REASON_UNSPECIFIED") if has_calls => StopReason::ToolUse,
        None | Some("STOP" | "FINISH_REASON_UNSPECIFIED") => StopReason::EndTurn,
        Some("MAX_TOKENS") => StopReason::MaxTokens,
        Some(
            "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "LANGUAGE"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION"
            | "MODEL_ARMOR",
        ) => StopReason::ContentFilter,
        Some(other) => StopReason::Other(other.to_ascii_lowercase()),
    }
}

/// Normalizes a 2xx reply.
///
/// # Errors
/// Transient when the body is not JSON, is cut off, or has neither `candidates` nor a
/// blocked prompt (case C20); an `error` object in a 2xx body is classified by
/// [`embedded_error`].
pub(crate) fn decode(reply: &Reply, key: Option<&ApiKey>) -> Result<LlmResponse, LlmError> {
    let wire: WireResponse = serde_json::from_slice(&reply.body)
        .map_err(|e| undecodable("gemini", reply.status, &reply.headers, &reply.body, &e, key))?;
    let usage = wire.usage_metadata.map_or_else(TokenUsage::default, |u| {
        let cached = u.cached_content_token_count.unwrap_or(0);
        TokenUsage::new(
            u.prompt_token_count.unwrap_or(0) + u.tool_use_prompt_token_count.unwrap_or(0),
            u.candidates_token_count.unwrap_or(0) + u.thoughts_token_count.unwrap_or(0),
        )
        .with_cache(cached, 0)
    });
    let request_id = request_id(&reply.headers).or(wire.response_id);
    let candidate = wire.candidates.and_then(|c| c.into_iter().next());
    let Some(candidate) = candidate else {
        if let Some(reason) = wire.prompt_feedback.and_then(|f| f.block_reason) {
            // The prompt itself was blocked: no candidate at all.
            let mut response =
                LlmResponse::text(format!("Gemini blocked the prompt (blockReason {reason})"))
                    .with_stop_reason(StopReason::ContentFilter)
                    .with_usage(usage);
            response.model = wire.model_version;
            response.request_id = request_id;
            return Ok(response);
        }
        if let Some(error) = wire.error.and_then(ErrorBody::from_value) {
            return Err(embedded_error(
                "gemini",
                reply.status,
                &reply.headers,
                error,
                key,
            ));
        }
        let missing = <serde_json::Error as serde::de::Error>::missing_field("candidates");
        return Err(undecodable(
            "gemini",
            reply.status,
            &reply.headers,
            &reply.body,
            &missing,
            key,
        ));
    };
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
    for part in parts {
        if let Some(call) = part.function_call {
            let mut call = ToolCall::from_wire(
                call.id.unwrap_or_default(),
                call.name.unwrap_or_default(),
                call.args.as_ref(),
            );
            call.thought_signature = part.thought_signature;
            tool_calls.push(call);
        } else if let Some(t) = part.text {
            if part.thought {
                reasoning.push_str(&t);
            } else {
                text.push_str(&t);
            }
        }
    }
    fill_ids(&mut tool_calls);
    let finish = candidate.finish_reason.as_deref();
    let stop_reason = stop_reason(finish, !tool_calls.is_empty());
    if stop_reason == StopReason::ContentFilter && text.trim().is_empty() {
        text = candidate.finish_message.unwrap_or_else(|| {
            format!(
                "Gemini stopped the response (finishReason {})",
                finish.unwrap_or("")
            )
        });
    }
    let mut response = LlmResponse::tool_calls(tool_calls)
        .with_text(text)
        .with_stop_reason(stop_reason)
        .with_usage(usage);
    response.model = wire.model_version;
    response.reasoning = reasoning;
    response.request_id = request_id;
    Ok(response)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::message::ToolResult;
    use serde_json::json;

    fn body(request: &LlmRequest) -> Value {
        serde_json::from_slice(&encode(request, &WireCache::default()).unwrap()).unwrap()
    }

    fn client(base: Option<&str>) -> GeminiClient {
        let mut options = ProviderOptions::default().with_api_key("k-123456");
        if let Some(base) = base {
            options = options.with_base_url(base);
        }
        GeminiClient::new(&options).unwrap()
    }

    #[test]
    fn endpoints_take_the_model_and_never_the_key() {
        let c = client(None);
        assert_eq!(
            c.endpoint("gemini-2.5-flash").unwrap().as_str(),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            c.endpoint("models/gemini-3-pro-preview").unwrap().as_str(),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-3-pro-preview:generateContent"
        );
        // A slash or a query in the name cannot change the path.
        let odd = c.endpoint("gemini-x/../../v1/y?key=1").unwrap();
        assert!(odd.query().is_none(), "{odd}");
        assert!(
            odd.path().starts_with("/v1beta/models/gemini-x%2F"),
            "{odd}"
        );
        assert!(c.endpoint(" ").is_err());
        let v1 = client(Some("http://127.0.0.1:9/v1/"));
        assert_eq!(
            v1.endpoint("gemini-2.0-flash").unwrap().as_str(),
            "http://127.0.0.1:9/v1/models/gemini-2.0-flash:generateContent"
        );
    }

    #[test]
    fn versions_decide_schema_with_tools() {
        assert_eq!(major_version("gemini-2.5-flash"), Some(2));
        assert_eq!(major_version("models/gemini-3-pro-preview"), Some(3));
        assert_eq!(major_version("gemini-flash-latest"), None);
        assert!(!schema_with_tools("gemini-2.5-pro"));
        assert!(!schema_with_tools("gemini-1.5-flash"));
        assert!(schema_with_tools("gemini-3.1-flash"));
        assert!(schema_with_tools("gemini-flash-latest"));
    }

    #[test]
    fn history_is_contents_with_signed_calls_and_responses_first() {
        let request = LlmRequest::new("gemini-3-pro-preview")
            .with_system("sys")
            .with_message(Message::user("hi"))
            .with_message(Message::assistant(
                "checking",
                vec![
                    ToolCall::new("fc_1", "a", json!({"x": 1})).with_thought_signature("c2lnMQ=="),
                    ToolCall::new("fc_2", "b", json!("not an object")),
                ],
            ))
            .with_message(Message::tool_results(vec![
                ToolResult::error("fc_2", "b", "boom"),
                ToolResult::ok("fc_1", "a", "one"),
            ]))
            .with_message(Message::user("now submit"))
            .with_message(Message::assistant(
                "",
                vec![ToolCall::new("fc_3", "a", json!({}))],
            ))
            .with_message(Message::tool_results(vec![ToolResult::ok(
                "fc_3", "a", "two",
            )]))
            .with_message(Message::assistant("", vec![]));
        let b = body(&request);
        assert_eq!(b["systemInstruction"], json!({"parts": [{"text": "sys"}]}));
        assert_eq!(
            b["contents"],
            json!([
                {"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [
                    {"text": "checking"},
                    {"functionCall": {"id": "fc_1", "name": "a", "args": {"x": 1}}, "thoughtSignature": "c2lnMQ=="},
                    {"functionCall": {"id": "fc_2", "name": "b", "args": {}}}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"id": "fc_1", "name": "a", "response": {"output": "one"}}},
                    {"functionResponse": {"id": "fc_2", "name": "b", "response": {"error": "boom"}}},
                    {"text": "now submit"}
                ]},
                {"role": "model", "parts": [
                    {"functionCall": {"id": "fc_3", "name": "a", "args": {}}, "thoughtSignature": UNSIGNED_CALL}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"id": "fc_3", "name": "a", "response": {"output": "two"}}}
                ]},
                {"role": "model", "parts": [{"text": "(empty)"}]}
            ])
        );
        assert!(b.get("tools").is_none() && b.get("toolConfig").is_none());
        assert_eq!(b["generationConfig"], json!({"maxOutputTokens": 4096}));
    }

    #[test]
    fn tool_config_declarations_and_temperature_are_mapped() {
        let tools = vec![
            ToolDefinition::new(
                "lookup",
                "Look up.",
                json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false}),
            ),
            ToolDefinition::new("ping", "", json!({"type": "object", "properties": {}})),
        ];
        let base = LlmRequest::new("gemini-2.5-flash")
            .with_message(Message::user("x"))
            .with_tools(tools)
            .with_temperature(2.7);
        let cases = [
            (ToolChoice::Auto, json!({"mode": "AUTO"})),
            (ToolChoice::Required, json!({"mode": "ANY"})),
            (
                ToolChoice::Tool("lookup".into()),
                json!({"mode": "ANY", "allowedFunctionNames": ["lookup"]}),
            ),
            (ToolChoice::None, json!({"mode": "NONE"})),
        ];
        for (choice, wire) in cases {
            let b = body(&base.clone().with_tool_choice(choice));
            assert_eq!(b["toolConfig"], json!({"functionCallingConfig": wire}));
            assert_eq!(b["generationConfig"]["temperature"], json!(2.0));
            assert_eq!(
                b["tools"],
                json!([{"functionDeclarations": [
                    {"name": "lookup", "description": "Look up.", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
                    {"name": "ping"}
                ]}])
            );
        }
    }

    #[test]
    fn finish_reasons_map_to_stop_reasons() {
        assert_eq!(stop_reason(Some("STOP"), false), StopReason::EndTurn);
        assert_eq!(stop_reason(None, true), StopReason::ToolUse);
        assert_eq!(stop_reason(Some("MAX_TOKENS"), true), StopReason::MaxTokens);
        for filter in [
            "SAFETY",
            "RECITATION",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "LANGUAGE",
        ] {
            assert_eq!(
                stop_reason(Some(filter), false),
                StopReason::ContentFilter,
                "{filter}"
            );
        }
        assert_eq!(
            stop_reason(Some("MALFORMED_FUNCTION_CALL"), false),
            StopReason::Other("malformed_function_call".into())
        );
        assert_eq!(
            stop_reason(Some("OTHER"), false),
            StopReason::Other("other".into())
        );
    }
}
