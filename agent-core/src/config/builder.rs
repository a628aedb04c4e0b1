//! [`AgentConfigBuilder`]: every setting of a config, checked by `build()`.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{AgentConfig, ConfigError};
use crate::error::Ending;
use crate::handover::RunState;
use crate::llm::LlmClient;
use crate::message::ToolCall;
use crate::observe::Observer;
use crate::output::AgentOutput;
use crate::pricing::{ModelPrice, Pricing};
use crate::providers::{ApiKey, ProviderOptions};
use crate::result::AgentResult;
use crate::scores::Grader;
use crate::store::StoreSettings;
use crate::tool::ToolRegistry;

use super::params::Params;
use super::validator::OutputContext;
use crate::limits::Limits;
use crate::tool::{StateMap, StateRequirement, Tool, ToolDefinition};
use std::collections::BTreeMap;

/// A check on a validated value that a schema cannot express; its error is fed back to
/// the model like a schema error.
pub type OutputValidator<T> = Arc<dyn Fn(&T) -> Result<(), String> + Send + Sync>;

/// Which tools are offered in a turn, from the run's state: called once per user tool
/// before each LLM call (see the builder's `tools_for`).
pub(super) type ToolFilter = Arc<dyn Fn(&RunState<'_>, &ToolDefinition) -> bool + Send + Sync>;

/// Which tool calls need a person's approval, from the call and the run's state: asked
/// for every call of a user tool the model makes (see the builder's `approval`).
pub(crate) type ApprovalPolicy = Arc<dyn Fn(&ToolCall, &RunState<'_>) -> bool + Send + Sync>;

/// The customer message of a result, when a config wants one other than its templates
/// (see the builder's `customer_message_fn`); `None` falls back to the templates.
pub(super) type CustomerMessageFn<T> = Arc<dyn Fn(&AgentResult<T>) -> Option<String> + Send + Sync>;

/// Every setting of a config. Kept whole inside the config so `with_` can derive variants.
pub(crate) struct Settings<T> {
    pub(crate) name: String,
    pub(crate) model: Option<String>,
    pub(crate) fallbacks: Vec<super::fallback::FallbackSetting>,
    pub(crate) llm: Option<Arc<dyn LlmClient>>,
    pub(crate) system_prompt: Option<String>,
    pub(crate) tools: ToolRegistry,
    pub(crate) limits: Limits,
    pub(crate) params: Params,
    pub(crate) state: StateMap,
    pub(crate) run_state: Vec<StateRequirement>,
    pub(crate) provider: ProviderOptions,
    pub(crate) pricing: Pricing,
    pub(crate) cancellation: Option<CancellationToken>,
    pub(crate) tools_for: Option<ToolFilter>,
    pub(crate) approval: Option<ApprovalPolicy>,
    pub(crate) customer_messages: BTreeMap<Ending, String>,
    pub(crate) customer_message_fn: Option<CustomerMessageFn<T>>,
    pub(crate) grader: Option<Arc<dyn Grader<T>>>,
    pub(crate) output_validator: Option<super::validator::ContextValidator<T>>,
    pub(crate) observer: Option<Arc<dyn Observer>>,
    pub(crate) stores: StoreSettings,
    pub(crate) guardrails: super::guardrails::Guardrails<T>,
    pub(crate) handoffs: Vec<super::handoff::Handoff<T>>,
    pub(crate) compaction: super::compaction::Compaction,
    pub(crate) context_window: Option<crate::pricing::ContextWindow>,
    pub(crate) prompt_cache_key: Option<Arc<str>>,
    pub(crate) provider_batch: Option<crate::providers::ProviderBatch>,
    pub(crate) tool_search: Option<super::ToolSearch>,
}

impl<T> Clone for Settings<T> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            model: self.model.clone(),
            fallbacks: self.fallbacks.clone(),
            llm: self.llm.clone(),
            system_prompt: self.system_prompt.clone(),
            tools: self.tools.clone(),
            limits: self.limits,
            params: self.params,
            state: self.state.clone(),
            run_state: self.run_state.clone(),
            provider: self.provider.clone(),
            pricing: self.pricing.clone(),
            cancellation: self.cancellation.clone(),
            tools_for: self.tools_for.clone(),
            approval: self.approval.clone(),
            customer_messages: self.customer_messages.clone(),
            customer_message_fn: self.customer_message_fn.clone(),
            grader: self.grader.clone(),
            output_validator: self.output_validator.clone(),
            observer: self.observer.clone(),
            stores: self.stores.clone(),
            guardrails: self.guardrails.clone(),
            handoffs: self.handoffs.clone(),
            compaction: self.compaction.clone(),
            context_window: self.context_window,
            prompt_cache_key: self.prompt_cache_key.clone(),
            provider_batch: self.provider_batch.clone(),
            tool_search: self.tool_search.clone(),
        }
    }
}

