//! [`AgentConfig`]: a frozen, validated agent definition.

mod batch_gate;
mod builder;
mod caching;
mod checks;
mod compaction;
mod fallback;
mod fingerprint;
mod guardrails;
mod handoff;
mod params;
mod route;
pub use crate::backoff::Backoff;
pub use crate::limits::Limits;
pub use compaction::Compaction;
pub(crate) use compaction::{Plan as CompactionPlan, Summarizer};
pub use handoff::{Handoff, HistoryFilter};
mod bm25;
mod stores;
mod table;
mod validator;
pub use validator::OutputContext;
mod tool_search;
pub(crate) use tool_search::SearchPlan;
pub use tool_search::{SEARCH_TOOLS, ToolSearch};

pub(crate) use checks::is_legal_tool_name;
use checks::{check_output_tool, check_settings, compile_tools, escalation_tool, invalid};
pub(crate) use table::ToolTable;

use std::fmt;
use std::sync::Arc;

pub(crate) use crate::error::ConfigError;
pub(crate) use builder::Settings;
pub use builder::{AgentConfigBuilder, OutputValidator};

use crate::llm::{LlmClient, OutputSpec};
use crate::output::{AgentOutput, AnswerMode, ESCALATE_TO_HUMAN, OutputMode};
use crate::pricing::ModelPrice;
use crate::tool::{StateMap, Tool, ToolDefinition};
use crate::validate::SchemaValidator;

/// A frozen agent: model, prompt, tools, budgets and guards, for output type `T`.
///
/// Immutable and cheap to clone (one `Arc`). Made only by [`AgentConfig::builder`] and
/// [`with_`](Self::with_), both of which check every setting, so a malformed config never
/// reaches [`run_agent`](crate::run_agent).
pub struct AgentConfig<T> {
    pub(crate) inner: Arc<Compiled<T>>,
}

impl<T> Clone for AgentConfig<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// One user tool, ready to run.
pub(crate) struct CompiledTool {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) definition: ToolDefinition,
    pub(crate) validator: SchemaValidator,
    /// `Tool::irreversible`, asked once.
    pub(crate) irreversible: bool,
    /// `Tool::requires_approval`, asked once.
    pub(crate) requires_approval: bool,
    /// `Tool::max_result_tokens` as bytes (tokens times 4), asked once.
    pub(crate) max_result_bytes: Option<usize>,
}

