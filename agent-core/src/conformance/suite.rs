//! The store conformance kit: the trait tests agent-store's SQLite and PostgreSQL
//! stores pass, as async functions any backend of [`CheckpointStore`] or [`Memory`]
//! can run (with the `conformance` feature; see `docs/stores.md`, "Testing a store of
//! your own").
//!
//! A backend under test is a [`Backend`]: it opens handles on one store, as separate
//! processes would (the same data each time: a test that opens eight handles races
//! eight writers). Each function takes a backend whose store is fresh (empty) and
//! panics, with the assertion that failed, when the store breaks the contract; it never
//! cleans up (dropping the backend is the caller's).
//! [`checkpoint_conformance!`](crate::checkpoint_conformance) and
//! [`memory_conformance!`](crate::memory_conformance) write one `#[tokio::test]` per
//! function:
//!
//! ```ignore
//! // tests/conformance.rs of a crate with a store `MyStore` (dev-dependencies:
//! // agent-core with the `conformance` feature, tokio with `macros` and
//! // `rt-multi-thread`).
//! use agent_core::conformance::Backend;
//!
//! struct Fresh(MyStore); // one fresh store per test, removed on drop
//!
//! impl Backend for Fresh {
//!     type Store = MyStore;
//!     fn open(&self) -> agent_core::conformance::Opening<'_, MyStore> {
//!         Box::pin(async move { self.0.clone() })
//!     }
//! }
//!
//! async fn fresh() -> Fresh {
//!     Fresh(MyStore::temporary().await)
//! }
//!
//! agent_core::checkpoint_conformance!(fresh());
//! agent_core::memory_conformance!(fresh());
//! ```
//!
//! What is checked, per trait:
//!
//! - [`CheckpointStore`]: [`checkpoints_and_the_ledger_round_trip`] (rows stored and
//!   read back byte for byte, NUL and non-ASCII text included),
//!   [`a_boundary_is_one_write`] (`save_boundary` stored whole or refused whole, 64 runs
//!   at once), [`fenced_writes_keep_one_writer`] (the fencing rule; 8 handles claiming
//!   one run at once, exactly one wins; a `started` entry racing a take-over 40 times
//!   is fenced or seen, never lost);
//! - [`Memory`]: [`memory_across_runs`] (a thread's turns loaded into the next run,
//!   trimmed by the window without separating a tool call from its result; the
//!   thread's round-trip cap), [`appends_are_idempotent_and_ordered_under_concurrency`]
//!   (24 concurrent appends, each run's messages together, the same run appended twice
//!   stored once; a NUL in a key refused with `StoreError::Invalid`).
//!
//! The fault injectors [`CrashAt`](super::CrashAt) and [`HangAt`](super::HangAt) wrap
//! any checkpoint store for the crash tests of durable runs.

// A conformance test reports a broken contract by panicking with the assertion, as any
// test does: the module is test code shipped for other crates' tests.
// The records are built field by field, as a crate outside this one must (they are
// `#[non_exhaustive]`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::field_reassign_with_default
)]

use std::future::Future;
use std::pin::Pin;

use serde_json::json;

use crate::llm::{LlmError, Message};
use crate::store::{
    CheckpointRecord, CheckpointStore, LedgerEntry, LedgerStatus, Memory, MemoryWindow,
    SaveOutcome, StoreError, ThreadEntry,
};
use crate::testing::ScriptedModel;
use crate::{AgentConfig, AgentError, RunOptions, error::Budget, run_agent_with, tool, tools};

/// The future of [`Backend::open`].
pub type Opening<'a, S> = Pin<Box<dyn Future<Output = S> + Send + 'a>>;

/// A store under test: [`open`](Self::open) returns a handle on it, a new one each call
/// (as another process would open the same database), all sharing its data.
pub trait Backend: Send + Sync {
    /// The store's handle type: the traits under test, cloned into concurrent tasks.
    type Store: Clone + Send + Sync + 'static;

    /// A handle on the store. A backend without separate handles returns a clone of
    /// the one it holds.
    fn open(&self) -> Opening<'_, Self::Store>;
}

/// Looks up an order.
#[tool]
async fn lookup(order_id: String) -> String {
    format!("{order_id}: shipped")
}

fn user(text: &str) -> Message {
    Message::user(text)
}

