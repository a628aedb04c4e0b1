//! No-progress guards: repeated identical calls, and turns that learn nothing new.

use std::borrow::Cow;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use crate::error::StuckReason;
use crate::limits::Limits;
use crate::message::{ToolCall, ToolResult, canonical_json};

/// What one call (tool name and canonical arguments) returned last, and how often in
/// a row.
#[derive(Debug, Clone, PartialEq)]
struct CallRecord {
    /// The last result's content and error flag.
    last: (String, bool),
    /// Executions in a row that returned that same result (1 for the first).
    same_streak: u32,
    /// Executions in a row that returned an error result (any error).
    error_streak: u32,
}

/// The state of both guards over one run.
///
/// The repeat guard judges progress by results, not by calls: calling a tool again with
/// the same arguments is fine while the result changes (polling a job until it is done,
/// retrying after "busy, try again"). A call is stuck when it returned the same result
/// `repeat_limit` times in a row (the same call, the same answer: nothing can change),
/// or an error `repeat_limit + 1` times in a row (errors whose text varies, such as a
/// timestamp, still add up).
///
/// The limits are the config's (`repeated_call_limit`, `no_progress_turns`), passed to
/// each [`record_turn`](Self::record_turn); the guard holds only counters, which a
/// checkpoint keeps (serialized as [`GuardState`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Guard {
    calls: HashMap<(String, String), CallRecord>,
    seen_results: HashSet<(String, String)>,
    idle_turns: u32,
}

impl Guard {
    pub(crate) fn new() -> Self {
        Self {
            calls: HashMap::new(),
            seen_results: HashSet::new(),
            idle_turns: 0,
        }
    }

    /// Records the user-tool calls of a turn with their results (in the same order);
    /// fires when a call is stuck (see [`Guard`]) or the turn was the
    /// `no_progress_limit`-th in a row without new result content.
    ///
    /// A call counts once per turn (parallel duplicates in one turn are one attempt:
    /// C6, C11), and a call whose arguments arrived unusable does not count (its `{}` is
    /// not what the model sent; the no-progress guard still sees it).
    pub(crate) fn record_turn(
        &mut self,
        limits: &Limits,
        calls: &[ToolCall],
        results: &[ToolResult],
    ) -> Option<StuckReason> {
        let mut fired = None;
        for (i, (call, result)) in calls.iter().zip(results).enumerate() {
            if call.arguments_error.is_some() {
                continue;
            }
            // The same call earlier in this turn (a turn holds few calls: a scan, no set).
            let repeated_in_turn = calls[..i].iter().any(|earlier| {
                earlier.arguments_error.is_none()
                    && earlier.name == call.name
                    && earlier.arguments == call.arguments
            });
            if repeated_in_turn {
                continue;
            }
            let record = self
                .calls
                .entry((call.name.clone(), canonical_json(&call.arguments)))
                .and_modify(|r| {
                    let same = r.last.1 == result.is_error && r.last.0 == result.content;
                    r.same_streak = if same { r.same_streak + 1 } else { 1 };
                    r.error_streak = if result.is_error {
                        r.error_streak + 1
                    } else {
                        0
                    };
                    if !same {
                        r.last.0.clone_from(&result.content);
                        r.last.1 = result.is_error;
                    }
                })
                .or_insert_with(|| CallRecord {
                    last: (result.content.clone(), result.is_error),
                    same_streak: 1,
                    error_streak: u32::from(result.is_error),
                });
            let times = if record.same_streak >= limits.repeated_call_limit {
                Some(record.same_streak)
            } else if record.error_streak > limits.repeated_call_limit {
                Some(record.error_streak)
            } else {
                None
            };
            if let (Some(times), None) = (times, &fired) {
                fired = Some(StuckReason::RepeatedCall {
                    tool: call.name.clone(),
                    arguments: canonical_json(&call.arguments),
                    times,
                });
            }
        }
        let idle = self.record_results(results, limits.no_progress_turns);
        fired.or(idle)
    }

    /// Records the results of a tool turn; fires after `no_progress_limit` consecutive
    /// tool turns whose every result (tool name and content) was seen before.
    fn record_results(&mut self, results: &[ToolResult], limit: u32) -> Option<StuckReason> {
        let mut new_content = false;
        for r in results {
            new_content |= self
                .seen_results
                .insert((r.name.clone(), r.content.clone()));
        }
        if new_content {
            self.idle_turns = 0;
            None
        } else {
            self.idle_turns += 1;
            (self.idle_turns >= limit).then_some(StuckReason::NoProgress {
                turns: self.idle_turns,
            })
        }
    }
}

