//! [`AgentConfigBuilder`]: every setting of a config, checked by `build()`.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::config::{AgentConfig, ConfigError};
use crate::error::Ending;
use crate::handover::RunState;
use crate::llm::LlmClient;
use crate::observe::Observer;
use crate::output::{AgentOutput, OutputMode, PromptCaching};
use crate::pricing::{ModelPrice, Pricing};
use crate::providers::{ApiKey, ProviderOptions};
use crate::registry::ToolRegistry;
use crate::result::AgentResult;
use crate::scores::Grader;
use crate::stores::StoreSettings;
use crate::tool::{StateMap, StateRequirement, Tool, ToolDefinition};
use std::collections::BTreeMap;

/// A check on a validated value that a schema cannot express; its error is fed back to
/// the model like a schema error.
pub type OutputValidator<T> = Arc<dyn Fn(&T) -> Result<(), String> + Send + Sync>;

/// Which tools are offered in a turn, from the run's state: called once per user tool
/// before each round trip (see the builder's `tools_for`).
pub type ToolFilter = Arc<dyn Fn(&RunState<'_>, &ToolDefinition) -> bool + Send + Sync>;

/// The customer message of a result, when a config wants one other than its templates
/// (see the builder's `customer_message_fn`); `None` falls back to the templates.
pub type CustomerMessageFn<T> = Arc<dyn Fn(&AgentResult<T>) -> Option<String> + Send + Sync>;

/// Every setting of a config. Kept whole inside the config so `with_` can derive variants.
pub(crate) struct Settings<T> {
    pub(crate) name: String,
    pub(crate) model: Option<String>,
    pub(crate) llm: Option<Arc<dyn LlmClient>>,
    pub(crate) system_prompt: Option<String>,
    pub(crate) tools: ToolRegistry,
    pub(crate) max_llm_calls: u32,
    pub(crate) max_tool_calls: u32,
    pub(crate) max_llm_retries: u32,
    pub(crate) max_parse_retries: u32,
    pub(crate) max_tokens: u32,
    pub(crate) temperature: Option<f32>,
    pub(crate) tool_timeout: Duration,
    pub(crate) llm_timeout: Duration,
    pub(crate) max_tool_result_bytes: usize,
    pub(crate) grader_timeout: Duration,
    pub(crate) tool_concurrency: usize,
    pub(crate) backoff: Backoff,
    pub(crate) state: StateMap,
    pub(crate) run_state: Vec<StateRequirement>,
    pub(crate) provider: ProviderOptions,
    pub(crate) max_total_tokens: Option<u64>,
    pub(crate) max_cost_usd: Option<f64>,
    pub(crate) pricing: Pricing,
    pub(crate) deadline: Option<Duration>,
    pub(crate) cancellation: Option<CancellationToken>,
    pub(crate) repeated_call_limit: u32,
    pub(crate) no_progress_turns: u32,
    pub(crate) escalation: bool,
    pub(crate) wrap_up: bool,
    pub(crate) output_mode: OutputMode,
    pub(crate) prompt_caching: PromptCaching,
    pub(crate) tools_for: Option<ToolFilter>,
    pub(crate) customer_messages: BTreeMap<Ending, String>,
    pub(crate) customer_message_fn: Option<CustomerMessageFn<T>>,
    pub(crate) grader: Option<Arc<dyn Grader<T>>>,
    pub(crate) output_validator: Option<OutputValidator<T>>,
    pub(crate) observer: Option<Arc<dyn Observer>>,
    pub(crate) stores: StoreSettings,
    pub(crate) capture_content: bool,
}

impl<T> Clone for Settings<T> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            model: self.model.clone(),
            llm: self.llm.clone(),
            system_prompt: self.system_prompt.clone(),
            tools: self.tools.clone(),
            max_llm_calls: self.max_llm_calls,
            max_tool_calls: self.max_tool_calls,
            max_llm_retries: self.max_llm_retries,
            max_parse_retries: self.max_parse_retries,
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            tool_timeout: self.tool_timeout,
            llm_timeout: self.llm_timeout,
            max_tool_result_bytes: self.max_tool_result_bytes,
            grader_timeout: self.grader_timeout,
            tool_concurrency: self.tool_concurrency,
            backoff: self.backoff,
            state: self.state.clone(),
            run_state: self.run_state.clone(),
            provider: self.provider.clone(),
            max_total_tokens: self.max_total_tokens,
            max_cost_usd: self.max_cost_usd,
            pricing: self.pricing.clone(),
            deadline: self.deadline,
            cancellation: self.cancellation.clone(),
            repeated_call_limit: self.repeated_call_limit,
            no_progress_turns: self.no_progress_turns,
            escalation: self.escalation,
            wrap_up: self.wrap_up,
            output_mode: self.output_mode,
            prompt_caching: self.prompt_caching,
            tools_for: self.tools_for.clone(),
            customer_messages: self.customer_messages.clone(),
            customer_message_fn: self.customer_message_fn.clone(),
            grader: self.grader.clone(),
            output_validator: self.output_validator.clone(),
            observer: self.observer.clone(),
            stores: self.stores.clone(),
            capture_content: self.capture_content,
        }
    }
}

