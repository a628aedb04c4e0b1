//! The Chat Completions wire format: the request body a [`LlmRequest`] is encoded into
//! (the reply is decoded in `response.rs`).

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::llm::{LlmError, LlmRequest, OutputSpec, ToolChoice};
use crate::message::{Message, ToolCall};
use crate::output::PromptCacheTtl;
use crate::providers::encoded::{WireCache, raw, request_body};
use crate::providers::history::{self, Turn};
use crate::schema;
use crate::tool::ToolDefinition;

use super::parts;

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<&'a RawValue>,
    /// `reasoning_effort` (reasoning models; source: Chat Completions reference,
    /// <https://platform.openai.com/docs/api-reference/chat/create>).
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    /// `prompt_cache_key` and `prompt_cache_retention` (see [`cache_fields`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'static str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

/// `stream_options`: the usage of a streamed call comes in a last chunk.
#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

/// A user message's content: a string, or content parts when the turn has parts (see
/// [`parts::chat_part`]); a text-only turn keeps the string.
#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<Value>),
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    parameters: Value,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireChoice<'a> {
    Mode(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: NamedFunction<'a>,
    },
}

#[derive(Serialize)]
struct NamedFunction<'a> {
    name: &'a str,
}

/// The JSON body for a request (`compatible`: the quirks of compatible servers). The
/// tool definitions and the output schema come from `cache`, encoded once per tool set
/// and output spec.
///
/// # Errors
/// A permanent [`LlmError`] if serialization fails (it does not for these types).
#[cfg(test)]
pub(crate) fn encode(
    request: &LlmRequest,
    compatible: bool,
    cache: &WireCache,
) -> Result<Vec<u8>, LlmError> {
    encode_body(request, compatible, cache, false)
}

/// [`encode`], with `stream: true` and `stream_options.include_usage` when `stream`.
///
/// # Errors
/// As [`encode`].
pub(crate) fn encode_body(
    request: &LlmRequest,
    compatible: bool,
    cache: &WireCache,
    stream: bool,
) -> Result<Vec<u8>, LlmError> {
    let failed = |e: serde_json::Error| {
        LlmError::permanent(format!("cannot serialize the chat request: {e}"))
    };
    let tools = if request.tools.is_empty() {
        None
    } else {
        Some(
            cache
                .tools
                .get_or_encode(&request.tools, |defs| raw(&wire_tools(defs, compatible)))
                .map_err(failed)?,
        )
    };
    let response_format = match request.output.as_ref().filter(|spec| spec.is_native()) {
        Some(spec) => Some(
            cache
                .output
                .get_or_encode(spec, |spec| raw(&response_format(spec, compatible)))
                .map_err(failed)?,
        ),
        None => None,
    };
    let (cache_key, retention) = cache_fields(request);
    let body = Body {
        model: &request.model,
        messages: messages(request.system.as_deref(), &request.messages)?,
        tools: tools.as_deref(),
        tool_choice: tool_choice(&request.tool_choice, &request.tools, compatible),
        max_completion_tokens: (!compatible).then_some(request.max_tokens),
        max_tokens: compatible.then_some(request.max_tokens),
        temperature: request
            .temperature
            .filter(|_| compatible || accepts_temperature(&request.model)),
        response_format: response_format.as_deref(),
        reasoning_effort: request
            .reasoning
            .and_then(|r| r.effort)
            .filter(|_| !compatible)
            .map(crate::llm::Effort::as_str),
        prompt_cache_key: cache_key.filter(|_| !compatible),
        prompt_cache_retention: retention.filter(|_| !compatible),
        stream,
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
    };
    let fixed = tools.as_ref().map_or(0, |t| t.get().len())
        + response_format.as_ref().map_or(0, |f| f.get().len());
    request_body(&body, request, Some(fixed)).map_err(failed)
}

/// The prompt-cache TTLs OpenAI and Azure OpenAI take: `FiveMinutes` as
/// `prompt_cache_retention: "in_memory"` (kept 5 to 10 minutes after its last use, at
/// most an hour) and `TwentyFourHours` as `"24h"` (extended retention, on the models the
/// guide lists). Sources: <https://platform.openai.com/docs/guides/prompt-caching#prompt-cache-retention>,
/// <https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/prompt-caching>
/// ("set the `prompt_cache_retention` parameter on the Responses or Chat Completions
/// API").
pub(crate) const CACHE_TTLS: &[PromptCacheTtl] =
    &[PromptCacheTtl::FiveMinutes, PromptCacheTtl::TwentyFourHours];

