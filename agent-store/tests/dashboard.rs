//! The dashboard's aggregate queries (`Store::agents`, `overview`, `turn_counts`,
//! `runs_page`) on both backends, over records with known values.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use agent_core::Ending;
use agent_core::store::{FeedbackStore, RunRecord};
use agent_core::{json, store::StoreError};
use agent_store::{DAY_MS, RunFilter, RunScope, Store};
use common::Place;

/// Day 20,000 (2024-10-04) at noon, in ms.
const DAY0: u64 = 20_000 * DAY_MS;

#[allow(clippy::too_many_arguments)]
fn record(
    n: u32,
    agent: &str,
    variant: Option<&str>,
    ending: Ending,
    category: Option<&str>,
    day: u64,
    duration_ms: u64,
    llm_calls: u32,
    metadata: serde_json::Value,
    input: &str,
) -> RunRecord {
    serde_json::from_value(json!({
        "trace_id": format!("{n:032x}"),
        "agent": agent,
        "variant": variant,
        "fingerprint": "f",
        "model": "test",
        "thread": if n.is_multiple_of(2) { Some("even") } else { None },
        "input": input,
        "output": {"queue": "billing"},
        "ending": ending,
        "category": category,
        "error": null,
        "usage": {"llm_calls": llm_calls, "tool_calls": 0, "input_tokens": 100, "output_tokens": 10,
                  "cache_read_tokens": 0, "cache_write_tokens": 0, "cost_usd": 0.01, "estimated_llm_calls": 0},
        "scores": null,
        "duration_ms": duration_ms,
        "started_at_ms": DAY0 + day * DAY_MS + 43_200_000 + u64::from(n),
        "metadata": metadata,
    }))
    .unwrap()
}

/// 12 runs of `triage` over 2 days and 2 variants, 1 run of `other`.
async fn seed(store: &Store) {
    let m = json!({});
    let runs = [
        record(
            1,
            "triage",
            Some("a"),
            Ending::Answered,
            None,
            0,
            120,
            2,
            json!({"partial": "true"}),
            "Parcel late",
        ),
        record(
            2,
            "triage",
            Some("a"),
            Ending::Answered,
            None,
            0,
            340,
            3,
            m.clone(),
            "Charged 100% twice",
        ),
        record(
            3,
            "triage",
            Some("a"),
            Ending::Escalated,
            Some("escalated"),
            0,
            95,
            4,
            json!({"store_failures": "2"}),
            "Angry",
        ),
        record(
            4,
            "triage",
            Some("b"),
            Ending::Stuck,
            Some("stuck"),
            0,
            2_345,
            6,
            m.clone(),
            "Loop",
        ),
        record(
            5,
            "triage",
            Some("b"),
            Ending::Exhausted,
            Some("max_llm_calls"),
            0,
            5_000,
            8,
            m.clone(),
            "Long",
        ),
        record(
            6,
            "triage",
            Some("b"),
            Ending::Answered,
            None,
            1,
            130,
            2,
            m.clone(),
            "Refund",
        ),
        record(
            7,
            "triage",
            Some("a"),
            Ending::Answered,
            None,
            1,
            131,
            2,
            m.clone(),
            "Refund again",
        ),
        record(
            8,
            "triage",
            Some("a"),
            Ending::Answered,
            None,
            1,
            999,
            5,
            json!({"store_failures": "x"}),
            "Hi",
        ),
        record(
            9,
            "triage",
            Some("a"),
            Ending::Failed,
            Some("llm_permanent_error"),
            1,
            10,
            1,
            m.clone(),
            "Quota",
        ),
        record(
            10,
            "triage",
            None,
            Ending::Paused,
            Some("paused"),
            1,
            50,
            1,
            m.clone(),
            "Refund NW-9",
        ),
        record(
            11,
            "triage",
            Some("a"),
            Ending::Answered,
            None,
            1,
            77,
            2,
            m.clone(),
            "Bye \u{0}nul",
        ),
        record(
            12,
            "triage",
            Some("a"),
            Ending::Answered,
            None,
            5,
            77,
            2,
            m.clone(),
            "Outside the range",
        ),
        record(
            13,
            "other",
            None,
            Ending::Answered,
            None,
            0,
            1,
            1,
            m.clone(),
            "Other agent",
        ),
    ];
    for r in &runs {
        store.record(r).await.unwrap();
    }
}

