//! A thread compacted across 50 runs on both backends: once the thread no longer fits
//! the memory window, each run summarizes the messages the window drops (with the
//! stored summary) and stores the new summary with its entry; the next run starts from
//! the summary plus the newest messages; the system prompt is never stored or repeated.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use agent_core::store::Memory;
use agent_core::testing::{ScriptStep, ScriptedModel};
use agent_core::{
    AgentConfig, RunOptions,
    config::Compaction,
    llm::{LlmResponse, Message, TokenUsage},
    run_agent_with,
    store::MemoryWindow,
};
use common::Place;

const RUNS: usize = 50;
const SYSTEM: &str = "SYSTEM-PROMPT-7f3a: you are a support agent.";

fn texts(prefix: &str, n: usize, usage: (u64, u64)) -> ScriptedModel {
    ScriptedModel::from_steps((1..=n).map(|k| {
        ScriptStep::Respond(
            LlmResponse::text(format!("{prefix} {k}"))
                .with_usage(TokenUsage::new(usage.0, usage.1)),
        )
    }))
}

async fn a_thread_compacted_across_50_runs(place: &Place) {
    let store = place.open().await;
    let model = texts("answer", RUNS, (100, 10));
    let writer = texts("summary", RUNS, (50, 10));
    let config: AgentConfig<String> = AgentConfig::builder("chat")
        .llm(model.clone())
        .system_prompt(SYSTEM)
        .memory(store.clone())
        .memory_window(MemoryWindow::new(6, 100_000))
        .compaction(
            Compaction::summarize_with(writer.clone(), "summarizer").max_history_tokens(1_000_000),
        )
        .build()
        .unwrap();
    let thread = place.target().replace(['/', ':', '.'], "_");
    for run in 1..=RUNS {
        let input = format!("question {run}");
        let result = run_agent_with(
            &config,
            input.as_str(),
            RunOptions::new().thread(thread.as_str()),
        )
        .await;
        assert_eq!(
            result.outcome.as_deref(),
            Ok(format!("answer {run}").as_str())
        );
        assert_eq!(result.store_failures, 0);
        // Two messages per run; the window holds 6: from run 5 on, each run summarizes.
        let summarized = run >= 5;
        assert_eq!(result.usage.compactions, u32::from(summarized), "run {run}");
        assert_eq!(result.usage.compaction_failures, 0);
        // The summary's tokens are the run's: 110 of its own call, 60 of the summary.
        assert_eq!(
            result.usage.total_tokens(),
            if summarized { 170 } else { 110 }
        );
        let sent = &model.requests()[run - 1];
        let messages = &sent.messages;
        assert_eq!(messages.last(), Some(&Message::user(input.as_str())));
        if summarized {
            let k = run - 4;
            assert_eq!(
                messages[0],
                Message::user(format!(
                    "Summary of the earlier messages of this conversation:\nsummary {k}"
                ))
            );
            // The summary, the six newest messages, the input.
            assert_eq!(messages.len(), 8, "run {run}");
            assert_eq!(messages[1], Message::user(format!("question {}", run - 3)));
        } else {
            assert_eq!(messages.len(), 2 * run - 1);
        }
    }
    assert_eq!(writer.request_count(), RUNS - 4);
    // Each summary is written from the one before and the two messages the window
    // dropped; never from the system prompt.
    let asked = writer.requests();
    let Message::User { content, .. } = &asked[1].messages[0] else {
        panic!("{:?}", asked[1].messages);
    };
    assert!(
        content.starts_with("summary of what came before: summary 1\n"),
        "{content}"
    );
    assert!(
        content.contains("user: question 2\nassistant: answer 2"),
        "{content}"
    );
    assert!(
        asked
            .iter()
            .all(|r| !format!("{:?}", r.messages).contains("SYSTEM-PROMPT-7f3a"))
    );

    // The store: the last summary, and the messages after what it covers.
    let state = store.load(&thread, 1_000).await.unwrap();
    assert_eq!(
        state.summary.as_deref(),
        Some(format!("summary {}", RUNS - 4).as_str())
    );
    assert_eq!(state.messages.len(), 8);
    assert_eq!(
        state.messages[0],
        Message::user(format!("question {}", RUNS - 3))
    );
    assert_eq!((state.runs, state.llm_calls), (RUNS as u64, RUNS as u64));
    let stored = format!("{:?}", state);
    assert!(!stored.contains("SYSTEM-PROMPT-7f3a"), "{stored}");
    assert!(
        !stored.contains("Summary of the earlier messages"),
        "a summary message was stored: {stored}"
    );
    store.close().await.unwrap();
}

both_backends!(a_thread_compacted_across_50_runs);
