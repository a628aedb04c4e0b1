//! Run records, feedback, eval-set export, traces, replay and diff on both backends;
//! hostile text round-trips as data.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::collections::HashSet;

use agent_core::store::{
    EvalFilter, ExpectedSource, Feedback, FeedbackStore, RunQuery, TraceEvent, TraceStore,
};
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, Ending, RunOptions, agent_output, json,
    llm::{LlmError, Message},
    run_agent_with,
    store::StoreError,
    tool, tools,
};
use common::Place;

/// A triage decision.
#[agent_output]
#[derive(Debug, Clone, PartialEq)]
struct Triage {
    /// The queue.
    queue: String,
    /// Severity 1 to 4.
    severity: u8,
}

/// Looks up an order.
#[tool]
async fn lookup(order_id: String) -> String {
    format!("{order_id}: shipped")
}

async fn runs_feedback_and_eval_export(place: &Place) {
    let store = place.open().await;
    let model = ScriptedModel::new()
        .tool_call("lookup", json!({"order_id": "NW-1"}))
        .submit(json!({"queue": "billing", "severity": 2}))
        .submit(json!({"queue": "returns", "severity": 1}))
        .fail(LlmError::permanent("quota exhausted"));
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(model.clone())
        .tools(tools![lookup])
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .variant("baseline")
        .build()
        .unwrap();
    let r1 = run_agent_with(
        &config,
        "Charged twice for NW-1",
        RunOptions::new().metadata("ticket", "T-1"),
    )
    .await;
    let r2 = run_agent_with(&config, "Wrong size", RunOptions::new()).await;
    let r3 = run_agent_with(&config, "Hello?", RunOptions::new()).await;
    assert!(r1.is_ok() && r2.is_ok());
    assert_eq!(r3.category(), Some("llm_permanent_error"));
    assert_eq!(r1.store_failures + r2.store_failures + r3.store_failures, 0);

    let rec = store.run(&r1.trace_id).await.unwrap().unwrap();
    assert_eq!(rec.agent, "triage");
    assert_eq!(rec.variant.as_deref(), Some("baseline"));
    assert_eq!(rec.fingerprint, config.fingerprint());
    assert_eq!(rec.input, "Charged twice for NW-1");
    assert_eq!(rec.output, json!({"queue": "billing", "severity": 2}));
    assert_eq!(rec.ending, Ending::Answered);
    assert_eq!(rec.usage, r1.usage);
    assert_eq!(rec.usage.llm_calls, 2);
    assert_eq!(rec.duration_ms, r1.duration.as_millis() as u64);
    assert!(rec.started_at_ms > 1_700_000_000_000);
    assert_eq!(rec.metadata["ticket"], "T-1");
    let failed = store.run(&r3.trace_id).await.unwrap().unwrap();
    assert_eq!(failed.ending, Ending::Failed);
    assert_eq!(failed.category.as_deref(), Some("llm_permanent_error"));
    assert!(failed.error.unwrap().contains("quota exhausted"));
    assert!(store.run("0".repeat(32).as_str()).await.unwrap().is_none());

    // Newest first; filters.
    let listed = store.runs(&RunQuery::new()).await.unwrap();
    assert_eq!(listed.len(), 3);
    let ids: HashSet<_> = listed.iter().map(|r| r.trace_id.clone()).collect();
    assert!(ids.contains(&r1.trace_id) && ids.contains(&r3.trace_id));
    assert!(
        listed
            .windows(2)
            .all(|w| w[0].started_at_ms >= w[1].started_at_ms)
    );
    let answered = store
        .runs(&RunQuery::new().ending(Ending::Answered))
        .await
        .unwrap();
    assert_eq!(answered.len(), 2);
    assert!(
        store
            .runs(&RunQuery::new().agent("other"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.runs(&RunQuery::new().limit(1)).await.unwrap().len(),
        1
    );

    // Feedback: a rating, a correction, and a run that does not exist.
    store
        .attach_feedback(&r1.trace_id, &Feedback::new().rating(1).note("good"))
        .await
        .unwrap();
    store
        .attach_feedback(
            &r2.trace_id,
            &Feedback::new()
                .rating(-1)
                .corrected_output(json!({"queue": "returns", "severity": 2})),
        )
        .await
        .unwrap();
    assert!(matches!(
        store
            .attach_feedback("f".repeat(32).as_str(), &Feedback::new().rating(1))
            .await,
        Err(StoreError::NotFound { .. })
    ));
    let rated = store.run(&r1.trace_id).await.unwrap().unwrap();
    let feedback = rated.feedback.unwrap();
    assert_eq!(
        (feedback.rating, feedback.note.as_deref()),
        (Some(1), Some("good"))
    );
    assert!(feedback.given_at_ms > 0);
    // Feedback replaces earlier feedback.
    store
        .attach_feedback(&r1.trace_id, &Feedback::new().rating(2))
        .await
        .unwrap();
    assert_eq!(
        store
            .run(&r1.trace_id)
            .await
            .unwrap()
            .unwrap()
            .feedback
            .unwrap()
            .rating,
        Some(2)
    );

    // The eval set: the accepted output of r1, the correction of r2; r3 failed.
    let set = store.eval_set(&EvalFilter::new()).await.unwrap();
    assert_eq!(set.len(), 2);
    let by_id = |id: &str| set.iter().find(|e| e.trace_id == id).unwrap();
    assert_eq!(
        by_id(&r1.trace_id).expected,
        json!({"queue": "billing", "severity": 2})
    );
    assert_eq!(by_id(&r1.trace_id).source, ExpectedSource::Accepted);
    assert_eq!(
        by_id(&r2.trace_id).expected,
        json!({"queue": "returns", "severity": 2})
    );
    assert_eq!(by_id(&r2.trace_id).source, ExpectedSource::Correction);
    assert_eq!(by_id(&r2.trace_id).input, "Wrong size");
    let mut jsonl = Vec::new();
    assert_eq!(
        store
            .export_jsonl(&EvalFilter::new().agent("triage"), &mut jsonl)
            .await
            .unwrap(),
        2
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines
            .iter()
            .all(|l| l["input"].is_string() && l["expected"].is_object())
    );
    assert!(
        store
            .eval_set(&EvalFilter::new().agent("other"))
            .await
            .unwrap()
            .is_empty()
    );

    // The trace: the transcript from the input on, and the events in order.
    let trace = store.trace(&r1.trace_id).await.unwrap().unwrap();
    assert_eq!(trace.transcript, r1.transcript);
    assert_eq!(
        trace
            .tool_calls()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["lookup", "submit_output"]
    );
    let kinds: Vec<&str> = trace
        .events
        .iter()
        .map(|e| match e {
            TraceEvent::TurnStarted { .. } => "turn",
            TraceEvent::ToolFinished { .. } => "tool",
            TraceEvent::RunEnded { .. } => "end",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["turn", "tool", "turn", "end"]);
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.runs, stats.traces, stats.feedback), (3, 3, 2));
    store.close().await.unwrap();
}

async fn replay_and_diff(place: &Place) {
    let store = place.open().await;
    let first = ScriptedModel::new()
        .tool_call("lookup", json!({"order_id": "NW-1"}))
        .submit(json!({"queue": "billing", "severity": 2}));
    let config: AgentConfig<Triage> = AgentConfig::builder("triage")
        .llm(first)
        .tools(tools![lookup])
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .build()
        .unwrap();
    let history = vec![
        Message::user("Earlier: my order is NW-1"),
        Message::assistant("Noted.", vec![]),
    ];
    let original = run_agent_with(
        &config,
        "Charged twice",
        RunOptions::new()
            .history(history.clone())
            .metadata("ticket", "T-9"),
    )
    .await;
    assert!(original.is_ok());
    let stored = store.trace(&original.trace_id).await.unwrap().unwrap();
    assert_eq!(stored.history, history);
    assert_eq!(stored.transcript[0], Message::user("Charged twice"));

    // Replay on a variant with another model: same input, same history before it.
    let second = ScriptedModel::new().submit(json!({"queue": "shipping", "severity": 2}));
    let variant = config
        .with_(|b| b.llm(second.clone()).variant("no-tools"))
        .unwrap();
    assert_ne!(variant.fingerprint(), "");
    let replayed = store.replay(&original.trace_id, &variant).await.unwrap();
    assert!(replayed.is_ok());
    assert_ne!(replayed.trace_id, original.trace_id);
    let sent = second.requests();
    assert_eq!(sent[0].messages[..2], history[..]);
    assert_eq!(sent[0].messages[2], Message::user("Charged twice"));
    let record = store.run(&replayed.trace_id).await.unwrap().unwrap();
    assert_eq!(record.metadata["replay_of"], original.trace_id);
    assert_eq!(record.metadata["ticket"], "T-9");
    assert_eq!(record.variant.as_deref(), Some("no-tools"));

    let diff = store
        .diff(&original.trace_id, &replayed.trace_id)
        .await
        .unwrap();
    assert!(!diff.is_same());
    assert_eq!(diff.endings, (Ending::Answered, Ending::Answered));
    assert_eq!(diff.output.len(), 1);
    assert_eq!(diff.output[0].path, "/queue");
    assert_eq!(diff.output[0].left, Some(json!("billing")));
    assert_eq!(diff.output[0].right, Some(json!("shipping")));
    assert_eq!(diff.first_divergent_call, Some(0));
    let text = diff.to_string();
    assert!(
        text.contains("/queue: \"billing\" -> \"shipping\""),
        "{text}"
    );
    assert!(
        store
            .diff(&original.trace_id, &original.trace_id)
            .await
            .unwrap()
            .is_same()
    );
    assert!(matches!(
        store.replay("nope", &variant).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.diff(&original.trace_id, "nope").await,
        Err(StoreError::NotFound { .. })
    ));
    store.close().await.unwrap();
}

const HOSTILE: &str = "'; DROP TABLE runs; --\u{0} \"quoted\" `tick` \\ $1 ? :name @p %s \u{0}\n\r\t\u{7f} 🦀 \u{FEFF}";

/// Echoes its argument, hostile bytes and all.
#[tool]
async fn echo(text: String) -> String {
    format!("{text}{HOSTILE}")
}

async fn hostile_text_round_trips(place: &Place) {
    let store = place.open().await;
    let model = ScriptedModel::new()
        .tool_call("echo", json!({"text": HOSTILE}))
        .text(HOSTILE);
    let config: AgentConfig<String> = AgentConfig::builder(format!("agent{HOSTILE}"))
        .llm(model)
        .tools(tools![echo])
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .memory(store.clone())
        .variant(HOSTILE)
        .build()
        .unwrap();
    let thread = "thread '; DROP TABLE threads; -- \"x\"";
    let input = format!("{HOSTILE}{HOSTILE}");
    let result = run_agent_with(
        &config,
        input.clone(),
        RunOptions::new().thread(thread).metadata(HOSTILE, HOSTILE),
    )
    .await;
    assert_eq!(result.outcome.as_deref(), Ok(HOSTILE));
    assert_eq!(
        result.store_failures, 0,
        "nothing in the text can break a statement"
    );

    let run = store.run(&result.trace_id).await.unwrap().unwrap();
    assert_eq!(run.input, input);
    assert_eq!(run.output, json!(HOSTILE));
    assert_eq!(run.agent, format!("agent{HOSTILE}"));
    assert_eq!(run.variant.as_deref(), Some(HOSTILE));
    assert_eq!(run.metadata[HOSTILE], HOSTILE);
    let trace = store.trace(&result.trace_id).await.unwrap().unwrap();
    assert_eq!(trace.transcript, result.transcript);
    let Message::Tool { results } = &trace.transcript[2] else {
        panic!("{:?}", trace.transcript)
    };
    assert_eq!(results[0].content, format!("{HOSTILE}{HOSTILE}"));
    let memory = agent_core::store::Memory::load(&store, thread, 10)
        .await
        .unwrap();
    assert_eq!(memory.messages, result.transcript);
    store
        .attach_feedback(
            &result.trace_id,
            &Feedback::new()
                .note(HOSTILE)
                .corrected_output(json!(HOSTILE)),
        )
        .await
        .unwrap();
    let run = store.run(&result.trace_id).await.unwrap().unwrap();
    assert_eq!(run.feedback.unwrap().note.as_deref(), Some(HOSTILE));
    // Listing by a hostile agent name and variant finds the run (the column copies
    // agree with the filters).
    let found = store
        .runs(
            &RunQuery::new()
                .agent(format!("agent{HOSTILE}"))
                .variant(HOSTILE),
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    // Every table is still there.
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats.runs, stats.traces, stats.threads, stats.feedback),
        (1, 1, 1, 1)
    );
    store.check_integrity().await.unwrap();
    store.close().await.unwrap();
}

both_backends!(
    runs_feedback_and_eval_export,
    replay_and_diff,
    hostile_text_round_trips
);

/// Several stores (as from several worker processes) opening the same new schema at the
/// same moment all open: the losers of the `CREATE SCHEMA` race are not errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stores_opening_one_new_schema_at_once_all_open() {
    let Some(place) = common::postgres_place().await else {
        return;
    };
    let opens: Vec<_> = (0..8)
        .map(|_| {
            let (target, options) = (place.target(), place.options());
            tokio::spawn(async move { agent_store::Store::open_with(&target, options).await })
        })
        .collect();
    let mut failures = Vec::new();
    for open in opens {
        if let Err(e) = open.await.unwrap() {
            failures.push(e.to_string());
        }
    }
    place.remove().await;
    assert_eq!(failures, Vec::<String>::new());
}