fn checkpoint(run_id: &str, seq: u64, writer: &str) -> CheckpointRecord {
    let mut record = CheckpointRecord::default();
    record.run_id = run_id.into();
    record.seq = seq;
    record.fingerprint = "f".into();
    record.header = "{}".into();
    record.state = format!("{{\"by\":\"{writer}\",\"seq\":{seq}}}");
    record.writer = writer.into();
    record
}

fn started(run_id: &str, call_id: &str) -> LedgerEntry {
    serde_json::from_value(json!({
        "run_id": run_id, "call_id": call_id, "tool": "send_email", "arguments_hash": "00",
        "status": {"status": "started"}
    }))
    .unwrap()
}

fn completed(run_id: &str, call_id: &str) -> LedgerEntry {
    serde_json::from_value(json!({
        "run_id": run_id, "call_id": call_id, "tool": "send_email", "arguments_hash": "00",
        "status": {"status": "completed", "content": "sent", "is_error": false, "fatal": false}
    }))
    .unwrap()
}

/// A checkpoint saved twice reads back as the second, byte for byte (NUL, non-ASCII);
/// a ledger entry recorded `started` then `completed` is one entry; an unknown run has
/// no checkpoint and an empty ledger. (Whether an empty run id is refused is the
/// backend's choice: agent-store refuses it, `InMemoryCheckpoints` takes it.)
pub async fn checkpoints_and_the_ledger_round_trip<B>(backend: &B)
where
    B: Backend,
    B::Store: CheckpointStore,
{
    let store = backend.open().await;
    assert_eq!(store.load("r1").await.unwrap(), None);
    let mut record = CheckpointRecord::default();
    record.run_id = "r1".into();
    record.seq = 1;
    record.fingerprint = "f".into();
    record.header = "{\"a\":1}".into();
    record.state = "{\"text\":\"nul \\u0000 and é\"}".into();
    store.save(&record).await.unwrap();
    record.seq = 2;
    record.finished = true;
    store.save(&record).await.unwrap();
    assert_eq!(store.load("r1").await.unwrap(), Some(record));
    let started: LedgerEntry = serde_json::from_value(json!({
        "run_id": "r1", "call_id": "c1", "tool": "t", "arguments_hash": "00",
        "status": {"status": "started"}
    }))
    .unwrap();
    store.record_tool(&started).await.unwrap();
    let mut done = started.clone();
    done.status = serde_json::from_value(
        json!({"status": "completed", "content": "ok\u{0}", "is_error": false, "fatal": false}),
    )
    .unwrap();
    store.record_tool(&done).await.unwrap();
    let ledger = store.ledger("r1").await.unwrap();
    assert_eq!(ledger, vec![done]);
    assert!(matches!(ledger[0].status, LedgerStatus::Completed { .. }));
    assert_eq!(store.ledger("r2").await.unwrap(), vec![]);
}

