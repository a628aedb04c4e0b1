//! The Responses API wire format: the request body a [`LlmRequest`] is encoded into,
//! and the `response` object decoded into an [`LlmResponse`]. Source: Responses API
//! reference, "Create a model response" and "The response object"
//! (<https://platform.openai.com/docs/api-reference/responses>).

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::llm::{
    LlmError, LlmRequest, LlmResponse, RefusalReason, StopReason, TokenUsage, ToolChoice,
};
use crate::message::ToolCall;
use crate::providers::ApiKey;
use crate::providers::classify::{ErrorBody, embedded_error, request_id, undecodable};
use crate::providers::encoded::{WireCache, raw, request_body};
use crate::providers::history::{self, Turn};
use crate::providers::http::Reply;
use crate::providers::normalize::fill_ids;
use crate::schema;
use crate::tool::ToolDefinition;

use super::super::parts;
use super::super::wire::{accepts_temperature, cache_fields, strict_format};

/// The `include` value that returns each reasoning item's `encrypted_content`, so a
/// stateless (`store: false`) conversation can send it back.
pub(super) const ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<Input<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a RawValue>,
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    /// `reasoning: {"effort": ..}` (source: Responses API reference, `reasoning`,
    /// <https://platform.openai.com/docs/api-reference/responses/create>).
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Value>,
    store: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    include: Option<[&'static str; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_response_id: Option<&'a str>,
    /// `prompt_cache_key` and `prompt_cache_retention`, as on Chat Completions (see
    /// `cache_fields`; source: Responses API reference,
    /// <https://platform.openai.com/docs/api-reference/responses/create>).
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'static str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

/// One item of `input`.
#[derive(Serialize)]
#[serde(untagged)]
enum Input<'a> {
    Item(Item<'a>),
    /// A `reasoning` item, exactly as the API returned it.
    Raw(&'a Value),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item<'a> {
    Message {
        role: &'static str,
        content: Content<'a>,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: String,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: Content<'a>,
    },
}

/// A message's content or a call's output: a string, or input content parts when the
/// turn or the result has parts (see [`parts::responses_part`]); text alone keeps the
/// string.
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Value>),
}

impl<'a> Content<'a> {
    fn text(text: &'a str) -> Self {
        Content::Text(Cow::Borrowed(text))
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireChoice<'a> {
    Mode(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        name: &'a str,
    },
}

/// The JSON body for a request. `store`: `store: true` and `previous_response_id`
/// (see [`input`]); else `store: false` with `include: ["reasoning.encrypted_content"]`.
/// The tools and the output format come from `cache`, encoded once per tool set and
/// output spec.
///
/// # Errors
/// A permanent [`LlmError`] if serialization fails (it does not for these types).
pub(crate) fn encode_body(
    request: &LlmRequest,
    store: bool,
    cache: &WireCache,
    stream: bool,
) -> Result<Vec<u8>, LlmError> {
    let failed = |e: serde_json::Error| {
        LlmError::permanent(format!("cannot serialize the responses request: {e}"))
    };
    // With `tool_search` (see `search`), encoded per request: which functions are
    // deferred follows the run's reveals.
    let native = (request.native_tool_search.as_deref()).filter(|_| !request.tools.is_empty());
    let tools = match native {
        Some(native) => Some(Arc::from(
            raw(&search::tools(request, native, wire_tool, reasoning_of)).map_err(failed)?,
        )),
        None if request.tools.is_empty() => None,
        None => Some(
            cache
                .tools
                .get_or_encode(&request.tools, |defs| raw(&wire_tools(defs)))
                .map_err(failed)?,
        ),
    };
    let text = match request.output.as_ref().filter(|spec| spec.is_native()) {
        Some(spec) => Some(
            cache
                .output
                .get_or_encode(spec, |spec| {
                    let mut format = Map::new();
                    format.insert("type".to_owned(), Value::String("json_schema".to_owned()));
                    format.extend(strict_format(spec));
                    raw(&json!({ "format": format }))
                })
                .map_err(failed)?,
        ),
        None => None,
    };
    let (input, previous_response_id) = input(&request.messages, store, native.is_some())?;
    let (cache_key, retention) = cache_fields(request);
    let body = Body {
        model: &request.model,
        instructions: request.system.as_deref().filter(|s| !s.trim().is_empty()),
        input,
        tools: tools.as_deref(),
        tool_choice: tool_choice(&request.tool_choice, &request.tools),
        text: text.as_deref(),
        max_output_tokens: request.max_tokens,
        temperature: request
            .temperature
            .filter(|_| accepts_temperature(&request.model)),
        reasoning: request
            .reasoning
            .and_then(|r| r.effort)
            .map(|e| json!({"effort": e.as_str()})),
        store,
        include: (!store).then_some([ENCRYPTED_REASONING]),
        previous_response_id,
        prompt_cache_key: cache_key,
        prompt_cache_retention: retention,
        stream,
    };
    request_body(&body, request, None).map_err(failed)
}

/// The `tools` array, in the Responses API's flat shape
/// `{"type": "function", "name", "description", "parameters", "strict"}`: parameters
/// through [`schema::for_openai`] and `strict: false` (the API's default is `true`,
/// which would change what optional parameters mean; the arguments are validated by
/// the runner, as on Chat Completions).
fn wire_tools(defs: &[ToolDefinition]) -> Vec<Value> {
    defs.iter().map(wire_tool).collect()
}

/// One function of [`wire_tools`].
fn wire_tool(def: &ToolDefinition) -> Value {
    let mut tool = Map::new();
    tool.insert("type".to_owned(), Value::String("function".to_owned()));
    tool.insert("name".to_owned(), Value::String(def.name.clone()));
    if !def.description.is_empty() {
        tool.insert(
            "description".to_owned(),
            Value::String(def.description.clone()),
        );
    }
    tool.insert("parameters".to_owned(), schema::for_openai(&def.parameters));
    tool.insert("strict".to_owned(), Value::Bool(false));
    Value::Object(tool)
}

fn tool_choice<'a>(choice: &'a ToolChoice, tools: &[ToolDefinition]) -> Option<WireChoice<'a>> {
    if tools.is_empty() {
        return None;
    }
    Some(match choice {
        ToolChoice::Required => WireChoice::Mode("required"),
        ToolChoice::None => WireChoice::Mode("none"),
        ToolChoice::Tool(name) => WireChoice::Function {
            kind: "function",
            name,
        },
        _ => WireChoice::Mode("auto"),
    })
}

