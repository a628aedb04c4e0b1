//! Prompt caching at `build()`: whether requests mark their prefix (`PromptCaching`
//! resolved), and the TTL checked against every model's provider, with its price.

use crate::error::ConfigError;
use crate::llm::LlmClient;
use crate::output::{PromptCacheTtl, PromptCaching};
use crate::pricing::ModelPrice;
use crate::tool::ToolDefinition;

/// Whether requests mark their stable prefix: `On` and `Off` as set; `Auto` when the
/// system prompt and the offered tools' descriptions and schemas are about
/// [`PromptCaching::AUTO_MIN_TOKENS`] tokens or more (4 bytes a token).
pub(super) fn resolve(
    caching: PromptCaching,
    system_prompt: Option<&str>,
    offered: &[ToolDefinition],
) -> bool {
    match caching {
        PromptCaching::On => true,
        PromptCaching::Off => false,
        _ => {
            let bytes = system_prompt.map_or(0, str::len)
                + offered
                    .iter()
                    .map(|t| t.description.len() + t.parameters.to_string().len())
                    .sum::<usize>();
            (bytes as u64).div_ceil(4) >= PromptCaching::AUTO_MIN_TOKENS
        }
    }
}

/// Checks that `client` takes the prompt-cache TTL `ttl` for `wire_model` (configured
/// as `name`).
///
/// # Errors
/// [`ConfigError::UnsupportedCacheTtl`] naming the provider, the model and the values it
/// takes.
pub(super) fn check_ttl(
    client: &dyn LlmClient,
    wire_model: &str,
    name: &str,
    ttl: PromptCacheTtl,
) -> Result<(), ConfigError> {
    let allowed = client.prompt_cache_ttls(wire_model);
    if allowed.contains(&ttl) {
        return Ok(());
    }
    Err(ConfigError::UnsupportedCacheTtl {
        provider: client.provider().to_owned(),
        model: name.to_owned(),
        ttl: ttl.as_str().to_owned(),
        allowed: if allowed.is_empty() {
            "none (this provider takes no TTL; leave prompt_cache_ttl unset)".to_owned()
        } else {
            allowed
                .iter()
                .map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        },
    })
}

/// [`check_ttl`] for every model of a config (`(client, wire model, name, price)`: the
/// primary and each fallback), pricing each model's cache writes at the TTL's rate
/// ([`ModelPrice::for_cache_ttl`]); nothing without a TTL.
///
/// # Errors
/// As [`check_ttl`], for the first model whose provider does not take `ttl`.
pub(super) fn apply_ttl<'m>(
    ttl: Option<PromptCacheTtl>,
    models: impl Iterator<
        Item = (
            &'m dyn LlmClient,
            &'m str,
            &'m str,
            &'m mut Option<ModelPrice>,
        ),
    >,
) -> Result<(), ConfigError> {
    let Some(ttl) = ttl else {
        return Ok(());
    };
    for (client, wire_model, name, price) in models {
        check_ttl(client, wire_model, name, ttl)?;
        *price = price.map(|p| p.for_cache_ttl(ttl));
    }
    Ok(())
}