async fn aggregates_count_what_was_recorded(place: &Place) {
    let store = place.open().await;
    seed(&store).await;
    assert_eq!(store.agents().await.unwrap(), ["other", "triage"]);

    let scope = RunScope::new("triage", DAY0, DAY0 + 2 * DAY_MS);
    let overview = store.overview(&scope).await.unwrap();
    let rows = &overview.counts;
    let total: u64 = rows.iter().map(|r| r.runs).sum();
    assert_eq!(total, 11);
    let sum = |f: &dyn Fn(&agent_store::DayCount) -> bool,
               g: &dyn Fn(&agent_store::DayCount) -> u64|
     -> u64 { rows.iter().filter(|r| f(r)).map(g).sum() };
    assert_eq!(sum(&|r| r.day == 20_000, &|r| r.runs), 5);
    assert_eq!(sum(&|r| r.day == 20_001, &|r| r.runs), 6);
    assert_eq!(sum(&|r| r.ending == Ending::Answered, &|r| r.runs), 6);
    assert_eq!(sum(&|r| r.ending == Ending::Escalated, &|r| r.runs), 1);
    assert_eq!(sum(&|r| r.ending == Ending::Stuck, &|r| r.runs), 1);
    assert_eq!(sum(&|r| r.ending == Ending::Paused, &|r| r.runs), 1);
    assert_eq!(sum(&|_| true, &|r| r.partial), 1);
    assert_eq!(sum(&|_| true, &|r| r.store_failures), 2);
    assert_eq!(sum(&|_| true, &|r| r.tokens), 11 * 110);
    let cost: f64 = rows.iter().map(|r| r.cost_usd).sum();
    assert!((cost - 0.11).abs() < 1e-9, "{cost}");
    // Latency buckets: two significant digits, rounded down.
    let mut buckets: Vec<(u64, u64)> = overview
        .latency
        .iter()
        .map(|r| (r.latency_floor_ms, r.runs))
        .collect();
    buckets.sort_unstable();
    assert_eq!(
        buckets,
        [
            (10, 1),
            (50, 1),
            (77, 1),
            (95, 1),
            (120, 1),
            (130, 1),
            (130, 1),
            (340, 1),
            (990, 1),
            (2_300, 1),
            (5_000, 1)
        ],
        "runs 6 (variant b) and 7 (variant a) are both in 130 on day 1"
    );

    let b = store.overview(&scope.clone().variant("b")).await.unwrap();
    assert_eq!(b.counts.iter().map(|r| r.runs).sum::<u64>(), 3);
    assert_eq!(b.latency.iter().map(|r| r.runs).sum::<u64>(), 3);
    assert!(b.counts.iter().all(|r| r.variant.as_deref() == Some("b")));
    let none = store.overview(&scope.clone().variant("")).await.unwrap();
    assert!(
        none.counts.is_empty(),
        "no run has the variant \"\" (run 10 has none)"
    );

    let turns = store.turn_counts(&scope).await.unwrap();
    let answered_2: u64 = turns
        .iter()
        .filter(|t| t.ending == Ending::Answered && t.llm_calls == 2)
        .map(|t| t.runs)
        .sum();
    assert_eq!(answered_2, 4);
    let capped: Vec<_> = turns.iter().filter(|t| t.max_llm_calls_category).collect();
    assert_eq!(capped.len(), 1);
    assert_eq!(
        (capped[0].ending, capped[0].llm_calls, capped[0].runs),
        (Ending::Exhausted, 8, 1)
    );
    let stats = agent_core::eval::TurnStats::from_counts(
        turns.iter().map(|t| {
            (
                t.ending,
                t.llm_calls,
                t.max_llm_calls_category,
                t.runs as usize,
            )
        }),
        None,
    );
    assert_eq!(stats.answered_p95, Some(5));
    assert_eq!(stats.suggested_max_llm_calls, Some(6));
    assert_eq!(stats.hit_cap, 1);
    store.close().await.unwrap();
}

