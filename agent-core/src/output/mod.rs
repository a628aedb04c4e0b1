//! The [`AgentOutput`] trait: a run's output type and how a submission becomes a value;
//! [`OutputMode`]: how the model is asked for it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod answer;
mod reasoning;

use crate::tool::ToolDefinition;
use crate::validate::ValidationErrors;
pub(crate) use answer::{Extracted, extract_json, prompted_system};
pub(crate) use reasoning::{reasoning_open, without_reasoning};

/// The name of the synthetic tool whose valid call ends a run.
pub const SUBMIT_OUTPUT: &str = "submit_output";

/// The name of the built-in escalation tool (see the builder's `escalation`).
pub const ESCALATE_TO_HUMAN: &str = "escalate_to_human";

/// How the model is asked for the structured answer; set with the builder's
/// `output_mode`, kept by `with_`.
///
/// Every mode has the same contract: the answer is validated against the output type's
/// JSON Schema (then deserialized, then checked by any `validate` fn or output
/// validator); a rejected answer is fed back with the JSON path of each problem and
/// counts against `max_parse_retries`; the same categories end a run; the wrap-up turn
/// and escalation work alike. Other tools stay usable in every mode.
///
/// | mode | the model answers with | what is sent |
/// |---|---|---|
/// | `Tool` | a `submit_output` tool call | `submit_output` among the tools; a forced tool choice after a plain-text turn and in the wrap-up turn |
/// | `Native` | JSON text | the provider's structured output: OpenAI and compatible servers `response_format: {type: json_schema, ..}`, Anthropic `output_config: {format: {type: json_schema, ..}}`; on grammar-based servers, which never show that schema to the model, the schema goes in the system prompt too, and turns that offer tools go without it (the grammar would forbid a tool call; `OutputCapabilities::native_blocks_tools`) |
/// | `Prompted` | JSON text (bare, fenced, or followed by text) | the schema and an instruction appended to the system prompt, nothing else |
/// | `Auto` | | the best mode the route supports (below) |
///
/// `Auto` (the default) resolves when the config is built, from the client's
/// [`OutputCapabilities`](crate::llm::OutputCapabilities): `Tool` where the server enforces
/// a forced tool call (Anthropic, OpenAI, the `test` model, hand-written clients);
/// `Native` where it does not but constrains output to a schema (`ollama/` and
/// `dispatch/`: llama.cpp, vLLM and Ollama apply `response_format` as a grammar or
/// guided decoding, while `tool_choice` depends on the model's chat template);
/// `Prompted` where it does neither. The table per provider and model is in
/// [`providers`](crate::providers). `AgentResult::output` holds the raw answer text in
/// `Native` and `Prompted` modes, the submitted arguments in `Tool` mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutputMode {
    /// The best mode the route supports (see the table above).
    #[default]
    Auto,
    /// The synthetic `submit_output` tool.
    Tool,
    /// The provider's structured output (a JSON Schema the server enforces).
    Native,
    /// The schema in the system prompt; the JSON object is read from the text.
    Prompted,
}

/// Whether a config marks its stable prompt prefix (tool definitions and system prompt)
/// for the provider's prompt cache; set with the builder's `prompt_caching`, with its
/// lifetime set by `prompt_cache_ttl` ([`PromptCacheTtl`]) and its OpenAI routing key by
/// `prompt_cache_key`.
///
/// The same meaning on every wire: *on* asks the provider to serve this prefix from its
/// cache on the next request that repeats it; *off* (or `Auto` on a short prefix) sends
/// the request exactly as without caching. What each provider gets (the sources and the
/// full rules are in `docs/providers.md`, "Prompt caching"):
/// - Anthropic: a `cache_control: {"type": "ephemeral"}` breakpoint (with `"ttl"` when a
///   TTL is set) on the system prompt, else on the last tool (source:
///   <https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching>). A write costs
///   1.25x the input rate (2x with a 1-hour TTL), a read 0.1x.
/// - AWS Bedrock Converse: a `{"cachePoint": {"type": "default"}}` block (with `"ttl"`)
///   after the system prompt, else after the tools (Claude only; Nova caches no tools),
///   for the models that take cache points: Claude 3.5 Haiku, 3.7 Sonnet and 4 or later,
///   and Amazon Nova (sources:
///   <https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html>,
///   <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CachePointBlock.html>).
///   Other Bedrock models reject a cache point, so they get none.
/// - OpenAI and Azure OpenAI (Chat Completions and Responses): the prefix is cached by the
///   server with no marker; *on* sends `prompt_cache_key` when one is set and
///   `prompt_cache_retention` when a TTL is set (source:
///   <https://platform.openai.com/docs/guides/prompt-caching>).
/// - Gemini: implicit caching, with no marker and no setting (source:
///   <https://ai.google.dev/gemini-api/docs/caching>); the flag changes nothing there.
///
/// Every provider's cache reads (and Anthropic's and Bedrock's writes) land in
/// `Usage::cache_read_tokens` / `cache_write_tokens` and are priced at the cache rates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PromptCaching {
    /// Mark the prefix when it is long enough to be cached: about 1,024 tokens or more
    /// of tool definitions and system prompt (estimated at 4 bytes a token).
    #[default]
    Auto,
    /// Always mark it.
    On,
    /// Never mark it.
    Off,
}

