//! [`TestModel`]: the built-in model `test`, schema-driven, no script, no network.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::llm::{
    LlmClient, LlmFuture, LlmRequest, LlmResponse, StopReason, TokenUsage, ToolChoice,
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
        if let Some(spec) = &request.output {
            // Native or prompted mode: the answer is JSON text.
            return LlmResponse::text(example_for_schema(&spec.schema).to_string())
                .with_stop_reason(StopReason::EndTurn);
        }
        match request.tools.iter().find(|t| t.name == SUBMIT_OUTPUT) {
            Some(def) => LlmResponse::tool_calls(vec![self.call(def)]),
            None => LlmResponse::text("This is the built-in test model's answer.")
                .with_stop_reason(StopReason::EndTurn),
        }
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
}
