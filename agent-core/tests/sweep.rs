//! `sweep` over scripted variants: counts, paired wins and losses, turn data and
//! bootstrap intervals against hand-computed values; grading failures; the table, JSON
//! and SVG.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::eval::{
    Case, Comparison, Grade, GradeError, GroundTruth, Match, RunGradeFuture, RunGrader, Sample,
    SweepError, SweepEvent, SweepOptions, Variant, WinLoss, sweep,
};
use agent_core::{AgentConfig, Ending};
use common::planned::{Planned, Step, answer_at};
use common::*;
use serde_json::{Value, json};

/// The expected severity of sample `i`: 1, 2, 3, 4, 1, ...
fn severity(i: usize) -> u64 {
    1 + (i as u64 % 4)
}

fn samples() -> Vec<Sample> {
    (0..10)
        .map(|i| {
            Sample::new(format!("s{i}"), i.to_string()).expected(json!({"severity": severity(i)}))
        })
        .collect()
}

fn answer(i: usize, right: bool) -> Value {
    let s = if right {
        severity(i)
    } else {
        severity(i) % 4 + 1
    };
    json!({"severity": s, "summary": format!("sample {i}")})
}

fn index(input: &str) -> usize {
    input.parse().unwrap()
}

/// Three variants over samples 0..9 (expected severity per sample):
/// - `base`: answers at once; right on 0..5, wrong on 6 and 7; plain text on 8 and 9
///   (`schema_not_called` after 3 round trips).
/// - `careful`: looks up once, then answers (2 round trips); right on all but 3.
/// - `capped` (max_llm_calls 2): even samples answered right at once; odd ones look up
///   until round trip 3, so the cap ends them (`max_llm_calls`, 2 round trips).
fn variants() -> Vec<Variant<Triage>> {
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let base = AgentConfig::<Triage>::builder("base")
        .llm(Planned(|input: &str, _turn| {
            let i = index(input);
            match i {
                0..=5 => Step::Submit(answer(i, true)),
                6 | 7 => Step::Submit(answer(i, false)),
                _ => Step::Text,
            }
        }))
        .tool(lookup.clone())
        .backoff(agent_core::config::Backoff::none())
        .max_llm_calls(8)
        .build()
        .unwrap();
    let careful = base
        .with_(|b| {
            b.llm(Planned(|input: &str, turn| {
                let i = index(input);
                answer_at(2, turn, answer(i, i != 3))
            }))
        })
        .unwrap();
    let capped = base
        .with_(|b| {
            b.llm(Planned(|input: &str, turn| {
                let i = index(input);
                answer_at(
                    if i.is_multiple_of(2) { 1 } else { 3 },
                    turn,
                    answer(i, true),
                )
            }))
            .max_llm_calls(2)
        })
        .unwrap();
    vec![
        Variant::new("base", base),
        Variant::new("careful", careful),
        Variant::new("capped", capped),
    ]
}

fn truth() -> GroundTruth {
    GroundTruth::new().field("severity", Match::Exact)
}

async fn run(options: &SweepOptions<Triage>) -> Comparison {
    sweep(&variants(), &samples(), options).await.unwrap()
}

