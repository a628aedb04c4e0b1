//! [`AgentConfig::fingerprint`](crate::AgentConfig::fingerprint): a stable hash of what
//! changes an agent's behaviour.

use serde_json::json;

use crate::config::Settings;
use crate::stores::fnv1a64;
use crate::tool::ToolDefinition;

/// The fingerprint of compiled settings: 64-bit FNV-1a over a canonical JSON rendering of
/// the model, provider, prompt, offered tools, budgets, guards, memory window and
/// retrieval settings, as 16 lowercase hex digits.
pub(crate) fn of<T>(
    s: &Settings<T>,
    offered: &[ToolDefinition],
    wire_model: &str,
    provider: &str,
) -> String {
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let tools: Vec<_> = offered
        .iter()
        .map(|t| json!([t.name, t.description, t.parameters]))
        .collect();
    let canonical = json!({
        "model": s.model.as_deref().unwrap_or(wire_model),
        "wire_model": wire_model,
        "provider": provider,
        "system_prompt": s.system_prompt,
        "tools": tools,
        "max_llm_calls": s.max_llm_calls,
        "max_tool_calls": s.max_tool_calls,
        "max_llm_retries": s.max_llm_retries,
        "max_parse_retries": s.max_parse_retries,
        "max_tokens": s.max_tokens,
        "temperature": s.temperature,
        "tool_timeout_ms": ms(s.tool_timeout),
        "llm_timeout_ms": ms(s.llm_timeout),
        "max_tool_result_bytes": s.max_tool_result_bytes,
        "max_total_tokens": s.max_total_tokens,
        "max_cost_usd": s.max_cost_usd,
        "deadline_ms": s.deadline.map(ms),
        "repeated_call_limit": s.repeated_call_limit,
        "no_progress_turns": s.no_progress_turns,
        "escalation": s.escalation,
        "wrap_up": s.wrap_up,
        "output_validator": s.output_validator.is_some(),
        "memory_window": [s.stores.window.max_messages, s.stores.window.max_tokens],
        "max_thread_llm_calls": s.stores.max_thread_llm_calls,
        "retrieval_top_k": s.stores.retriever.as_ref().map(|_| s.stores.top_k),
    });
    format!("{:016x}", fnv1a64(canonical.to_string().as_bytes()))
}