/// A boundary (`save_boundary`: finished entries, the checkpoint, started entries) on
/// the backend: stored whole; refused with its checkpoint when another writer took
/// the run over (its started entries then not stored, its finished ones stored); and
/// many boundaries of many runs at once, each stored whole (the writer's batches).
pub async fn a_boundary_is_one_write<B>(backend: &B)
where
    B: Backend,
    B::Store: CheckpointStore,
{
    use SaveOutcome::{Fenced, Saved};
    let store = backend.open().await;
    let sorted = |mut entries: Vec<LedgerEntry>| {
        entries.sort_by(|a, b| a.call_id.cmp(&b.call_id));
        entries
    };
    let first = checkpoint("b1", 1, "a");
    assert_eq!(store.save_fenced(&first, 0).await.unwrap(), Saved);
    let next = checkpoint("b1", 2, "a");
    let entries = [completed("b1", "c0"), started("b1", "c1")];
    assert_eq!(
        store
            .save_boundary(Some((&next, 0)), &entries, "a")
            .await
            .unwrap(),
        Saved
    );
    assert_eq!(store.load("b1").await.unwrap(), Some(next));
    assert_eq!(sorted(store.ledger("b1").await.unwrap()), entries.to_vec());
    // Another process takes the run over from seq 2.
    let claim = checkpoint("b1", 3, "b");
    assert_eq!(store.save_fenced(&claim, 2).await.unwrap(), Saved);
    let late = checkpoint("b1", 3, "a");
    let entries = [completed("b1", "c1"), started("b1", "c2")];
    assert_eq!(
        store
            .save_boundary(Some((&late, 0)), &entries, "a")
            .await
            .unwrap(),
        Fenced
    );
    assert_eq!(store.load("b1").await.unwrap(), Some(claim.clone()));
    // c1's result is kept (a finished entry is stored whatever the fence); c2 never
    // started.
    assert_eq!(
        sorted(store.ledger("b1").await.unwrap()),
        vec![completed("b1", "c0"), completed("b1", "c1")]
    );
    // Entries alone: the started one is fenced by the stored checkpoint's writer.
    let alone = [started("b1", "c3")];
    assert_eq!(
        store.save_boundary(None, &alone, "a").await.unwrap(),
        Fenced
    );
    assert_eq!(store.save_boundary(None, &alone, "b").await.unwrap(), Saved);
    assert_eq!(store.save_boundary(None, &[], "b").await.unwrap(), Saved);
    assert_eq!(store.load("b1").await.unwrap(), Some(claim));
    // A boundary that takes the run over (from seq 3): its started entry is checked
    // after its checkpoint, so it is the new writer's.
    let taken = checkpoint("b1", 4, "c");
    let start = [started("b1", "c4")];
    assert_eq!(
        store
            .save_boundary(Some((&taken, 3)), &start, "c")
            .await
            .unwrap(),
        Saved
    );
    assert_eq!(store.load("b1").await.unwrap(), Some(taken));
    // c0, c1 completed; c3 and c4 started.
    assert_eq!(store.ledger("b1").await.unwrap().len(), 4);
    // 64 runs' boundaries at once, two per run (a checkpoint with a started entry, then
    // the completed entry with the next checkpoint): every one stored whole.
    let runs: Vec<String> = (0..64).map(|i| format!("m{i}")).collect();
    let turns = futures::future::join_all(runs.iter().map(|run| {
        let store = &store;
        async move {
            let pending = checkpoint(run, 1, "w");
            let start = [started(run, "c1")];
            let a = store.save_boundary(Some((&pending, 0)), &start, "w").await;
            let after = checkpoint(run, 2, "w");
            let done = [completed(run, "c1")];
            let b = store.save_boundary(Some((&after, 0)), &done, "w").await;
            (a.unwrap(), b.unwrap())
        }
    }))
    .await;
    assert!(turns.iter().all(|t| *t == (Saved, Saved)), "{turns:?}");
    for run in &runs {
        assert_eq!(
            store.load(run).await.unwrap(),
            Some(checkpoint(run, 2, "w"))
        );
        assert_eq!(store.ledger(run).await.unwrap(), vec![completed(run, "c1")]);
    }
}