#[tokio::test]
async fn a_sweep_reproduces_hand_computed_counts_pairs_and_turns() {
    let c = run(&SweepOptions::new().grader(truth()).concurrency(5)).await;
    assert_eq!(c.samples, 10);
    assert_eq!(c.baseline, "base");
    assert_eq!(c.runs.len(), 30);
    let names: Vec<&str> = c.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["base", "careful", "capped"]);

    let base = c.variant("base").unwrap();
    assert_eq!(base.endings[&Ending::Answered], 8);
    assert_eq!(base.endings[&Ending::Exhausted], 2);
    assert_eq!(base.endings[&Ending::Failed], 0);
    assert_eq!(base.categories["schema_not_called"], 2);
    assert_eq!(base.answered.unwrap().mean, 0.8);
    assert_eq!(base.score.unwrap().mean, 0.6);
    assert_eq!(base.scores["severity"].mean, 0.6);
    assert_eq!(
        base.graded, 10,
        "a run without an answer is graded 0, not skipped"
    );
    assert_eq!(base.vs_baseline, None);
    // 8 runs of 1 round trip and 2 of 3; 10 input and 2 output tokens a round trip.
    assert_eq!((base.input_tokens, base.output_tokens), (140, 28));
    assert_eq!((base.llm_calls.p50, base.llm_calls.p95), (1.0, 3.0));
    assert_eq!(base.turns.count(Ending::Answered, 1), 8);
    assert_eq!(base.turns.count(Ending::Exhausted, 3), 2);
    assert_eq!(base.turns.suggested_max_llm_calls, Some(2));
    assert_eq!(base.turns.hit_cap, 0);
    assert_eq!((base.model.as_str(), base.max_llm_calls), ("(custom)", 8));
    assert_eq!(base.output_mode, "tool");

    let careful = c.variant("careful").unwrap();
    assert_eq!(careful.endings[&Ending::Answered], 10);
    assert_eq!(careful.score.unwrap().mean, 0.9);
    assert_eq!((careful.input_tokens, careful.output_tokens), (200, 40));
    assert_eq!((careful.llm_calls.p50, careful.llm_calls.p95), (2.0, 2.0));
    assert_eq!(careful.turns.suggested_max_llm_calls, Some(3));
    let paired = careful.vs_baseline.unwrap();
    // Answered where base did not: samples 8 and 9.
    assert_eq!(paired.answered, win_loss(2, 0, 8));
    // Better on 6, 7 (right vs wrong), 8, 9 (right vs no answer); worse on 3.
    assert_eq!(paired.score, Some(win_loss(4, 1, 5)));

    let capped = c.variant("capped").unwrap();
    assert_eq!(capped.endings[&Ending::Answered], 5);
    assert_eq!(capped.categories["max_llm_calls"], 5);
    assert_eq!(capped.score.unwrap().mean, 0.5);
    assert_eq!((capped.llm_calls.p50, capped.llm_calls.p95), (1.0, 2.0));
    assert_eq!(capped.turns.hit_cap, 5);
    assert_eq!(capped.turns.max_llm_calls, Some(2));
    assert_eq!(capped.turns.count(Ending::Exhausted, 2), 5);
    let paired = capped.vs_baseline.unwrap();
    // Answered: 8 won (capped answered, base not); 1, 3, 5, 7 lost.
    assert_eq!(paired.answered, win_loss(1, 4, 5));
    // Score: 6 and 8 won (1 vs 0); 1, 3, 5 lost (0 vs 1).
    assert_eq!(paired.score, Some(win_loss(2, 3, 5)));

    // Records: variant by variant, samples in order, with the grade.
    let first: Vec<&str> = c.runs_of("capped").map(|r| r.sample.as_str()).collect();
    assert_eq!(
        first,
        ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"]
    );
    let s1 = c.runs_of("capped").nth(1).unwrap();
    assert_eq!(s1.category.as_deref(), Some("max_llm_calls"));
    assert_eq!(s1.grade.as_ref().unwrap().score, 0.0);
    assert!(s1.grade.as_ref().unwrap().reason.contains("max_llm_calls"));
}

fn win_loss(wins: usize, losses: usize, ties: usize) -> WinLoss {
    let mut w = WinLoss::default();
    w.wins = wins;
    w.losses = losses;
    w.ties = ties;
    w
}

/// The intervals, from the exact bootstrap distribution: a resample of n = 10 values
/// with k ones has mean k/10, k ~ Binomial(10, p). The interval ends are the
/// nearest-rank 2.5th and 97.5th percentiles (ranks 50 and 1950) of 2000 resample means.
/// - p = 0.6 (base's score): P(k <= 2) = 0.012, P(k <= 3) = 0.055, so about 25 of
///   2000 means are below 0.3 and 110 at most 0.3: rank 50 is 0.3. P(k = 10) = 0.006,
///   P(k >= 9) = 0.046: about 12 means are 1.0 and 93 at least 0.9: rank 1950 is 0.9.
/// - p = 0.9 (careful): P(k <= 6) = 0.013, P(k <= 7) = 0.070: low 0.7; P(k = 10) =
///   0.35: high 1.0.
/// - p = 0.5 (capped): P(k <= 1) = 0.011, P(k <= 2) = 0.055: low 0.2; high 0.8.
/// - p = 1 (careful answered): every mean is 1.
///
/// Each count is at least 4 standard deviations from 50, so any seed gives these.
#[tokio::test]
async fn intervals_match_the_exact_bootstrap_distribution_and_are_reproducible() {
    for seed in [1, 2, 0x5eed] {
        let c = run(&SweepOptions::new().grader(truth()).seed(seed)).await;
        let score = |name: &str| c.variant(name).unwrap().score.unwrap();
        let ends = |e: agent_core::eval::Estimate| (e.low, e.high);
        assert_eq!(ends(score("base")), (0.3, 0.9), "seed {seed}");
        assert_eq!(ends(score("careful")), (0.7, 1.0), "seed {seed}");
        assert_eq!(ends(score("capped")), (0.2, 0.8), "seed {seed}");
        let answered = c.variant("careful").unwrap().answered.unwrap();
        assert_eq!(
            (answered.mean, answered.low, answered.high, answered.n),
            (1.0, 1.0, 1.0, 10)
        );
        let capped = c.variant("capped").unwrap().answered.unwrap();
        assert_eq!(ends(capped), (0.2, 0.8), "seed {seed}");
    }
    // The same seed, the same intervals, including those whose ends the distribution
    // does not pin (base answered: p = 0.8, P(k <= 5) = 0.033, about 66 means of 2000).
    let a = run(&SweepOptions::new().grader(truth()).seed(9)).await;
    let b = run(&SweepOptions::new().grader(truth()).seed(9)).await;
    for (x, y) in a.variants.iter().zip(&b.variants) {
        assert_eq!(
            (x.answered, x.score, &x.scores),
            (y.answered, y.score, &y.scores)
        );
    }
    let few = run(&SweepOptions::new().grader(truth()).resamples(1)).await;
    let base = few.variant("base").unwrap().score.unwrap();
    assert_eq!(base.low, base.high, "one resample: one mean");
}