/// A config after `build()`: the plan the runner reads, compiled once from the
/// settings. The runner reads these fields only; `settings` is kept whole for
/// [`AgentConfig::with_`] and the config's accessors.
pub(crate) struct Compiled<T> {
    /// The settings as set on the builder (config/ reads them; the runner never does).
    pub(super) settings: Settings<T>,
    /// The agent's name.
    pub(crate) name: String,
    /// The config's application state, shared by every run that adds none of its own.
    pub(crate) state: Arc<StateMap>,
    /// The state types each run must bring (`expects_state`).
    pub(crate) run_state: Vec<crate::tool::StateRequirement>,
    /// The models a turn may go to: the primary first, then each fallback in order.
    /// Never empty.
    pub(crate) models: Vec<ModelEntry>,
    /// Every cap, retry count, timeout and guard.
    pub(crate) limits: Limits,
    /// The request's sampling temperature (the builder's `temperature`).
    pub(crate) temperature: Option<f32>,
    /// Whether the run's spans record what the model saw and said.
    pub(crate) capture_content: bool,
    /// Whether the last LLM call forces the answer (the builder's `wrap_up`).
    pub(crate) wrap_up: bool,
    /// The user tools as `build()` froze them (a source's tools as they were then), and
    /// every tool offered in an ordinary turn.
    pub(crate) table: Arc<ToolTable>,
    /// The newest table built from the tool sources' snapshots (the frozen one until a
    /// source changes); see `ToolSource`.
    pub(crate) latest: std::sync::Mutex<Arc<ToolTable>>,
    /// The tools offered in the wrap-up turn (tool mode): `submit_output`, and
    /// `escalate_to_human` when escalation is on.
    pub(crate) wrap_up_offered: Option<Arc<[ToolDefinition]>>,
    /// How a run ends with a value.
    pub(crate) output: OutputPlan,
    /// Whether requests mark their prefix for the prompt cache (`PromptCaching`
    /// resolved).
    pub(crate) prompt_cache: bool,
    /// The builder's `prompt_cache_ttl` (checked for every model) and `prompt_cache_key`.
    pub(crate) prompt_cache_ttl: Option<crate::output::PromptCacheTtl>,
    pub(crate) prompt_cache_key: Option<Arc<str>>,
    pub(crate) escalation_validator: Option<SchemaValidator>,
    /// The stable hash of what changes behaviour (see [`AgentConfig::fingerprint`]).
    pub(crate) fingerprint: String,
    /// When and how a long conversation is compacted (`None`: never).
    pub(crate) compaction: Option<compaction::Plan>,
    /// The hooks the loop calls: policies, validators, guardrails, grader, observer,
    /// customer messages.
    pub(crate) hooks: Hooks<T>,
    /// Deferred tool loading (`tool_search`), checked against the tools.
    pub(crate) tool_search: Option<SearchPlan>,
    /// The agents a turn may hand the conversation to.
    pub(crate) handoffs: Vec<Handoff<T>>,
    /// The stores around a run, and their timeout.
    pub(crate) stores: crate::store::StoreSettings,
    /// A token that cancels every run of the config.
    pub(crate) cancellation: Option<tokio_util::sync::CancellationToken>,
    /// The routed primary's batch endpoints, whether or not `.provider_batch(..)` is
    /// set (a `with_` variant that keeps the route keeps them).
    pub(crate) route_batch: Option<Arc<dyn crate::providers::batch::BatchWire>>,
}

/// One model a turn may go to: the primary, or a fallback.
pub(crate) struct ModelEntry {
    /// The name as configured (with its routing prefix), else the wire model: the key
    /// of its price and usage entry.
    pub(crate) name: String,
    pub(crate) client: Arc<dyn LlmClient>,
    /// The model name sent (prefix removed).
    pub(crate) wire_model: String,
    pub(crate) price: Option<ModelPrice>,
    /// The system prompt as this model gets it (the schema added in prompted mode, and
    /// in native mode where the server does not show it to the model).
    pub(crate) system_prompt: Option<String>,
    /// The provider's batch endpoints: set on the primary when the config has
    /// `.provider_batch(..)` (then `run_batch` sends its calls in batch jobs).
    pub(crate) batch: Option<Arc<dyn crate::providers::batch::BatchWire>>,
    /// The reasoning this model is asked for: the config's, when this model takes it.
    pub(crate) reasoning: Option<crate::llm::Reasoning>,
    /// The tokens of a request's input this model takes (its context window, from
    /// `context_window(..)` for the primary or the window table, minus `max_tokens`);
    /// `None` when the window is unknown.
    pub(crate) input_room: Option<u64>,
}

/// The hooks of a config the loop calls (see the builder's setters of the same names).
pub(crate) struct Hooks<T> {
    pub(crate) tools_for: Option<builder::ToolFilter>,
    pub(crate) approval: Option<builder::ApprovalPolicy>,
    pub(crate) output_validator: Option<validator::ContextValidator<T>>,
    pub(crate) grader: Option<Arc<dyn crate::scores::Grader<T>>>,
    pub(crate) guardrails: guardrails::Guardrails<T>,
    pub(crate) observer: Option<Arc<dyn crate::observe::Observer>>,
    pub(crate) customer_messages: std::collections::BTreeMap<crate::error::Ending, String>,
    pub(crate) customer_message_fn: Option<builder::CustomerMessageFn<T>>,
}