impl<T> Settings<T> {
    fn new(name: String) -> Self {
        Self {
            name,
            model: None,
            llm: None,
            system_prompt: None,
            tools: ToolRegistry::new(),
            max_llm_calls: 50,
            max_tool_calls: 10,
            max_llm_retries: 3,
            max_parse_retries: 2,
            max_tokens: 4096,
            temperature: None,
            tool_timeout: Duration::from_secs(60),
            llm_timeout: Duration::from_secs(600),
            max_tool_result_bytes: 100_000,
            grader_timeout: Duration::from_secs(60),
            tool_concurrency: 8,
            backoff: Backoff::default(),
            state: StateMap::new(),
            run_state: Vec::new(),
            provider: ProviderOptions::default(),
            max_total_tokens: None,
            max_cost_usd: None,
            pricing: Pricing::default(),
            deadline: None,
            cancellation: None,
            repeated_call_limit: 2,
            no_progress_turns: 3,
            escalation: false,
            wrap_up: true,
            output_mode: OutputMode::Auto,
            prompt_caching: PromptCaching::Auto,
            tools_for: None,
            customer_messages: BTreeMap::new(),
            customer_message_fn: None,
            grader: None,
            output_validator: None,
            observer: None,
            stores: StoreSettings::default(),
            capture_content: false,
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

    /// The model, routed by prefix (the table is in [`providers`](crate::providers)):
    /// `claude-...`, `gpt-...`/`o1`/`o3`/`o4`/`chatgpt-...`, `ollama/NAME`,
    /// `dispatch/NAME`, or `test`. An unknown name or a missing key is a
    /// [`ConfigError`] at `build()`.
    #[must_use]
    pub fn model(mut self, name: impl Into<String>) -> Self {
        self.settings.model = Some(name.into());
        self
    }

    /// Any [`LlmClient`]; used instead of routing `model` (which, if set, is still sent
    /// as the request's `model` field).
    #[must_use]
    pub fn llm(mut self, client: impl LlmClient + 'static) -> Self {
        self.settings.llm = Some(Arc::new(client));
        self
    }

    /// A shared [`LlmClient`] (see [`llm`](Self::llm)).
    #[must_use]
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
        /// The cap on round trips, failed ones included (default 50; at least 1).
        max_llm_calls: u32
    );
    setter!(
        /// The cap on tool executions (default 10). Calls past it are answered with a
        /// "limit reached, submit now" result and not run; it never ends a run by itself.
        max_tool_calls: u32
    );
    setter!(
        /// How many consecutive transient provider failures end the run (default 3; at
        /// least 1). A success resets the count.
        max_llm_retries: u32
    );
    setter!(
        /// Corrections allowed after the first malformed turn (default 2): with 2, the
        /// third malformed turn ends the run.
        max_parse_retries: u32
    );
    setter!(
        /// The output-token cap per round trip (tokens, default 4096; at least 1).
        max_tokens: u32
    );
    setter!(
        /// How long one tool execution may take (default 60 s; more than zero).
        tool_timeout: Duration
    );
    setter!(
        /// How long one round trip may take before the runner gives up on it (default
        /// 600 s, the official SDKs' request timeout; more than zero). A call that runs
        /// over is a transient failure, retried like any other. This bounds every
        /// `LlmClient`, including hand-written ones; the HTTP adapters also have their
        /// own `request_timeout`.
        llm_timeout: Duration
    );
    setter!(
        /// The largest tool result shown to the model (bytes, default 100,000, about
        /// 25,000 tokens; at least 1). A longer result is cut at a character boundary and
        /// ends with a note saying how much was left out, so one tool cannot blow the
        /// context window or the token budget.
        max_tool_result_bytes: usize
    );
    setter!(
        /// How long the grader may take (default 60 s; more than zero). A grader that
        /// runs over leaves `scores` at `None`; the outcome is unchanged. Like a tool, a
        /// grader must not block its thread: the timeout can only stop it at an `.await`.
        grader_timeout: Duration
    );
    setter!(
        /// How many tool calls of one turn run at once (default 8; at least 1).
        tool_concurrency: usize
    );
    setter!(
        /// The backoff between retries of a transient provider failure.
        backoff: Backoff
    );
    setter!(
        /// How many times in a row the same call (same tool, same canonical arguments)
        /// may return the same result before the run is `stuck` (default 2; at least 2);
        /// the same call failing `repeated_call_limit + 1` times in a row is stuck too. A
        /// repeat whose result changed (polling a job until it is done, a retry after
        /// "busy, try again") is progress and resets the count.
        repeated_call_limit: u32
    );
    setter!(
        /// How many consecutive turns without new tool result content make the run
        /// `stuck` (default 3; at least 1).
        no_progress_turns: u32
    );
    setter!(
        /// Offers the built-in `escalate_to_human` tool (reason, summary); calling it ends
        /// the run as escalated (default off).
        escalation: bool
    );
    setter!(
        /// When one round trip is left (or a token/cost budget would be passed by one more
        /// ordinary turn), offer only `submit_output` and force it (default on).
        wrap_up: bool
    );
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
    setter!(
        /// How the model is asked for the structured answer (default
        /// [`OutputMode::Auto`]: the best mode the route supports). See [`OutputMode`]
        /// for the modes and how `Auto` chooses. Ignored for `AgentConfig<String>`,
        /// whose answer is plain text. `build()` rejects `Native` for a model known not
        /// to support it ([`ConfigError::UnsupportedOutputMode`]).
        output_mode: OutputMode
    );
    setter!(
        /// Whether the tool definitions and system prompt are marked for the provider's
        /// prompt cache (default [`PromptCaching::Auto`]: when they are about 1,024
        /// tokens or more). See [`PromptCaching`] for what each provider does.
        prompt_caching: PromptCaching
    );

    /// Sampling temperature (0.0 to 2.0; `build()` rejects others).
    ///
    /// Some providers take less, and the adapter sends what they take: Anthropic's
    /// range is 0.0 to 1.0 (a higher value is sent as 1.0), and OpenAI's reasoning
    /// models (o1, o3, o4, gpt-5 but not `-chat`) take none (it is left out).
    /// `build()` logs a `tracing` warning naming the model and what is sent whenever it
    /// differs from the value set here.
    #[must_use]
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.settings.temperature = Some(temperature);
        self
    }

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

