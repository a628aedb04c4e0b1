//! The built-in run graders on known inputs with hand-computed scores: `GroundTruth`,
//! `Heuristic`, `LlmJudge` (a scripted judge that answers, corrects itself, and fails)
//! and `Composite`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use agent_core::eval::{
    Case, Composite, Grade, GradeError, GroundTruth, Heuristic, JudgeVerdict, LlmJudge, Match,
    Rubric, RunGrader,
};
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentError, AgentResult, OutputMode, agent_output,
    llm::{LlmResponse, TokenUsage},
    pricing::ModelPrice,
    run_agent,
};
use serde_json::{Value, json};

/// The output type of these tests.
#[agent_output]
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Ticket {
    /// 1 to 4.
    pub severity: u8,
    /// The queue.
    pub queue: String,
    /// Tags.
    pub tags: Vec<String>,
    /// A summary.
    pub summary: String,
}

fn answer() -> Value {
    json!({
        "severity": 3,
        "queue": "billing",
        "tags": ["refund", "late"],
        "summary": "Charged twice for NW-10231; refund one charge."
    })
}

/// A run that answers `answer` at once.
async fn answered(answer: Value) -> AgentResult<Ticket> {
    let model = ScriptedModel::new().submit(answer);
    let config = AgentConfig::<Ticket>::builder("t")
        .llm(model)
        .build()
        .unwrap();
    run_agent(&config, "I was charged twice for NW-10231").await
}

/// A run that ends without an answer (`schema_not_called` after three text turns).
async fn unanswered() -> AgentResult<Ticket> {
    let model = ScriptedModel::new().text("hm").text("hm").text("hm");
    let config = AgentConfig::<Ticket>::builder("t")
        .llm(model)
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert_eq!(r.category(), Some("schema_not_called"));
    r
}

fn truth() -> GroundTruth {
    GroundTruth::new()
        .field_weighted("queue", Match::Exact, 2.0)
        .field("severity", Match::Within(0.5))
        .field("tags", Match::SameSet)
        .field(
            "summary",
            Match::custom(|got: &Value, want: &Value| {
                let ok = got
                    .as_str()
                    .zip(want.as_str())
                    .is_some_and(|(g, w)| g.contains(w));
                (ok, format!("mentions {want}: {ok}"))
            }),
        )
}

#[tokio::test]
async fn ground_truth_weighs_exact_tolerance_set_and_custom_fields() {
    let result = answered(answer()).await;
    let expected = json!({
        "severity": 2, "queue": "billing", "tags": ["late", "refund"], "summary": "NW-10231"
    });
    let case = Case::new("ticket", &result).expected(&expected);
    let grade = truth().grade_run(&case).await.unwrap();
    // queue 1 (weight 2), severity 0 (3 is 1 away, tolerance 0.5), tags 1, summary 1.
    assert_eq!(grade.scores["queue"], 1.0);
    assert_eq!(grade.scores["severity"], 0.0);
    assert_eq!(grade.scores["tags"], 1.0);
    assert_eq!(grade.scores["summary"], 1.0);
    assert_eq!(grade.score, (2.0 + 0.0 + 1.0 + 1.0) / 5.0);
    assert_eq!(grade.reasons["severity"], "3, expected 2: not within 0.5");
    assert_eq!(grade.reasons["summary"], "mentions \"NW-10231\": true");
    assert_eq!(grade.reason, "3 of 4 fields match");
    assert_eq!(grade.usage.llm_calls, 0);
    assert_eq!(grade.passed, None);

    // Within 1, severity matches; a label without tags or summary scores only the rest.
    let lenient = GroundTruth::new()
        .field_weighted("queue", Match::Exact, 2.0)
        .field("severity", Match::Within(1.0))
        .field("tags", Match::SameSet);
    let partial = json!({"severity": 2, "queue": "returns"});
    let grade = lenient
        .grade_run(&Case::new("ticket", &result).expected(&partial))
        .await
        .unwrap();
    assert_eq!(grade.scores.len(), 2, "{grade:?}");
    assert_eq!(grade.scores["queue"], 0.0);
    assert_eq!(grade.scores["severity"], 1.0);
    assert_eq!(grade.score, 1.0 / 3.0);
    assert_eq!(grade.reasons["queue"], "\"billing\", expected \"returns\"");
}

