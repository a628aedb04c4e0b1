//! The provider boundary: [`LlmClient`] and the request/response types an adapter fills.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

mod content;
mod error;
mod estimate;
mod reasoning;
mod refusal;
mod sink;
mod tool_search;

use crate::content::TokenRule;
pub use crate::message::{Message, ToolCall, ToolResult};
use crate::output::OutputMode;
pub use crate::output::{AnswerMode, OutputSpec};
use crate::tool::ToolDefinition;
pub use content::{COMMON_IMAGES, ContentCapabilities, PDF};
pub use error::{LlmError, LlmErrorCause, LlmErrorKind};
pub(crate) use estimate::{message_bytes, message_bytes_with};
pub use reasoning::{Effort, Reasoning};
pub use refusal::RefusalReason;
pub use sink::{StreamDelta, StreamSink};
pub(crate) use sink::{push_piece, replay};
pub use tool_search::{NativeToolSearch, ProviderSearches};

/// The future an [`LlmClient`] returns.
pub type LlmFuture<'a> = Pin<Box<dyn Future<Output = Result<LlmResponse, LlmError>> + Send + 'a>>;

/// A chat model behind some transport: a provider adapter, a scripted test model, or
/// your own (see `examples/custom_llm.rs`).
///
/// Object-safe, `Send + Sync`, usable as `Arc<dyn LlmClient>`. One call is one round
/// trip: the runner owns retries, backoff and budgets, so an implementation must not
/// retry on its own; it classifies each failure as transient or permanent
/// ([`LlmErrorKind`]) and reports any server-given delay in [`LlmError::retry_after`].
pub trait LlmClient: Send + Sync {
    /// Sends one request and returns the model's turn.
    ///
    /// # Errors
    /// An [`LlmError`]: [`LlmErrorKind::Transient`] when the same request may succeed if
    /// sent again (timeouts, 429 rate limits, 5xx), [`LlmErrorKind::Permanent`] otherwise.
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a>;

    /// Sends one request as a streamed LLM call: each piece of the turn goes to
    /// `sink` as it arrives, and the whole turn is returned at the end, as
    /// [`complete`](Self::complete) returns it. The runner calls it for streamed runs
    /// ([`run_agent_stream`](crate::run_agent_stream)).
    ///
    /// The default calls [`complete`](Self::complete) and hands the turn to `sink` in
    /// one piece (its text, then each tool call), so every client works with a
    /// streamed run. The provider adapters stream over SSE, and call
    /// [`StreamSink::flush`] whenever they are about to wait for more of the body (an
    /// implementation that never does still works: the runner flushes the sink when
    /// the turn is complete).
    ///
    /// # Errors
    /// As [`complete`](Self::complete). A stream that ends before the provider's end
    /// marker and before its final chunk (the one with the finish reason; cut
    /// mid-way) is [`LlmErrorKind::Transient`]: the runner retries the whole LLM call
    /// under its usual rules.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a LlmRequest,
        sink: &'a mut dyn StreamSink,
    ) -> LlmFuture<'a> {
        Box::pin(async move {
            let response = self.complete(request).await?;
            replay(&response, sink);
            Ok(response)
        })
    }

    /// The provider's name as in the OpenTelemetry GenAI conventions (`gen_ai.provider.name`),
    /// for example `"anthropic"`, `"openai"`; `"custom"` by default.
    fn provider(&self) -> &str {
        "custom"
    }

    /// What this client can do for structured output with `model` (the wire model
    /// name): whether it enforces a forced tool choice, and whether it takes a native
    /// output schema ([`LlmRequest::output`]). [`OutputMode::Auto`] picks the mode from
    /// this. The default (for hand-written clients) claims both, so `Auto` picks
    /// [`OutputMode::Tool`].
    fn output_capabilities(&self, model: &str) -> OutputCapabilities {
        let _ = model;
        OutputCapabilities::default()
    }

    /// The temperature this client actually sends for `model` when `requested` is
    /// set: the same value (the default), a value clamped to the provider's range, or
    /// `None` when the model takes no temperature. `build()` logs a warning when it
    /// differs from what was set, so a setting is never dropped silently.
    fn effective_temperature(&self, model: &str, requested: f32) -> Option<f32> {
        let _ = model;
        Some(requested)
    }

    /// Whether this client can send `reasoning` for `model` (the wire model name) with
    /// an output cap of `max_tokens` (tokens): `Err` with the reason when the model does
    /// not reason or cannot honour it; `build()` turns it into
    /// `ConfigError::InvalidSetting`. The default (for hand-written clients) accepts
    /// anything.
    ///
    /// # Errors
    /// Why the setting cannot be sent.
    fn check_reasoning(
        &self,
        model: &str,
        reasoning: &Reasoning,
        max_tokens: u32,
    ) -> Result<(), &'static str> {
        let _ = (model, reasoning, max_tokens);
        Ok(())
    }

    /// Which parts `model` takes beside text (images, documents, audio), from where,
    /// and how large: the runner refuses a part the model cannot take before any
    /// request (and a fallback chain skips such a model). The default is text alone
    /// ([`ContentCapabilities::TEXT_ONLY`]): a custom client that takes parts says which.
    fn content_capabilities(&self, model: &str) -> ContentCapabilities {
        let _ = model;
        ContentCapabilities::TEXT_ONLY
    }

    /// The prompt-cache TTLs this client can ask `model`'s provider for
    /// ([`LlmRequest::prompt_cache_ttl`]); `build()` rejects a config whose
    /// `prompt_cache_ttl` is not among them with
    /// [`ConfigError::UnsupportedCacheTtl`](crate::error::ConfigError::UnsupportedCacheTtl).
    /// The default is none: a custom client that sends a TTL says which it takes.
    fn prompt_cache_ttls(&self, model: &str) -> &'static [crate::output::PromptCacheTtl] {
        let _ = model;
        &[]
    }

    /// Whether this client sends `model`'s provider its own tool search
    /// ([`LlmRequest::native_tool_search`]); the default is no (the local search).
    fn native_tool_search(&self, model: &str) -> bool {
        let _ = model;
        false
    }
}

