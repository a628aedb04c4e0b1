//! Memory across runs on both backends: earlier turns loaded before a run and trimmed
//! by the window (a tool call never separated from its result), the run's turns
//! appended after it, the thread's round-trip cap ending a run before any request,
//! idempotent and concurrent appends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use agent_core::store::{Memory, ThreadEntry};
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentError, RunOptions,
    error::Budget,
    json,
    llm::{LlmError, Message},
    run_agent_with,
    store::{MemoryWindow, StoreError},
    tool, tools,
};
use common::Place;

/// Looks up an order.
#[tool]
async fn lookup(order_id: String) -> String {
    format!("{order_id}: shipped")
}

fn user(text: &str) -> Message {
    Message::user(text)
}

async fn memory_across_runs(place: &Place) {
    let store = place.open().await;
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
    store.close().await.unwrap();
}

async fn appends_are_idempotent_and_ordered_under_concurrency(place: &Place) {
    let store = place.open().await;
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
    // Keys with NUL are refused on both backends.
    assert!(matches!(
        store.load("bad\0id", 1).await,
        Err(StoreError::Invalid { .. })
    ));
    store.close().await.unwrap();
}

both_backends!(
    memory_across_runs,
    appends_are_idempotent_and_ordered_under_concurrency
);