/// Whole days come from the rollups (kept by triggers), parts of days from `runs`: a
/// range that cuts days counts the same runs, and a run recorded again under the same
/// trace id moves from its old ending to the new one.
async fn rollups_follow_partial_days_and_replaced_runs(place: &Place) {
    let store = place.open().await;
    seed(&store).await;
    // From run 3 of day 0 (12:00 + 3 ms) to before run 12 of day 5 (12:00 + 12 ms).
    let cut = RunScope::new("triage", DAY0 + 43_200_003, DAY0 + 5 * DAY_MS + 43_200_012);
    let rows = store.overview(&cut).await.unwrap().counts;
    let mut days: Vec<(i64, u64)> = Vec::new();
    for r in &rows {
        match days.last_mut() {
            Some((d, n)) if *d == r.day => *n += r.runs,
            _ => days.push((r.day, r.runs)),
        }
    }
    assert_eq!(
        days,
        [(20_000, 3), (20_001, 6)],
        "runs 3-5 of day 0, all of day 1"
    );
    let stuck = |rows: &[agent_store::DayCount]| -> u64 {
        rows.iter()
            .filter(|r| r.ending == Ending::Stuck)
            .map(|r| r.runs)
            .sum()
    };
    assert_eq!(stuck(&rows), 1);
    let whole = RunScope::new("triage", DAY0, DAY0 + 2 * DAY_MS);
    let before = store.overview(&whole).await.unwrap().counts;
    assert_eq!(before.iter().map(|r| r.runs).sum::<u64>(), 11);

    // Run 4 (stuck, 6 calls, 2,345 ms) recorded again: answered in 3 calls, 500 ms.
    let again = record(
        4,
        "triage",
        Some("b"),
        Ending::Answered,
        None,
        0,
        500,
        3,
        json!({"partial": "true"}),
        "Loop",
    );
    store.record(&again).await.unwrap();
    for scope in [&whole, &cut] {
        let overview = store.overview(scope).await.unwrap();
        let rows = &overview.counts;
        assert_eq!(stuck(rows), 0);
        let answered: u64 = rows
            .iter()
            .filter(|r| r.ending == Ending::Answered)
            .map(|r| r.runs)
            .sum();
        let partial: u64 = rows.iter().map(|r| r.partial).sum();
        let at = |floor: u64| -> u64 {
            overview
                .latency
                .iter()
                .filter(|r| r.latency_floor_ms == floor)
                .map(|r| r.runs)
                .sum()
        };
        assert_eq!((at(2_300), at(500)), (0, 1));
        assert_eq!(
            overview.latency.iter().map(|r| r.runs).sum::<u64>(),
            rows.iter().map(|r| r.runs).sum::<u64>()
        );
        if scope == &whole {
            assert_eq!((answered, partial), (7, 2));
            assert_eq!(rows.iter().map(|r| r.runs).sum::<u64>(), 11);
            assert_eq!(rows.iter().map(|r| r.tokens).sum::<u64>(), 11 * 110);
        } else {
            // Runs 1 and 2 (day 0) are before the cut; run 4 is answered now.
            assert_eq!((answered, partial), (5, 1));
        }
        let turns = store.turn_counts(scope).await.unwrap();
        let at = |ending: Ending, calls: u32| -> u64 {
            turns
                .iter()
                .filter(|t| t.ending == ending && t.llm_calls == calls)
                .map(|t| t.runs)
                .sum()
        };
        assert_eq!(at(Ending::Stuck, 6), 0);
        assert_eq!(at(Ending::Answered, 3), if scope == &whole { 2 } else { 1 });
    }
    // Recording the same run again changes nothing.
    store.record(&again).await.unwrap();
    let after = store.overview(&whole).await.unwrap().counts;
    assert_eq!(after.iter().map(|r| r.runs).sum::<u64>(), 11);
    assert_eq!(stuck(&after), 0);
    store.close().await.unwrap();
}

async fn runs_pages_filter_and_page(place: &Place) {
    let store = place.open().await;
    seed(&store).await;
    let mut f = RunFilter::new();
    f.agent = Some("triage".into());
    f.limit = 5;
    let p1 = store.runs_page(&f).await.unwrap();
    assert_eq!(p1.runs.len(), 5);
    assert_eq!(p1.runs[0].trace_id, format!("{:032x}", 12));
    f.after = p1.next.clone();
    let p2 = store.runs_page(&f).await.unwrap();
    assert_eq!(p2.runs.len(), 5);
    f.after = p2.next.clone();
    let p3 = store.runs_page(&f).await.unwrap();
    assert_eq!(p3.runs.len(), 2);
    assert!(p3.next.is_none());
    let mut seen: Vec<String> = [p1.runs, p2.runs, p3.runs]
        .concat()
        .into_iter()
        .map(|r| r.trace_id)
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 12);

    let mut f = RunFilter::new();
    f.ending = Some(Ending::Answered);
    f.variant = Some("a".into());
    f.from_ms = Some(DAY0 + DAY_MS);
    f.to_ms = Some(DAY0 + 2 * DAY_MS);
    let ids: Vec<String> = store
        .runs_page(&f)
        .await
        .unwrap()
        .runs
        .into_iter()
        .map(|r| r.trace_id)
        .collect();
    assert_eq!(
        ids,
        [
            format!("{:032x}", 11),
            format!("{:032x}", 8),
            format!("{:032x}", 7)
        ]
    );

    let mut f = RunFilter::new();
    f.text = Some("refund".into());
    assert_eq!(
        store.runs_page(&f).await.unwrap().runs.len(),
        3,
        "case-insensitive text"
    );
    f.text = Some("100%".into());
    let hits = store.runs_page(&f).await.unwrap().runs;
    assert_eq!(hits.len(), 1, "% is a literal");
    assert_eq!(hits[0].input, "Charged 100% twice");
    let mut f = RunFilter::new();
    f.thread = Some("even".into());
    assert_eq!(store.runs_page(&f).await.unwrap().runs.len(), 6);
    let mut f = RunFilter::new();
    f.category = Some("max_llm_calls".into());
    assert_eq!(store.runs_page(&f).await.unwrap().runs.len(), 1);
    store.close().await.unwrap();
}

async fn a_store_that_is_down_is_unavailable(place: &Place) {
    let store = place.open().await;
    seed(&store).await;
    place.remove().await;
    let scope = RunScope::new("triage", DAY0, DAY0 + 2 * DAY_MS);
    let err = store.overview(&scope).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Unavailable { .. } | StoreError::Backend { .. }
        ),
        "{err:?}"
    );
}

both_backends!(
    aggregates_count_what_was_recorded,
    rollups_follow_partial_days_and_replaced_runs,
    runs_pages_filter_and_page,
    a_store_that_is_down_is_unavailable
);