#[tokio::test]
async fn ground_truth_without_fields_compares_every_expected_key() {
    let result = answered(answer()).await;
    let expected = json!({"queue": "billing", "severity": 3.0, "tags": ["late", "refund"]});
    let grade = GroundTruth::new()
        .grade_run(&Case::new("t", &result).expected(&expected))
        .await
        .unwrap();
    // Numbers by value (3 == 3.0); a list compared exactly is order-sensitive.
    assert_eq!(grade.scores["queue"], 1.0);
    assert_eq!(grade.scores["severity"], 1.0);
    assert_eq!(grade.scores["tags"], 0.0);
    assert_eq!(grade.score, 2.0 / 3.0);
}

#[tokio::test]
async fn ground_truth_reads_a_native_answer_as_the_run_read_it() {
    let model = ScriptedModel::new().respond(LlmResponse::text(format!(
        "Here it is:\n```json\n{}\n```",
        answer()
    )));
    let config = AgentConfig::<Ticket>::builder("native")
        .llm(model)
        .output_mode(OutputMode::Native)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert!(result.is_ok(), "{:?}", result.outcome);
    let expected = json!({"queue": "billing", "severity": 3});
    let grade = GroundTruth::new()
        .grade_run(&Case::new("t", &result).expected(&expected))
        .await
        .unwrap();
    assert_eq!(grade.score, 1.0);
}

#[tokio::test]
async fn ground_truth_scores_a_run_without_an_answer_zero_and_names_its_errors() {
    let result = unanswered().await;
    let expected = json!({"severity": 2, "queue": "billing"});
    let grade = truth()
        .grade_run(&Case::new("t", &result).expected(&expected))
        .await
        .unwrap();
    assert_eq!(grade.score, 0.0);
    assert_eq!(
        grade.scores.keys().collect::<Vec<_>>(),
        ["queue", "severity"]
    );
    assert!(grade.scores.values().all(|v| *v == 0.0));
    assert_eq!(
        grade.reason,
        "no answer: the run ended exhausted (schema_not_called)"
    );

    let result = answered(answer()).await;
    let err = truth()
        .grade_run(&Case::new("t", &result))
        .await
        .unwrap_err();
    assert_eq!(err, GradeError::NoExpected);
    let other = json!({"colour": "red"});
    let err = truth()
        .grade_run(&Case::new("t", &result).expected(&other))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "failed");
    assert!(err.to_string().contains("none of the fields"), "{err}");
    let wild = GroundTruth::new().field("queue", Match::custom(|_: &Value, _: &Value| 1.5));
    let err = wild
        .grade_run(&Case::new("t", &result).expected(&expected))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        GradeError::OutOfRange {
            name: "queue".into(),
            value: 1.5
        }
    );
}

#[tokio::test]
async fn ground_truth_compares_a_text_answer_whole() {
    let config = AgentConfig::<String>::builder("text")
        .llm(ScriptedModel::new().text("billing"))
        .build()
        .unwrap();
    let result = run_agent(&config, "q").await;
    let (yes, no) = (json!("billing"), json!("spam"));
    let hit = GroundTruth::new()
        .grade_run(&Case::new("q", &result).expected(&yes))
        .await
        .unwrap();
    let miss = GroundTruth::new()
        .grade_run(&Case::new("q", &result).expected(&no))
        .await
        .unwrap();
    assert_eq!((hit.score, miss.score), (1.0, 0.0));
    assert_eq!(hit.scores.keys().collect::<Vec<_>>(), ["answer"]);
}

#[tokio::test]
async fn heuristics_see_the_output_and_the_run() {
    // Two tool turns, then the answer: 3 round trips, 2 tool executions.
    let model = ScriptedModel::new()
        .tool_call("lookup", json!({"order_id": "NW-10231"}))
        .tool_call("lookup", json!({"order_id": "NW-10232"}))
        .submit(answer());
    let config = AgentConfig::<Ticket>::builder("t")
        .llm(model)
        .tool(EchoTool)
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(
        (result.usage.llm_calls, result.usage.tool_calls),
        (3, 2),
        "{:?}",
        result.outcome
    );
    let at_most_one = Heuristic::<Ticket>::new("at_most_1_tool_call", |case| {
        let n = case.result.usage.tool_calls;
        (n <= 1, format!("{n} tool calls"))
    });
    let grade = at_most_one
        .grade_run(&Case::new("t", &result))
        .await
        .unwrap();
    assert_eq!(grade.score, 0.0);
    assert_eq!(grade.scores["at_most_1_tool_call"], 0.0);
    assert_eq!(grade.reasons["at_most_1_tool_call"], "2 tool calls");

    let names_order = Heuristic::on_answer(
        "summary_names_order",
        |t: &Ticket, _run: &AgentResult<Ticket>| t.summary.contains("NW-10231"),
    );
    let grade = names_order
        .grade_run(&Case::new("t", &result))
        .await
        .unwrap();
    assert_eq!((grade.score, grade.reason.as_str()), (1.0, "passed"));
    let transcript_len = Heuristic::<Ticket>::new("short", |case| {
        if case.result.transcript.len() <= 4 {
            1.0
        } else {
            0.25
        }
    });
    let grade = transcript_len
        .grade_run(&Case::new("t", &result))
        .await
        .unwrap();
    assert_eq!((grade.score, grade.reason.as_str()), (0.25, "0.25"));

    let failed = unanswered().await;
    let grade = names_order
        .grade_run(&Case::new("t", &failed))
        .await
        .unwrap();
    assert_eq!(grade.score, 0.0);
    assert!(grade.reason.starts_with("no answer"), "{}", grade.reason);

    let wild = Heuristic::<Ticket>::new("wild", |_| f64::NAN);
    let err = wild.grade_run(&Case::new("t", &result)).await.unwrap_err();
    assert_eq!(err.category(), "out_of_range");
}

