//! A tree of agents with a tripwire: the triage agent asks a refunds agent (an agent
//! used as a tool, `AgentConfig::as_tool`) about refunds, and an input guardrail stops
//! any ticket that holds a card number before a model sees it.

use std::path::Path;

use agent_core::{
    AgentConfig, agent_output,
    guardrail::{InputGuardrail, Verdict},
    tools,
};

use crate::model::ModelChoice;
use crate::triage::{OrderBook, Triage, lookup_order, refund_status};

/// The refunds agent's answer to one question from the triage agent.
#[agent_output]
#[derive(Debug, Clone, PartialEq)]
pub struct RefundAnswer {
    /// The order the question is about, as refund_status found it (like NW-10231); null
    /// if the question names no order or the order does not exist.
    #[schemars(regex(pattern = r"^NW-\d{5}$"))]
    pub order_id: Option<String>,
    /// The refund's state: none, requested, approved, rejected or paid.
    pub state: String,
    /// The refund's amount (USD), when there is a refund.
    pub amount_usd: Option<f64>,
    /// One or two sentences for the triage agent: the refund's state and what is due.
    #[schemars(length(min = 10, max = 240))]
    pub answer: String,
}

/// The system prompt of the refunds agent.
pub const REFUNDS_PROMPT: &str = "You answer questions about refunds for Northwind Outfitters. \
Today is 2026-05-18. Look the order up with refund_status (and lookup_order for what was \
bought), then say what state its refund is in and what, if anything, is due.";

/// The system prompt of the triage agent that delegates refund questions.
pub const DELEGATING_PROMPT: &str = "You triage support tickets for Northwind Outfitters, an \
outdoor gear shop. Today is 2026-05-18. For each ticket: find the order it is about with \
lookup_order; for a question about a refund or a charge, ask the refunds agent with \
ask_refunds (give it the order id and the question); compare what the customer says with the \
records, then give your triage decision. Security and legal tickets are always severity 3 or \
4. Hand the ticket to a human with escalate_to_human only when it cannot be triaged at all.";

/// A ticket that holds a card number (a test number): the input guardrail stops it
/// before any LLM call.
pub const CARD_TICKET: &str = "Subject: new card\n\nHi, my last order was charged to an old card. Please use this \
one instead: 4111 1111 1111 1111, expiry 09/28. Thanks, Dana";

/// The refunds agent: `refund_status` and `lookup_order` over `orders.json`, its own loop
/// budgets (4 LLM calls, 3 tool calls).
///
/// # Errors
/// A message when `orders.json` cannot be loaded or the config is invalid.
pub fn refunds_config(
    data: &Path,
    choice: &ModelChoice,
) -> Result<AgentConfig<RefundAnswer>, String> {
    let orders = OrderBook::load(&data.join("orders.json"))?;
    let builder = AgentConfig::builder("refunds")
        .system_prompt(REFUNDS_PROMPT)
        .tools(tools![refund_status, lookup_order])
        .state(orders)
        .max_llm_calls(4)
        .max_tool_calls(3)
        .max_tokens(512)
        .temperature(0.0);
    choice
        .apply(builder)
        .build()
        .map_err(|e| format!("invalid refunds config: {e}"))
}

/// The triage agent of this example: `lookup_order`, the refunds agent as the tool
/// `ask_refunds`, and the `card_number` input guardrail. Its token cap (40,000 tokens)
/// binds the refunds agent's calls too.
///
/// # Errors
/// A message when `orders.json` cannot be loaded or a config is invalid.
pub fn delegating_config(data: &Path, choice: &ModelChoice) -> Result<AgentConfig<Triage>, String> {
    let refunds = refunds_config(data, choice)?;
    let orders = OrderBook::load(&data.join("orders.json"))?;
    let builder = AgentConfig::builder("ticket-triage")
        .system_prompt(DELEGATING_PROMPT)
        .tools(tools![lookup_order])
        .tool(refunds.as_tool(
            "ask_refunds",
            "Ask the refunds agent about an order's refund or a charge: give the order id \
             and the question. It answers with the refund's state and amount.",
        ))
        .state(orders)
        .input_guardrail(card_guardrail())
        .escalation(true)
        .max_llm_calls(8)
        .max_tool_calls(6)
        .max_total_tokens(40_000)
        .max_tokens(1024)
        .temperature(0.0);
    choice
        .apply(builder)
        .build()
        .map_err(|e| format!("invalid triage config: {e}"))
}

/// The input guardrail `card_number`: it trips on a ticket that holds a payment card
/// number (see [`has_card_number`]), so the number never reaches a model, a tool or a
/// trace of the model's turns.
pub fn card_guardrail() -> InputGuardrail {
    InputGuardrail::new("card_number", |ticket: &str| {
        if has_card_number(ticket) {
            Verdict::Trip("the ticket holds a payment card number".into())
        } else {
            Verdict::Pass
        }
    })
}

/// Whether `text` holds a payment card number: 13 to 19 digits, optionally grouped by
/// single spaces or dashes, that pass the Luhn check (ISO/IEC 7812). Order ids
/// (`NW-10231`) and dates are too short to match.
pub fn has_card_number(text: &str) -> bool {
    let mut digits: Vec<u32> = Vec::new();
    let mut last_was_separator = false;
    for c in text.chars().chain(std::iter::once('.')) {
        if let Some(d) = c.to_digit(10) {
            digits.push(d);
            last_was_separator = false;
        } else if (c == ' ' || c == '-') && !digits.is_empty() && !last_was_separator {
            last_was_separator = true;
        } else {
            if (13..=19).contains(&digits.len()) && luhn(&digits) {
                return true;
            }
            digits.clear();
            last_was_separator = false;
        }
    }
    false
}

/// The Luhn check: from the right, every second digit doubled (minus 9 past 9), the
/// sum a multiple of 10.
fn luhn(digits: &[u32]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| match (i % 2 == 1, d * 2) {
            (true, doubled) if doubled > 9 => doubled - 9,
            (true, doubled) => doubled,
            (false, _) => d,
        })
        .sum();
    sum.is_multiple_of(10)
}

/// One line per child run of a ticket (indented, under the ticket's line): the tool, the
/// child's ending and category, its LLM calls and tokens.
pub fn child_lines(usage: &agent_core::usage::Usage) -> Vec<String> {
    usage
        .children
        .iter()
        .map(|c| {
            format!(
                "    -> {} ({} agent): {}{} calls={}+{} tokens={}",
                c.tool,
                c.agent,
                c.ending,
                c.category
                    .as_deref()
                    .map(|k| format!(" ({k})"))
                    .unwrap_or_default(),
                c.usage.llm_calls,
                c.usage.tool_calls,
                c.usage.total_tokens(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_numbers_are_found_and_order_ids_and_phone_numbers_are_not() {
        assert!(has_card_number(CARD_TICKET));
        assert!(has_card_number("card 4111-1111-1111-1111"));
        assert!(has_card_number("amex 378282246310005 thanks"));
        // One digit off: not a card number (Luhn fails).
        assert!(!has_card_number("4111 1111 1111 1112"));
        assert!(!has_card_number("order NW-10231, placed 2026-05-01"));
        assert!(!has_card_number("call me at +1 415 555 0100"));
        // Two separators in a row end the group.
        assert!(!has_card_number("4111  1111 1111 1111"));
    }
}