/// The prompt-cache fields of `request` on OpenAI's two APIs: `prompt_cache_key` (the
/// config's key, combined with the prefix hash to route requests to a machine that holds
/// the prefix) and `prompt_cache_retention` (the TTL), both only while
/// `request.prompt_cache` is on: off, the request carries neither (OpenAI still caches
/// prompts of 1,024 tokens or more by itself; source:
/// <https://platform.openai.com/docs/guides/prompt-caching>).
pub(crate) fn cache_fields(request: &LlmRequest) -> (Option<&str>, Option<&'static str>) {
    if !request.prompt_cache {
        return (None, None);
    }
    let retention = match request.prompt_cache_ttl {
        Some(PromptCacheTtl::FiveMinutes) => Some("in_memory"),
        Some(PromptCacheTtl::TwentyFourHours) => Some("24h"),
        _ => None,
    };
    (request.prompt_cache_key.as_deref(), retention)
}

/// The `tools` array: each definition with its parameters through [`schema::for_openai`]
/// (for compatible servers [`schema::for_compatible_output`], whose pattern shorthands
/// a grammar converter can enforce: llama.cpp turns tool parameters into a grammar too,
/// and would accept any string for `^NW-\d{5}$`).
fn wire_tools(defs: &[ToolDefinition], compatible: bool) -> Vec<WireTool<'_>> {
    defs.iter()
        .map(|def| WireTool {
            kind: "function",
            function: WireToolFunction {
                name: &def.name,
                description: &def.description,
                parameters: if compatible {
                    schema::for_compatible_output(&def.parameters)
                } else {
                    schema::for_openai(&def.parameters)
                },
            },
        })
        .collect()
}

/// The `response_format` of native output mode:
/// `{"type": "json_schema", "json_schema": {"name", "description", "schema", "strict"}}`
/// (source: Chat Completions reference, `response_format`,
/// <https://platform.openai.com/docs/api-reference/chat/create>).
///
/// OpenAI: strict whenever the schema qualifies after [`schema::for_openai_strict`]
/// (no open maps, tuples or `serde_json::Value` fields), else the non-strict schema.
/// Compatible servers get the full canonical schema (llama.cpp turns `maxLength`,
/// `minimum`, `enum` and `pattern` into its grammar), with the pattern shorthands its
/// grammar converter rejects spelled out ([`schema::for_compatible_output`]), and no
/// `strict` flag.
fn response_format(spec: &OutputSpec, compatible: bool) -> Value {
    let format = if compatible {
        let mut format = named(spec);
        format.insert(
            "schema".to_owned(),
            schema::for_compatible_output(&spec.schema),
        );
        format
    } else {
        strict_format(spec)
    };
    serde_json::json!({"type": "json_schema", "json_schema": format})
}

/// `name`, and `description` when there is one, of a JSON schema output format.
fn named(spec: &OutputSpec) -> serde_json::Map<String, Value> {
    let mut format = serde_json::Map::new();
    format.insert("name".to_owned(), Value::String(spec.name.clone()));
    if !spec.description.trim().is_empty() {
        format.insert(
            "description".to_owned(),
            Value::String(spec.description.clone()),
        );
    }
    format
}

/// OpenAI's JSON schema output format, `{"name", "description", "schema", "strict"}`
/// (the Chat Completions `response_format.json_schema` and the Responses
/// `text.format`, which adds `"type": "json_schema"` beside them): strict whenever
/// the schema qualifies after [`schema::for_openai_strict`], else the non-strict
/// schema of [`schema::for_openai`] with `strict: false`.
pub(super) fn strict_format(spec: &OutputSpec) -> serde_json::Map<String, Value> {
    let mut format = named(spec);
    let strict = schema::for_openai_strict(&spec.schema);
    if schema::openai_strict_violations(&strict).is_empty() {
        format.insert("schema".to_owned(), strict);
        format.insert("strict".to_owned(), Value::Bool(true));
    } else {
        format.insert("schema".to_owned(), schema::for_openai(&spec.schema));
        format.insert("strict".to_owned(), Value::Bool(false));
    }
    format
}