/// What a client can do for structured output (see [`LlmClient::output_capabilities`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputCapabilities {
    /// The server enforces `tool_choice` `required` / a named tool, so a forced
    /// `submit_output` call is guaranteed to be a call (not text).
    pub forced_tool_choice: bool,
    /// The server takes an output JSON Schema ([`OutputMode::Native`]) and constrains
    /// the reply to it.
    pub native: bool,
    /// In native mode, the model sees the schema (its field names, descriptions and
    /// allowed values): OpenAI and Anthropic show it to the model. Grammar-based
    /// servers (llama.cpp, vLLM, Ollama) only constrain decoding, so the model would
    /// fill fields it was never told the meaning of; when this is `false`, native mode
    /// also puts the schema in the system prompt, as prompted mode does.
    pub native_schema_seen: bool,
    /// In native mode, the output schema constrains every token of the reply, so a
    /// request that carries it can never make a tool call: grammar-based servers
    /// (llama.cpp, vLLM, Ollama) apply `response_format` as a grammar over the whole
    /// reply. When this is `true`, the runner sends the schema only on turns that
    /// offer no tool or force the answer (`tool_choice: none`, the nudge and wrap-up
    /// turns), and turns that let the model look things up go without it; an answer
    /// such a turn writes as text is validated as usual, and a malformed one is
    /// corrected on a turn that carries the schema. A lookup repeated with the same
    /// result (which ends a run `stuck` elsewhere) gets that answering turn instead.
    pub native_blocks_tools: bool,
}

impl Default for OutputCapabilities {
    fn default() -> Self {
        Self {
            forced_tool_choice: true,
            native: true,
            native_schema_seen: true,
            native_blocks_tools: false,
        }
    }
}

impl OutputCapabilities {
    /// Capabilities from the first two facts; the model sees a native schema
    /// (see [`native_schema_seen`](Self::native_schema_seen); set it with
    /// [`with_native_schema_seen`](Self::with_native_schema_seen)).
    pub const fn new(forced_tool_choice: bool, native: bool) -> Self {
        Self {
            forced_tool_choice,
            native,
            native_schema_seen: true,
            native_blocks_tools: false,
        }
    }

    /// Sets whether the model sees a native schema.
    #[must_use]
    pub const fn with_native_schema_seen(mut self, seen: bool) -> Self {
        self.native_schema_seen = seen;
        self
    }

    /// Sets whether a native schema blocks tool calls (see
    /// [`native_blocks_tools`](Self::native_blocks_tools)).
    #[must_use]
    pub const fn with_native_blocks_tools(mut self, blocks: bool) -> Self {
        self.native_blocks_tools = blocks;
        self
    }

    /// The mode [`OutputMode::Auto`] resolves to: [`OutputMode::Tool`] where a forced
    /// tool call is enforced, else [`OutputMode::Native`] where an output schema is,
    /// else [`OutputMode::Prompted`].
    pub fn auto_mode(self) -> OutputMode {
        if self.forced_tool_choice {
            OutputMode::Tool
        } else if self.native {
            OutputMode::Native
        } else {
            OutputMode::Prompted
        }
    }
}

