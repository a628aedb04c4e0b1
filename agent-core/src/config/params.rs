//! The plain settings of a config that are not limits (those are `crate::limits`),
//! declared once: the model's sampling and reasoning, the output mode, prompt caching and
//! switches. Each row of the table below is one setting: its field, default, builder
//! setter (with its docs), the check `build()` makes, and its part in the fingerprint.
//! A new setting is one new row.

use serde_json::{Map, Value, json};

use crate::error::ConfigError;
use crate::limits::{Rejected, reject};
use crate::output::{AgentOutput, OutputMode, PromptCacheTtl, PromptCaching};

use super::AgentConfigBuilder;

/// Generates [`Params`] (fields and defaults), its `check` and `fingerprint`, and one
/// builder setter per row.
///
/// A row: doc comments (the setter's), `name: Type = default`, then
/// - `set(Arg) |a| expr`: the setter's argument type and the field's value from it;
/// - `check |v| expr`: a [`Rejected`] for the field's value (`build()` turns it into
///   [`ConfigError::InvalidSetting`] named after the setting), `None` to accept;
/// - `fingerprint KEY |v| expr`: `Some("key")` and the JSON value the fingerprint
///   hashes, or `None` for a setting that does not change requests.
macro_rules! params {
    ($(
        $(#[$doc:meta])*
        $name:ident: $ty:ty = $default:expr,
            set($arg:ty) $set:expr,
            check $check:expr,
            fingerprint $key:expr, $fp:expr;
    )*) => {
        /// The plain settings of a config (see the module docs).
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct Params {
            $( pub(crate) $name: $ty, )*
        }

        impl Default for Params {
            fn default() -> Self {
                Self { $( $name: $default, )* }
            }
        }

        impl Params {
            /// The first rejected setting, in table order.
            ///
            /// # Errors
            /// [`ConfigError::InvalidSetting`] naming the setting.
            pub(crate) fn check(&self) -> Result<(), ConfigError> {
                $(
                    let check: fn($ty) -> Rejected = $check;
                    if let Some((setting, value, reason)) = check(self.$name) {
                        return Err(ConfigError::InvalidSetting {
                            setting: setting.unwrap_or(stringify!($name)),
                            value,
                            reason,
                        });
                    }
                )*
                Ok(())
            }

            /// Appends the settings that change requests to the fingerprint's canonical
            /// object, in table order.
            pub(crate) fn fingerprint(&self, out: &mut Map<String, Value>) {
                $(
                    let key: Option<&str> = $key;
                    if let Some(key) = key {
                        let value: fn($ty) -> Value = $fp;
                        out.insert(key.to_owned(), value(self.$name));
                    }
                )*
            }
        }

        impl<T: AgentOutput> AgentConfigBuilder<T> {
            $(
                $(#[$doc])*
                #[must_use]
                #[allow(clippy::redundant_closure_call)]
                pub fn $name(mut self, value: $arg) -> Self {
                    let set: fn($arg) -> $ty = $set;
                    self.settings.params.$name = set(value);
                    self
                }
            )*
        }
    };
}

params! {
    /// Sampling temperature (0.0 to 2.0; `build()` rejects others).
    ///
    /// Some providers take less, and the adapter sends what they take: Anthropic's
    /// range is 0.0 to 1.0 (a higher value is sent as 1.0), and OpenAI's reasoning
    /// models (o1, o3, o4, gpt-5 but not `-chat`) take none (it is left out).
    /// `build()` logs a `tracing` warning naming the model and what is sent whenever it
    /// differs from the value set here.
    temperature: Option<f32> = None,
        set(f32) Some,
        check |v| match v {
            Some(t) => reject(!(0.0..=2.0).contains(&t), t, "it must be between 0.0 and 2.0"),
            None => None,
        },
        fingerprint Some("temperature"), |v| json!(v);
    /// The reasoning asked of the model: an effort level and/or a thinking budget
    /// (see [`Reasoning`](crate::llm::Reasoning) for what each provider gets). `build()`
    /// returns [`ConfigError::InvalidSetting`] when the model does not reason or cannot
    /// honour the budget (the client's `check_reasoning`).
    reasoning: Option<crate::llm::Reasoning> = None,
        set(crate::llm::Reasoning) Some,
        check |v| reject(
            v.is_some_and(|r| r.effort.is_none() && r.budget_tokens.is_none()),
            "Reasoning::default()",
            "give an effort level or a budget",
        ),
        // In the fingerprint only when set (`fingerprint.rs`).
        fingerprint None, |_| Value::Null;
    /// Offers the built-in `escalate_to_human` tool (reason, summary); calling it ends
    /// the run as escalated (default off).
    escalation: bool = false,
        set(bool) |v| v,
        check |_| None,
        fingerprint Some("escalation"), |v| json!(v);
    /// When one LLM call is left (or a token/cost budget would be passed by one more
    /// ordinary turn), offer only `submit_output` and force it (default on).
    wrap_up: bool = true,
        set(bool) |v| v,
        check |_| None,
        fingerprint Some("wrap_up"), |v| json!(v);
    /// How the model is asked for the structured answer (default
    /// [`OutputMode::Auto`]: the best mode the route supports). See [`OutputMode`]
    /// for the modes and how `Auto` chooses. Ignored for `AgentConfig<String>`,
    /// whose answer is plain text. `build()` rejects `Native` for a model known not
    /// to support it ([`ConfigError::UnsupportedOutputMode`]).
    output_mode: OutputMode = OutputMode::Auto,
        set(OutputMode) |v| v,
        check |_| None,
        fingerprint None, |_| Value::Null;
    /// Whether the tool definitions and system prompt are marked for the provider's
    /// prompt cache (default [`PromptCaching::Auto`]: when they are about 1,024
    /// tokens or more). See [`PromptCaching`] for what each provider does.
    prompt_caching: PromptCaching = PromptCaching::Auto,
        set(PromptCaching) |v| v,
        check |_| None,
        fingerprint None, |_| Value::Null;
    /// How long the provider keeps the cached prefix after its last use (default: unset,
    /// the provider's own default). Sent only while prompt caching is on (see
    /// [`PromptCaching`]); `build()` rejects a TTL the model's provider does not take
    /// (Gemini and OpenAI-compatible servers take none) with
    /// [`ConfigError::UnsupportedCacheTtl`] naming the provider and the values it takes.
    /// See [`PromptCacheTtl`] for what each provider gets.
    prompt_cache_ttl: Option<PromptCacheTtl> = None,
        set(PromptCacheTtl) Some,
        check |_| None,
        // In the fingerprint only when set (`fingerprint.rs`).
        fingerprint None, |_| Value::Null;
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
    capture_content: bool = false,
        set(bool) |v| v,
        check |_| None,
        fingerprint None, |_| Value::Null;
}

/// The builder's per-limit setters: one per row of the limits table, each setting that
/// field of the config's [`Limits`](crate::Limits) (see `crate::limits`).
macro_rules! limit_setters {
    ($(
        $(#[$doc:meta])*
        $name:ident: $ty:ty = $default:expr,
            set($arg:ty) $set:expr,
            check $check:expr,
            fingerprint $key:expr, $fp:expr;
    )*) => {
        impl<T: AgentOutput> AgentConfigBuilder<T> {
            $(
                $(#[$doc])*
                #[must_use]
                #[allow(clippy::redundant_closure_call)]
                pub fn $name(mut self, value: $arg) -> Self {
                    let set: fn($arg) -> $ty = $set;
                    self.settings.limits.$name = set(value);
                    self
                }
            )*
        }
    };
}

crate::limits::limits_table!(limit_setters);