/// The provider data of a call: `{"reasoning": [..], "response_id": ".."}`.
fn data_of(call: &ToolCall) -> Option<&Map<String, Value>> {
    call.provider_data.as_ref().and_then(Value::as_object)
}

/// The reasoning items kept with a call, to send back ahead of it (tool search items
/// among them, see [`search`]).
fn reasoning_of(call: &ToolCall) -> &[Value] {
    data_of(call)
        .and_then(|d| d.get("reasoning"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The id of the response a turn came from (kept with its first call).
fn response_id_of(calls: &[ToolCall]) -> Option<&str> {
    data_of(calls.first()?)?
        .get("response_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
}

/// The `input` items of the conversation, and the `previous_response_id` to send.
///
/// Stateless: every turn, every assistant turn with its text as an assistant message
/// and each call as a `function_call` item preceded by the reasoning items that came
/// before it; each answer as a `function_call_output` (every call answered, see
/// [`history::turns`]). With `store`, when a model turn holds the id of its response,
/// only what follows the last such turn is sent, with that id as
/// `previous_response_id` (the stored response holds the rest).
///
/// A user turn with parts has its content as input parts, its text first; an answer
/// with parts has its `output` as input parts (`input_text` with the result's text,
/// then the parts), which the API takes for function call outputs (source: Responses
/// API reference, `function_call_output.output`, a string or a list of `input_text`,
/// `input_image` and `input_file`).
///
/// # Errors
/// A permanent [`LlmError`] for a part the API has no form for (see
/// [`parts::responses_part`]).
fn input(
    messages: &[crate::message::Message],
    store: bool,
    searching: bool,
) -> Result<(Vec<Input<'_>>, Option<&str>), LlmError> {
    // Tool search items go back only in a request that has `tool_search`.
    let ahead = |call| {
        reasoning_of(call)
            .iter()
            .filter(move |item| searching || !search::is_search_item(item))
            .map(Input::Raw)
    };
    let turns = history::turns(messages);
    let mut start = 0;
    let mut previous = None;
    if store {
        for (at, turn) in turns.iter().enumerate().rev() {
            if let Turn::Assistant { calls, .. } = turn
                && let Some(id) = response_id_of(calls)
            {
                start = at + 1;
                previous = Some(id);
                break;
            }
        }
    }
    let mut out = Vec::with_capacity(turns.len() + 2);
    for turn in turns.into_iter().skip(start) {
        match turn {
            Turn::User { text, parts: given } => {
                let content = if given.is_empty() {
                    Content::text(text)
                } else {
                    Content::Parts(parts::user_content(
                        text,
                        given,
                        "input_text",
                        parts::responses_part,
                    )?)
                };
                out.push(Input::Item(Item::Message {
                    role: "user",
                    content,
                }));
            }
            Turn::Assistant { text, calls } => {
                if let Some(first) = calls.first() {
                    out.extend(ahead(first));
                }
                if !text.trim().is_empty() || calls.is_empty() {
                    out.push(Input::Item(Item::Message {
                        role: "assistant",
                        content: Content::text(history::non_empty(text)),
                    }));
                }
                for (i, call) in calls.iter().enumerate() {
                    if i > 0 {
                        out.extend(ahead(call));
                    }
                    out.push(Input::Item(function_call(call)));
                }
            }
            // Another provider's paused turn: its text, as an assistant turn.
            Turn::Paused { text, .. } => out.push(Input::Item(Item::Message {
                role: "assistant",
                content: Content::text(history::non_empty(text)),
            })),
            Turn::Results(answers) => {
                for a in answers {
                    let text = if a.is_error {
                        Cow::Owned(format!("Error: {}", a.content))
                    } else {
                        Cow::Borrowed(a.content)
                    };
                    let output = if a.parts.is_empty() {
                        Content::Text(text)
                    } else {
                        let mut items = Vec::with_capacity(a.parts.len() + 1);
                        items.push(json!({"type": "input_text", "text": text}));
                        for part in a.parts {
                            items.push(parts::responses_part(part)?);
                        }
                        Content::Parts(items)
                    };
                    out.push(Input::Item(Item::FunctionCallOutput {
                        call_id: a.call_id,
                        output,
                    }));
                }
            }
        }
    }
    Ok((out, previous))
}

fn function_call(call: &ToolCall) -> Item<'_> {
    let arguments = match &call.arguments {
        object @ Value::Object(_) => object.to_string(),
        _ => "{}".to_owned(),
    };
    Item::FunctionCall {
        call_id: &call.id,
        name: &call.name,
        arguments,
    }
}

// ---- response ----

/// The response object, with its `output` items kept as JSON (reasoning items go back
/// unchanged).
#[derive(Default, Deserialize)]
pub(crate) struct WireResponse {
    pub(super) id: Option<String>,
    pub(super) model: Option<String>,
    pub(super) status: Option<String>,
    pub(super) output: Option<Vec<Value>>,
    pub(super) usage: Option<WireUsage>,
    pub(super) error: Option<Value>,
    pub(super) incomplete_details: Option<Value>,
}

#[derive(Default, Deserialize)]
pub(crate) struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<Details>,
    output_tokens_details: Option<Details>,
}

#[derive(Default, Deserialize)]
struct Details {
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    /// The counts as [`TokenUsage`]: `input_tokens_details.cached_tokens` as cache
    /// reads; `output_tokens` includes the reasoning tokens
    /// (`output_tokens_details.reasoning_tokens`), which are billed as output.
    pub(crate) fn tokens(&self) -> TokenUsage {
        let cached = self
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        TokenUsage::new(
            self.input_tokens.unwrap_or(0),
            self.output_tokens.unwrap_or(0),
        )
        .with_cache(cached, 0)
    }

    fn reasoning_tokens(&self) -> u64 {
        self.output_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or(0)
    }
}

/// Normalizes a 2xx reply.
///
/// # Errors
/// Transient when the body is not JSON, is cut off, or has no `output` (unless it is
/// `incomplete`: see [`decode_wire`]); an `error`
/// object (a `failed` response, or an error event of a stream) is classified by
/// [`embedded_error`].
pub(crate) fn decode(
    reply: &Reply,
    provider: &str,
    key: Option<&ApiKey>,
) -> Result<LlmResponse, LlmError> {
    let wire: WireResponse = serde_json::from_slice(&reply.body)
        .map_err(|e| undecodable(provider, reply.status, &reply.headers, &reply.body, &e, key))?;
    decode_wire(wire, reply, provider, key)
}

/// A string field of a JSON object.
fn text_of<'v>(value: &'v Value, field: &str) -> Option<&'v str> {
    value.get(field).and_then(Value::as_str)
}