/// The fenced writes: the rule, 8 claims at once (exactly one
/// wins), and a `started` entry racing a take-over 40 times (the entry is fenced, or the
/// taker's ledger read after its claim sees it: never both missed).
pub async fn fenced_writes_keep_one_writer<B>(backend: &B)
where
    B: Backend,
    B::Store: CheckpointStore,
{
    use SaveOutcome::{Fenced, Saved};
    let store = backend.open().await;
    // A fresh run: written only while nothing is stored.
    assert_eq!(
        store
            .save_fenced(&checkpoint("w1", 1, "a"), 0)
            .await
            .unwrap(),
        Saved
    );
    assert_eq!(
        store
            .save_fenced(&checkpoint("w1", 1, "b"), 0)
            .await
            .unwrap(),
        Fenced
    );
    // The writer goes on; a resumer takes over from seq 2; the first writer is out.
    assert_eq!(
        store
            .save_fenced(&checkpoint("w1", 2, "a"), 0)
            .await
            .unwrap(),
        Saved
    );
    assert_eq!(
        store
            .save_fenced(&checkpoint("w1", 3, "b"), 2)
            .await
            .unwrap(),
        Saved
    );
    assert_eq!(
        store
            .save_fenced(&checkpoint("w1", 3, "a"), 0)
            .await
            .unwrap(),
        Fenced
    );
    assert_eq!(
        store
            .save_fenced(&checkpoint("w1", 4, "a"), 2)
            .await
            .unwrap(),
        Fenced
    );
    assert_eq!(
        store.load("w1").await.unwrap(),
        Some(checkpoint("w1", 3, "b"))
    );
    // Ledger: only the stored writer (or anyone, for a run with no checkpoint).
    assert_eq!(
        store
            .record_tool_fenced(&started("w1", "c1"), "a")
            .await
            .unwrap(),
        Fenced
    );
    assert_eq!(store.ledger("w1").await.unwrap(), vec![]);
    assert_eq!(
        store
            .record_tool_fenced(&started("w1", "c1"), "b")
            .await
            .unwrap(),
        Saved
    );
    assert_eq!(store.ledger("w1").await.unwrap(), vec![started("w1", "c1")]);
    assert_eq!(
        store
            .record_tool_fenced(&started("w9", "c1"), "z")
            .await
            .unwrap(),
        Saved
    );
    // Eight processes claim from seq 3 at once, each on its own connection pool.
    let stores: Vec<B::Store> = futures::future::join_all((0..8).map(|_| backend.open())).await;
    let claims: Vec<_> = (0..8)
        .map(|i| checkpoint("w1", 4, &format!("p{i}")))
        .collect();
    let outcomes =
        futures::future::join_all(stores.iter().zip(&claims).map(|(s, c)| s.save_fenced(c, 3)))
            .await;
    let won: Vec<usize> = (0..8).filter(|&i| outcomes[i] == Ok(Saved)).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    assert_eq!(
        store.load("w1").await.unwrap(),
        Some(claims[won[0]].clone())
    );
    // A `started` entry of the owner against a take-over, on two pools, 40 times.
    let (owner, taker) = (&stores[0], &stores[1]);
    let (mut fenced, mut seen) = (0, 0);
    for round in 0..40 {
        let run = format!("race{round}");
        owner
            .save_fenced(&checkpoint(&run, 1, "a"), 0)
            .await
            .unwrap();
        let entry = started(&run, "c1");
        let (start, ledger) = tokio::join!(owner.record_tool_fenced(&entry, "a"), async {
            assert_eq!(
                taker
                    .save_fenced(&checkpoint(&run, 2, "b"), 1)
                    .await
                    .unwrap(),
                Saved
            );
            taker.ledger(&run).await.unwrap()
        });
        match start.unwrap() {
            Fenced => fenced += 1,
            _ => {
                assert_eq!(
                    ledger,
                    vec![entry],
                    "round {round}: a started entry was missed"
                );
                seen += 1;
            }
        }
    }
    eprintln!("started against a take-over: {fenced} fenced, {seen} seen by the taker");
    assert_eq!(fenced + seen, 40);
}