#[tokio::test]
async fn without_a_grader_there_are_no_scores_but_every_count() {
    let c = run(&SweepOptions::new().baseline("careful")).await;
    assert_eq!(c.baseline, "careful");
    let base = c.variant("base").unwrap();
    assert_eq!((base.score, base.graded), (None, 0));
    assert!(base.scores.is_empty());
    let paired = base.vs_baseline.unwrap();
    assert_eq!(paired.answered, win_loss(0, 2, 8));
    assert_eq!(paired.score, None);
    assert_eq!(c.variant("careful").unwrap().vs_baseline, None);
    assert!(
        c.runs
            .iter()
            .all(|r| r.grade.is_none() && r.grade_error.is_none())
    );
    let table = c.to_string();
    assert!(!table.contains("score"), "{table}");
}

/// Panics on s1, sleeps past the timeout on s2, gives 2.0 on s3, fails on s4; else 1.
struct Unruly;

impl RunGrader<Triage> for Unruly {
    fn grade_run<'a>(&'a self, case: &'a Case<'a, Triage>) -> RunGradeFuture<'a> {
        let input = case.input.to_owned();
        if input == "1" {
            panic!("grader exploded");
        }
        Box::pin(async move {
            match input.as_str() {
                "2" => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(Grade::single("ok", 1.0, "late"))
                }
                "3" => Ok(Grade::single("ok", 2.0, "too much")),
                "4" => Err(GradeError::failed("no opinion")),
                _ => Ok(Grade::single("ok", 1.0, "fine")),
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_grader_that_panics_hangs_or_misbehaves_fails_that_run_only() {
    let c = run(&SweepOptions::new()
        .grader(Unruly)
        .grade_timeout(Duration::from_secs(5)))
    .await;
    for v in &c.variants {
        assert_eq!(v.graded, 6, "{}", v.name);
        let failures: Vec<(&str, usize)> = v
            .grade_failures
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect();
        assert_eq!(
            failures,
            [
                ("failed", 1),
                ("out_of_range", 1),
                ("panicked", 1),
                ("timeout", 1)
            ]
        );
        assert_eq!(v.score.unwrap().mean, 1.0);
    }
    let base: Vec<_> = c.runs_of("base").collect();
    assert_eq!(
        base[1].ending,
        Ending::Answered,
        "grading never changes the outcome"
    );
    let e = base[1].grade_error.as_ref().unwrap();
    assert_eq!(e.category, "panicked");
    assert!(e.message.contains("grader exploded"), "{}", e.message);
    assert_eq!(base[2].grade_error.as_ref().unwrap().category, "timeout");
    // Score pairs count only samples where both runs have a grade: 6 of 10.
    let paired = c.variant("careful").unwrap().vs_baseline.unwrap();
    assert_eq!(paired.score.unwrap().pairs(), 6);
}

#[tokio::test]
async fn the_observer_sees_every_run_with_its_variant_and_a_panic_in_it_is_caught() {
    type Seen = (String, String, Ending, usize, usize);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let started = Arc::new(Mutex::new(None));
    let (log, start) = (Arc::clone(&seen), Arc::clone(&started));
    let options = SweepOptions::new().grader(truth()).concurrency(3).observer(
        move |event: &SweepEvent<'_, Triage>| match event {
            SweepEvent::Started { runs } => *start.lock().unwrap() = Some(*runs),
            SweepEvent::RunFinished {
                variant,
                sample,
                result,
                grade,
                done,
                total,
            } => {
                assert!(grade.is_some());
                log.lock().unwrap().push((
                    variant.to_string(),
                    sample.id.clone(),
                    result.ending(),
                    *done,
                    *total,
                ));
                if *done == 7 {
                    panic!("observer bug");
                }
            }
            _ => {}
        },
    );
    let c = run(&options).await;
    assert_eq!(*started.lock().unwrap(), Some(30));
    let mut seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 30);
    assert_eq!(
        seen.iter().map(|s| s.3).collect::<Vec<_>>(),
        (1..=30).collect::<Vec<_>>()
    );
    assert!(seen.iter().all(|s| s.4 == 30));
    seen.sort();
    let capped_s1 = seen
        .iter()
        .find(|s| s.0 == "capped" && s.1 == "s1")
        .unwrap();
    assert_eq!(capped_s1.2, Ending::Exhausted);
    assert_eq!(c.runs.len(), 30);
}

