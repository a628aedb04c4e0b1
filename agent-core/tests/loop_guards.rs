//! Guards (repeated calls, no progress), escalation, the wrap-up turn, the grader and
//! output validators: each fires at an exact request count.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentError, Ending,
    error::StuckReason,
    eval::{FnGrader, Scores},
    llm::{ToolCall, ToolChoice},
    run_agent,
};
use common::*;
use serde_json::json;

#[tokio::test]
async fn the_same_call_with_the_same_result_twice_is_stuck() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new();
    // The same arguments, spelled with other whitespace.
    let again = ToolCall::from_json_text("x", "lookup", "{ \"order_id\" :   \"A1\" }");
    let model = model
        .tool_call("lookup", order("A1"))
        .tool_calls(vec![again])
        .submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "stuck");
    assert_eq!(err.ending(), Ending::Stuck);
    assert_eq!(
        err,
        AgentError::Stuck {
            reason: StuckReason::RepeatedCall {
                tool: "lookup".into(),
                arguments: r#"{"order_id":"A1"}"#.into(),
                times: 2
            }
        }
    );
    assert_eq!(
        err.to_string(),
        r#"stuck: lookup({"order_id":"A1"}) called 2 times in a row without progress (the same result, or an error, each time)"#
    );
    // The repeat runs (its result decides), then the run stops: no third request.
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (2, 2));
    assert_eq!(lookup.runs(), 2);
    assert_eq!(model.request_count(), 2);
    assert_well_formed(&r.transcript);
}

#[tokio::test]
async fn the_repeat_limit_is_configurable() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .tool_call("lookup", order("A1"))
        .tool_call("lookup", order("A1"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .repeated_call_limit(3)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("stuck"));
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 3));
}

/// A tool whose answers come from a list, in order (the last one repeats).
#[derive(Clone)]
struct Sequence {
    name: &'static str,
    answers: std::sync::Arc<std::sync::Mutex<Vec<Result<&'static str, &'static str>>>>,
    runs: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl Sequence {
    fn new(name: &'static str, answers: Vec<Result<&'static str, &'static str>>) -> Self {
        Self {
            name,
            answers: std::sync::Arc::new(std::sync::Mutex::new(answers)),
            runs: std::sync::Arc::default(),
        }
    }
}

impl agent_core::Tool for Sequence {
    fn definition(&self) -> agent_core::tool::ToolDefinition {
        agent_core::tool::ToolDefinition::new(
            self.name,
            "Check a job's status.",
            json!({"type": "object", "properties": {"job_id": {"type": "string"}},
                   "required": ["job_id"]}),
        )
    }

    fn call<'a>(
        &'a self,
        _arguments: serde_json::Value,
        _context: agent_core::ToolContext,
    ) -> agent_core::tool::ToolFuture<'a> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut answers = self.answers.lock().unwrap();
        let answer = if answers.len() > 1 {
            answers.remove(0)
        } else {
            answers[0]
        };
        Box::pin(async move {
            answer
                .map(str::to_owned)
                .map_err(agent_core::ToolError::new)
        })
    }
}

// C31: polling the same job with the same arguments is progress while the status
// changes; the run ends Ok after 2 executions.
#[tokio::test]
async fn c31_polling_with_a_changing_result_is_progress() {
    let status = Sequence::new("job_status", vec![Ok("running"), Ok("done")]);
    let model = ScriptedModel::new()
        .tool_call("job_status", json!({"job_id": "J1"}))
        .tool_call("job_status", json!({"job_id": "J1"}))
        .submit(valid());
    let config = builder(&model, &[]).tool(status.clone()).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 2));
    assert_eq!(last_results(&model.requests()[2])[0].content, "done");
}

// C31, its sibling: a retry after a tool error is progress too.
#[tokio::test]
async fn c31_a_retry_after_a_tool_error_is_progress() {
    let reserve = Sequence::new("job_status", vec![Err("busy, try again"), Ok("reserved")]);
    let model = ScriptedModel::new()
        .tool_call("job_status", json!({"job_id": "J1"}))
        .tool_call("job_status", json!({"job_id": "J1"}))
        .submit(valid());
    let config = builder(&model, &[]).tool(reserve.clone()).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(r.usage.tool_calls, 2);
}