/// A tool that echoes its arguments.
struct EchoTool;

impl agent_core::Tool for EchoTool {
    fn definition(&self) -> agent_core::tool::ToolDefinition {
        agent_core::tool::ToolDefinition::new(
            "lookup",
            "Look up an order.",
            json!({"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}),
        )
    }

    fn call<'a>(
        &'a self,
        arguments: Value,
        _ctx: agent_core::ToolContext,
    ) -> agent_core::tool::ToolFuture<'a> {
        Box::pin(async move { Ok(arguments.to_string()) })
    }
}

fn rubric() -> Rubric {
    Rubric::new()
        .criterion("faithful", "States only what the ticket says.")
        .criterion_weighted("actionable", "Says what to do next.", 3.0)
}

fn verdict(criteria: &[(&str, u8)]) -> Value {
    json!({
        "criteria": criteria
            .iter()
            .map(|(name, score)| json!({"criterion": name, "reason": "because", "score": score}))
            .collect::<Vec<_>>(),
        "reason": "good on facts, weak on next steps"
    })
}

fn judge_with(model: &ScriptedModel) -> LlmJudge {
    LlmJudge::new(
        rubric(),
        AgentConfig::<JudgeVerdict>::builder("judge")
            .model("judge-model")
            .llm(model.clone())
            .price("judge-", ModelPrice::new(1000.0, 2000.0)),
    )
    .unwrap()
}

fn priced_submit(model: ScriptedModel, arguments: Value) -> ScriptedModel {
    let call = model.call("submit_output", arguments);
    model.respond(LlmResponse::tool_calls(vec![call]).with_usage(TokenUsage::new(100, 50)))
}

#[tokio::test]
async fn a_judge_maps_each_criterion_and_reports_its_own_cost() {
    let model = priced_submit(
        ScriptedModel::new(),
        verdict(&[("faithful", 5), ("actionable", 2)]),
    );
    let judge = judge_with(&model);
    let result = answered(answer()).await;
    let run_usage = result.usage.clone();
    let expected = json!({"queue": "billing"});
    let grade = judge
        .grade_run(&Case::new("I was charged twice", &result).expected(&expected))
        .await
        .unwrap();
    // 5 -> 1.0, 2 -> 0.25; weights 1 and 3.
    assert_eq!(grade.scores["faithful"], 1.0);
    assert_eq!(grade.scores["actionable"], 0.25);
    assert_eq!(grade.score, (1.0 + 3.0 * 0.25) / 4.0);
    assert_eq!(grade.reason, "good on facts, weak on next steps");
    assert_eq!(grade.reasons["actionable"], "because");
    // The judge's spend: 100 in * $1000/M + 50 out * $2000/M = $0.20, apart from the run's.
    assert_eq!(grade.usage.llm_calls, 1);
    assert_eq!(grade.usage.input_tokens, 100);
    assert!((grade.usage.cost_usd.unwrap() - 0.2).abs() < 1e-12);
    assert_eq!(result.usage, run_usage, "the judged run's usage is its own");
    assert_eq!(result.usage.llm_calls, 1);
    // The judge saw the rubric, the task, the answer and the reference.
    let request = &model.requests()[0];
    let system = request.system.as_deref().unwrap();
    assert!(
        system.contains("- actionable: Says what to do next."),
        "{system}"
    );
    let agent_core::llm::Message::User { content, .. } = &request.messages[0] else {
        panic!("{:?}", request.messages[0]);
    };
    assert!(content.contains("I was charged twice"), "{content}");
    assert!(content.contains("\"queue\": \"billing\""), "{content}");
    assert!(content.contains("reference answer"), "{content}");
    assert!(content.contains("Charged twice for NW-10231"), "{content}");
}

