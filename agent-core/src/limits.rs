//! [`Limits`]: every cap, retry count, timeout and guard of a run, as one value.
//!
//! The rows of [`limits_table!`] declare each limit once: its field, default, builder
//! setter (with its docs), the check `build()` makes, and its part in the fingerprint.
//! The same table gives the fields and chainable setters of [`Limits`], its checks, and
//! the builder's per-limit setters (`config/builder.rs`). A new limit is one new row.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ConfigError;

/// A duration in whole milliseconds, saturating.
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A rejection: the setting's name when it is not the row's (a field of it), the value
/// as shown in the error, and why.
pub(crate) type Rejected = Option<(Option<&'static str>, String, &'static str)>;

/// `reason` when `bad` holds, showing `value`.
pub(crate) fn reject(bad: bool, value: impl ToString, reason: &'static str) -> Rejected {
    bad.then(|| (None, value.to_string(), reason))
}

/// The table of limits: calls `$callback!` with every row (see the module docs).
///
/// A row: doc comments (the field's and the setters'), `name: Type = default`, then
/// - `set(Arg) |a| expr`: the setters' argument type and the field's value from it;
/// - `check |v| expr`: a [`Rejected`] for the field's value (`build()` turns it into
///   [`ConfigError::InvalidSetting`] named after the setting), `None` to accept;
/// - `fingerprint KEY |v| expr`: `Some("key")` and the JSON value the fingerprint
///   hashes, or `None` for a limit that does not change requests.
macro_rules! limits_table {
    ($callback:ident) => {
        $callback! {
            /// The cap on LLM calls, failed ones included (default 50; at least 1).
            max_llm_calls: u32 = 50,
                set(u32) |v| v,
                check |v| $crate::limits::reject(v == 0, v, "a run needs at least one LLM call"),
                fingerprint Some("max_llm_calls"), |v| ::serde_json::json!(v);
            /// The cap on tool executions (default 10). Calls past it are answered with a
            /// "limit reached, submit now" result and not run; it never ends a run by itself.
            max_tool_calls: u32 = 10,
                set(u32) |v| v,
                check |_| None,
                fingerprint Some("max_tool_calls"), |v| ::serde_json::json!(v);
            /// How many consecutive transient provider failures end the run (default 3; at
            /// least 1). A success resets the count.
            max_llm_retries: u32 = 3,
                set(u32) |v| v,
                check |v| $crate::limits::reject(v == 0, v, "it counts failures; the first failure is 1"),
                fingerprint Some("max_llm_retries"), |v| ::serde_json::json!(v);
            /// Corrections allowed after the first malformed turn (default 2): with 2, the
            /// third malformed turn ends the run.
            max_parse_retries: u32 = 2,
                set(u32) |v| v,
                check |_| None,
                fingerprint Some("max_parse_retries"), |v| ::serde_json::json!(v);
            /// Transfers of the conversation to another agent per run (default 4; see the
            /// builder's `handoff`): one more ends the run `stuck` (`StuckReason::Handoffs`).
            max_handoffs: u32 = 4,
                set(u32) |v| v,
                check |_| None,
                fingerprint None, |_| ::serde_json::Value::Null;
            /// The output-token cap per LLM call (tokens, default 4096; at least 1).
            max_tokens: u32 = 4096,
                set(u32) |v| v,
                check |v| $crate::limits::reject(v == 0, v, "the model must be allowed some output"),
                fingerprint Some("max_tokens"), |v| ::serde_json::json!(v);
            /// How long one tool execution may take (default 60 s; more than zero).
            tool_timeout: ::std::time::Duration = ::std::time::Duration::from_secs(60),
                set(::std::time::Duration) |v| v,
                check |v| $crate::limits::reject(v.is_zero(), "0 s", "a tool needs time to run"),
                fingerprint Some("tool_timeout_ms"), |v| ::serde_json::json!($crate::limits::ms(v));
            /// How long one LLM call may take before the runner gives up on it (default
            /// 600 s, the official SDKs' request timeout; more than zero). A call that runs
            /// over is a transient failure, retried like any other. This bounds every
            /// `LlmClient`, including hand-written ones; the HTTP adapters also have their
            /// own `request_timeout`.
            llm_timeout: ::std::time::Duration = ::std::time::Duration::from_secs(600),
                set(::std::time::Duration) |v| v,
                check |v| $crate::limits::reject(v.is_zero(), "0 s", "a model call needs time"),
                fingerprint Some("llm_timeout_ms"), |v| ::serde_json::json!($crate::limits::ms(v));
            /// The largest tool result shown to the model (bytes, default 100,000, about
            /// 25,000 tokens; at least 1). A longer result is cut at a character boundary and
            /// ends with a note saying how much was left out, so one tool cannot blow the
            /// context window or the token budget.
            max_tool_result_bytes: usize = 100_000,
                set(usize) |v| v,
                check |v| $crate::limits::reject(v == 0, v, "a tool result needs some bytes"),
                fingerprint Some("max_tool_result_bytes"), |v| ::serde_json::json!(v);
            /// How long the grader may take (default 60 s; more than zero). A grader that
            /// runs over leaves `scores` at `None`; the outcome is unchanged. Like a tool, a
            /// grader must not block its thread: the timeout can only stop it at an `.await`.
            grader_timeout: ::std::time::Duration = ::std::time::Duration::from_secs(60),
                set(::std::time::Duration) |v| v,
                check |v| $crate::limits::reject(v.is_zero(), "0 s", "a grader needs time"),
                fingerprint None, |_| ::serde_json::Value::Null;
            /// How many tool calls of one turn run at once (default 8; at least 1).
            tool_concurrency: usize = 8,
                set(usize) |v| v,
                check |v| $crate::limits::reject(v == 0, v, "at least one tool call must run at a time"),
                fingerprint None, |_| ::serde_json::Value::Null;
            /// The backoff between retries of a transient provider failure.
            backoff: $crate::backoff::Backoff = $crate::backoff::Backoff::default(),
                set($crate::backoff::Backoff) |v| v,
                check |v| (!(0.0..=1.0).contains(&v.jitter))
                    .then(|| (Some("backoff.jitter"), v.jitter.to_string(), "it must be between 0.0 and 1.0")),
                fingerprint None, |_| ::serde_json::Value::Null;
            /// A cap on input + output tokens over the run (tokens), checked before each call:
            /// the run stops with `budget_exhausted` when the tokens used so far plus those of
            /// the last LLM call (the next one is at least as large, the conversation only
            /// grows) would pass it, so it never pays for the call that crosses the cap.
            max_total_tokens: Option<u64> = None,
                set(u64) Some,
                check |v| $crate::limits::reject(v == Some(0), 0, "a run needs some tokens"),
                fingerprint Some("max_total_tokens"), |v| ::serde_json::json!(v);
            /// A cap on the run's cost (USD), checked before each call like `max_total_tokens`
            /// (spent so far plus the last LLM call's cost). The model needs a price in the
            /// pricing table, else `build()` returns [`ConfigError::MissingPrice`](crate::ConfigError::MissingPrice).
            max_cost_usd: Option<f64> = None,
                set(f64) Some,
                check |v| match v {
                    Some(usd) => $crate::limits::reject(
                        !(usd.is_finite() && usd > 0.0),
                        usd,
                        "it must be a positive number of USD",
                    ),
                    None => None,
                },
                fingerprint Some("max_cost_usd"), |v| ::serde_json::json!(v);
            /// A wall-clock deadline for the whole run, from its start (more than zero).
            deadline: Option<::std::time::Duration> = None,
                set(::std::time::Duration) Some,
                check |v| $crate::limits::reject(v.is_some_and(|d| d.is_zero()), "0 s", "a run needs time"),
                fingerprint Some("deadline_ms"), |v| ::serde_json::json!(v.map($crate::limits::ms));
            /// How many times in a row the same call (same tool, same canonical arguments)
            /// may return the same result before the run is `stuck` (default 2; at least 2);
            /// the same call failing `repeated_call_limit + 1` times in a row is stuck too. A
            /// repeat whose result changed (polling a job until it is done, a retry after
            /// "busy, try again") is progress and resets the count.
            repeated_call_limit: u32 = 2,
                set(u32) |v| v,
                check |v| $crate::limits::reject(v < 2, v, "a first call cannot be a repeat; use 2 or more"),
                fingerprint Some("repeated_call_limit"), |v| ::serde_json::json!(v);
            /// How many consecutive turns without new tool result content make the run
            /// `stuck` (default 3; at least 1).
            no_progress_turns: u32 = 3,
                set(u32) |v| v,
                check |v| $crate::limits::reject(v == 0, v, "use 1 or more"),
                fingerprint Some("no_progress_turns"), |v| ::serde_json::json!(v);
        }
    };
}
pub(crate) use limits_table;

