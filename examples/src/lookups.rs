//! Whether the runs looked orders up: of the tickets that name an order, how many runs
//! called `lookup_order`, and how many of those calls found it. A triage that never
//! looks can still guess the queue; it cannot say whether the customer's claims match
//! the records.

use std::fmt;

use agent_core::{AgentResult, llm::Message};

use crate::triage::Ticket;

/// The tool that finds an order.
const LOOKUP: &str = "lookup_order";

/// Whether `text` names an order the way customers write ids: `NW`, then an optional
/// `-` or space, then five characters each a digit or the letter O (`NW-10231`,
/// `nw 1O225`), in any case.
pub fn names_an_order(text: &str) -> bool {
    let bytes = text.as_bytes();
    (0..bytes.len()).any(|i| {
        let Some(rest) = bytes.get(i..) else {
            return false;
        };
        if rest.len() < 7 || !rest[..2].eq_ignore_ascii_case(b"nw") {
            return false;
        }
        let rest = match rest[2] {
            b'-' | b' ' => &rest[3..],
            _ => &rest[2..],
        };
        rest.len() >= 5
            && rest[..5]
                .iter()
                .all(|b| b.is_ascii_digit() || matches!(b, b'o' | b'O'))
    })
}

/// Order lookups over a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lookups {
    /// Tickets whose text names an order ([`names_an_order`]).
    pub naming: usize,
    /// Of those, the runs that called `lookup_order` at least once.
    pub looked_up: usize,
    /// Of those, the runs where a `lookup_order` call found an order (a result that is
    /// not an error).
    pub found: usize,
    /// Runs that called `lookup_order` on a ticket that names no order.
    pub looked_up_unnamed: usize,
    /// Tool executions over every run (`Usage::tool_calls`).
    pub tool_calls: u64,
}

impl Lookups {
    /// Counts lookups over `runs`, each a ticket and its run's result.
    pub fn measure<T>(runs: &[(&Ticket, &AgentResult<T>)]) -> Self {
        let mut out = Self::default();
        for (ticket, result) in runs {
            out.tool_calls += u64::from(result.usage.tool_calls);
            let (called, found) = lookups_in(&result.transcript);
            if names_an_order(&ticket.text) {
                out.naming += 1;
                out.looked_up += usize::from(called);
                out.found += usize::from(found);
            } else {
                out.looked_up_unnamed += usize::from(called);
            }
        }
        out
    }
}

/// Whether a transcript has a `lookup_order` call, and a result of one that found an
/// order.
fn lookups_in(transcript: &[Message]) -> (bool, bool) {
    let mut called = false;
    let mut found = false;
    for message in transcript {
        match message {
            Message::Assistant { tool_calls, .. } => {
                called |= tool_calls.iter().any(|c| c.name == LOOKUP);
            }
            Message::Tool { results } => {
                found |= results.iter().any(|r| r.name == LOOKUP && !r.is_error);
            }
            _ => {}
        }
    }
    (called, found)
}

impl fmt::Display for Lookups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "order lookups: {} of {} tickets that name an order called {LOOKUP} ({} found it); \
             {} of the others called it; {} tool calls in all",
            self.looked_up, self.naming, self.found, self.looked_up_unnamed, self.tool_calls
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ids_are_recognized_as_customers_write_them() {
        for text in [
            "order NW-10231.",
            "(nw 1O225)",
            "NW10205",
            "Pedido NW-10218 - where",
        ] {
            assert!(names_an_order(text), "{text}");
        }
        for text in ["no order here", "NW-102", "NW-1023x", "network 12345", "nw"] {
            assert!(!names_an_order(text), "{text}");
        }
    }

    #[test]
    fn twenty_five_bundled_tickets_name_an_order() {
        let tickets =
            crate::triage::load_tickets(&crate::triage::data_dir().join("tickets")).unwrap();
        let unnamed: Vec<&str> = tickets
            .iter()
            .filter(|t| !names_an_order(&t.text))
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(
            unnamed,
            [
                "009-return-policy-question",
                "010-seo-partnership",
                "012-cannot-log-in",
                "013-feature-back-in-stock-alerts"
            ]
        );
    }

    #[tokio::test]
    async fn lookups_are_counted_per_ticket() {
        use agent_core::testing::ScriptedModel;
        use agent_core::{AgentConfig, llm::ToolCall, run_agent};
        use serde_json::json;
        let data = crate::triage::data_dir();
        // Ticket a names an order and finds it; b names one and looks a wrong id up;
        // c names one and never looks; d names none and looks anyway.
        let model = ScriptedModel::new()
            .tool_calls(vec![ToolCall::new(
                "1",
                LOOKUP,
                json!({"order_id": "NW-10231"}),
            )])
            .text("done")
            .tool_calls(vec![ToolCall::new(
                "2",
                LOOKUP,
                json!({"order_id": "NW-99999"}),
            )])
            .text("done")
            .text("done")
            .tool_calls(vec![ToolCall::new(
                "3",
                LOOKUP,
                json!({"order_id": "NW-10231"}),
            )])
            .text("done");
        let orders = crate::triage::OrderBook::load(&data.join("orders.json")).unwrap();
        let config: AgentConfig<String> = AgentConfig::builder("t")
            .llm(model)
            .tools(agent_core::tools![crate::triage::lookup_order])
            .state(orders)
            .build()
            .unwrap();
        let tickets: Vec<Ticket> = [
            ("a", "Where is NW-10231?"),
            ("b", "Where is NW-99999?"),
            ("c", "Where is NW-10224?"),
            ("d", "Where is my parcel?"),
        ]
        .into_iter()
        .map(|(name, text)| Ticket {
            name: name.into(),
            text: text.into(),
            attachments: Vec::new(),
        })
        .collect();
        let mut results = Vec::new();
        for ticket in &tickets {
            results.push(run_agent(&config, ticket.text.as_str()).await);
        }
        let runs: Vec<(&Ticket, &AgentResult<String>)> = tickets.iter().zip(&results).collect();
        let lookups = Lookups::measure(&runs);
        assert_eq!(
            lookups,
            Lookups {
                naming: 3,
                looked_up: 2,
                found: 1,
                looked_up_unnamed: 1,
                tool_calls: 3,
            }
        );
        assert_eq!(
            lookups.to_string(),
            "order lookups: 2 of 3 tickets that name an order called lookup_order (1 found it); \
             1 of the others called it; 3 tool calls in all"
        );
    }
}
