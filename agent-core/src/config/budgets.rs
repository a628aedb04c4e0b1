//! The plain settings of a config, declared once: budgets, timeouts, guards and
//! switches. Each row of the table below is one setting: its field, default, builder
//! setter (with its docs), the check `build()` makes, and its part in the fingerprint.
//! A new budget is one new row.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::backoff::Backoff;
use crate::error::ConfigError;
use crate::output::{AgentOutput, OutputMode, PromptCaching};

use super::AgentConfigBuilder;

/// A duration in whole milliseconds, saturating.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A rejection: the setting's name when it is not the row's (a field of it), the value
/// as shown in the error, and why.
type Rejected = Option<(Option<&'static str>, String, &'static str)>;

/// `reason` when `bad` holds, showing `value`.
fn reject(bad: bool, value: impl ToString, reason: &'static str) -> Rejected {
    bad.then(|| (None, value.to_string(), reason))
}

/// Generates [`Budgets`] (fields and defaults), its `check` and `fingerprint`, and one
/// builder setter per row.
///
/// A row: doc comments (the setter's), `name: Type = default`, then
/// - `set(Arg) |a| expr`: the setter's argument type and the field's value from it;
/// - `check |v| expr`: a [`Rejected`] for the field's value (`build()` turns it into
///   [`ConfigError::InvalidSetting`] named after the setting), `None` to accept;
/// - `fingerprint KEY |v| expr`: `Some("key")` and the JSON value the fingerprint
///   hashes, or `None` for a setting that does not change requests.
macro_rules! budgets {
    ($(
        $(#[$doc:meta])*
        $name:ident: $ty:ty = $default:expr,
            set($arg:ty) $set:expr,
            check $check:expr,
            fingerprint $key:expr, $fp:expr;
    )*) => {
        /// The plain settings of a config (see the module docs).
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct Budgets {
            $( pub(crate) $name: $ty, )*
        }

        impl Default for Budgets {
            fn default() -> Self {
                Self { $( $name: $default, )* }
            }
        }

        impl Budgets {
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
                    self.settings.budgets.$name = set(value);
                    self
                }
            )*
        }
    };
}