/// Generates [`Limits`] (fields, defaults, chainable setters), its `check` and
/// `fingerprint`, from the rows of [`limits_table!`].
macro_rules! limits_struct {
    ($(
        $(#[$doc:meta])*
        $name:ident: $ty:ty = $default:expr,
            set($arg:ty) $set:expr,
            check $check:expr,
            fingerprint $key:expr, $fp:expr;
    )*) => {
        /// Every cap, retry count, timeout and guard of a run, as one value: what a config
        /// runs with ([`AgentConfigBuilder::limits`](crate::AgentConfigBuilder::limits),
        /// [`AgentConfig::limits`](crate::AgentConfig::limits)) and what a
        /// [`Handover`](crate::handover::Handover) reports the run had.
        ///
        /// Start from [`Limits::default`] and change what you need, with the chainable
        /// setters (`Limits::default().max_llm_calls(20).deadline(Duration::from_secs(30))`)
        /// or the fields. The builder's per-limit setters (`.max_llm_calls(20)`) set the same
        /// fields. `build()` checks every value and returns
        /// [`ConfigError::InvalidSetting`](crate::ConfigError::InvalidSetting) naming the
        /// first one out of range. Units: tokens, USD, bytes, and durations.
        ///
        /// Serialized (in hand-overs) with every field optional: a record written before a
        /// field existed reads it as its default.
        #[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        #[non_exhaustive]
        pub struct Limits {
            $( $(#[$doc])* pub $name: $ty, )*
        }

        impl Default for Limits {
            fn default() -> Self {
                Self { $( $name: $default, )* }
            }
        }

        impl Limits {
            $(
                $(#[$doc])*
                #[must_use]
                #[allow(clippy::redundant_closure_call)]
                pub fn $name(mut self, value: $arg) -> Self {
                    let set: fn($arg) -> $ty = $set;
                    self.$name = set(value);
                    self
                }
            )*

            /// The first value out of range, in table order.
            ///
            /// # Errors
            /// [`ConfigError::InvalidSetting`] naming the limit.
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

            /// The limits that change requests, as the fingerprint's `(key, value)` pairs.
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
    };
}

limits_table!(limits_struct);

impl Limits {
    /// The caps a hand-over shows beside the run's `deadline` (the one it ran with: the
    /// config's or the run's, whichever is sooner).
    pub(crate) fn with_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.deadline = deadline;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_setters_change_one_field_and_check_names_the_first_bad_one() {
        let limits = Limits::default()
            .max_llm_calls(7)
            .deadline(Duration::from_secs(3));
        assert_eq!(limits.max_llm_calls, 7);
        assert_eq!(limits.deadline, Some(Duration::from_secs(3)));
        assert_eq!(limits.max_tool_calls, Limits::default().max_tool_calls);
        assert!(limits.check().is_ok());
        let bad = Limits::default().max_llm_calls(0).max_tokens(0);
        match bad.check() {
            Err(ConfigError::InvalidSetting { setting, .. }) => {
                assert_eq!(setting, "max_llm_calls")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_record_without_the_newer_fields_reads_them_as_defaults() {
        let old = json!({
            "max_llm_calls": 8, "max_tool_calls": 10, "max_parse_retries": 2,
            "max_total_tokens": null, "max_cost_usd": null, "deadline": null
        });
        let limits: Limits = serde_json::from_value(old).unwrap();
        assert_eq!(limits.max_llm_calls, 8);
        assert_eq!(limits.tool_timeout, Duration::from_secs(60));
    }
}