/// Whether an OpenAI model takes a `temperature`: the reasoning models (o1, o3, o4 and
/// the gpt-5 family, except its `-chat` models) reject any value but the default with a
/// 400, so the adapter leaves it out for them (source: OpenAI's reasoning guide,
/// <https://platform.openai.com/docs/guides/reasoning>, "unsupported parameters").
/// Whether OpenAI can send `reasoning` for `model`: a reasoning model (o1, o3, o4,
/// gpt-5 except `-chat`), an effort level (OpenAI takes no token budget), `minimal` on
/// gpt-5 models only (source: the reasoning guide,
/// <https://platform.openai.com/docs/guides/reasoning>).
///
/// # Errors
/// Why it cannot.
pub(crate) fn check_reasoning(
    model: &str,
    reasoning: &crate::llm::Reasoning,
) -> Result<(), &'static str> {
    if accepts_temperature(model) {
        return Err("the model is not a reasoning model (o1, o3, o4, gpt-5)");
    }
    match reasoning.effort {
        None => Err("OpenAI takes an effort level (Effort::Low, Medium, High), not a token budget"),
        Some(crate::llm::Effort::Minimal) if !model.starts_with("gpt-5") => {
            Err("Effort::Minimal is for gpt-5 models only")
        }
        Some(_) => Ok(()),
    }
}

pub(super) fn accepts_temperature(model: &str) -> bool {
    let reasoning = ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|p| model.starts_with(p))
        && !model.contains("-chat");
    !reasoning
}

fn tool_choice<'a>(
    choice: &'a ToolChoice,
    tools: &[ToolDefinition],
    compatible: bool,
) -> Option<WireChoice<'a>> {
    if tools.is_empty() {
        return None;
    }
    Some(match choice {
        ToolChoice::Required => WireChoice::Mode("required"),
        ToolChoice::None => WireChoice::Mode("none"),
        ToolChoice::Tool(name) if compatible && tools.len() == 1 && tools[0].name == *name => {
            WireChoice::Mode("required")
        }
        ToolChoice::Tool(name) => WireChoice::Function {
            kind: "function",
            function: NamedFunction { name },
        },
        _ => WireChoice::Mode("auto"),
    })
}

/// The `messages` array.
///
/// # Errors
/// A permanent [`LlmError`] for a part Chat Completions has no form for (see
/// [`parts::chat_part`], [`parts::chat_tool_text`]).
fn messages<'a>(
    system: Option<&'a str>,
    history: &'a [Message],
) -> Result<Vec<WireMessage<'a>>, LlmError> {
    let turns = history::turns(history);
    let mut out = Vec::with_capacity(turns.len() + 2);
    if let Some(system) = system.filter(|s| !s.trim().is_empty()) {
        out.push(WireMessage::System { content: system });
    }
    for turn in turns {
        match turn {
            Turn::User { text, parts: given } => {
                let content = if given.is_empty() {
                    UserContent::Text(text)
                } else {
                    UserContent::Parts(parts::user_content(text, given, "text", parts::chat_part)?)
                };
                out.push(WireMessage::User { content });
            }
            Turn::Assistant { text, calls } => {
                let content = if !text.trim().is_empty() {
                    Some(text)
                } else if calls.is_empty() {
                    Some(history::EMPTY_TURN)
                } else {
                    None
                };
                out.push(WireMessage::Assistant {
                    content,
                    tool_calls: calls.iter().map(wire_call).collect(),
                });
            }
            // Another provider's paused turn: its text, as an assistant turn.
            Turn::Paused { text, .. } => out.push(WireMessage::Assistant {
                content: Some(history::non_empty(text)),
                tool_calls: Vec::new(),
            }),
            Turn::Results(answers) => {
                for a in answers {
                    let text = if a.parts.is_empty() {
                        Cow::Borrowed(a.content)
                    } else {
                        Cow::Owned(parts::chat_tool_text(a.content, a.parts)?)
                    };
                    out.push(WireMessage::Tool {
                        tool_call_id: a.call_id,
                        content: if a.is_error {
                            Cow::Owned(format!("Error: {text}"))
                        } else {
                            text
                        },
                    });
                }
            }
        }
    }
    Ok(out)
}

fn wire_call(call: &ToolCall) -> WireCall<'_> {
    let arguments = match &call.arguments {
        object @ Value::Object(_) => object.to_string(),
        _ => "{}".to_owned(),
    };
    WireCall {
        id: &call.id,
        kind: "function",
        function: WireFunction {
            name: &call.name,
            arguments,
        },
    }
}

#[cfg(test)]
mod tests;