impl<C: LlmClient + ?Sized> LlmClient for Arc<C> {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        (**self).complete(request)
    }
    fn complete_streaming<'a>(
        &'a self,
        request: &'a LlmRequest,
        sink: &'a mut dyn StreamSink,
    ) -> LlmFuture<'a> {
        (**self).complete_streaming(request, sink)
    }
    fn provider(&self) -> &str {
        (**self).provider()
    }
    fn output_capabilities(&self, model: &str) -> OutputCapabilities {
        (**self).output_capabilities(model)
    }
    fn effective_temperature(&self, model: &str, requested: f32) -> Option<f32> {
        (**self).effective_temperature(model, requested)
    }
    fn check_reasoning(
        &self,
        model: &str,
        reasoning: &Reasoning,
        max_tokens: u32,
    ) -> Result<(), &'static str> {
        (**self).check_reasoning(model, reasoning, max_tokens)
    }

    fn content_capabilities(&self, model: &str) -> ContentCapabilities {
        (**self).content_capabilities(model)
    }

    fn prompt_cache_ttls(&self, model: &str) -> &'static [crate::output::PromptCacheTtl] {
        (**self).prompt_cache_ttls(model)
    }

    fn native_tool_search(&self, model: &str) -> bool {
        (**self).native_tool_search(model)
    }
}

/// Which tools the model may or must call in a turn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (OpenAI `"auto"`, Anthropic `{"type":"auto"}`).
    #[default]
    Auto,
    /// The model must call some tool (OpenAI `"required"`, Anthropic `{"type":"any"}`).
    Required,
    /// The model must call this tool (OpenAI `{"type":"function",..}`, Anthropic `{"type":"tool",..}`).
    Tool(String),
    /// The model may not call tools.
    None,
}

/// One LLM call's request. The runner builds it; adapters translate it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LlmRequest {
    /// The model name as the provider knows it (routing prefixes such as `dispatch/` removed).
    pub model: String,
    /// The system prompt, if any.
    pub system: Option<String>,
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// The tools offered in this turn (including the synthetic `submit_output`).
    pub tools: Arc<[ToolDefinition]>,
    /// Which tools the model may or must call.
    pub tool_choice: ToolChoice,
    /// The cap on output tokens for this call (tokens).
    pub max_tokens: u32,
    /// Sampling temperature, when set.
    pub temperature: Option<f32>,
    /// Whether to mark the request's stable prefix (tool definitions and system
    /// prompt) for the provider's prompt cache. Anthropic gets a `cache_control`
    /// breakpoint on the system prompt (else on the last tool definition), Bedrock a
    /// `cachePoint` block in the same place (on the models that take one), OpenAI and
    /// Azure OpenAI the `prompt_cache_key` and `prompt_cache_retention` below; Gemini
    /// caches by itself and ignores it (see
    /// [`PromptCaching`](crate::output::PromptCaching)). Set by the config's
    /// `prompt_caching`. Off, the request is exactly as without caching.
    pub prompt_cache: bool,
    /// How long the provider keeps the cached prefix (the config's `prompt_cache_ttl`),
    /// sent only with `prompt_cache`; `None` leaves the provider's default. An adapter
    /// drops a TTL its provider does not take ([`LlmClient::prompt_cache_ttls`]; a
    /// config never has one).
    pub prompt_cache_ttl: Option<crate::output::PromptCacheTtl>,
    /// OpenAI's `prompt_cache_key` (the config's `prompt_cache_key`), sent to OpenAI
    /// and Azure OpenAI only with `prompt_cache`; other providers ignore it.
    pub prompt_cache_key: Option<Arc<str>>,
    /// The structured answer expected in text, in [`OutputMode::Native`] (adapters send
    /// the schema as the provider's structured-output setting) or
    /// [`OutputMode::Prompted`] (the schema is in the system prompt; adapters send
    /// nothing). `None` in [`OutputMode::Tool`] and for plain-text output.
    pub output: Option<Arc<OutputSpec>>,
    /// The reasoning asked of the model (the builder's `reasoning`), sent as the
    /// provider takes it (see [`Reasoning`]); `None` sends nothing.
    pub reasoning: Option<Reasoning>,
    /// How the estimates count the request's parts: the rule of the model the runner
    /// sends it to (its [`ContentCapabilities::tokens`]), set when the run has parts.
    pub(crate) token_rule: TokenRule,
    /// The provider's own tool search, when the runner asks for it (see
    /// [`NativeToolSearch`]); `None` sends none (the default).
    pub native_tool_search: Option<Arc<NativeToolSearch>>,
}

