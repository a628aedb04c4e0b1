//! Fallback models: the settings of each, routed and checked at `build()` against the
//! primary model's output plan, and the system prompt each model gets.

use crate::error::ConfigError;
use crate::llm::LlmClient;
use crate::output::OutputMode;
use crate::providers::ProviderOptions;

use super::checks::invalid;
use super::{ModelEntry, OutputPlan, Settings};

/// One fallback model as set on the builder: its name, and its own provider settings
/// (`None`: the primary's, without its key, base URL and token).
#[derive(Clone, Debug)]
pub(crate) struct FallbackSetting {
    pub(crate) model: String,
    pub(crate) options: Option<ProviderOptions>,
}

impl FallbackSetting {
    pub(crate) fn new(model: String, options: Option<ProviderOptions>) -> Self {
        Self { model, options }
    }
}

/// The system prompt as sent to `client`: the user's, plus the schema instruction in
/// prompted mode, and in native mode where the server constrains decoding without
/// showing the schema to the model.
pub(super) fn system_prompt_for<T>(
    settings: &Settings<T>,
    output: &OutputPlan,
    client: &dyn LlmClient,
    wire_model: &str,
) -> Option<String> {
    let schema_unseen = !client.output_capabilities(wire_model).native_schema_seen;
    match output {
        OutputPlan::Json(spec)
            if spec.mode == OutputMode::Prompted
                || (spec.mode == OutputMode::Native && schema_unseen) =>
        {
            Some(crate::output::prompted_system(
                settings.system_prompt.as_deref(),
                spec,
            ))
        }
        _ => settings.system_prompt.clone(),
    }
}

/// Routes and checks every fallback model of `settings`, after the primary
/// (`primary`: its name as configured; `settings.provider.pool` already the primary's).
///
/// # Errors
/// [`ConfigError::InvalidSetting`] for a model listed twice (or the primary again);
/// the routing errors of `route::route` (unknown prefix, missing key or URL);
/// [`ConfigError::MissingPrice`] when `max_cost_usd` is set and a fallback has no
/// price; [`ConfigError::UnsupportedOutputMode`] when the primary's resolved mode is
/// native and a fallback's provider takes no output schema.
pub(super) fn compile<T>(
    settings: &Settings<T>,
    primary: &str,
    output: &OutputPlan,
) -> Result<Vec<ModelEntry>, ConfigError> {
    let mut out: Vec<ModelEntry> = Vec::with_capacity(settings.fallbacks.len());
    for setting in &settings.fallbacks {
        let model = setting.model.as_str();
        if model == primary || out.iter().any(|f| f.name == model) {
            return Err(invalid(
                "fallback_models",
                model,
                "a model is listed twice (or is the primary model)",
            ));
        }
        let options = match &setting.options {
            Some(options) => {
                let mut options = options.clone();
                options.pool.clone_from(&settings.provider.pool);
                options
            }
            None => {
                let mut options = settings.provider.clone();
                options.api_key = None;
                options.base_url = None;
                options.bearer_token = None;
                options.api_version = None;
                options
            }
        };
        let route = super::route::route(model, &options)?;
        let price = settings.pricing.price_of(model);
        if let Some(p) = price.filter(|p| !p.is_valid()) {
            return Err(invalid(
                "price",
                format!("{p:?}"),
                "every rate must be a finite, non-negative number of USD per million tokens",
            ));
        }
        if settings.limits.max_cost_usd.is_some() && price.is_none() {
            return Err(ConfigError::MissingPrice {
                model: model.to_owned(),
            });
        }
        if let OutputPlan::Json(spec) = output
            && spec.mode == OutputMode::Native
            && !route.client.output_capabilities(&route.wire_model).native
        {
            return Err(ConfigError::UnsupportedOutputMode {
                model: model.to_owned(),
                mode: OutputMode::Native,
                reason: "the primary model's output mode is native, and this fallback's \
                         provider does not take an output schema for it; set \
                         OutputMode::Tool or OutputMode::Prompted"
                    .to_owned(),
            });
        }
        let system_prompt =
            system_prompt_for(settings, output, route.client.as_ref(), &route.wire_model);
        let reasoning =
            fallback_reasoning(settings, model, route.client.as_ref(), &route.wire_model);
        out.push(ModelEntry {
            name: model.to_owned(),
            client: route.client,
            wire_model: route.wire_model,
            price,
            system_prompt,
            batch: None,
            reasoning,
            input_room: crate::pricing::ContextWindow::of(model).map(|w| {
                w.tokens
                    .saturating_sub(u64::from(settings.limits.max_tokens))
            }),
        });
    }
    Ok(out)
}

/// The reasoning a fallback model is asked for: the config's, when the model takes it
/// (its client's `check_reasoning`); none, with a warning at `build()`, when it does not,
/// so that a switch never sends a setting the next provider rejects.
fn fallback_reasoning<T>(
    settings: &Settings<T>,
    model: &str,
    client: &dyn LlmClient,
    wire_model: &str,
) -> Option<crate::llm::Reasoning> {
    let reasoning = settings.params.reasoning?;
    match client.check_reasoning(wire_model, &reasoning, settings.limits.max_tokens) {
        Ok(()) => Some(reasoning),
        Err(reason) => {
            tracing::warn!(
                model,
                reason = %reason,
                "the fallback model does not take the config's reasoning; it gets none"
            );
            None
        }
    }
}