impl<T> Hooks<T> {
    fn of(s: &Settings<T>) -> Self {
        Self {
            tools_for: s.tools_for.clone(),
            approval: s.approval.clone(),
            output_validator: s.output_validator.clone(),
            grader: s.grader.clone(),
            guardrails: s.guardrails.clone(),
            observer: s.observer.clone(),
            customer_messages: s.customer_messages.clone(),
            customer_message_fn: s.customer_message_fn.clone(),
        }
    }
}

impl<T> Compiled<T> {
    /// The config's `.provider_batch(..)`, when set.
    pub(crate) fn settings_provider_batch(&self) -> Option<&crate::providers::ProviderBatch> {
        self.settings.provider_batch.as_ref()
    }

    /// The primary model (the first entry).
    pub(crate) fn primary(&self) -> &ModelEntry {
        // `compile` always makes one entry.
        &self.models[0]
    }
}

/// How a run of a config ends with a value.
pub(crate) enum OutputPlan {
    /// `AgentConfig<String>`: a plain-text turn ends the run with its text.
    Text,
    /// A valid `submit_output` call ends the run.
    Tool,
    /// A reply whose text holds a valid JSON answer ends the run (native or prompted).
    Json(Arc<OutputSpec>),
}

impl OutputPlan {
    /// The resolved mode (`Tool` for plain text, which has no schema).
    pub(crate) fn mode(&self) -> OutputMode {
        match self {
            OutputPlan::Text | OutputPlan::Tool => OutputMode::Tool,
            OutputPlan::Json(spec) => spec.mode.into(),
        }
    }
}

impl<T: AgentOutput> AgentConfig<T> {
    /// Starts a builder for an agent called `name` (used in traces and receipts).
    pub fn builder(name: impl Into<String>) -> AgentConfigBuilder<T> {
        AgentConfigBuilder::new(name.into())
    }

    /// Derives a variant: `f` gets a builder holding this config's settings; the result
    /// is checked like `build()`. The output type stays `T`.
    ///
    /// A variant that keeps the model and the provider settings (key, base URL,
    /// timeouts) keeps this config's client: no new route, no second read of the
    /// environment. Every HTTP adapter shares one connection pool per timeout pair
    /// anyway, so even a variant with another model of the same provider reuses the
    /// warm connections.
    ///
    /// # Errors
    /// The [`ConfigError`] `build()` would return for the derived settings.
    pub fn with_(
        &self,
        f: impl FnOnce(AgentConfigBuilder<T>) -> AgentConfigBuilder<T>,
    ) -> Result<Self, ConfigError> {
        let builder = f(AgentConfigBuilder::from_settings(
            self.inner.settings.clone(),
        ));
        Self::compile(builder.settings, Some(&self.inner))
    }

    /// Whether runs of this config are durable: a checkpoint store is set
    /// (`.checkpoints(..)` on the builder; see `docs/durable.md`).
    pub fn has_checkpoints(&self) -> bool {
        self.inner.settings.stores.checkpoints.is_some()
    }

    /// The provider batch settings (`.provider_batch(..)`), when set: `run_batch` (and
    /// any run seated at a [`batch_gate`](Self::batch_gate)) sends this config's LLM
    /// calls in provider batch jobs.
    pub fn provider_batch(&self) -> Option<&crate::providers::ProviderBatch> {
        self.inner.settings.provider_batch.as_ref()
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.inner.settings.name
    }

    /// The model name as configured (with its routing prefix), or the client's model.
    pub fn model(&self) -> &str {
        self.inner
            .settings
            .model
            .as_deref()
            .unwrap_or(&self.inner.primary().wire_model)
    }

    /// The provider of the routed client (`gen_ai.provider.name`).
    pub fn provider(&self) -> &str {
        self.inner.primary().client.provider()
    }

    /// What the primary model takes beside text (image, document and audio media
    /// types, URLs, file ids, parts in tool results, size caps), as its client reports
    /// it for the routed model. A run refuses a given part this rejects with
    /// [`AgentError::UnsupportedContent`](crate::error::AgentError::UnsupportedContent)
    /// before any request (a fallback model that takes it is used instead), so an app
    /// can check its attachments first and send a note in their place.
    pub fn content_capabilities(&self) -> crate::llm::ContentCapabilities {
        let primary = self.inner.primary();
        primary.client.content_capabilities(&primary.wire_model)
    }