impl LlmRequest {
    /// A request with no messages, no tools, `tool_choice` auto and `max_tokens` 4096.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            system: None,
            messages: Vec::new(),
            tools: Arc::from(Vec::new()),
            tool_choice: ToolChoice::Auto,
            max_tokens: 4096,
            temperature: None,
            prompt_cache: false,
            prompt_cache_ttl: None,
            prompt_cache_key: None,
            output: None,
            reasoning: None,
            token_rule: TokenRule::Conservative,
            native_tool_search: None,
        }
    }

    /// An estimate of the request's input tokens, for servers that report no usage:
    /// the bytes of the system prompt, every message (text, tool call arguments as JSON,
    /// tool results) and every tool definition (description and parameter schema as
    /// JSON), divided by 4, rounded up. Four bytes per token is the usual rule of thumb
    /// for English text with the common tokenizers; it overestimates for JSON-heavy
    /// prompts less than it underestimates for code, which is the safe side for a cap.
    /// An image, a document or audio counts as the tokens of its provider's published
    /// rule ([`TokenRule`]: the rule of the model the runner sends the request to, the
    /// conservative one for a request made by hand).
    pub fn estimated_input_tokens(&self) -> u64 {
        self.estimated_input_tokens_with(&self.messages)
    }

    /// [`estimated_input_tokens`](Self::estimated_input_tokens) of this request with
    /// `messages` in place of its own (the runner keeps a run's messages beside the
    /// request between calls).
    pub(crate) fn estimated_input_tokens_with(&self, messages: &[Message]) -> u64 {
        let mut bytes = self.system.as_ref().map_or(0, String::len);
        let rule = self.token_rule;
        bytes += messages
            .iter()
            .map(|m| message_bytes_with(m, rule))
            .sum::<usize>();
        bytes += self
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum::<usize>();
        if let Some(spec) = &self.output {
            bytes += spec.schema.to_string().len();
        }
        (bytes as u64).div_ceil(4)
    }

    /// Sets the expected structured answer (see [`output`](Self::output)).
    #[must_use]
    pub fn with_output(mut self, spec: OutputSpec) -> Self {
        self.output = Some(Arc::new(spec));
        self
    }

    /// Sets the system prompt.
    #[must_use]
    pub fn with_system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Appends a message.
    #[must_use]
    pub fn with_message(mut self, message: Message) -> Self {
        self.messages.push(message);
        self
    }

    /// Sets the offered tools.
    #[must_use]
    pub fn with_tools(mut self, tools: Vec<ToolDefinition>) -> Self {
        self.tools = Arc::from(tools);
        self
    }

    /// Sets the tool choice.
    #[must_use]
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// Sets the output-token cap (tokens).
    #[must_use]
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Sets the temperature.
    #[must_use]
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }
}

/// Why the model stopped, normalized across providers.
///
/// The runner classifies a turn by its content, never by `EndTurn`/`ToolUse` (case C5:
/// servers mislabel them). Three stop reasons change what the turn means (the table per
/// provider is in `docs/providers.md`, "Stop reasons"): `Refusal` and `ContentFilter`
/// end the run (`refused`), `ContextWindowExceeded` ends it (`context_window_exceeded`),
/// and `MaxTokens` marks the turn's last tool call, or an empty turn, as cut off by the
/// output cap. The stop reason is also traced (`gen_ai.response.finish_reasons`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The model finished its turn (Anthropic `end_turn`, OpenAI `stop`).
    #[default]
    EndTurn,
    /// The model stopped to call tools (Anthropic `tool_use`, OpenAI `tool_calls`).
    ToolUse,
    /// The output-token cap was reached (Anthropic `max_tokens`, OpenAI `length`).
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// Output was filtered (OpenAI `content_filter`).
    ContentFilter,
    /// The model refused (Anthropic `refusal`, OpenAI a `message.refusal`).
    Refusal,
    /// The conversation filled the model's context window (Anthropic
    /// `model_context_window_exceeded`).
    ContextWindowExceeded,
    /// The provider paused a long turn (Anthropic `pause_turn`, during server tools
    /// such as web search): not an answer. The runner sends the turn's content back
    /// unchanged ([`LlmResponse::provider_content`], as a
    /// [`Message::Paused`]) and the model goes on with it, in
    /// the next LLM call (case C41).
    PauseTurn,
    /// Anything else, as the provider spelled it.
    Other(String),
}