/// How long the provider keeps a cached prefix after its last use; set with the
/// builder's `prompt_cache_ttl` (unset: the provider's default, which is 5 minutes, or
/// OpenAI's in-memory retention).
///
/// Each provider takes a few values only, and `build()` rejects any other with
/// [`ConfigError::UnsupportedCacheTtl`](crate::error::ConfigError::UnsupportedCacheTtl)
/// naming the provider and the values it takes:
///
/// | provider | `FiveMinutes` | `OneHour` | `TwentyFourHours` |
/// |---|---|---|---|
/// | Anthropic | `"ttl": "5m"` | `"ttl": "1h"` (writes cost 2x input) | rejected |
/// | Bedrock, Claude 4.5 and later | `"ttl": "5m"` | `"ttl": "1h"` | rejected |
/// | Bedrock, other caching models | `"ttl": "5m"` | rejected | rejected |
/// | OpenAI, Azure OpenAI | `prompt_cache_retention: "in_memory"` | rejected | `prompt_cache_retention: "24h"` |
/// | Gemini, OpenAI-compatible servers, other Bedrock models | rejected | rejected | rejected |
///
/// OpenAI's in-memory retention keeps a prefix 5 to 10 minutes after its last use (at
/// most an hour), which is what `FiveMinutes` means elsewhere; its extended retention
/// keeps it up to 24 hours, on the models its guide lists (GPT-5.x, GPT-4.1; others
/// answer 400). Sources: <https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching>,
/// <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CachePointBlock.html>,
/// <https://platform.openai.com/docs/guides/prompt-caching#prompt-cache-retention>.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum PromptCacheTtl {
    /// Five minutes (Anthropic's and Bedrock's default; OpenAI's in-memory retention).
    #[serde(rename = "5m")]
    FiveMinutes,
    /// One hour (Anthropic; Bedrock for Claude 4.5 and later).
    #[serde(rename = "1h")]
    OneHour,
    /// Twenty-four hours (OpenAI's and Azure OpenAI's extended retention).
    #[serde(rename = "24h")]
    TwentyFourHours,
}

impl PromptCacheTtl {
    /// The short name: `5m`, `1h` or `24h` (Anthropic's and Bedrock's `ttl` values).
    pub fn as_str(self) -> &'static str {
        match self {
            PromptCacheTtl::FiveMinutes => "5m",
            PromptCacheTtl::OneHour => "1h",
            PromptCacheTtl::TwentyFourHours => "24h",
        }
    }
}

impl std::fmt::Display for PromptCacheTtl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PromptCaching {
    /// The estimated prefix size (tokens) from which `Auto` marks it.
    pub const AUTO_MIN_TOKENS: u64 = 1024;
}

impl OutputMode {
    /// The stable name: `auto`, `tool`, `native` or `prompted`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputMode::Auto => "auto",
            OutputMode::Tool => "tool",
            OutputMode::Native => "native",
            OutputMode::Prompted => "prompted",
        }
    }
}

impl std::fmt::Display for OutputMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for OutputMode {
    type Err = String;