#[tokio::test]
async fn a_verdict_that_misses_a_criterion_is_fed_back_to_the_judge() {
    let model = ScriptedModel::new()
        .submit(verdict(&[("faithful", 4), ("tone", 3)]))
        .submit(verdict(&[("faithful", 4), ("actionable", 3)]));
    let judge = judge_with(&model);
    let result = answered(answer()).await;
    let grade = judge.grade_run(&Case::new("t", &result)).await.unwrap();
    assert_eq!(grade.usage.llm_calls, 2);
    assert_eq!(grade.scores["faithful"], 0.75);
    assert_eq!(grade.scores["actionable"], 0.5);
    let feedback = model.requests()[1].messages.last().unwrap().clone();
    let text = format!("{feedback:?}");
    assert!(
        text.contains("criterion \\\"actionable\\\" is missing"),
        "{text}"
    );
    assert!(text.contains("\\\"tone\\\" is not a criterion"), "{text}");
}

#[tokio::test]
async fn a_judge_that_fails_is_a_typed_failure_and_the_run_is_untouched() {
    // The judge answers in text three times: its own run ends schema_not_called.
    let model = ScriptedModel::new()
        .respond(LlmResponse::text("looks fine").with_usage(TokenUsage::new(100, 50)))
        .respond(LlmResponse::text("really fine").with_usage(TokenUsage::new(100, 50)))
        .respond(LlmResponse::text("fine!").with_usage(TokenUsage::new(100, 50)));
    let judge = judge_with(&model);
    let result = answered(answer()).await;
    let err = judge.grade_run(&Case::new("t", &result)).await.unwrap_err();
    match &err {
        GradeError::Judge { error, usage } => {
            assert!(
                matches!(&**error, AgentError::SchemaNotCalled { attempts } if attempts.len() == 3)
            );
            assert_eq!(usage.llm_calls, 3);
            assert!((usage.cost_usd.unwrap() - 0.6).abs() < 1e-12);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.category(), "judge_failed");
    assert_eq!(err.usage().llm_calls, 3);
    assert!(result.is_ok());
    assert_eq!(result.usage.llm_calls, 1);

    // A provider failure in the judge: the same, typed.
    let down = ScriptedModel::new().fail(agent_core::llm::LlmError::permanent("judge is down"));
    let err = judge_with(&down)
        .grade_run(&Case::new("t", &result))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, GradeError::Judge { error, .. } if error.category() == "llm_permanent_error"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_run_without_an_answer_is_not_sent_to_the_judge() {
    let model = ScriptedModel::new();
    let judge = judge_with(&model);
    let failed = unanswered().await;
    let grade = judge.grade_run(&Case::new("t", &failed)).await.unwrap();
    assert_eq!(grade.score, 0.0);
    assert_eq!(
        grade.scores.keys().collect::<Vec<_>>(),
        ["actionable", "faithful"]
    );
    assert_eq!(model.request_count(), 0);
    assert_eq!(grade.usage.llm_calls, 0);
}

#[tokio::test]
async fn a_judge_as_the_config_grader_scores_runs_and_never_changes_them() {
    let judged_model = ScriptedModel::new().submit(answer());
    let good = ScriptedModel::new().submit(verdict(&[("faithful", 3), ("actionable", 5)]));
    let config = AgentConfig::<Ticket>::builder("graded")
        .llm(judged_model)
        .grader(judge_with(&good))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    let scores = r.scores.clone().unwrap();
    assert_eq!((scores["faithful"], scores["actionable"]), (0.5, 1.0));
    assert_eq!(r.usage.llm_calls, 1, "the judge's calls are not the run's");

    let broken = ScriptedModel::new().text("no").text("no").text("no");
    let config = AgentConfig::<Ticket>::builder("graded")
        .llm(ScriptedModel::new().submit(answer()))
        .grader(judge_with(&broken))
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok(), "{:?}", r.outcome);
    assert_eq!(r.scores, None);
    assert_eq!(broken.request_count(), 3);
}

#[test]
fn a_rubric_is_checked_when_the_judge_is_built() {
    let builder = || AgentConfig::<JudgeVerdict>::builder("judge").model("test");
    for (rubric, want) in [
        (Rubric::new(), "a judge needs at least one criterion"),
        (
            Rubric::new().criterion("a", "x").criterion("a", "y"),
            "criterion names must be unique",
        ),
        (
            Rubric::new().criterion_weighted("a", "x", 0.0),
            "a weight is a finite number above 0",
        ),
    ] {
        let err = LlmJudge::new(rubric, builder()).unwrap_err();
        assert!(err.to_string().contains(want), "{err}");
    }
}

#[tokio::test]
async fn a_composite_weighs_its_parts_and_applies_its_threshold() {
    let result = answered(answer()).await;
    let expected = json!({"severity": 2, "queue": "billing"});
    let model = ScriptedModel::new().submit(verdict(&[("faithful", 5), ("actionable", 1)]));
    let few_tools = Heuristic::<Ticket>::new("few_tools", |c| c.result.usage.tool_calls <= 3);
    let composite = Composite::new()
        .part(
            "truth",
            3.0,
            GroundTruth::new()
                .field("queue", Match::Exact)
                .field("severity", Match::Exact),
        )
        .part("judge", 2.0, judge_with(&model))
        .part("few_tools", 1.0, few_tools.clone())
        .pass_threshold(0.6);
    let grade = composite
        .grade_run(&Case::new("t", &result).expected(&expected))
        .await
        .unwrap();
    // truth 0.5 (queue 1, severity 0); judge (1.0 + 3 * 0.0) / 4 = 0.25; few_tools 1.
    // (3 * 0.5 + 2 * 0.25 + 1 * 1) / 6 = 0.5.
    assert_eq!(grade.scores["truth"], 0.5);
    assert_eq!(grade.scores["truth.severity"], 0.0);
    assert_eq!(grade.scores["judge"], 0.25);
    assert_eq!(grade.scores["judge.faithful"], 1.0);
    assert_eq!(grade.scores["few_tools"], 1.0);
    assert_eq!(grade.score, 0.5);
    assert_eq!(grade.passed, Some(false));
    assert_eq!(grade.usage.llm_calls, 1, "the judge's round trip");
    assert_eq!(grade.reasons["judge"], "good on facts, weak on next steps");
    assert!(
        grade.reason.ends_with("-> 0.50 (threshold 0.6: failed)"),
        "{}",
        grade.reason
    );

    let lenient = Composite::new()
        .part(
            "truth",
            1.0,
            GroundTruth::new().field("queue", Match::Exact),
        )
        .part("few_tools", 1.0, few_tools.clone())
        .pass_threshold(0.6);
    let grade = lenient
        .grade_run(&Case::new("t", &result).expected(&expected))
        .await
        .unwrap();
    assert_eq!((grade.score, grade.passed), (1.0, Some(true)));

    // A failing part fails the combination, named, with what the parts spent.
    let failing = ScriptedModel::new()
        .respond(LlmResponse::text("?").with_usage(TokenUsage::new(10, 1)))
        .respond(LlmResponse::text("?").with_usage(TokenUsage::new(10, 1)))
        .respond(LlmResponse::text("?").with_usage(TokenUsage::new(10, 1)));
    let composite = Composite::new()
        .part("truth", 1.0, GroundTruth::new())
        .part("judge", 1.0, judge_with(&failing));
    let err = composite
        .grade_run(&Case::new("t", &result).expected(&expected))
        .await
        .unwrap_err();
    match &err {
        GradeError::Part { part, error, usage } => {
            assert_eq!(part, "judge");
            assert_eq!(error.category(), "judge_failed");
            assert_eq!(usage.llm_calls, 3);
        }
        other => panic!("{other:?}"),
    }
    let empty = Composite::<Ticket>::new();
    assert_eq!(
        empty
            .grade_run(&Case::new("t", &result))
            .await
            .unwrap_err()
            .category(),
        "failed"
    );
}

#[test]
fn grades_check_their_range_and_convert_to_scores() {
    let grade = Grade::single("x", 0.5, "half");
    assert!(grade.check().is_ok());
    let scores: agent_core::eval::Scores = grade.into();
    assert_eq!(scores["x"], 0.5);
    let bad = Grade::single("x", 1.5, "too much");
    assert_eq!(bad.check().unwrap_err().category(), "out_of_range");
}

#[test]
#[allow(deprecated)]
fn the_old_root_paths_of_evaluation_still_compile() {
    // Moved under `agent_core::eval`; the root names are deprecated aliases of the same
    // types, so code written against them keeps working.
    let old: agent_core::eval::GroundTruth =
        agent_core::eval::GroundTruth::new().field("queue", agent_core::eval::Match::Exact);
    let new: agent_core::eval::GroundTruth = old;
    let _ = new;
    let sample: agent_core::eval::Sample = agent_core::eval::Sample::new("a", "text");
    assert_eq!(sample.id, "a");
    let _grader: &dyn agent_core::eval::RunGrader<String> = &agent_core::eval::GroundTruth::new();
}
