//! The delegation example on the built-in test model: tickets answered with one run of
//! the refunds agent each, whose tokens the triage run's usage includes; the card ticket
//! stopped by the input guardrail before any LLM call.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use agent_core::{Ending, eval::run_batch};
use agent_examples::delegation::{CARD_TICKET, child_lines, delegating_config};
use agent_examples::model::ModelChoice;
use agent_examples::triage::{data_dir, load_tickets};

#[tokio::test]
async fn tickets_are_answered_with_the_refunds_agent_and_the_card_ticket_trips() {
    let config = delegating_config(&data_dir(), &ModelChoice::Fallback).unwrap();
    let tickets = load_tickets(&data_dir().join("tickets")).unwrap();
    let mut inputs: Vec<String> = tickets.iter().take(3).map(|t| t.text.clone()).collect();
    inputs.push(CARD_TICKET.to_owned());
    let batch = run_batch(&config, inputs, 2).await;
    for result in &batch.results[..3] {
        assert_eq!(result.ending(), Ending::Answered, "{:?}", result.outcome);
        // The test model calls every tool once: lookup_order, then ask_refunds.
        assert_eq!(result.usage.tool_calls, 2);
        let [child] = &result.usage.children[..] else {
            panic!("one refunds run: {:?}", result.usage.children);
        };
        assert_eq!(
            (child.tool.as_str(), child.agent.as_str()),
            ("ask_refunds", "refunds")
        );
        assert_eq!(child.ending, "answered");
        assert!(!child.trace_id.is_empty());
        // The child's tokens are part of the parent's, not all of them.
        assert!(child.usage.total_tokens() > 0);
        assert!(result.usage.total_tokens() > child.usage.total_tokens());
        let lines = child_lines(&result.usage);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("ask_refunds (refunds agent): answered"),
            "{}",
            lines[0]
        );
    }

    let tripped = &batch.results[3];
    assert_eq!(tripped.category(), Some("guardrail_tripped"));
    assert_eq!(tripped.ending(), Ending::Failed);
    assert_eq!(tripped.usage.llm_calls, 0);
    assert_eq!(tripped.usage.guardrail_interventions, 1);
    assert!(tripped.usage.children.is_empty());
    let error = tripped.outcome.as_ref().unwrap_err().to_string();
    assert!(error.contains("card_number"), "{error}");
    // The receipt counts the tree and the guardrail.
    let receipt = &batch.receipt;
    assert_eq!(receipt.child_runs, 3);
    assert_eq!(receipt.guardrail_interventions, 1);
    assert_eq!(receipt.categories.get("guardrail_tripped"), Some(&1));
    let table = receipt.to_string();
    assert!(table.contains("child runs"), "{table}");
    assert!(table.contains("guardrail interventions"), "{table}");
}
