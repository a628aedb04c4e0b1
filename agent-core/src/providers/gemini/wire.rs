//! The `generateContent` wire format: the request body a [`LlmRequest`] is encoded
//! into (the reply is decoded in `response.rs`, shared by streamed replies).

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{UNSIGNED_CALL, clamp_temperature, schema_with_tools};
use crate::llm::{LlmError, LlmRequest, ToolChoice};
use crate::message::{Message, ToolCall};
use crate::providers::encoded::{WireCache, raw, request_body};
use crate::providers::history::{self, Turn};
use crate::schema;
use crate::tool::ToolDefinition;

pub(crate) use media::capabilities;

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
    /// Bytes, a Files API URI or an external URL, with its media resolution (see
    /// [`media`]).
    Media(media::UserMedia<'a>),
    /// A text this wire writes (the note before a tool's parts sent beside its response).
    Note {
        text: String,
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
    /// A tool's images and documents, on models that take multimodal function responses
    /// (see [`media::in_responses`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    parts: Vec<media::Media<'a>>,
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
    /// `thinkingConfig` (source: the thinking guide,
    /// <https://ai.google.dev/gemini-api/docs/thinking>): `thinkingBudget` (tokens) for
    /// Gemini 2.5, `thinkingLevel` (`low` / `high`) for Gemini 3.
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<serde_json::Value>,
}

/// The `thinkingConfig` of a request's reasoning (see [`GenerationConfig`]).
fn thinking_config(request: &LlmRequest) -> Option<serde_json::Value> {
    let reasoning = request.reasoning?;
    if request.model.starts_with("gemini-3") {
        let level = match reasoning.effort? {
            crate::llm::Effort::Minimal | crate::llm::Effort::Low => "low",
            _ => "high",
        };
        return Some(serde_json::json!({ "thinkingLevel": level }));
    }
    let budget = reasoning.budget_or_effort()?;
    Some(serde_json::json!({ "thinkingBudget": budget }))
}

/// Whether Gemini can send `reasoning` for `model`: Gemini 2.5 takes a budget (an
/// effort as its budget; Pro from 128 to 32,768 tokens, Flash up to 24,576), Gemini 3
/// an effort level only.
///
/// # Errors
/// Why it cannot.
pub(crate) fn check_reasoning(
    model: &str,
    reasoning: &crate::llm::Reasoning,
) -> Result<(), &'static str> {
    if model.starts_with("gemini-3") {
        return match reasoning.effort {
            Some(_) => Ok(()),
            None => Err("Gemini 3 takes an effort level (thinkingLevel), not a token budget"),
        };
    }
    if !model.starts_with("gemini-2.5") {
        return Err("the model does not think (Gemini 2.5 and 3 do)");
    }
    let budget = reasoning.budget_or_effort().unwrap_or(0);
    let max = if model.starts_with("gemini-2.5-pro") {
        32_768
    } else {
        24_576
    };
    if model.starts_with("gemini-2.5-pro") && budget < 128 {
        return Err("Gemini 2.5 Pro thinks with a budget of 128 to 32,768 tokens");
    }
    if budget > max {
        return Err("the budget is over the model's thinking limit (32,768 Pro, 24,576 Flash)");
    }
    Ok(())
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
        contents: contents(&request.messages, super::version(&request.model))?,
        tools: tools.as_deref(),
        tool_config,
        generation_config: GenerationConfig {
            max_output_tokens: request.max_tokens,
            temperature: request.temperature.map(clamp_temperature),
            response_mime_type: response_schema.is_some().then_some("application/json"),
            response_schema: response_schema.as_deref(),
            thinking_config: thinking_config(request),
        },
    };
    request_body(&body, request, None).map_err(failed)
}

/// The conversation as Gemini contents: user-side turns (text and function responses)
/// that follow each other are merged into one `user` content, responses first; a user
/// turn's parts follow its text (a turn of parts alone sends no `(empty)` text).
///
/// A tool's parts go inside its `functionResponse` (`parts`) when `multimodal` (Gemini
/// 3) and their type is taken there, else right after the responses, each call's
/// after a note naming it. A part's media resolution goes with it where the model
/// (by its `version`) takes one ([`media::takes_resolutions`]).
///
/// # Errors
/// A part this wire cannot encode (see [`media::part`]).
fn contents(
    messages: &[Message],
    version: Option<(u32, u32)>,
) -> Result<Vec<Content<'_>>, LlmError> {
    let multimodal = media::multimodal_responses(version);
    let resolutions = media::takes_resolutions(version);
    let mut out: Vec<Content<'_>> = Vec::new();
    let mut last_calls: &[ToolCall] = &[];
    for turn in history::turns(messages) {
        match turn {
            Turn::User { text, parts } => {
                let wire = user_parts(&mut out);
                if parts.is_empty() || text != history::EMPTY_TURN {
                    wire.push(Part::Text { text });
                }
                for part in parts {
                    wire.push(match part.as_text() {
                        Some(text) => Part::Text { text },
                        None => Part::Media(media::user_part(part, resolutions)?),
                    });
                }
            }
            Turn::Results(answers) => {
                // The answers are the preceding model turn's calls, in its call order.
                let mut responses: Vec<Part<'_>> = Vec::with_capacity(answers.len());
                let mut beside: Vec<Part<'_>> = Vec::new();
                for (answer, call) in answers.iter().zip(last_calls) {
                    let mut nested = Vec::new();
                    let mut noted = false;
                    for part in answer.parts {
                        if multimodal && media::in_responses(part) {
                            nested.push(media::part(part)?);
                            continue;
                        }
                        if !noted {
                            beside.push(Part::Note {
                                text: format!(
                                    "The parts call {} ({}) returned:",
                                    answer.call_id, call.name
                                ),
                            });
                            noted = true;
                        }
                        beside.push(match part.as_text() {
                            Some(text) => Part::Text { text },
                            None => Part::Media(media::user_part(part, resolutions)?),
                        });
                    }
                    responses.push(Part::Response {
                        function_response: WireFunctionResponse {
                            id: answer.call_id,
                            name: &call.name,
                            response: Outcome {
                                content: answer.content,
                                is_error: answer.is_error,
                            },
                            parts: nested,
                        },
                    });
                }
                let parts = user_parts(&mut out);
                let at = parts
                    .iter()
                    .position(|p| !matches!(p, Part::Response { .. }))
                    .unwrap_or(parts.len());
                let after = at + responses.len();
                parts.splice(at..at, responses);
                parts.splice(after..after, beside);
            }
            // Another provider's paused turn: its text, as a model turn.
            Turn::Paused { text, .. } => out.push(Content {
                role: "model",
                parts: vec![Part::Text {
                    text: history::non_empty(text),
                }],
            }),
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
    Ok(out)
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

mod media;
#[cfg(test)]
mod tests;
