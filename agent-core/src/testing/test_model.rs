//! [`TestModel`]: the built-in model `test`, schema-driven, no script, no network.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::llm::{
    ContentCapabilities, LlmClient, LlmFuture, LlmRequest, LlmResponse, StopReason, TokenUsage,
    ToolChoice,
};
use crate::message::{Message, ToolCall};
use crate::output::ESCALATE_TO_HUMAN;
use crate::output::SUBMIT_OUTPUT;
use crate::testing::example::example_for_schema;
use crate::tool::ToolDefinition;

/// A model that needs no script: it reads the offered tools and answers with
/// schema-valid arguments.
///
/// - With `submit_output` offered, it submits an example value built from its schema
///   ([`example_for_schema`](crate::testing::example_for_schema)).
/// - With [`calling_tools_first`](Self::calling_tools_first), it first calls every other
///   offered tool once, in one turn, with example arguments; then submits.
/// - When the request expects a JSON answer in text ([`LlmRequest::output`]: native or
///   prompted output mode), it answers with the example value as JSON text.
/// - Otherwise (compat mode), it answers with a short text.
///
/// It takes every part (images, documents, audio, from any source), and says which it
/// saw: the parts of the conversation's last user message are named in its text reply,
/// and after the first free-text string field of its example answer (`"example (saw
/// image/png, application/pdf)"`; a field with an `enum`, `pattern`, `format` or a
/// `maxLength` it would pass is left alone), so a run with attachments shows them end
/// to end offline.
///
/// Usage is estimated at four characters per token, so token budgets behave plausibly.
/// `.model("test")` routes here; the examples fall back to it when no provider is
/// configured, and say so.
#[derive(Debug, Default)]
pub struct TestModel {
    tools_first: bool,
    next_id: AtomicU64,
}

impl TestModel {
    /// A test model that submits at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls every other offered tool once before submitting.
    #[must_use]
    pub fn calling_tools_first(mut self) -> Self {
        self.tools_first = true;
        self
    }

    fn call(&self, def: &ToolDefinition) -> ToolCall {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        ToolCall::new(
            format!("test_call_{n}"),
            def.name.clone(),
            example_for_schema(&def.parameters),
        )
    }

    fn answer(&self, request: &LlmRequest) -> LlmResponse {
        let forced = match &request.tool_choice {
            ToolChoice::Tool(name) => request.tools.iter().find(|t| &t.name == name),
            _ => None,
        };
        if let Some(def) = forced {
            return LlmResponse::tool_calls(vec![self.call(def)]);
        }
        let has_results = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }));
        let no_tools = request.tool_choice == ToolChoice::None;
        if self.tools_first && !has_results && !no_tools {
            let calls: Vec<ToolCall> = request
                .tools
                .iter()
                .filter(|t| t.name != SUBMIT_OUTPUT && t.name != ESCALATE_TO_HUMAN)
                .map(|t| self.call(t))
                .collect();
            if !calls.is_empty() {
                return LlmResponse::tool_calls(calls);
            }
        }
        let seen = seen_parts(request);
        if let Some(spec) = &request.output {
            // Native or prompted mode: the answer is JSON text.
            let mut value = example_for_schema(&spec.schema);
            note_seen(&mut value, &spec.schema, seen.as_deref());
            return LlmResponse::text(value.to_string()).with_stop_reason(StopReason::EndTurn);
        }
        match request.tools.iter().find(|t| t.name == SUBMIT_OUTPUT) {
            Some(def) => {
                let mut call = self.call(def);
                note_seen(&mut call.arguments, &def.parameters, seen.as_deref());
                LlmResponse::tool_calls(vec![call])
            }
            None => {
                let text = match seen {
                    Some(seen) => format!("This is the built-in test model's answer (saw {seen})."),
                    None => "This is the built-in test model's answer.".to_owned(),
                };
                LlmResponse::text(text).with_stop_reason(StopReason::EndTurn)
            }
        }
    }
}

/// The media types of the parts of the conversation's last user message, joined with
/// ", "; `None` when it has none.
fn seen_parts(request: &LlmRequest) -> Option<String> {
    let last = request
        .messages
        .iter()
        .rev()
        .find(|m| matches!(m, Message::User { .. }))?;
    let types: Vec<&str> = last
        .parts()
        .filter_map(|p| p.media().map(|m| m.media_type.as_str()))
        .collect();
    (!types.is_empty()).then(|| types.join(", "))
}

/// Appends "(saw ...)" to the first string field of an example answer that takes any
/// text: its schema is a plain `"type": "string"` (no `enum`, `const`, `pattern` or
/// `format`) whose `maxLength`, if any, leaves room. No such field, no note.
fn note_seen(value: &mut serde_json::Value, schema: &serde_json::Value, seen: Option<&str>) {
    let (Some(seen), Some(map)) = (seen, value.as_object_mut()) else {
        return;
    };
    let note = format!(" (saw {seen})");
    let properties = schema.get("properties");
    let free = |key: &str, text: &str| {
        let Some(field) = properties.and_then(|p| p.get(key)) else {
            return false;
        };
        let constrained = ["enum", "const", "pattern", "format"]
            .iter()
            .any(|k| field.get(k).is_some());
        let room = field
            .get("maxLength")
            .and_then(serde_json::Value::as_u64)
            .is_none_or(|max| (text.chars().count() + note.chars().count()) as u64 <= max);
        field.get("type").and_then(serde_json::Value::as_str) == Some("string")
            && !constrained
            && room
    };
    if let Some(serde_json::Value::String(text)) = map
        .iter_mut()
        .find(|(k, v)| v.as_str().is_some_and(|text| free(k, text)))
        .map(|(_, v)| v)
    {
        text.push_str(&note);
    }
}

impl LlmClient for TestModel {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let response = self.answer(request);
        let usage = TokenUsage::new(
            request.estimated_input_tokens(),
            response.estimated_output_tokens(),
        );
        let response = response.with_usage(usage);
        Box::pin(async move { Ok(response) })
    }

    fn provider(&self) -> &str {
        "test"
    }

    fn content_capabilities(&self, _model: &str) -> ContentCapabilities {
        ContentCapabilities::ANY
    }
}