impl<T> Settings<T> {
    fn new(name: String) -> Self {
        Self {
            name,
            model: None,
            fallbacks: Vec::new(),
            llm: None,
            system_prompt: None,
            tools: ToolRegistry::new(),
            limits: Limits::default(),
            params: Params::default(),
            state: StateMap::new(),
            run_state: Vec::new(),
            provider: ProviderOptions::default(),
            pricing: Pricing::default(),
            cancellation: None,
            tools_for: None,
            approval: None,
            customer_messages: BTreeMap::new(),
            customer_message_fn: None,
            grader: None,
            output_validator: None,
            observer: None,
            stores: StoreSettings::default(),
            guardrails: super::guardrails::Guardrails::default(),
            handoffs: Vec::new(),
            compaction: super::compaction::Compaction::none(),
            context_window: None,
            prompt_cache_key: None,
            provider_batch: None,
            tool_search: None,
        }
    }
}

/// Builds an [`AgentConfig`]. Get one from [`AgentConfig::builder`]; finish with
/// [`build`](Self::build), which checks every setting and returns a [`ConfigError`]
/// for a malformed config.
pub struct AgentConfigBuilder<T> {
    pub(crate) settings: Settings<T>,
    _output: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for AgentConfigBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentConfigBuilder")
            .field("name", &self.settings.name)
            .field("model", &self.settings.model)
            .finish_non_exhaustive()
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty) => {
        $(#[$doc])*
        #[must_use]
        pub fn $name(mut self, value: $ty) -> Self {
            self.settings.$name = value;
            self
        }
    };
}

impl<T: AgentOutput> AgentConfigBuilder<T> {
    pub(crate) fn new(name: String) -> Self {
        Self::from_settings(Settings::new(name))
    }

    pub(crate) fn from_settings(settings: Settings<T>) -> Self {
        Self {
            settings,
            _output: PhantomData,
        }
    }

    /// Checks every setting and freezes the config.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first problem: a zero budget, an unroutable model or
    /// missing provider environment, a duplicate, illegal or reserved tool name, an
    /// unusable schema, missing tool state, or a cost cap without a price.
    pub fn build(self) -> Result<AgentConfig<T>, ConfigError> {
        AgentConfig::compile(self.settings, None)
    }

