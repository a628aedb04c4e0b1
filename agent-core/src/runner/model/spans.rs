//! The `chat` span of one model call (the OpenTelemetry GenAI conventions' client span):
//! opened with the request's attributes, then given the response's or the error's.

use crate::llm::{LlmError, LlmRequest, LlmResponse};

use super::content;
use crate::runner::trace;

/// Opens the `chat` span of LLM call `llm_call` (1-based) for `request`; with
/// `capture` (the config's `capture_content`), the system instructions and input
/// messages are recorded on it too.
pub(crate) fn chat(
    provider: &str,
    request: &LlmRequest,
    llm_call: u32,
    wrap_up: bool,
    capture: bool,
) -> tracing::Span {
    let span = tracing::info_span!(
        "chat",
        otel.name = %format_args!("chat {}", request.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = %provider,
        gen_ai.request.model = %request.model,
        // Integers as i64: the OpenTelemetry bridge exports a u64 field as a string.
        gen_ai.request.max_tokens = i64::from(request.max_tokens),
        gen_ai.response.id = tracing::field::Empty,
        gen_ai.response.model = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.system_instructions = tracing::field::Empty,
        gen_ai.input.messages = tracing::field::Empty,
        gen_ai.output.messages = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        llm_call = i64::from(llm_call),
        wrap_up,
    );
    if capture {
        if let Some(system) = &request.system {
            span.record(
                "gen_ai.system_instructions",
                content::system_instructions(system),
            );
        }
        span.record(
            "gen_ai.input.messages",
            content::input_messages(&request.messages),
        );
    }
    span
}

/// Records how the call ended: the response's id, model, finish reason and token counts
/// (and, with `capture`, its output messages), or the error's type, with a warning.
pub(crate) fn record_outcome(
    span: &tracing::Span,
    outcome: &Result<LlmResponse, LlmError>,
    capture: bool,
) {
    match outcome {
        Ok(response) => {
            if let Some(id) = &response.request_id {
                span.record("gen_ai.response.id", id.as_str());
            }
            if let Some(model) = &response.model {
                span.record("gen_ai.response.model", model.as_str());
            }
            trace::record_finish_reasons(span, response.stop_reason.as_str());
            let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            span.record(
                "gen_ai.usage.input_tokens",
                tokens(response.usage.input_tokens),
            );
            span.record(
                "gen_ai.usage.output_tokens",
                tokens(response.usage.output_tokens),
            );
            if capture {
                span.record("gen_ai.output.messages", content::output_messages(response));
            }
        }
        Err(error) => {
            let kind = if error.is_transient() {
                "llm_transient_error"
            } else {
                "llm_permanent_error"
            };
            record_error(span, kind);
            tracing::warn!(parent: span, error = %error, "model call failed");
        }
    }
}

/// Marks the span failed with `error.type` = `kind` (an error category).
pub(crate) fn record_error(span: &tracing::Span, kind: &str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "error");
}
