//! [`AgentConfig::fingerprint`](crate::AgentConfig::fingerprint): a stable hash of what
//! changes an agent's behaviour.

use serde_json::{Map, Value, json};

use crate::config::Settings;
use crate::store::fnv1a64;
use crate::tool::ToolDefinition;

/// The keys of the limits and plain settings, in the order the fingerprint hashes them.
const PLAIN_ORDER: [&str; 16] = [
    "max_llm_calls",
    "max_tool_calls",
    "max_llm_retries",
    "max_parse_retries",
    "max_tokens",
    "temperature",
    "tool_timeout_ms",
    "llm_timeout_ms",
    "max_tool_result_bytes",
    "max_total_tokens",
    "max_cost_usd",
    "deadline_ms",
    "repeated_call_limit",
    "no_progress_turns",
    "escalation",
    "wrap_up",
];

/// The fingerprint of compiled settings: 64-bit FNV-1a over a canonical JSON rendering of
/// the model, provider, prompt, offered tools, budgets, guards, memory window and
/// retrieval settings, as 16 lowercase hex digits.
pub(crate) fn of<T>(
    s: &Settings<T>,
    offered: &[ToolDefinition],
    wire_model: &str,
    provider: &str,
) -> String {
    let tools: Vec<_> = offered
        .iter()
        .map(|t| json!([t.name, t.description, t.parameters]))
        .collect();
    let mut canonical = Map::new();
    canonical.insert(
        "model".to_owned(),
        json!(s.model.as_deref().unwrap_or(wire_model)),
    );
    canonical.insert("wire_model".to_owned(), json!(wire_model));
    // Only with fallbacks, so that the fingerprints of configs without any stay as they were.
    if !s.fallbacks.is_empty() {
        let models: Vec<&str> = s.fallbacks.iter().map(|f| f.model.as_str()).collect();
        canonical.insert("fallback_models".to_owned(), json!(models));
    }
    canonical.insert("provider".to_owned(), json!(provider));
    canonical.insert("system_prompt".to_owned(), json!(s.system_prompt));
    canonical.insert("tools".to_owned(), json!(tools));
    // The limits and the other plain settings, in the order of the one table they were
    // in before `Limits` (the key order is part of the hash).
    let mut plain = Map::new();
    s.limits.fingerprint(&mut plain);
    s.params.fingerprint(&mut plain);
    for key in PLAIN_ORDER {
        if let Some(value) = plain.remove(key) {
            canonical.insert(key.to_owned(), value);
        }
    }
    canonical.insert(
        "output_validator".to_owned(),
        json!(s.output_validator.is_some()),
    );
    // Only with guardrails, so that the fingerprints of configs without any stay as they were.
    if !s.guardrails.is_empty() {
        canonical.insert("guardrails".to_owned(), json!(s.guardrails.names()));
    }
    // Only when set, so that the fingerprints of configs without them stay as they were.
    if let Some(ttl) = s.params.prompt_cache_ttl {
        canonical.insert("prompt_cache_ttl".to_owned(), json!(ttl));
    }
    if let Some(search) = &s.tool_search {
        canonical.insert(
            "tool_search".to_owned(),
            json!({"max_results": search.max_results, "always_on": search.always_on}),
        );
        // Only when set, so that the fingerprints of configs without it stay as they were.
        if search.native {
            canonical.insert("tool_search_native".to_owned(), json!(true));
        }
    }
    if let Some(key) = &s.prompt_cache_key {
        canonical.insert("prompt_cache_key".to_owned(), json!(key.as_ref()));
    }
    // Only with reasoning, so that the fingerprints of configs without it stay as they were.
    if let Some(reasoning) = &s.params.reasoning {
        canonical.insert("reasoning".to_owned(), json!(reasoning));
    }
    // Only with a compaction, so that the fingerprints of configs without one stay as they were.
    if !matches!(s.compaction.strategy, super::compaction::Strategy::None) {
        canonical.insert(
            "compaction".to_owned(),
            json!(format!("{:?}", s.compaction)),
        );
    }
    canonical.insert(
        "memory_window".to_owned(),
        json!([s.stores.window.max_messages, s.stores.window.max_tokens]),
    );
    canonical.insert(
        "max_thread_llm_calls".to_owned(),
        json!(s.stores.max_thread_llm_calls),
    );
    canonical.insert(
        "retrieval_top_k".to_owned(),
        json!(s.stores.retriever.as_ref().map(|_| s.stores.top_k)),
    );
    let canonical = Value::Object(canonical);
    format!("{:016x}", fnv1a64(canonical.to_string().as_bytes()))
}