    /// The API key for the routed provider, instead of its environment variable.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.settings.provider.api_key = Some(ApiKey::new(key));
        self
    }

    /// The provider's base URL, instead of its environment variable or default.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.settings.provider.base_url = Some(url.into());
        self
    }

    /// The whole-request timeout of the HTTP adapters (default 600 s).
    #[must_use]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.settings.provider.request_timeout = timeout;
        self
    }

    /// The largest provider response body accepted (bytes, default 32 MiB).
    #[must_use]
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.settings.provider.max_response_bytes = bytes;
        self
    }

    /// A cap on input + output tokens over the run (tokens), checked before each call:
    /// the run stops with `budget_exhausted` when the tokens used so far plus those of
    /// the last round trip (the next one is at least as large, the conversation only
    /// grows) would pass it, so it never pays for the call that crosses the cap.
    #[must_use]
    pub fn max_total_tokens(mut self, tokens: u64) -> Self {
        self.settings.max_total_tokens = Some(tokens);
        self
    }

    /// A cap on the run's cost (USD), checked before each call like `max_total_tokens`
    /// (spent so far plus the last round trip's cost). The model needs a price in the
    /// pricing table, else `build()` returns [`ConfigError::MissingPrice`].
    #[must_use]
    pub fn max_cost_usd(mut self, usd: f64) -> Self {
        self.settings.max_cost_usd = Some(usd);
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

    /// A wall-clock deadline for the whole run, from its start (more than zero).
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.settings.deadline = Some(deadline);
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
    /// tool)` is asked for every user tool before each round trip, and a tool it
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

    /// Records what the model saw and said on the run's spans (default `false`: off).
    ///
    /// On, as the OpenTelemetry GenAI conventions' opt-in attributes (JSON text): each
    /// `chat` span gets `gen_ai.system_instructions`, `gen_ai.input.messages` (the whole
    /// conversation sent) and `gen_ai.output.messages` (the reply: text and tool calls,
    /// with its finish reason); each `execute_tool` span `gen_ai.tool.call.arguments` and
    /// `gen_ai.tool.call.result`. Prompts, tool arguments and tool results can hold
    /// personal data: whatever a tool returns is recorded as it is. API keys, request
    /// state (`RunOptions::state`) and providers' opaque tokens (thought signatures) are
    /// never recorded. Off, none of these fields is ever filled.
    #[must_use]
    pub fn capture_content(mut self, on: bool) -> Self {
        self.settings.capture_content = on;
        self
    }
}