budgets! {
    /// The cap on LLM calls, failed ones included (default 50; at least 1).
    max_llm_calls: u32 = 50,
        set(u32) |v| v,
        check |v| reject(v == 0, v, "a run needs at least one LLM call"),
        fingerprint Some("max_llm_calls"), |v| json!(v);
    /// The cap on tool executions (default 10). Calls past it are answered with a
    /// "limit reached, submit now" result and not run; it never ends a run by itself.
    max_tool_calls: u32 = 10,
        set(u32) |v| v,
        check |_| None,
        fingerprint Some("max_tool_calls"), |v| json!(v);
    /// How many consecutive transient provider failures end the run (default 3; at
    /// least 1). A success resets the count.
    max_llm_retries: u32 = 3,
        set(u32) |v| v,
        check |v| reject(v == 0, v, "it counts failures; the first failure is 1"),
        fingerprint Some("max_llm_retries"), |v| json!(v);
    /// Corrections allowed after the first malformed turn (default 2): with 2, the
    /// third malformed turn ends the run.
    max_parse_retries: u32 = 2,
        set(u32) |v| v,
        check |_| None,
        fingerprint Some("max_parse_retries"), |v| json!(v);
    /// Transfers of the conversation to another agent per run (default 4; see the
    /// builder's `handoff`): one more ends the run `stuck` (`StuckReason::Handoffs`).
    max_handoffs: u32 = 4,
        set(u32) |v| v,
        check |_| None,
        fingerprint None, |_| Value::Null;
    /// The output-token cap per LLM call (tokens, default 4096; at least 1).
    max_tokens: u32 = 4096,
        set(u32) |v| v,
        check |v| reject(v == 0, v, "the model must be allowed some output"),
        fingerprint Some("max_tokens"), |v| json!(v);
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
    /// (see [`Reasoning`](crate::Reasoning) for what each provider gets). `build()`
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
    /// How long one tool execution may take (default 60 s; more than zero).
    tool_timeout: Duration = Duration::from_secs(60),
        set(Duration) |v| v,
        check |v| reject(v.is_zero(), "0 s", "a tool needs time to run"),
        fingerprint Some("tool_timeout_ms"), |v| json!(ms(v));
    /// How long one LLM call may take before the runner gives up on it (default
    /// 600 s, the official SDKs' request timeout; more than zero). A call that runs
    /// over is a transient failure, retried like any other. This bounds every
    /// `LlmClient`, including hand-written ones; the HTTP adapters also have their
    /// own `request_timeout`.
    llm_timeout: Duration = Duration::from_secs(600),
        set(Duration) |v| v,
        check |v| reject(v.is_zero(), "0 s", "a model call needs time"),
        fingerprint Some("llm_timeout_ms"), |v| json!(ms(v));
    /// The largest tool result shown to the model (bytes, default 100,000, about
    /// 25,000 tokens; at least 1). A longer result is cut at a character boundary and
    /// ends with a note saying how much was left out, so one tool cannot blow the
    /// context window or the token budget.
    max_tool_result_bytes: usize = 100_000,
        set(usize) |v| v,
        check |v| reject(v == 0, v, "a tool result needs some bytes"),
        fingerprint Some("max_tool_result_bytes"), |v| json!(v);
    /// How long the grader may take (default 60 s; more than zero). A grader that
    /// runs over leaves `scores` at `None`; the outcome is unchanged. Like a tool, a
    /// grader must not block its thread: the timeout can only stop it at an `.await`.
    grader_timeout: Duration = Duration::from_secs(60),
        set(Duration) |v| v,
        check |v| reject(v.is_zero(), "0 s", "a grader needs time"),
        fingerprint None, |_| Value::Null;
    /// How many tool calls of one turn run at once (default 8; at least 1).
    tool_concurrency: usize = 8,
        set(usize) |v| v,
        check |v| reject(v == 0, v, "at least one tool call must run at a time"),
        fingerprint None, |_| Value::Null;
    /// The backoff between retries of a transient provider failure.
    backoff: Backoff = Backoff::default(),
        set(Backoff) |v| v,
        check |v| (!(0.0..=1.0).contains(&v.jitter))
            .then(|| (Some("backoff.jitter"), v.jitter.to_string(), "it must be between 0.0 and 1.0")),
        fingerprint None, |_| Value::Null;
    /// A cap on input + output tokens over the run (tokens), checked before each call:
    /// the run stops with `budget_exhausted` when the tokens used so far plus those of
    /// the last LLM call (the next one is at least as large, the conversation only
    /// grows) would pass it, so it never pays for the call that crosses the cap.
    max_total_tokens: Option<u64> = None,
        set(u64) Some,
        check |v| reject(v == Some(0), 0, "a run needs some tokens"),
        fingerprint Some("max_total_tokens"), |v| json!(v);
    /// A cap on the run's cost (USD), checked before each call like `max_total_tokens`
    /// (spent so far plus the last LLM call's cost). The model needs a price in the
    /// pricing table, else `build()` returns [`ConfigError::MissingPrice`].
    max_cost_usd: Option<f64> = None,
        set(f64) Some,
        check |v| match v {
            Some(usd) => reject(
                !(usd.is_finite() && usd > 0.0),
                usd,
                "it must be a positive number of USD",
            ),
            None => None,
        },
        fingerprint Some("max_cost_usd"), |v| json!(v);
    /// A wall-clock deadline for the whole run, from its start (more than zero).
    deadline: Option<Duration> = None,
        set(Duration) Some,
        check |v| reject(v.is_some_and(|d| d.is_zero()), "0 s", "a run needs time"),
        fingerprint Some("deadline_ms"), |v| json!(v.map(ms));
    /// How many times in a row the same call (same tool, same canonical arguments)
    /// may return the same result before the run is `stuck` (default 2; at least 2);
    /// the same call failing `repeated_call_limit + 1` times in a row is stuck too. A
    /// repeat whose result changed (polling a job until it is done, a retry after
    /// "busy, try again") is progress and resets the count.
    repeated_call_limit: u32 = 2,
        set(u32) |v| v,
        check |v| reject(v < 2, v, "a first call cannot be a repeat; use 2 or more"),
        fingerprint Some("repeated_call_limit"), |v| json!(v);
    /// How many consecutive turns without new tool result content make the run
    /// `stuck` (default 3; at least 1).
    no_progress_turns: u32 = 3,
        set(u32) |v| v,
        check |v| reject(v == 0, v, "use 1 or more"),
        fingerprint Some("no_progress_turns"), |v| json!(v);
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