#[tokio::test]
async fn a_bad_setup_is_refused_before_any_run() {
    let v = variants();
    let s = samples();
    let o = SweepOptions::<Triage>::new();
    assert_eq!(
        sweep(&[], &s, &o).await.unwrap_err(),
        SweepError::NoVariants
    );
    let twice = vec![v[0].clone(), Variant::new("base", v[1].config().clone())];
    assert!(matches!(
        sweep(&twice, &s, &o).await.unwrap_err(),
        SweepError::BadVariantName { name } if name == "base"
    ));
    let unnamed = vec![Variant::new(" ", v[0].config().clone())];
    assert!(matches!(
        sweep(&unnamed, &s, &o).await.unwrap_err(),
        SweepError::BadVariantName { .. }
    ));
    let dup = vec![s[0].clone(), s[0].clone()];
    assert!(matches!(
        sweep(&v, &dup, &o).await.unwrap_err(),
        SweepError::DuplicateSample { id } if id == "s0"
    ));
    let err = sweep(&v, &s, &SweepOptions::new().baseline("nope"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the baseline \"nope\" is not a variant (base, careful, capped)"
    );
    // No samples: a comparison of zero runs.
    let c = sweep(&v, &[], &o).await.unwrap();
    assert_eq!(c.variant("base").unwrap().runs, 0);
    assert_eq!(c.variant("base").unwrap().answered, None);
}

#[test]
fn the_sweep_future_is_send() {
    fn send<F: Send>(_: F) {}
    let v = variants();
    let s = samples();
    let o = SweepOptions::new().grader(truth());
    send(sweep(&v, &s, &o));
}

#[tokio::test]
async fn the_table_and_the_json_hold_the_numbers() {
    let c = run(&SweepOptions::new().grader(truth())).await;
    let table = c.to_string();
    // A row's cells: split on runs of two or more spaces.
    let row = |label: &str| -> Vec<String> {
        let line = table
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no row {label:?} in\n{table}"));
        line[label.len()..]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let header = table.lines().next().unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["base", "careful", "capped"]
    );
    assert_eq!(
        row("answered (95% CI)"),
        [
            "80.0% [50.0, 100.0]",
            "100.0% [100.0, 100.0]",
            "50.0% [20.0, 80.0]"
        ],
        "{table}"
    );
    assert_eq!(
        row("score (95% CI)"),
        [
            "0.600 [0.300, 0.900]",
            "0.900 [0.700, 1.000]",
            "0.500 [0.200, 0.800]"
        ]
    );
    assert_eq!(
        row("vs base: answered +W -L =T"),
        ["-", "+2 -0 =8", "+1 -4 =5"]
    );
    assert_eq!(
        row("vs base: score +W -L =T"),
        ["-", "+4 -1 =5", "+2 -3 =5"]
    );
    assert_eq!(row("    max_llm_calls"), ["0", "0", "5"]);
    assert_eq!(row("    schema_not_called"), ["2", "0", "0"]);
    assert_eq!(row("input tokens"), ["140", "200", "150"]);
    assert_eq!(row("llm_calls p50 / p95"), ["1 / 3", "2 / 2", "1 / 2"]);
    assert_eq!(row("hit the cap"), ["0", "0", "5"]);
    assert_eq!(row("suggested max_llm_calls"), ["2", "3", "2"]);

    let text = serde_json::to_string(&c).unwrap();
    let back: Comparison = serde_json::from_str(&text).unwrap();
    assert_eq!(back, c);
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["variants"][2]["categories"]["max_llm_calls"], 5);
    assert_eq!(
        value["variants"][0]["turns"]["histogram"]["answered"]["1"],
        8
    );
    let path = std::env::temp_dir().join(format!("sweep-{}.json", std::process::id()));
    c.write_json(&path).unwrap();
    let read: Comparison = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(read, c);
    std::fs::remove_file(&path).unwrap();
}