impl StopReason {
    /// The OpenTelemetry `gen_ai.response.finish_reasons` spelling.
    pub fn as_str(&self) -> &str {
        match self {
            Self::EndTurn => "stop",
            Self::ToolUse => "tool_calls",
            Self::MaxTokens => "length",
            Self::StopSequence => "stop_sequence",
            Self::ContentFilter => "content_filter",
            Self::Refusal => "refusal",
            Self::ContextWindowExceeded => "context_window_exceeded",
            Self::PauseTurn => "pause_turn",
            Self::Other(s) => s,
        }
    }
}

/// Token counts of one LLM call (tokens).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TokenUsage {
    /// Input (prompt) tokens, including cached ones (tokens).
    pub input_tokens: u64,
    /// Output (completion) tokens, reasoning tokens included (tokens): every token
    /// class the provider bills at its output rate, however it reports them (a server
    /// that counts reasoning apart from its completion count has both added here; case
    /// C56, see `docs/providers.md`, "Usage").
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache (a subset of `input_tokens`).
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache (Anthropic `cache_creation_input_tokens`).
    pub cache_write_tokens: u64,
    /// Whether the call went through the provider's batch API, so that every token of
    /// it is billed at the batch price ([`BATCH_PRICE_FACTOR`](crate::pricing::BATCH_PRICE_FACTOR)
    /// of the listed rates; see [`ModelPrice::cost`](crate::pricing::ModelPrice::cost)).
    /// Set on the answers of a provider batch job (`.provider_batch(..)`); `false` for
    /// live calls.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub batch: bool,
}

impl TokenUsage {
    /// Usage with the given input and output tokens.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            batch: false,
        }
    }

    /// Marks the usage as billed at the batch price (see [`batch`](Self::batch)).
    #[must_use]
    pub fn with_batch(mut self, batch: bool) -> Self {
        self.batch = batch;
        self
    }

    /// Sets the cache token counts (tokens).
    #[must_use]
    pub fn with_cache(mut self, read: u64, write: u64) -> Self {
        self.cache_read_tokens = read;
        self.cache_write_tokens = write;
        self
    }
}

/// One model turn, normalized.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct LlmResponse {
    /// The turn's text: all text blocks joined; empty when there was none.
    pub text: String,
    /// The tool calls, in emission order, each with a unique id.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Token usage of this LLM call.
    pub usage: TokenUsage,
    /// The provider's request id (`request-id`, `x-request-id`), when sent.
    pub request_id: Option<String>,
    /// The model that answered, when the provider says.
    pub model: Option<String>,
    /// Reasoning the provider returned apart from the answer (vLLM and LM Studio
    /// `reasoning_content`, Ollama `reasoning`); empty when none. Not part of the
    /// conversation; in native and prompted output modes an answer found only here
    /// (some reasoning parsers put the JSON there) is read from it.
    pub reasoning: String,
    /// The turn's content exactly as the provider sent it, when it must go back
    /// unchanged: set with [`StopReason::PauseTurn`] (Anthropic's content blocks,
    /// server tool blocks included); `None` otherwise.
    pub provider_content: Option<serde_json::Value>,
    /// The structured reason a refusal or content filter came with (case C58), when
    /// the provider gave one: set with [`StopReason::Refusal`] or
    /// [`StopReason::ContentFilter`]; `None` otherwise.
    pub refusal: Option<RefusalReason>,
    /// The provider's own tool searches of the turn, when it ran any (boxed: rare).
    pub provider_searches: Option<Box<ProviderSearches>>,
}

impl LlmResponse {
    /// An estimate of the turn's output tokens, for servers that report no usage: the
    /// bytes of its text, its reasoning and its tool calls (names and arguments as JSON),
    /// divided by 4, rounded up (the rule of [`LlmRequest::estimated_input_tokens`]).
    pub fn estimated_output_tokens(&self) -> u64 {
        let bytes = self.text.len()
            + self.reasoning.len()
            + self
                .tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.to_string().len())
                .sum::<usize>();
        (bytes as u64).div_ceil(4)
    }

    /// A plain-text turn.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// A turn of tool calls (stop reason `ToolUse`).
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls: calls,
            stop_reason: StopReason::ToolUse,
            ..Self::default()
        }
    }

    /// Sets the text.
    #[must_use]
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    /// Sets the usage.
    #[must_use]
    pub fn with_usage(mut self, usage: TokenUsage) -> Self {
        self.usage = usage;
        self
    }

    /// Sets the stop reason.
    #[must_use]
    pub fn with_stop_reason(mut self, stop_reason: StopReason) -> Self {
        self.stop_reason = stop_reason;
        self
    }

    /// Sets the provider request id.
    #[must_use]
    pub fn with_request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }

    /// Sets the reasoning text (kept as the turn's transcript part,
    /// [`Message::reasoning`]).
    #[must_use]
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = reasoning.into();
        self
    }
}