/// One call's counters in a checkpoint: (tool, canonical arguments, last content, last
/// is_error, same streak, error streak).
type CallState<'a> = (Cow<'a, str>, Cow<'a, str>, Cow<'a, str>, bool, u32, u32);

/// The guards' counters as a checkpoint keeps them (sorted, so equal states encode
/// equally); borrowed from the guard when written, owned when read.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct GuardState<'a> {
    calls: Vec<CallState<'a>>,
    seen_results: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    idle_turns: u32,
}

impl Guard {
    /// The counters, for a checkpoint.
    pub(crate) fn state(&self) -> GuardState<'_> {
        let mut calls: Vec<_> = self
            .calls
            .iter()
            .map(|((tool, args), r)| {
                (
                    Cow::Borrowed(tool.as_str()),
                    Cow::Borrowed(args.as_str()),
                    Cow::Borrowed(r.last.0.as_str()),
                    r.last.1,
                    r.same_streak,
                    r.error_streak,
                )
            })
            .collect();
        calls.sort();
        let mut seen_results: Vec<_> = self
            .seen_results
            .iter()
            .map(|(a, b)| (Cow::Borrowed(a.as_str()), Cow::Borrowed(b.as_str())))
            .collect();
        seen_results.sort();
        GuardState {
            calls,
            seen_results,
            idle_turns: self.idle_turns,
        }
    }

    /// The guard a checkpoint's counters describe.
    pub(crate) fn from_state(state: GuardState<'_>) -> Self {
        let mut guard = Self::new();
        guard.restore(state);
        guard
    }

    /// Puts back the counters of a checkpoint.
    fn restore(&mut self, state: GuardState<'_>) {
        self.calls = state
            .calls
            .into_iter()
            .map(
                |(tool, args, content, is_error, same_streak, error_streak)| {
                    (
                        (tool.into_owned(), args.into_owned()),
                        CallRecord {
                            last: (content.into_owned(), is_error),
                            same_streak,
                            error_streak,
                        },
                    )
                },
            )
            .collect();
        self.seen_results = state
            .seen_results
            .into_iter()
            .map(|(a, b)| (a.into_owned(), b.into_owned()))
            .collect();
        self.idle_turns = state.idle_turns;
    }
}

impl serde::Serialize for Guard {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.state().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Guard {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        GuardState::deserialize(deserializer).map(Guard::from_state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A guard with its limits, as the run holds the two.
    struct Tested {
        guard: Guard,
        limits: Limits,
    }

    impl Tested {
        fn new(repeated_call_limit: u32, no_progress_turns: u32) -> Self {
            Self {
                guard: Guard::new(),
                limits: Limits::default()
                    .repeated_call_limit(repeated_call_limit)
                    .no_progress_turns(no_progress_turns),
            }
        }

        fn record_turn(
            &mut self,
            calls: &[ToolCall],
            results: &[ToolResult],
        ) -> Option<StuckReason> {
            self.guard.record_turn(&self.limits, calls, results)
        }

        fn record_results(&mut self, results: &[ToolResult]) -> Option<StuckReason> {
            self.guard
                .record_results(results, self.limits.no_progress_turns)
        }

        fn state(&self) -> GuardState<'_> {
            self.guard.state()
        }

        fn restore(&mut self, state: GuardState<'_>) {
            self.guard.restore(state);
        }
    }

    fn turn(g: &mut Tested, call: &ToolCall, content: &str, is_error: bool) -> Option<StuckReason> {
        let result = if is_error {
            ToolResult::error(&call.id, &call.name, content)
        } else {
            ToolResult::ok(&call.id, &call.name, content)
        };
        g.record_turn(std::slice::from_ref(call), &[result])
    }