// C31, the truly stuck case: the same call, the same result again.
#[tokio::test]
async fn c31_polling_that_returns_the_same_status_again_is_stuck() {
    let status = Sequence::new("job_status", vec![Ok("running"), Ok("done"), Ok("done")]);
    let model = ScriptedModel::new()
        .tool_call("job_status", json!({"job_id": "J1"}))
        .tool_call("job_status", json!({"job_id": "J1"}))
        .tool_call("job_status", json!({"job_id": "J1"}))
        .submit(valid());
    let config = builder(&model, &[]).tool(status.clone()).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        r.outcome.unwrap_err(),
        AgentError::Stuck {
            reason: StuckReason::RepeatedCall {
                tool: "job_status".into(),
                arguments: r#"{"job_id":"J1"}"#.into(),
                times: 2
            }
        }
    );
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 3));
}

// Errors whose text varies still add up: the call failing 3 times in a row (limit 2 + 1)
// is stuck.
#[tokio::test]
async fn a_call_failing_again_and_again_is_stuck_one_later() {
    let failing = Sequence::new(
        "job_status",
        vec![Err("busy (1)"), Err("busy (2)"), Err("busy (3)")],
    );
    let model = ScriptedModel::new()
        .tool_call("job_status", json!({"job_id": "J1"}))
        .tool_call("job_status", json!({"job_id": "J1"}))
        .tool_call("job_status", json!({"job_id": "J1"}))
        .submit(valid());
    let config = builder(&model, &[]).tool(failing).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("stuck"));
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (3, 3));
}

#[tokio::test]
async fn turns_without_new_tool_results_are_stuck_after_three() {
    let lookup = TestTool::new("lookup", Behaviour::Fixed("no such order"));
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .tool_call("lookup", order("A2"))
        .tool_call("lookup", order("A3"))
        .tool_call("lookup", order("A4"))
        .submit(valid());
    let config = builder(&model, &[&lookup]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    // Turn 1 brings "no such order" (new); turns 2, 3, 4 bring nothing new.
    assert_eq!(
        r.outcome.unwrap_err(),
        AgentError::Stuck {
            reason: StuckReason::NoProgress { turns: 3 }
        }
    );
    assert_eq!((r.usage.llm_calls, r.usage.tool_calls), (4, 4));
}

#[tokio::test]
async fn no_progress_turns_is_configurable_and_new_content_resets_it() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let fixed = TestTool::new("fixed", Behaviour::Fixed("nothing"));
    let model = ScriptedModel::new()
        .tool_call("fixed", order("A1"))
        .tool_call("fixed", order("A2"))
        .tool_call("lookup", order("B1"))
        .tool_call("fixed", order("A3"))
        .tool_call("fixed", order("A4"))
        .submit(valid());
    let config = builder(&model, &[&lookup, &fixed])
        .no_progress_turns(2)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        r.outcome.unwrap_err(),
        AgentError::Stuck {
            reason: StuckReason::NoProgress { turns: 2 }
        }
    );
    assert_eq!(r.usage.llm_calls, 5);
}

#[tokio::test]
async fn escalation_ends_the_run_as_escalated_with_the_summary() {
    let model = ScriptedModel::new().tool_call(
        "escalate_to_human",
        json!({"reason": "legal threat", "summary": "Customer threatens to sue over order A1."}),
    );
    let config = builder(&model, &[]).escalation(true).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.ending(), Ending::Escalated);
    let err = r.outcome.unwrap_err();
    assert_eq!(
        err,
        AgentError::Escalated {
            reason: "legal threat".into(),
            summary: "Customer threatens to sue over order A1.".into()
        }
    );
    assert_eq!(err.category(), "escalated");
    assert_eq!(r.usage.llm_calls, 1);
    let names: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["submit_output", "escalate_to_human"]);
}

