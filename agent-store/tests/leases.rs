//! Leases of durable runs and the fencing of `record_decisions`, on SQLite and
//! PostgreSQL: a paused run holds no lease; two reviewers recording at once both keep
//! their decisions; a resume's claim takes the lease and `record_decisions` then
//! refuses (`NotPaused`) and writes nothing; only the holder renews the lease.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common::Place;

use agent_core::{
    AgentConfig, AgentError, RunOptions, Tool, ToolContext,
    durable::{
        CheckpointStore, Decisions, ResumeError, SaveOutcome, paused_runs, record_decisions,
        unfinished_runs,
    },
    llm::ToolCall,
    run_agent_with,
    testing::ScriptedModel,
    tool::{ToolDefinition, ToolFuture},
};
use serde_json::{Value, json};

struct Refund;

impl Tool for Refund {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "refund",
            "Refunds an order.",
            json!({"type": "object", "properties": {"order": {"type": "string"}},
                   "required": ["order"]}),
        )
    }

    fn call<'a>(&'a self, _: Value, _: ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Ok("refunded".to_owned()) })
    }

    fn requires_approval(&self) -> bool {
        true
    }
}

fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

async fn record_decisions_is_fenced_by_leases(place: &Place) {
    let store = place.open().await;
    let model = ScriptedModel::new()
        .tool_calls(vec![
            ToolCall::new("c1", "refund", json!({"order": "A1"})),
            ToolCall::new("c2", "refund", json!({"order": "A2"})),
        ])
        .text("done");
    let config: AgentConfig<String> = AgentConfig::builder("leases")
        .llm(model)
        .tool(Refund)
        .checkpoints(store.clone())
        .build()
        .unwrap();
    let result = run_agent_with(&config, "refund both", RunOptions::new().run_id("lease-1")).await;
    assert!(
        matches!(result.outcome, Err(AgentError::Paused { .. })),
        "{:?}",
        result.outcome
    );
    let paused = store.load("lease-1").await.unwrap().unwrap();
    assert_eq!(paused.lease_until_ms, 0, "a paused run holds no lease");
    let listed = unfinished_runs(&store, 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].paused);
    assert!(
        !listed[0].orphaned_at(now_ms()),
        "a paused run is never swept"
    );

    // Two reviewers at once: each write is a compare-and-set on the seq it read; the
    // later one reads again and merges, so both decisions are kept.
    let (a, b) = tokio::join!(
        record_decisions(&store, "lease-1", Decisions::new().approve("c1")),
        record_decisions(&store, "lease-1", Decisions::new().deny("c2", "no"))
    );
    a.unwrap();
    b.unwrap();
    let listed = paused_runs(&store, 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        serde_json::to_value(&listed[0].decided).unwrap(),
        json!({"c1": {"decision": "approve"}, "c2": {"decision": "deny", "reason": "no"}})
    );

    // A resume's claim: the same checkpoint under its token, seq + 1, holding a lease.
    let before = store.load("lease-1").await.unwrap().unwrap();
    let mut claim = before.clone();
    claim.seq += 1;
    claim.writer = "f".repeat(32);
    claim.lease_until_ms = now_ms() + 60_000;
    assert_eq!(
        store.save_fenced(&claim, before.seq).await.unwrap(),
        SaveOutcome::Saved
    );
    let refused = record_decisions(&store, "lease-1", Decisions::new().approve("c2"))
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        ResumeError::NotPaused {
            run_id: "lease-1".into()
        }
    );
    assert_eq!(
        store.load("lease-1").await.unwrap().unwrap(),
        claim,
        "nothing written"
    );
    let listed = unfinished_runs(&store, 10).await.unwrap();
    assert!(!listed[0].paused, "claimed: running");
    assert!(!listed[0].orphaned_at(now_ms()), "its lease is held");
    assert!(listed[0].orphaned_at(claim.lease_until_ms));

    // Only the holder renews, and only while it holds the run.
    let until = now_ms() + 120_000;
    assert_eq!(
        store
            .renew_lease("lease-1", &claim.writer, until)
            .await
            .unwrap(),
        SaveOutcome::Saved
    );
    assert_eq!(
        store
            .renew_lease("lease-1", &"0".repeat(32), until + 1)
            .await
            .unwrap(),
        SaveOutcome::Fenced
    );
    assert_eq!(
        store
            .renew_lease("no-such-run", &claim.writer, until)
            .await
            .unwrap(),
        SaveOutcome::Fenced
    );
    assert_eq!(
        store.load("lease-1").await.unwrap().unwrap().lease_until_ms,
        until
    );

    // The resume goes on and finishes: no lease, and decisions find it not paused.
    let resumed = agent_core::resume_agent(&config, "lease-1").await.unwrap();
    assert_eq!(resumed.outcome.as_deref(), Ok("done"));
    let finished = store.load("lease-1").await.unwrap().unwrap();
    assert!(finished.finished);
    assert_eq!(finished.lease_until_ms, 0);
    store.close().await.unwrap();
}

crate::both_backends!(record_decisions_is_fenced_by_leases);