    /// A checkpoint's guard state (borrowed when written, owned when read) puts back
    /// the same counters: the restored guard encodes alike and fires where the first
    /// would have.
    #[test]
    fn the_state_round_trips_through_its_json() {
        let mut g = Tested::new(2, 10);
        let call = ToolCall::new("1", "lookup", json!({"id": "q\"1"}));
        assert!(turn(&mut g, &call, "said \"shipped\"", false).is_none());
        assert!(
            turn(
                &mut g,
                &ToolCall::new("2", "stock", json!({})),
                "none",
                true
            )
            .is_none()
        );
        let text = serde_json::to_string(&g.state()).unwrap();
        let read: GuardState<'_> = serde_json::from_str(&text).unwrap();
        let mut back = Tested::new(2, 10);
        back.restore(read);
        assert_eq!(serde_json::to_string(&back.state()).unwrap(), text);
        assert_eq!(back.state(), g.state());
        assert!(matches!(
            turn(&mut back, &call, "said \"shipped\"", false),
            Some(StuckReason::RepeatedCall { .. })
        ));
    }

    #[test]
    fn the_same_call_with_the_same_result_fires_at_the_limit() {
        let mut g = Tested::new(2, 10);
        let call = ToolCall::new("1", "lookup", json!({"id": 1, "x": 2}));
        assert!(turn(&mut g, &call, "shipped", false).is_none());
        let same = ToolCall::new("2", "lookup", json!({"x": 2, "id": 1}));
        assert_eq!(
            turn(&mut g, &same, "shipped", false),
            Some(StuckReason::RepeatedCall {
                tool: "lookup".into(),
                arguments: r#"{"id":1,"x":2}"#.into(),
                times: 2
            })
        );
    }

    // C31: polling with a changing result is progress; so is a retry after an error.
    #[test]
    fn c31_a_repeat_whose_result_changed_is_progress() {
        let mut g = Tested::new(2, 10);
        let poll = ToolCall::new("1", "job_status", json!({"job_id": "J1"}));
        assert!(turn(&mut g, &poll, "running", false).is_none());
        assert!(turn(&mut g, &poll, "done", false).is_none());
        let busy = ToolCall::new("2", "reserve", json!({"slot": 3}));
        assert!(turn(&mut g, &busy, "busy, try again", true).is_none());
        assert!(turn(&mut g, &busy, "reserved", false).is_none());
        // The same result again is stuck.
        assert!(turn(&mut g, &busy, "reserved", false).is_some());
    }

    #[test]
    fn errors_that_keep_coming_fire_one_later_even_when_their_text_varies() {
        let mut g = Tested::new(2, 10);
        let call = ToolCall::new("1", "reserve", json!({"slot": 3}));
        assert!(turn(&mut g, &call, "busy at 10:00:01", true).is_none());
        assert!(turn(&mut g, &call, "busy at 10:00:02", true).is_none());
        assert_eq!(
            turn(&mut g, &call, "busy at 10:00:03", true),
            Some(StuckReason::RepeatedCall {
                tool: "reserve".into(),
                arguments: r#"{"slot":3}"#.into(),
                times: 3
            })
        );
    }

    #[test]
    fn duplicates_within_a_turn_and_unusable_arguments_do_not_count() {
        let mut g = Tested::new(2, 10);
        let same = || ToolCall::new("1", "ping", json!({}));
        let ok = || ToolResult::ok("1", "ping", "pong");
        assert!(
            g.record_turn(&[same(), same(), same()], &[ok(), ok(), ok()])
                .is_none(),
            "one turn, one attempt"
        );
        let broken = || ToolCall::with_invalid_arguments("2", "lookup", "truncated");
        let err = || ToolResult::error("2", "lookup", "not run");
        assert!(g.record_turn(&[broken()], &[err()]).is_none());
        assert!(g.record_turn(&[broken()], &[err()]).is_none());
        assert!(
            g.record_turn(&[same()], &[ok()]).is_some(),
            "ping in a second turn with the same result is a repeat"
        );
    }

    #[test]
    fn no_progress_counts_consecutive_idle_turns() {
        let mut g = Tested::new(2, 2);
        let r = |c: &str| vec![ToolResult::ok("id", "lookup", c)];
        assert!(g.record_results(&r("not found")).is_none());
        assert!(g.record_results(&r("not found")).is_none());
        assert!(g.record_results(&r("found!")).is_none());
        assert!(g.record_results(&r("found!")).is_none());
        assert_eq!(
            g.record_results(&r("not found")),
            Some(StuckReason::NoProgress { turns: 2 })
        );
    }
}