#[tokio::test]
async fn escalation_with_bad_arguments_is_a_validation_retry() {
    let model = ScriptedModel::new()
        .tool_call("escalate_to_human", json!({"reason": "unsure"}))
        .submit(valid());
    let config = builder(&model, &[]).escalation(true).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    let res = &last_results(&model.requests()[1])[0];
    assert!(
        res.is_error && res.content.contains("summary"),
        "{}",
        res.content
    );
}

#[tokio::test]
async fn escalation_off_means_the_tool_is_unknown() {
    let model = ScriptedModel::new()
        .tool_call("escalate_to_human", json!({"reason": "r", "summary": "s"}))
        .submit(valid());
    let config = builder(&model, &[]).build().unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert!(
        last_results(&model.requests()[1])[0]
            .content
            .starts_with("Unknown tool")
    );
}

#[tokio::test]
async fn the_last_round_trip_offers_only_submit_output_and_forces_it() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .tool_call("lookup", order("A2"))
        .submit(valid());
    let config = builder(&model, &[&lookup])
        .wrap_up(true)
        .max_llm_calls(3)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    let reqs = model.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[1].tools.len(), 2);
    assert_eq!(reqs[1].tool_choice, ToolChoice::Auto);
    let last: Vec<&str> = reqs[2].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(last, ["submit_output"]);
    assert_eq!(
        reqs[2].tool_choice,
        ToolChoice::Tool("submit_output".into())
    );
}

#[tokio::test]
async fn a_wrap_up_submission_is_validated_like_any_other() {
    let model = ScriptedModel::new().submit(invalid());
    let config = builder(&model, &[])
        .wrap_up(true)
        .max_llm_calls(1)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "max_llm_calls");
    assert_eq!(err.attempts().len(), 1, "the rejected submission is kept");
    assert_eq!(
        model.requests()[0].tool_choice,
        ToolChoice::Tool("submit_output".into())
    );
}

#[tokio::test]
async fn wrap_up_is_on_by_default_and_can_be_turned_off() {
    let model = ScriptedModel::new().submit(valid());
    let config = agent_core::AgentConfig::<Triage>::builder("d")
        .llm(model.clone())
        .max_llm_calls(1)
        .build()
        .unwrap();
    assert!(run_agent(&config, "t").await.is_ok());
    assert_eq!(
        model.requests()[0].tool_choice,
        ToolChoice::Tool("submit_output".into())
    );

    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[])
        .wrap_up(false)
        .max_llm_calls(1)
        .build()
        .unwrap();
    assert!(run_agent(&config, "t").await.is_ok());
    assert_eq!(model.requests()[0].tool_choice, ToolChoice::Auto);
}

// ---- grader and output validators --------------------------------------------------

fn scores(pairs: &[(&str, f64)]) -> Scores {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

#[tokio::test]
async fn grader_scores_land_in_the_result() {
    let model = ScriptedModel::new().submit(valid());
    let config = builder(&model, &[])
        .grader(FnGrader(|t: &Triage, input: &str| {
            Ok(scores(&[
                ("severity_ok", f64::from(t.severity == 2)),
                ("has_input", f64::from(!input.is_empty())),
            ]))
        }))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(
        r.scores,
        Some(scores(&[("has_input", 1.0), ("severity_ok", 1.0)]))
    );
}

#[tokio::test]
async fn a_failing_panicking_or_out_of_range_grader_never_changes_the_outcome() {
    type G = fn(&Triage, &str) -> Result<Scores, String>;
    let graders: [G; 3] = [
        |_, _| Err("judge unavailable".into()),
        |_, _| panic!("judge exploded"),
        |_, _| Ok(scores(&[("x", 1.5)])),
    ];
    for grader in graders {
        let model = ScriptedModel::new().submit(valid());
        let config = builder(&model, &[])
            .grader(FnGrader(grader))
            .build()
            .unwrap();
        let r = run_agent(&config, "ticket").await;
        assert!(r.is_ok());
        assert_eq!(r.scores, None);
    }
}

#[tokio::test]
async fn the_grader_is_not_called_on_failure() {
    let model = ScriptedModel::new().text("a").text("b").text("c");
    let config = builder(&model, &[])
        .grader(FnGrader(|_: &Triage, _: &str| panic!("must not be called")))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("schema_not_called"));
    assert_eq!(r.scores, None);
}