/// Memory across runs: earlier turns loaded before a run and trimmed by the window (a
/// tool call never separated from its result), the run's turns appended after it, a
/// failed run adding its round trips only, the thread's round-trip cap ending a run
/// before any request, threads kept apart.
pub async fn memory_across_runs<B>(backend: &B)
where
    B: Backend,
    B::Store: Memory,
{
    let store = backend.open().await;
    let model = ScriptedModel::new()
        .text("Hello Ada")
        .text("Your name is Ada")
        .tool_call("lookup", json!({"order_id": "NW-1"}))
        .text("NW-1 has shipped")
        .fail(LlmError::permanent("the provider is down"))
        .text("Still here");
    let config: AgentConfig<String> = AgentConfig::builder("chat")
        .llm(model.clone())
        .tools(tools![lookup])
        .memory(store.clone())
        .memory_window(MemoryWindow::new(5, 10_000))
        .build()
        .unwrap();
    let ada = || RunOptions::new().thread("ada");

    let r1 = run_agent_with(&config, "I'm Ada", ada()).await;
    assert_eq!(r1.outcome.as_deref(), Ok("Hello Ada"));
    let r2 = run_agent_with(&config, "What's my name?", ada()).await;
    assert_eq!(r2.outcome.as_deref(), Ok("Your name is Ada"));
    let r3 = run_agent_with(&config, "Where is NW-1?", ada()).await;
    assert_eq!(r3.outcome.as_deref(), Ok("NW-1 has shipped"));
    assert_eq!(r3.usage.llm_calls, 2);
    assert!(r1.store_failures + r2.store_failures + r3.store_failures == 0);

    let sent = model.requests();
    assert_eq!(sent[0].messages, [user("I'm Ada")]);
    // The second run sees the first exchange, then its own input.
    assert_eq!(
        sent[1].messages,
        [
            user("I'm Ada"),
            Message::assistant("Hello Ada", vec![]),
            user("What's my name?")
        ]
    );
    // The third: four earlier messages fit the window of five.
    assert_eq!(sent[2].messages.len(), 5);
    assert_eq!(sent[2].messages[4], user("Where is NW-1?"));

    // Thread: 4 + 4 messages (the tool exchange), 4 round trips, 3 runs.
    let state = store.load("ada", 100).await.unwrap();
    assert_eq!(state.messages.len(), 8);
    assert_eq!((state.llm_calls, state.runs), (4, 3));
    assert_eq!(state.messages[..2], r1.transcript[..]);

    // Fourth run: the last five messages start at Ada's second answer; the window moves
    // on to the next user message, so the tool call and its result stay together.
    let r4 = run_agent_with(&config, "Thanks", ada()).await;
    assert_eq!(r4.category(), Some("llm_permanent_error"));
    let sent = model.requests();
    let history = &sent[4].messages[..sent[4].messages.len() - 1];
    assert_eq!(history.len(), 4, "{history:?}");
    assert_eq!(history[0], user("Where is NW-1?"));
    assert!(matches!(&history[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 1));
    assert!(
        matches!(&history[2], Message::Tool { results } if results[0].content == "NW-1: shipped")
    );

    // A failed run adds its round trips, not its messages.
    let state = store.load("ada", 100).await.unwrap();
    assert_eq!(
        (state.messages.len(), state.llm_calls, state.runs),
        (8, 5, 4)
    );

    // The cap: five round trips used, a cap of five ends the next run before any request.
    let capped = config.with_(|b| b.max_thread_llm_calls(5)).unwrap();
    let before = model.request_count();
    let refused = run_agent_with(&capped, "One more?", ada()).await;
    assert_eq!(
        refused.outcome,
        Err(AgentError::BudgetExhausted {
            budget: Budget::ThreadLlmCalls { limit: 5, used: 5 }
        })
    );
    assert_eq!(refused.category(), Some("budget_exhausted"));
    assert_eq!(refused.usage.llm_calls, 0);
    assert_eq!(model.request_count(), before, "no request was sent");
    let state = store.load("ada", 100).await.unwrap();
    assert_eq!(
        (state.llm_calls, state.runs),
        (5, 4),
        "a refused run adds nothing"
    );

    // Another thread is not capped; a run without a thread touches no thread.
    let bob = run_agent_with(&capped, "I'm Bob", RunOptions::new().thread("bob")).await;
    assert_eq!(bob.outcome.as_deref(), Ok("Still here"));
    assert_eq!(store.load("bob", 10).await.unwrap().messages.len(), 2);
    assert_eq!(store.load("nobody", 10).await.unwrap().runs, 0);
}

/// 24 runs appending to one thread at once: every run's messages stored together, the
/// same run appended again stored once, the newest messages returned when fewer are
/// asked for, a NUL in a thread id refused with [`StoreError::Invalid`].
pub async fn appends_are_idempotent_and_ordered_under_concurrency<B>(backend: &B)
where
    B: Backend,
    B::Store: Memory,
{
    let store = backend.open().await;
    let entry = |i: usize| {
        ThreadEntry::new(
            format!("{i:032x}"),
            vec![
                user(&format!("q{i}")),
                Message::assistant(format!("a{i}"), vec![]),
            ],
            1,
        )
    };
    let tasks: Vec<_> = (0..24)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.append("shared", &entry(i)).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    // The same run appended again changes nothing.
    store.append("shared", &entry(3)).await.unwrap();
    let state = store.load("shared", 1000).await.unwrap();
    assert_eq!((state.llm_calls, state.runs), (24, 24));
    assert_eq!(state.messages.len(), 48);
    let mut seen = Vec::new();
    for pair in state.messages.chunks(2) {
        let (Message::User { content: q, .. }, Message::Assistant { text: a, .. }) =
            (&pair[0], &pair[1])
        else {
            panic!("an exchange was split: {pair:?}");
        };
        assert_eq!(q[1..], a[1..], "each run's messages stay together");
        seen.push(q.clone());
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 24);
    // The newest messages come back when fewer are asked for.
    let last = store.load("shared", 2).await.unwrap();
    assert_eq!(last.messages, state.messages[46..]);
    // A key with a NUL byte is refused (`StoreError::Invalid`).
    assert!(matches!(
        store.load("bad\0id", 1).await,
        Err(StoreError::Invalid { .. })
    ));
}