    /// The cap on LLM calls.
    pub fn max_llm_calls(&self) -> u32 {
        self.inner.limits.max_llm_calls
    }

    /// The cap on tool executions.
    pub fn max_tool_calls(&self) -> u32 {
        self.inner.limits.max_tool_calls
    }

    /// The consecutive transient failures that end a run.
    pub fn max_llm_retries(&self) -> u32 {
        self.inner.limits.max_llm_retries
    }

    /// The corrections allowed after the first malformed turn.
    pub fn max_parse_retries(&self) -> u32 {
        self.inner.limits.max_parse_retries
    }

    /// Every limit the config's runs have (see [`Limits`]).
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The tools offered in an ordinary turn (user tools, `submit_output` in tool
    /// mode, `escalate_to_human` when enabled, and a `transfer_to_{name}` per
    /// handoff), as `build()` froze them: a
    /// [`ToolSource`](crate::tool::ToolSource)'s tools as they were then (runs follow its
    /// later changes).
    pub fn tool_definitions(&self) -> &[ToolDefinition] {
        &self.inner.table.offered
    }

    /// The output mode runs use: never [`OutputMode::Auto`], which `build()` resolves
    /// (see [`OutputMode`]). [`OutputMode::Tool`] for `AgentConfig<String>`.
    pub fn output_mode(&self) -> OutputMode {
        self.inner.output.mode()
    }

    /// Whether requests mark their tool definitions and system prompt for the
    /// provider's prompt cache (the builder's `prompt_caching`, resolved).
    pub fn prompt_caching(&self) -> bool {
        self.inner.prompt_cache
    }

    /// The system prompt as sent to the model: the one set on the builder, plus, in
    /// [`OutputMode::Prompted`], the answer's schema and how to give it.
    pub fn effective_system_prompt(&self) -> Option<&str> {
        self.inner.primary().system_prompt.as_deref()
    }

    /// A stable hash of everything that changes the agent's behaviour: the model (and
    /// provider), the system prompt, every offered tool definition (so the output
    /// schema too), the budgets, timeouts and guards, and the memory and retrieval
    /// settings. 16 lowercase hex digits (64-bit FNV-1a of a canonical JSON rendering),
    /// the same on every platform and Rust version. The name, the variant label,
    /// observers, state and the stores themselves do not count: two configs that would
    /// send the same requests share a fingerprint.
    pub fn fingerprint(&self) -> &str {
        &self.inner.fingerprint
    }

    /// The variant label set with the builder's `variant` (recorded with every run).
    pub fn variant(&self) -> Option<&str> {
        self.inner.settings.stores.variant.as_deref()
    }

    /// Checks and freezes `settings`; `parent` is the config a `with_` variant derives
    /// from (its routed client is reused when the route is unchanged).
    pub(crate) fn compile(
        mut settings: Settings<T>,
        parent: Option<&Compiled<T>>,
    ) -> Result<Self, ConfigError> {
        check_settings(&settings)?;
        let (tools, tool_index) = compile_tools(&settings)?;
        let names: Vec<&str> = tools.iter().map(|t| t.definition.name.as_str()).collect();
        let tool_search = tool_search::plan(settings.tool_search.as_ref(), &names)?;
        let output_tool = T::output_tool();
        if let Some(def) = &output_tool {
            check_output_tool(def)?;
        }
        let same_route = parent.filter(|p| {
            settings.llm.is_none()
                && p.settings.llm.is_none()
                && settings.model.is_some()
                && p.settings.model == settings.model
                && p.settings.provider == settings.provider
        });
        let (client, wire_model, batch) = match (same_route, &settings.llm, &settings.model) {
            (Some(p), _, _) => (
                Arc::clone(&p.primary().client),
                p.primary().wire_model.clone(),
                p.route_batch.clone(),
            ),
            (None, Some(client), model) => {
                (Arc::clone(client), model.clone().unwrap_or_default(), None)
            }
            (None, None, Some(model)) => {
                let route = route::route(model, &settings.provider)?;
                // Variants derived with `with_` inherit the pool with the settings.
                settings.provider.pool = route.pool;
                (route.client, route.wire_model, route.batch)
            }
            (None, None, None) => {
                return Err(ConfigError::MissingModel {
                    prefixes: route::prefixes(),
                });
            }
        };
        let route_batch = batch.clone();
        let batch = match (&settings.provider_batch, batch) {
            (None, _) => None,
            (Some(_), Some(batch)) => Some(batch),
            (Some(_), None) => {
                return Err(ConfigError::InvalidSetting {
                    setting: "provider_batch",
                    value: settings
                        .model
                        .clone()
                        .unwrap_or_else(|| format!("a client of your own ({wire_model})")),
                    reason: "only the OpenAI Chat Completions routes (gpt-, o1, o3, o4, \
                             chatgpt-) and the Anthropic route (claude-) have a batch API \
                             agent-core sends to",
                });
            }
        };
        if let Some(t) = settings.params.temperature {
            let sent = client.as_ref().effective_temperature(&wire_model, t);
            if sent != Some(t) {
                tracing::warn!(
                    model = %wire_model,
                    requested = t,
                    sent = ?sent,
                    "temperature {t} is not what this model gets: {}",
                    match sent {
                        Some(s) => format!("the provider's range caps it at {s}"),
                        None => "the model takes no temperature, so none is sent".to_owned(),
                    }
                );
            }
        }
        if let Some(reasoning) = &settings.params.reasoning {
            client
                .check_reasoning(&wire_model, reasoning, settings.limits.max_tokens)
                .map_err(|reason| ConfigError::InvalidSetting {
                    setting: "reasoning",
                    value: format!("{reasoning:?} for {wire_model}"),
                    reason,
                })?;
        }
        let price_key = settings.model.clone().unwrap_or_else(|| wire_model.clone());
        let price_key = price_key.as_str();
        let price = settings.pricing.price_of(price_key);
        if let Some(p) = price.filter(|p| !p.is_valid()) {
            return Err(invalid(
                "price",
                format!("{p:?}"),
                "every rate must be a finite, non-negative number of USD per million tokens",
            ));
        }
        if settings.limits.max_cost_usd.is_some() && price.is_none() {
            return Err(ConfigError::MissingPrice {
                model: price_key.to_owned(),
            });
        }
        let output = match output_tool {
            None => OutputPlan::Text,
            Some(def) => plan_output(
                def,
                settings.params.output_mode,
                client.as_ref(),
                settings.model.as_deref().unwrap_or(&wire_model),
                &wire_model,
            )?,
        };
        let mut offered: Vec<ToolDefinition> = tools.iter().map(|t| t.definition.clone()).collect();
        let mut wrap_up: Vec<ToolDefinition> = Vec::new();
        if let (OutputPlan::Tool, Some(def)) = (&output, T::output_tool()) {
            wrap_up.push(def.clone());
            offered.push(def);
        }
        // Prompted mode, and native mode where the server constrains decoding without
        // showing the schema to the model, tell the model the schema in the prompt.
        let system_prompt =
            fallback::system_prompt_for(&settings, &output, client.as_ref(), &wire_model);
        let mut models = vec![ModelEntry {
            name: price_key.to_owned(),
            client,
            wire_model,
            price,
            system_prompt,
            batch,
            reasoning: settings.params.reasoning,
            input_room: settings
                .context_window
                .or_else(|| crate::pricing::ContextWindow::of(price_key))
                .map(|w| {
                    w.tokens
                        .saturating_sub(u64::from(settings.limits.max_tokens))
                }),
        }];
        models.extend(fallback::compile(&settings, price_key, &output)?);
        let compaction = compaction::plan(&settings, price_key)?;
        let escalation_validator = if settings.params.escalation {
            let def = escalation_tool();
            let validator = SchemaValidator::new(&def.parameters).map_err(|message| {
                ConfigError::InvalidSchema {
                    tool: ESCALATE_TO_HUMAN.to_owned(),
                    message,
                }
            })?;
            // At its limit a model may still hand over, with its summary.
            if !wrap_up.is_empty() {
                wrap_up.push(def.clone());
            }
            offered.push(def);
            Some(validator)
        } else {
            None
        };
        offered.extend(handoff::definitions(&settings.handoffs, &offered)?);
        let wrap_up_offered = (!wrap_up.is_empty()).then(|| Arc::from(wrap_up));
        let entries = models.iter_mut();
        let entries = entries.map(|m| (m.client.as_ref(), &*m.wire_model, &*m.name, &mut m.price));
        caching::apply_ttl(settings.params.prompt_cache_ttl, entries)?;
        let primary = &models[0];
        let prompt_cache = caching::resolve(
            settings.params.prompt_caching,
            primary.system_prompt.as_deref(),
            &offered,
        );
        let fingerprint = fingerprint::of(
            &settings,
            &offered,
            &primary.wire_model,
            primary.client.provider(),
        );
        let versions = settings.tools.sources().iter().map(|s| s.version).collect();
        let tools = tools.into_iter().map(Arc::new).collect();
        let table = Arc::new(ToolTable::new(tools, tool_index, offered.into(), versions));
        Ok(Self {
            inner: Arc::new(Compiled {
                name: settings.name.clone(),
                state: Arc::new(settings.state.clone()),
                run_state: settings.run_state.clone(),
                models,
                limits: settings.limits,
                temperature: settings.params.temperature,
                capture_content: settings.params.capture_content,
                wrap_up: settings.params.wrap_up,
                latest: std::sync::Mutex::new(Arc::clone(&table)),
                table,
                wrap_up_offered,
                output,
                prompt_cache,
                prompt_cache_ttl: settings.params.prompt_cache_ttl,
                prompt_cache_key: settings.prompt_cache_key.clone(),
                escalation_validator,
                fingerprint,
                compaction,
                hooks: Hooks::of(&settings),
                tool_search,
                handoffs: settings.handoffs.clone(),
                stores: settings.stores.clone(),
                cancellation: settings.cancellation.clone(),
                route_batch,
                settings,
            }),
        })
    }
}

impl<T> fmt::Debug for AgentConfig<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.inner.settings;
        f.debug_struct("AgentConfig")
            .field("name", &s.name)
            .field("model", &s.model)
            .field("provider", &self.inner.primary().client.provider())
            .field("tools", &s.tools)
            .field("limits", &s.limits)
            .field("params", &s.params)
            .field("provider_options", &s.provider)
            .finish_non_exhaustive()
    }
}