#[tokio::test]
async fn an_output_validator_rejection_is_fed_back_and_counts_as_a_parse_retry() {
    let model = ScriptedModel::new()
        .submit(json!({"severity": 1, "summary": "refund"}))
        .submit(json!({"severity": 1, "summary": "refund"}))
        .submit(valid());
    let config = builder(&model, &[])
        .max_parse_retries(1)
        .output_validator(|t: &Triage| {
            if t.summary.split_whitespace().count() < 2 {
                Err(format!(
                    "summary {:?} is too short: write at least two words",
                    t.summary
                ))
            } else {
                Ok(())
            }
        })
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    let err = r.outcome.unwrap_err();
    assert_eq!(err.category(), "schema_validation_failed");
    assert_eq!(err.attempts().len(), 2);
    assert_eq!(r.usage.llm_calls, 2);
    let res = &last_results(&model.requests()[1])[0];
    assert!(
        res.content
            .contains("is too short: write at least two words"),
        "{}",
        res.content
    );
}

#[tokio::test]
async fn an_output_validator_with_the_run_holds_the_answer_to_what_a_tool_found() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .submit(json!({"severity": 1, "summary": "refund for the order"}))
        .submit(json!({"severity": 1, "summary": "refund for order A1"}));
    let config = builder(&model, &[&lookup])
        .output_validator_with(|t: &Triage, run| {
            let found: Vec<String> = run
                .results_of("lookup")
                .map(|r| r.content.clone())
                .collect();
            match found.first() {
                Some(result) if !t.summary.contains("A1") => {
                    Err(format!("/summary: name the order lookup found ({result})"))
                }
                _ => Ok(()),
            }
        })
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.outcome.unwrap().summary, "refund for order A1");
    assert_eq!((r.usage.llm_calls, lookup.runs()), (3, 1));
    let res = &last_results(&model.requests()[2])[0];
    assert!(
        res.is_error
            && res
                .content
                .contains("/summary: name the order lookup found"),
        "{}",
        res.content
    );
}

#[tokio::test]
async fn the_wrap_up_turn_runs_no_other_tool_even_if_the_model_calls_one() {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let model = ScriptedModel::new()
        .tool_call("lookup", order("A1"))
        .tool_call("lookup", order("A2"));
    let config = builder(&model, &[&lookup])
        .wrap_up(true)
        .max_llm_calls(2)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("max_llm_calls"));
    assert_eq!(
        (r.usage.llm_calls, r.usage.tool_calls, lookup.runs()),
        (2, 1, 1)
    );
    let Some(agent_core::llm::Message::Tool { results }) = r.transcript.last() else {
        panic!()
    };
    assert!(
        results[0].is_error && results[0].content.contains("only submit_output"),
        "{results:?}"
    );
    assert_well_formed(&r.transcript);
}

/// An output type whose validation panics on severity 3.
#[derive(Debug)]
struct Touchy;

impl agent_core::AgentOutput for Touchy {
    fn output_tool() -> Option<agent_core::tool::ToolDefinition> {
        Some(agent_core::tool::ToolDefinition::new(
            "submit_output",
            "Submit.",
            triage_schema(),
        ))
    }
    fn from_arguments(
        arguments: &serde_json::Value,
    ) -> Result<Self, agent_core::schema::ValidationErrors> {
        if arguments["severity"] == 3 {
            panic!("validation bug on 3");
        }
        Ok(Touchy)
    }
}

#[tokio::test]
async fn a_panicking_output_validation_is_fed_back_like_a_schema_error() {
    let model = ScriptedModel::new()
        .submit(json!({"severity": 3, "summary": "x"}))
        .submit(valid());
    let config = agent_core::AgentConfig::<Touchy>::builder("touchy")
        .llm(model.clone())
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    let res = &last_results(&model.requests()[1])[0];
    assert!(
        res.content
            .contains("validation panicked: validation bug on 3"),
        "{}",
        res.content
    );
}