/// Normalizes a response object already read (a stream's final `response`; `reply`
/// then has an empty body).
///
/// `output` items: `message` (its `output_text` parts joined as the text, `refusal`
/// parts as a refusal), `function_call` (`call_id`, `name`, `arguments` as a JSON
/// string), `reasoning` (kept with the next call, its `summary` texts as
/// [`LlmResponse::reasoning`]); other item types are skipped. `status`: `incomplete`
/// with `incomplete_details.reason` `max_output_tokens` is
/// [`StopReason::MaxTokens`] and `content_filter` [`StopReason::ContentFilter`], as
/// Chat Completions' `length` and `content_filter`, with or without an `output` list
/// (none: an empty turn; C59); `failed` is an error.
///
/// # Errors
/// As [`decode`].
pub(super) fn decode_wire(
    wire: WireResponse,
    reply: &Reply,
    provider: &str,
    key: Option<&ApiKey>,
) -> Result<LlmResponse, LlmError> {
    let usage = wire
        .usage
        .as_ref()
        .map_or_else(TokenUsage::default, WireUsage::tokens);
    let failed = wire.status.as_deref() == Some("failed");
    let incomplete = wire.status.as_deref() == Some("incomplete");
    // An incomplete response may have no `output` at all (the cap was reached before
    // any item was finished): an empty turn cut by its cap, not a garbled body (C59).
    let output = match wire.output {
        Some(output) if !failed => output,
        None if incomplete && wire.error.as_ref().is_none_or(Value::is_null) => Vec::new(),
        _ => return Err(failure(wire.error, reply, provider, usage, key)),
    };
    let mut text = String::new();
    let mut refusal = String::new();
    let mut reasoning = String::new();
    let mut pending: Vec<Value> = Vec::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut found = crate::llm::ProviderSearches::default();
    for item in output {
        match text_of(&item, "type") {
            Some("message") => {
                let parts = item.get("content").and_then(Value::as_array);
                for part in parts.into_iter().flatten() {
                    match text_of(part, "type") {
                        Some("output_text") => text.push_str(text_of(part, "text").unwrap_or("")),
                        Some("refusal") => {
                            refusal.push_str(text_of(part, "refusal").unwrap_or(""));
                        }
                        _ => {}
                    }
                }
            }
            Some("function_call") => {
                let id = text_of(&item, "call_id").or_else(|| text_of(&item, "id"));
                let name = text_of(&item, "name").unwrap_or("");
                let mut call = ToolCall::from_wire(id.unwrap_or(""), name, item.get("arguments"));
                let mut data = Map::new();
                if calls.is_empty()
                    && let Some(id) = &wire.id
                {
                    data.insert("response_id".to_owned(), Value::String(id.clone()));
                }
                if !pending.is_empty() {
                    data.insert(
                        "reasoning".to_owned(),
                        Value::Array(std::mem::take(&mut pending)),
                    );
                }
                if !data.is_empty() {
                    call.provider_data = Some(Value::Object(data));
                }
                calls.push(call);
            }
            // A provider tool search: goes back ahead of the next call, as reasoning.
            Some("tool_search_call" | "tool_search_output") => {
                found.searches += u32::from(text_of(&item, "type") == Some("tool_search_call"));
                found
                    .revealed
                    .extend(search::loaded(&item).into_iter().map(str::to_owned));
                pending.push(item);
            }
            Some("reasoning") => {
                let summary = item.get("summary").and_then(Value::as_array);
                for part in summary.into_iter().flatten() {
                    reasoning.push_str(text_of(part, "text").unwrap_or(""));
                }
                pending.push(item);
            }
            _ => {}
        }
    }
    // Reasoning after the last call has no item to go back ahead of: the API rejects
    // a reasoning item without its following item, so it is not kept.
    fill_ids(&mut calls);
    let mut stop_reason = match wire.status.as_deref() {
        Some("incomplete") => {
            let reason = wire
                .incomplete_details
                .as_ref()
                .and_then(|d| text_of(d, "reason"))
                .unwrap_or("incomplete");
            match reason {
                "max_output_tokens" => StopReason::MaxTokens,
                "content_filter" => StopReason::ContentFilter,
                other => StopReason::Other(other.to_owned()),
            }
        }
        _ if !calls.is_empty() => StopReason::ToolUse,
        Some("completed") | None => StopReason::EndTurn,
        Some(other) => StopReason::Other(other.to_owned()),
    };
    // A refusal is its own stop reason, as on Chat Completions; its text is the
    // answer's text when there is no other.
    // The refusal text is the model's explanation: the refusal's reason (C58).
    let mut reason = None;
    if calls.is_empty() && !refusal.trim().is_empty() {
        if text.trim().is_empty() {
            text = refusal.clone();
        }
        reason = RefusalReason::new().with_explanation(refusal).non_empty();
        stop_reason = StopReason::Refusal;
    }
    if let Some(usage) = &wire.usage {
        tracing::debug!(
            reasoning_tokens = usage.reasoning_tokens(),
            "responses usage"
        );
    }
    let mut response = LlmResponse::tool_calls(calls)
        .with_text(text)
        .with_stop_reason(stop_reason)
        .with_usage(usage);
    response.model = wire.model;
    response.reasoning = reasoning;
    response.provider_searches = (!found.is_empty()).then(|| Box::new(found));
    response.refusal = reason;
    response.request_id = request_id(&reply.headers).or(wire.id.filter(|id| !id.is_empty()));
    Ok(response)
}

/// The failure for a response without output: a `failed` response (its `error`
/// object, e.g. `{"code": "server_error", "message"}`), or the `{"error": ..}` body an
/// error event of a stream becomes, classified by [`embedded_error`]; without an error
/// object, an undecodable body (transient). The usage the body reports is kept.
fn failure(
    error: Option<Value>,
    reply: &Reply,
    provider: &str,
    usage: TokenUsage,
    key: Option<&ApiKey>,
) -> LlmError {
    let error = match error.and_then(ErrorBody::from_value) {
        Some(error) => embedded_error(provider, reply.status, &reply.headers, error, key),
        None => {
            let missing = <serde_json::Error as serde::de::Error>::missing_field("output");
            undecodable(
                provider,
                reply.status,
                &reply.headers,
                &reply.body,
                &missing,
                key,
            )
        }
    };
    if usage.input_tokens > 0 || usage.output_tokens > 0 {
        error.with_usage(usage)
    } else {
        error
    }
}

mod search;
#[cfg(test)]
mod tests;
