//! [`ConfigError`]: why a config was rejected before any request.

/// Why `build()` or `with_` rejected a config. A malformed config never reaches the loop.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Neither `.model(..)` nor `.llm(..)` was set.
    #[error("no model: set .model(\"NAME\") (routed by prefix: {prefixes}) or .llm(client)")]
    MissingModel {
        /// The routable prefixes, comma-separated.
        prefixes: String,
    },
    /// The model name matches no routing prefix.
    #[error("unknown model {model:?}: the name must start with one of {prefixes}")]
    UnknownModel {
        /// The name given.
        model: String,
        /// The routable prefixes, comma-separated.
        prefixes: String,
    },
    /// An environment variable the provider needs is not set.
    #[error(
        "model {model:?} needs the environment variable {var} (or set it explicitly on the builder)"
    )]
    MissingEnv {
        /// The model name.
        model: String,
        /// The variable's name.
        var: String,
    },
    /// A budget or setting has a value that makes no sense.
    #[error("{setting} = {value} is invalid: {reason}")]
    InvalidSetting {
        /// The setter's name, e.g. `max_llm_calls`.
        setting: &'static str,
        /// The value given.
        value: String,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// The prompt-cache TTL (`prompt_cache_ttl`) is not one the model's provider takes
    /// (see [`PromptCacheTtl`](crate::output::PromptCacheTtl) for the table).
    #[error(
        "prompt_cache_ttl = {ttl} is not supported by {provider} for model {model:?}: \
         allowed: {allowed}"
    )]
    UnsupportedCacheTtl {
        /// The provider (`gen_ai.provider.name`, e.g. `anthropic`, `aws.bedrock`).
        provider: String,
        /// The model the TTL was checked for (a fallback model's too).
        model: String,
        /// The TTL given: `5m`, `1h` or `24h`.
        ttl: String,
        /// The values this provider takes for this model, comma-separated, or `none
        /// (leave prompt_cache_ttl unset)`.
        allowed: String,
    },
    /// Two tools share a name.
    #[error("two tools are named {name:?}: tool names must be unique")]
    DuplicateTool {
        /// The repeated name.
        name: String,
    },
    /// A tool name breaks the providers' rule `^[A-Za-z0-9_-]{1,64}$`.
    #[error("tool name {name:?} is invalid: it must match ^[A-Za-z0-9_-]{{1,64}}$")]
    InvalidToolName {
        /// The name.
        name: String,
    },
    /// A user tool uses a name the runner reserves.
    #[error("tool name {name:?} is reserved by the runner; rename the tool")]
    ReservedToolName {
        /// The name.
        name: String,
    },
    /// A tool's (or the output type's) parameter schema is unusable.
    #[error("the schema of tool {tool:?} is invalid: {message}")]
    InvalidSchema {
        /// The tool name.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// A tool reads application state that the config does not hold.
    #[error(
        "tool {tool:?} needs state of type {type_name}: add it with .state(value), or declare \
         that each run provides it with .expects_state::<{type_name}>()"
    )]
    MissingState {
        /// The tool name.
        tool: String,
        /// The state type.
        type_name: &'static str,
    },
    /// A cost cap was set for a model without a price.
    #[error(
        "max_cost_usd is set but model {model:?} has no price: add one with .price(prefix, ModelPrice)"
    )]
    MissingPrice {
        /// The model name.
        model: String,
    },
    /// The output mode asked for cannot work with this model.
    #[error("output mode {mode} is not available for model {model:?}: {reason}")]
    UnsupportedOutputMode {
        /// The model name.
        model: String,
        /// The mode asked for.
        mode: crate::output::OutputMode,
        /// Why not, and what to use instead.
        reason: String,
    },
    /// A provider setting is invalid (a malformed base URL, for example).
    #[error("provider configuration for {model:?} is invalid: {message}")]
    InvalidProvider {
        /// The model name.
        model: String,
        /// What is wrong.
        message: String,
    },
    /// The model name routes to a provider whose Cargo feature is off in this build
    /// (`bedrock/` without the `bedrock` feature, for example; see docs/providers.md,
    /// "Cargo features"). Raised at `build()`, before any request.
    #[error(
        "model {model:?} routes to {provider}, whose adapter is not built: turn on agent-core's \
         Cargo feature {feature:?} (agent-core = {{ version = \"...\", features = [\"{feature}\"] }})"
    )]
    ProviderFeatureOff {
        /// The model name.
        model: String,
        /// The provider, as the route table names it (`AWS Bedrock`, `OpenAI`, ...).
        provider: &'static str,
        /// The Cargo feature that builds it: `openai`, `anthropic`, `gemini` or
        /// `bedrock`.
        feature: &'static str,
    },
    /// A tool needs approval (`#[tool(requires_approval)]`, or the config has an
    /// `.approval(..)` policy) but the config has no checkpoint store: a paused run
    /// could not be kept until the decision comes.
    #[error(
        "{what} needs approval, which pauses runs, but the config has no checkpoint store: \
         add one with .checkpoints(store)"
    )]
    ApprovalWithoutCheckpoints {
        /// `tool "NAME"` or `the approval policy`.
        what: String,
    },
}