/// Resolves the output mode for the output tool `def` (its schema and description).
///
/// # Errors
/// [`ConfigError::UnsupportedOutputMode`] for `Native` on a model the client says
/// cannot take an output schema.
fn plan_output(
    def: ToolDefinition,
    asked: OutputMode,
    client: &dyn LlmClient,
    model: &str,
    wire_model: &str,
) -> Result<OutputPlan, ConfigError> {
    let capabilities = client.output_capabilities(wire_model);
    let mode = match asked {
        OutputMode::Auto => capabilities.auto_mode(),
        other => other,
    };
    if mode == OutputMode::Native && !capabilities.native {
        return Err(ConfigError::UnsupportedOutputMode {
            model: model.to_owned(),
            mode,
            reason: "the provider does not take an output schema for this model; use \
                     OutputMode::Tool or OutputMode::Prompted"
                .to_owned(),
        });
    }
    Ok(match mode {
        OutputMode::Native | OutputMode::Prompted => OutputPlan::Json(Arc::new(OutputSpec::new(
            if mode == OutputMode::Native {
                AnswerMode::Native
            } else {
                AnswerMode::Prompted
            },
            "output",
            def.description,
            def.parameters,
        ))),
        _ => OutputPlan::Tool,
    })
}

#[cfg(test)]
mod tests;