#[cfg(feature = "plot")]
#[tokio::test]
async fn the_svg_parses_and_names_every_variant() {
    let mut v = variants();
    // A name that needs escaping in XML.
    v.push(Variant::new("tool <mode> & co", v[1].config().clone()));
    let c = sweep(&v, &samples(), &SweepOptions::new().grader(truth()))
        .await
        .unwrap();
    let path = std::env::temp_dir().join(format!("sweep-{}.svg", std::process::id()));
    c.write_svg(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for name in ["base", "careful", "capped", "tool <mode> & co"] {
        assert!(texts.contains(&name), "no x label {name:?} in {texts:?}");
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with(name) && t.contains("suggested max_llm_calls")),
            "no legend for {name:?} in {texts:?}"
        );
    }
    for caption in ["answered rate (95% CI)", "mean score (95% CI)"] {
        assert!(texts.contains(&caption), "{texts:?}");
    }
    // A bar per variant in each rate chart, plus the histogram's.
    let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
    assert!(rects >= 8 + 8, "{rects}");

    // Without a grader: the answered rate and the histogram only.
    let plain = sweep(&v, &samples(), &SweepOptions::new()).await.unwrap();
    let svg = plain.svg().unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts: Vec<&str> = doc
        .descendants()
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    assert!(!texts.contains(&"mean score (95% CI)"));
    assert!(texts.contains(&"answered rate (95% CI)"));
}

/// A feedback store that keeps run records in memory.
#[derive(Default)]
struct Recorded(Mutex<Vec<agent_core::store::RunRecord>>);

impl agent_core::store::FeedbackStore for Recorded {
    fn record<'a>(
        &'a self,
        run: &'a agent_core::store::RunRecord,
    ) -> agent_core::store::StoreFuture<'a, ()> {
        self.0.lock().unwrap().push(run.clone());
        Box::pin(async { Ok(()) })
    }
    fn attach_feedback<'a>(
        &'a self,
        _trace_id: &'a str,
        _feedback: &'a agent_core::store::Feedback,
    ) -> agent_core::store::StoreFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn run<'a>(
        &'a self,
        _trace_id: &'a str,
    ) -> agent_core::store::StoreFuture<'a, Option<agent_core::store::RunRecord>> {
        Box::pin(async { Ok(None) })
    }
    fn runs<'a>(
        &'a self,
        _query: &'a agent_core::store::RunQuery,
    ) -> agent_core::store::StoreFuture<'a, Vec<agent_core::store::RunRecord>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn eval_set<'a>(
        &'a self,
        _filter: &'a agent_core::store::EvalFilter,
    ) -> agent_core::store::StoreFuture<'a, Vec<agent_core::store::EvalExample>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn flush(&self) -> agent_core::store::StoreFuture<'_, u64> {
        Box::pin(async { Ok(0) })
    }
}

#[tokio::test]
async fn with_a_feedback_store_every_run_is_recorded_with_its_variant_name() {
    let store = Arc::new(Recorded::default());
    let a = AgentConfig::<Triage>::builder("a")
        .model("test")
        .build()
        .unwrap();
    let b = a.with_(|b| b.max_llm_calls(7)).unwrap();
    let variants = [Variant::new("first", a), Variant::new("second", b)];
    let samples: Vec<Sample> = (0..3)
        .map(|i| Sample::new(format!("s{i}"), i.to_string()))
        .collect();
    let store_dyn: Arc<dyn agent_core::store::FeedbackStore> = store.clone();
    let options = SweepOptions::default().feedback_store(store_dyn);
    let comparison = sweep(&variants, &samples, &options).await.unwrap();
    assert_eq!(comparison.variants.len(), 2);
    let records = store.0.lock().unwrap();
    assert_eq!(records.len(), 6);
    let mut labels: Vec<&str> = records
        .iter()
        .map(|r| r.variant.as_deref().unwrap())
        .collect();
    labels.sort_unstable();
    assert_eq!(
        labels,
        ["first", "first", "first", "second", "second", "second"]
    );
    assert!(
        records
            .iter()
            .all(|r| r.metadata["sweep.variant"] == r.variant.clone().unwrap())
    );
}