    /// Every limit at once (caps, retries, timeouts, guards; see [`Limits`]), replacing
    /// those set before; the per-limit setters (`.max_llm_calls(20)`) change one field
    /// of the same value. `build()` checks each one.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.settings.limits = limits;
        self
    }

    /// The model, routed by prefix (the table is in [`providers`](crate::providers)):
    /// `claude-...`, `gpt-...`/`o1`/`o3`/`o4`/`chatgpt-...`, `ollama/NAME`,
    /// `dispatch/NAME`, or `test`. An unknown name or a missing key is a
    /// [`ConfigError`] at `build()`.
    #[must_use]
    pub fn model(mut self, name: impl Into<String>) -> Self {
        self.settings.model = Some(name.into());
        self
    }

    /// Models to send a turn to, in order, when the model before them fails in a way
    /// another provider can serve; each name is routed by prefix like
    /// [`model`](Self::model), and an unknown name, a missing key or an output mode a
    /// fallback cannot take is a [`ConfigError`] at `build()`. Replaces any earlier
    /// list. Each fallback reads its provider's environment variables: the builder's
    /// [`api_key`](Self::api_key), [`base_url`](Self::base_url) and
    /// [`bearer_token`](Self::bearer_token) belong to the primary model (give a
    /// fallback its own with [`fallback_model_with`](Self::fallback_model_with)); the
    /// timeouts and the connection pool are shared.
    ///
    /// A turn falls back when its model spent `max_llm_retries` transient failures in
    /// a row (429, 5xx, 529, timeouts), or at once on a permanent failure of the
    /// model, provider or account (404 model not found, quota or credit exhausted,
    /// 401/402/403; [`LlmError::falls_back`](crate::llm::LlmError::falls_back)); never on a
    /// 400 or 422 about the request, a 413, a refusal, a content filter or a full
    /// context window, which the next model would answer the same way. The run goes on
    /// with the next model from then on (`docs/providers.md`, "Fallback models").
    #[must_use]
    pub fn fallback_models<I, S>(mut self, models: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.settings.fallbacks = models
            .into_iter()
            .map(|m| super::fallback::FallbackSetting::new(m.into(), None))
            .collect();
        self
    }

    /// Appends one fallback model (see [`fallback_models`](Self::fallback_models)) with
    /// its own provider settings: key, base URL, bearer token, API version, timeouts.
    #[must_use]
    pub fn fallback_model_with(
        mut self,
        model: impl Into<String>,
        options: ProviderOptions,
    ) -> Self {
        self.settings
            .fallbacks
            .push(super::fallback::FallbackSetting::new(
                model.into(),
                Some(options),
            ));
        self
    }

    /// Any [`LlmClient`]; used instead of routing `model` (which, if set, is still sent
    /// as the request's `model` field). A shared client is an `LlmClient` too
    /// (`Arc<C>`, `Arc<dyn LlmClient>`).
    #[must_use]
    pub fn llm(mut self, client: impl LlmClient + 'static) -> Self {
        self.settings.llm = Some(Arc::new(client));
        self
    }

    /// A shared client: the same as [`llm`](Self::llm), which takes an `Arc` too.
    #[must_use]
    #[deprecated(note = "pass the Arc to `llm` (`LlmClient` is implemented for Arc)")]
    pub fn llm_arc(mut self, client: Arc<dyn LlmClient>) -> Self {
        self.settings.llm = Some(client);
        self
    }

    /// The system prompt.
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.settings.system_prompt = Some(prompt.into());
        self
    }

    /// The key that groups requests sharing this prefix on OpenAI's prompt cache
    /// (`prompt_cache_key`, combined with the prefix's hash to route requests to the
    /// same cache; source: <https://platform.openai.com/docs/guides/prompt-caching>).
    /// Sent to OpenAI and Azure OpenAI (Chat Completions and Responses) while prompt
    /// caching is on; the other providers have no such key and ignore it. Use a stable
    /// name for a group of runs (the agent's name, a tenant), never a secret or personal
    /// data. `build()` rejects an empty key.
    #[must_use]
    pub fn prompt_cache_key(mut self, key: impl Into<String>) -> Self {
        self.settings.prompt_cache_key = Some(Arc::from(key.into()));
        self
    }

    /// Sends the LLM calls of [`run_batch`](crate::eval::run_batch) (and of an
    /// `agent-worker` worker's runs, or any run seated at a
    /// [`BatchGate`](crate::providers::BatchGate)) through the provider's batch API, one
    /// job per round of calls, at half the live price: OpenAI's Batch API for `gpt-`,
    /// `o1`/`o3`/`o4`, `chatgpt-`, Anthropic's Message Batches for `claude-` (see
    /// [`ProviderBatch`](crate::providers::ProviderBatch), `docs/batch.md`). Only the
    /// primary model's calls (a fallback's go live); a plain `run_agent` and streamed
    /// runs call live. `build()` rejects it for any other route, and for a client of
    /// your own (`.llm(..)`), with [`ConfigError::InvalidSetting`] naming the model.
    #[must_use]
    pub fn provider_batch(mut self, batch: crate::providers::ProviderBatch) -> Self {
        self.settings.provider_batch = Some(batch);
        self
    }

    /// The user tools (replacing any set before).
    #[must_use]
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.settings.tools = tools;
        self
    }

    /// Adds one user tool.
    #[must_use]
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.settings.tools.add(tool);
        self
    }

    setter!(
        /// Replaces the whole pricing table used for `max_cost_usd` and
        /// `Usage::cost_usd` (default: [`Pricing::default`], the providers' published
        /// list prices with their sources; `docs/pricing.md`). Build one from
        /// [`Pricing::empty`] or [`Pricing::default`] with [`Pricing::set`]; a model
        /// the table leaves unpriced (`ollama/`, `dispatch/` and unlisted models) has
        /// no `cost_usd`, and `max_cost_usd` for it is a
        /// [`ConfigError::MissingPrice`] at `build()`.
        pricing: Pricing
    );

    /// A grader that scores every validated value (see [`Grader`]).
    #[must_use]
    pub fn grader(mut self, grader: impl Grader<T> + 'static) -> Self {
        self.settings.grader = Some(Arc::new(grader));
        self
    }

    /// A check on the validated value; an `Err(message)` is fed back to the model like a
    /// schema error and counts against `max_parse_retries`.
    #[must_use]
    pub fn output_validator(
        mut self,
        check: impl Fn(&T) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.settings.output_validator = Some(Arc::new(move |value: &T, _: &OutputContext<'_>| {
            check(value)
        }));
        self
    }

    /// A check on the validated value that also reads the run so far ([`OutputContext`]:
    /// the conversation, every tool result): hold an answer to what the tools found. An
    /// `Err(message)` is fed back to the model like a schema error and counts against
    /// `max_parse_retries`; a panic in it is caught and fed back the same way. Replaces
    /// any [`output_validator`](Self::output_validator) set before (one check per
    /// config; call both checks from this one to keep both).
    /// The triage example's order check is one (`examples/src/triage.rs`,
    /// `order_found`).
    #[must_use]
    pub fn output_validator_with(
        mut self,
        check: impl Fn(&T, &OutputContext<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.settings.output_validator = Some(Arc::new(check));
        self
    }

    /// Application state for tools (one value per type; see `ToolContext::state`).
    #[must_use]
    pub fn state<S: Send + Sync + 'static>(mut self, value: S) -> Self {
        self.settings.state.insert(value);
        self
    }

    /// Shared application state for tools.
    #[must_use]
    pub fn state_arc<S: Send + Sync + 'static>(mut self, value: Arc<S>) -> Self {
        self.settings.state.insert_arc(value);
        self
    }

    /// Declares application state of type `S` that each run provides (with
    /// [`RunOptions::state`](crate::RunOptions::state)) instead of the config: a
    /// request's session, a per-request transaction. Tools that read `S` then build
    /// without it; a run that lacks it ends at once with `invalid_run`, before any
    /// request.
    #[must_use]
    pub fn expects_state<S: Send + Sync + 'static>(mut self) -> Self {
        let need = StateRequirement::of::<S>();
        if !self.settings.run_state.contains(&need) {
            self.settings.run_state.push(need);
        }
        self
    }

    /// The routed provider's options: its key, base URL, bearer token, API version, AWS
    /// region and credentials, timeouts and response cap (see [`ProviderOptions`], built
    /// with its `with_` setters), replacing any set before. Unset options fall back to
    /// the provider's environment variables and defaults, as documented on each. The
    /// fallback models take the same, without the key, base URL, bearer token and API
    /// version (give a fallback its own with `fallback_model_with`).
    ///
    /// ```
    /// use agent_core::AgentConfig;
    /// use agent_core::providers::ProviderOptions;
    ///
    /// let config: AgentConfig<String> = AgentConfig::builder("local")
    ///     .model("dispatch/qwen")
    ///     .provider(ProviderOptions::default().with_base_url("http://127.0.0.1:8080/v1"))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.model(), "dispatch/qwen");
    /// ```
    #[must_use]
    pub fn provider(mut self, options: ProviderOptions) -> Self {
        // A `with_` variant keeps its parent's connection pool (the route checks that
        // the pool's timeouts are the options').
        let pool = self.settings.provider.pool.take();
        self.settings.provider = options;
        if self.settings.provider.pool.is_none() {
            self.settings.provider.pool = pool;
        }
        self
    }

    /// The API key for the routed provider, instead of its environment variable.
    #[must_use]
    #[deprecated(
        note = "set it in the provider's options: `.provider(ProviderOptions::default().with_api_key(..))`"
    )]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.settings.provider.api_key = Some(ApiKey::new(key));
        self
    }

    /// The provider's base URL, instead of its environment variable or default.
    #[must_use]
    #[deprecated(
        note = "set it in the provider's options: `.provider(ProviderOptions::default().with_base_url(..))`"
    )]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.settings.provider.base_url = Some(url.into());
        self
    }

    /// A bearer token instead of the key, for `azure/` (a Microsoft Entra ID token) and
    /// `bedrock/` (a Bedrock API key), sent as `Authorization: Bearer TOKEN`; see [`ProviderOptions::bearer_token`].
    #[must_use]
    #[deprecated(
        note = "set it in the provider's options: `.provider(ProviderOptions::default().with_bearer_token(..))`"
    )]
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.settings.provider.bearer_token = Some(ApiKey::new(token));
        self
    }

    /// The AWS region of `bedrock/` (default `AWS_REGION`, else `AWS_DEFAULT_REGION`);
    /// see [`ProviderOptions::aws_region`].
    #[must_use]
    #[deprecated(
        note = "set it in the provider's options: `.provider(ProviderOptions::default().with_aws_region(..))`"
    )]
    pub fn aws_region(mut self, region: impl Into<String>) -> Self {
        self.settings.provider.aws_region = Some(region.into());
        self
    }

    /// The AWS credentials `bedrock/` signs with (default `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`); see
    /// [`ProviderOptions::aws_credentials`].
    #[must_use]
    #[deprecated(
        note = "set it in the provider's options: `.provider(ProviderOptions::default().with_aws_credentials(..))`"
    )]
    pub fn aws_credentials(mut self, credentials: crate::providers::AwsCredentials) -> Self {
        self.settings.provider.aws_credentials = Some(credentials);
        self
    }

    /// The Azure OpenAI `api-version` (default `AZURE_OPENAI_API_VERSION`, else
    /// `2024-10-21`); see [`ProviderOptions::api_version`].
    #[must_use]
    #[deprecated(
        note = "set it in the provider's options: `.provider(ProviderOptions::default().with_api_version(..))`"
    )]
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.settings.provider.api_version = Some(version.into());
        self
    }

    /// For the OpenAI Responses API (`openai-responses/MODEL`): store responses on
    /// OpenAI's side and chain turns with `previous_response_id` instead of sending the
    /// whole history with its encrypted reasoning (default `false`, stateless); see
    /// [`ProviderOptions::store_responses`].
    #[must_use]
    #[deprecated(
        note = "set it in the provider's options: `.provider(ProviderOptions::default().with_store_responses(..))`"
    )]
    pub fn store_responses(mut self, store: bool) -> Self {
        self.settings.provider.store_responses = store;
        self
    }

    /// The whole-request timeout of the HTTP adapters (default 600 s).
    #[must_use]
    #[deprecated(
        note = "set it in the provider's options: `.provider(ProviderOptions::default().with_request_timeout(..))`"
    )]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.settings.provider.request_timeout = timeout;
        self
    }

    /// The largest provider response body accepted (bytes, default 32 MiB).
    #[must_use]
    #[deprecated(
        note = "set it in the provider's options: `.provider(ProviderOptions::default().with_max_response_bytes(..))`"
    )]
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.settings.provider.max_response_bytes = bytes;
        self
    }

    /// Sets the price (USD per million tokens) of every model whose name starts with
    /// `prefix`, on top of the pricing table: it replaces a row with the same prefix,
    /// and the longest matching prefix wins, so `.price("gpt-5", ..)` leaves
    /// `gpt-5-mini` at its own row. Use it for prices the default table lacks or gets
    /// wrong for you: local models (`ollama/`, `dispatch/`; unpriced unless set, e.g.
    /// `.price("dispatch/", ModelPrice::new(0.0, 0.0))`), models newer than the table,
    /// negotiated rates. The model name matched is the one given to `.model(..)`.
    #[must_use]
    pub fn price(mut self, prefix: impl Into<String>, price: ModelPrice) -> Self {
        self.settings.pricing.set(prefix, price);
        self
    }

    /// A token the caller holds: cancelling it ends every run of this config with
    /// `cancelled` (in-flight requests and tools are dropped).
    #[must_use]
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.settings.cancellation = Some(token);
        self
    }

    /// Chooses the user tools offered in each turn from the run's state: `keep(state,
    /// tool)` is asked for every user tool before each LLM call, and a tool it
    /// rejects is not offered in that turn (no refund tool once a refund ran, say:
    /// `|state, tool| !(tool.name == "refund" && state.succeeded("refund"))`).
    /// `submit_output` and `escalate_to_human` are always offered; a call to a tool not
    /// offered in its turn is answered as an unknown tool, never run. The wrap-up turn
    /// offers no user tool anyway.
    #[must_use]
    pub fn tools_for(
        mut self,
        keep: impl Fn(&RunState<'_>, &ToolDefinition) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.settings.tools_for = Some(Arc::new(keep));
        self
    }

    /// Deferred tool loading for configs with many tools: each LLM call offers only the
    /// search tool `search_tools`, the always-on tools and the tools the run's searches
    /// revealed (see [`ToolSearch`](super::ToolSearch) for the rules, the counting and
    /// the errors `build()` returns): `.tool_search(ToolSearch::bm25().always_on(["lookup_order"]))`.
    #[must_use]
    pub fn tool_search(mut self, search: super::ToolSearch) -> Self {
        self.settings.tool_search = Some(search);
        self
    }

    /// Asks for a person's approval of tool calls chosen at run time (MCP tools
    /// included): `needs(call, state)` is asked for every call of a user tool the model
    /// makes (valid arguments, offered in its turn); when it returns `true`, or the tool
    /// itself requires approval (`#[tool(requires_approval)]`), the call does not run.
    /// The turn's other calls run, then the run pauses with ending `paused`
    /// ([`AgentError::Paused`](crate::AgentError::Paused) lists the pending calls) and
    /// [`resume_agent_with`](crate::durable::resume_agent_with) continues it with a decision for
    /// each: `|call, _| call.name == "refund" && call.arguments["amount"].as_f64() > Some(100.0)`.
    /// A policy that panics asks for approval. Needs a checkpoint store
    /// (`.checkpoints(..)`): `build()` returns
    /// [`ConfigError::ApprovalWithoutCheckpoints`] without one.
    #[must_use]
    pub fn approval(
        mut self,
        needs: impl Fn(&ToolCall, &RunState<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.settings.approval = Some(Arc::new(needs));
        self
    }

    /// The message for the customer when a run ends with `ending`
    /// (`AgentResult::customer_message`). `{trace_id}` in the template becomes the
    /// run's trace id (a reference for support). Without one, the defaults are:
    ///
    /// | ending | default |
    /// |---|---|
    /// | answered | "Thank you, we have received your request and it is being processed." |
    /// | escalated | "Thank you. Your request has been passed to a member of our team, who will get back to you." |
    /// | exhausted, stuck | "We could not complete your request automatically. Please contact support and quote reference {trace_id}." |
    /// | failed | "We could not process your request because of a technical problem. Please try again later, or contact support and quote reference {trace_id}." |
    /// | paused | "Thank you. Your request needs a review before we can go on; we will get back to you. Your reference is {trace_id}." |
    ///
    /// None of them claims that anything was resolved: only the config knows what an
    /// answer means for its customers.
    #[must_use]
    pub fn customer_message(mut self, ending: Ending, template: impl Into<String>) -> Self {
        self.settings
            .customer_messages
            .insert(ending, template.into());
        self
    }

    /// A customer message computed from the whole result (the answer's fields, the
    /// handover, the ending); `None` falls back to the templates of
    /// [`customer_message`](Self::customer_message). Called once per run, behind a catch
    /// boundary (a panic falls back too).
    #[must_use]
    pub fn customer_message_fn(
        mut self,
        f: impl Fn(&AgentResult<T>) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.settings.customer_message_fn = Some(Arc::new(f));
        self
    }

    /// An observer of every run's events.
    #[must_use]
    pub fn observer(mut self, observer: impl Observer + 'static) -> Self {
        self.settings.observer = Some(Arc::new(observer));
        self
    }
}
