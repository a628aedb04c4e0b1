//! An `LlmClient` written by hand: a rule-based "model" that triages tickets by keywords.
//!
//! ```text
//! cargo run --release --example custom_llm
//! ```
//!
//! Any transport or model fits behind the trait: implement `complete` (one round trip,
//! no retries: the runner owns retries, backoff and budgets) and classify failures as
//! transient or permanent. This one looks up the order a ticket names, then submits a
//! decision whose severity and queue come from keywords, and shows the runner's
//! validation at work: its first submission for a legal ticket is rejected by
//! `Triage::check`, and it corrects itself from the feedback.

use std::process::ExitCode;

use agent_core::{
    AgentConfig,
    eval::run_batch,
    llm::{LlmClient, LlmFuture, LlmRequest, LlmResponse, Message, TokenUsage, ToolCall},
};
use agent_examples::triage::{self, Triage, data_dir};
use serde_json::{Value, json};

/// Triage by keywords: no network, deterministic.
struct KeywordModel;

impl KeywordModel {
    fn decide(&self, request: &LlmRequest) -> LlmResponse {
        let ticket = match request.messages.first() {
            Some(Message::User { content, .. }) => content.to_lowercase(),
            _ => String::new(),
        };
        let order_id = find_order_id(&ticket);
        let results: Vec<&agent_core::llm::ToolResult> = request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { results } => Some(results.iter()),
                _ => None,
            })
            .flatten()
            .collect();
        // Turn 1: look the order up, if the ticket names one.
        if let (true, Some(id)) = (results.is_empty(), &order_id) {
            return call("lookup_order", json!({ "order_id": id }));
        }
        let found = results
            .iter()
            .any(|r| r.name == "lookup_order" && !r.is_error);
        let rejected = results
            .iter()
            .any(|r| r.name == "submit_output" && r.is_error);
        let (queue, mut severity) = classify(&ticket);
        if rejected {
            // The runner fed back why the last submission was rejected; fix it.
            severity = severity.max(3);
        }
        let order = if found { order_id } else { None };
        call(
            "submit_output",
            json!({
                "severity": severity,
                "queue": queue,
                "order_id": order,
                "summary": format!("Keyword triage: {queue} ticket{}.", if found { " about a known order" } else { "" }),
                "claims_match_records": Value::Null,
            }),
        )
    }
}

fn call(name: &str, arguments: Value) -> LlmResponse {
    LlmResponse::tool_calls(vec![ToolCall::new(format!("kw_{name}"), name, arguments)])
        .with_usage(TokenUsage::new(0, 0))
}

fn find_order_id(text: &str) -> Option<String> {
    let start = text.find("nw")?;
    let digits: String = text[start + 2..]
        .chars()
        .skip_while(|c| !c.is_ascii_digit() && *c != 'o')
        .take_while(|c| c.is_ascii_digit() || *c == 'o')
        .map(|c| if c == 'o' { '0' } else { c })
        .collect();
    (digits.len() == 5).then(|| format!("NW-{digits}"))
}

/// Queue and severity by keywords. Deliberately naive: legal tickets get severity 2,
/// which `Triage::check` rejects, so the correction loop shows.
fn classify(text: &str) -> (&'static str, u8) {
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if has(&["lawyer", "legal", "court"]) {
        ("legal", 2)
    } else if has(&["did not place", "didn't place", "hacked", "password"]) {
        ("security", 4)
    } else if has(&["refund", "charged", "promo"]) {
        ("billing", 2)
    } else if has(&["return", "exchange", "damaged", "wrong", "missing"]) {
        ("returns", 2)
    } else if has(&["parcel", "tracking", "arrived", "delivery", "pedido"]) {
        ("shipping", 2)
    } else if has(&["seo", "backlinks", "partnership"]) {
        ("spam", 1)
    } else if has(&["log in", "login", "account", "address", "cancel"]) {
        ("account", 2)
    } else {
        ("feedback", 1)
    }
}

impl LlmClient for KeywordModel {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let response = self.decide(request);
        Box::pin(async move { Ok(response) })
    }

    fn provider(&self) -> &str {
        "keywords"
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let config: AgentConfig<Triage> = match triage::base_config(&data_dir()).and_then(|b| {
        b.llm(KeywordModel)
            .model("keywords")
            .build()
            .map_err(|e| e.to_string())
    }) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let tickets = match triage::load_tickets(&data_dir().join("tickets")) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let batch = run_batch(&config, tickets.iter().map(|t| t.text.clone()), 8).await;
    for (ticket, result) in tickets.iter().zip(&batch.results) {
        println!("{}", agent_examples::cli::human_line(&ticket.name, result));
    }
    println!("\n{}", batch.receipt);
    ExitCode::SUCCESS
}
