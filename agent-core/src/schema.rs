//! JSON Schemas for tool parameters, and the per-provider transforms.
//!
//! (Stub: the macros issue fills this in. Signatures are fixed; adapters call them.)

use serde_json::Value;

/// The schema as sent to Anthropic (`input_schema`).
pub fn for_anthropic(schema: &Value) -> Value {
    schema.clone()
}

/// The schema as sent to OpenAI Chat Completions and OpenAI-compatible servers (non-strict).
pub fn for_openai(schema: &Value) -> Value {
    schema.clone()
}

/// The schema as sent to OpenAI with `strict: true`.
pub fn for_openai_strict(schema: &Value) -> Value {
    schema.clone()
}

/// The schema in the OpenAPI 3.0 subset Gemini accepts.
pub fn for_gemini(schema: &Value) -> Value {
    schema.clone()
}