    /// Parses `auto`, `tool`, `native` or `prompted`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(OutputMode::Auto),
            "tool" => Ok(OutputMode::Tool),
            "native" => Ok(OutputMode::Native),
            "prompted" => Ok(OutputMode::Prompted),
            other => Err(format!(
                "unknown output mode {other:?}; use auto, tool, native or prompted"
            )),
        }
    }
}

/// A type a run can end with.
///
/// `#[agent_output]` implements it for a struct: [`output_tool`](Self::output_tool) is
/// `submit_output` with the struct's JSON Schema as parameters, and
/// [`from_arguments`](Self::from_arguments) validates against that schema (compiled
/// once), then deserializes, then runs the struct's `validate = path` check.
///
/// `String` implements it as the compat mode: no `submit_output`; a plain-text turn ends
/// the run with its text.
pub trait AgentOutput: Sized + Send + 'static {
    /// The synthetic tool whose valid call ends the run, named [`SUBMIT_OUTPUT`]; `None`
    /// for the text compat mode.
    fn output_tool() -> Option<ToolDefinition>;

    /// Turns `submit_output` arguments into a value.
    ///
    /// # Errors
    /// Every problem, each message naming the JSON path and the rule
    /// (`"/severity: 9 is greater than the maximum of 4"`); the runner feeds them back
    /// to the model.
    fn from_arguments(arguments: &Value) -> Result<Self, ValidationErrors>;

    /// In compat mode, the value a plain-text turn ends the run with; `None` (the
    /// default) for types that end only through `submit_output`.
    fn from_text(text: &str) -> Option<Self> {
        let _ = text;
        None
    }

    /// Whether this answer is partial: some of the work done, some left open (for
    /// example a field `open_items` that is not empty). `false` by default;
    /// `#[agent_output(partial = path)]` names a `fn(&Self) -> bool`. A partial answer
    /// still ends the run `answered`; `AgentResult::is_partial` and the batch
    /// `Receipt` (its `partial` count) tell it apart from a full one.
    fn is_partial(&self) -> bool {
        false
    }
}

impl AgentOutput for String {
    fn output_tool() -> Option<ToolDefinition> {
        None
    }

    fn from_arguments(_arguments: &Value) -> Result<Self, ValidationErrors> {
        Err(ValidationErrors::one(
            "/: this run ends with plain text, not a submit_output call",
        ))
    }

    fn from_text(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
}

/// How the schema of an answer given as text reaches the model: the two
/// [`OutputMode`]s an [`OutputSpec`] can be in (the tool mode has no spec; `Auto` is
/// resolved at `build()`). Compares equal to the [`OutputMode`] of the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerMode {
    /// The provider's structured output (a JSON Schema the server enforces).
    Native,
    /// The schema in the system prompt; the JSON object is read from the text.
    Prompted,
}

impl From<AnswerMode> for OutputMode {
    fn from(mode: AnswerMode) -> Self {
        match mode {
            AnswerMode::Native => OutputMode::Native,
            AnswerMode::Prompted => OutputMode::Prompted,
        }
    }
}

impl PartialEq<OutputMode> for AnswerMode {
    fn eq(&self, other: &OutputMode) -> bool {
        OutputMode::from(*self) == *other
    }
}

impl PartialEq<AnswerMode> for OutputMode {
    fn eq(&self, other: &AnswerMode) -> bool {
        *self == OutputMode::from(*other)
    }
}

/// The structured answer a request expects in the model's text.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct OutputSpec {
    /// How the schema reaches the model.
    pub mode: AnswerMode,
    /// A name for the schema (`^[A-Za-z0-9_-]{1,64}$`; OpenAI's `json_schema.name`).
    pub name: String,
    /// What the answer is, for the model (the output type's doc comment).
    pub description: String,
    /// The canonical JSON Schema of the answer (an object schema); adapters transform
    /// it per provider.
    pub schema: Value,
}

impl OutputSpec {
    /// A spec from its parts.
    pub fn new(
        mode: AnswerMode,
        name: impl Into<String>,
        description: impl Into<String>,
        schema: Value,
    ) -> Self {
        Self {
            mode,
            name: name.into(),
            description: description.into(),
            schema,
        }
    }

    /// Whether adapters send the schema as the provider's structured-output setting.
    pub fn is_native(&self) -> bool {
        self.mode == AnswerMode::Native
    }
}
