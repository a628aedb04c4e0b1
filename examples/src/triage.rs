//! The triage agent: an `#[agent_output]` decision, two `#[tool]`s over `orders.json`,
//! and the config the examples share.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use agent_core::config::OutputContext;
use agent_core::content::{Input, Part};
use agent_core::llm::ContentCapabilities;
use agent_core::{
    AgentConfig, AgentConfigBuilder, ConfigError, State, agent_output, agent_type, tool, tools,
};

use crate::model::ModelChoice;

/// The queue that should handle a ticket.
#[agent_type]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Queue {
    /// Late, lost or misdelivered parcels; tracking questions.
    Shipping,
    /// Returns, exchanges, damaged or wrong items.
    Returns,
    /// Refunds, charges, promo codes, invoices.
    Billing,
    /// Login, profile and address changes, order changes or cancellations.
    Account,
    /// Suspected account takeover, fraud, orders the customer did not place.
    Security,
    /// Legal threats, chargebacks, regulators.
    Legal,
    /// Praise, feature requests, general questions.
    Feedback,
    /// Spam and messages unrelated to the shop.
    Spam,
}

/// Triage decision for one support ticket.
#[agent_output(validate = Triage::check)]
#[derive(Debug, Clone, PartialEq)]
pub struct Triage {
    /// The queue that should handle the ticket.
    pub queue: Queue,
    /// Severity, by what happened to the customer:
    /// 1 = nothing went wrong: a question, thanks, a suggestion, spam, or a routine return
    /// or exchange of an item they no longer want;
    /// 2 = a delay or a problem the usual process fixes: a late parcel, a damaged, wrong or
    /// missing item, a login problem, a change or cancellation to make, a price dispute;
    /// 3 = money or goods lost: charged twice or for a cancelled order, a refund short or
    /// weeks overdue, a parcel lost, or a customer chasing us after no reply;
    /// 4 = a security, safety or legal matter: an account takeover or fraud, an injury or a
    /// hazardous product, a legal threat or a chargeback.
    #[schemars(range(min = 1, max = 4))]
    pub severity: u8,
    /// The order the ticket is about, as lookup_order found it (NW- and five digits);
    /// null if the ticket names no order or the order does not exist.
    #[schemars(regex(pattern = r"^NW-\d{5}$"))]
    pub order_id: Option<String>,
    /// One or two sentences for the agent who picks the ticket up: what happened and
    /// what to do next.
    #[schemars(length(min = 10, max = 240))]
    pub summary: String,
    /// Whether the order records support what the customer says; null when there is no
    /// order to check.
    pub claims_match_records: Option<bool>,
}

impl Triage {
    /// Checks a schema cannot express: security and legal tickets are never low severity.
    ///
    /// # Errors
    /// The message fed back to the model.
    pub fn check(&self) -> Result<(), String> {
        let grave = matches!(self.queue, Queue::Security | Queue::Legal);
        if grave && self.severity < 3 {
            return Err(format!(
                "/severity: a {:?} ticket is severity 3 or 4, not {}",
                self.queue, self.severity
            ));
        }
        Ok(())
    }
}

/// One line of an order.
#[agent_type]
#[derive(Debug, Clone)]
pub struct Item {
    /// Product name.
    pub name: String,
    /// Quantity.
    pub qty: u32,
    /// Unit price (USD).
    pub unit_price_usd: f64,
}

/// A refund on an order.
#[agent_type]
#[derive(Debug, Clone)]
pub struct Refund {
    /// requested, approved, rejected or paid.
    pub status: String,
    /// Amount (USD).
    pub amount_usd: f64,
    /// When it was requested (ISO date).
    pub requested_on: String,
    /// Why.
    pub reason: String,
}

/// An order as stored in `orders.json`.
#[agent_type]
#[derive(Debug, Clone)]
pub struct Order {
    /// Like NW-10231.
    pub order_id: String,
    /// First name and last initial.
    pub customer: String,
    /// ISO date.
    pub placed_on: String,
    /// The lines.
    pub items: Vec<Item>,
    /// Total (USD).
    pub total_usd: f64,
    /// processing, shipped, delivered, cancelled or returned.
    pub status: String,
    /// The carrier, once shipped.
    #[serde(default)]
    pub carrier: Option<String>,
    /// The tracking number, once shipped.
    #[serde(default)]
    pub tracking: Option<String>,
    /// ISO date of delivery, once delivered.
    #[serde(default)]
    pub delivered_on: Option<String>,
    /// The refund, if any.
    #[serde(default)]
    pub refund: Option<Refund>,
}

/// The shop's orders: the application state the tools read.
#[derive(Debug, Default)]
pub struct OrderBook {
    orders: HashMap<String, Order>,
}

/// Why an order could not be found.
#[derive(Debug)]
pub struct NotFound(String);

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no order with id {:?} (ids are NW- and five digits); if the ticket gives no other \
             id, triage it from what the customer wrote",
            self.0
        )
    }
}

impl OrderBook {
    /// Loads `orders.json`.
    ///
    /// # Errors
    /// A message naming the file when it cannot be read or parsed.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let list: Vec<Order> =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self {
            orders: list.into_iter().map(|o| (o.order_id.clone(), o)).collect(),
        })
    }

    /// The order with this id, forgiving how customers type ids: case, spaces, and the
    /// letter O for the digit 0 (`nw 1O225` finds NW-10225).
    ///
    /// # Errors
    /// [`NotFound`] with the id as given.
    pub fn find(&self, id: &str) -> Result<&Order, NotFound> {
        let digits: String = id
            .chars()
            .skip_while(|c| !c.is_ascii_digit() && !matches!(c, 'o' | 'O'))
            .filter(|c| !matches!(c, ' ' | '-'))
            .map(|c| if matches!(c, 'o' | 'O') { '0' } else { c })
            .collect();
        self.orders
            .get(&format!("NW-{digits}"))
            .ok_or_else(|| NotFound(id.to_owned()))
    }

    /// The number of orders.
    pub fn len(&self) -> usize {
        self.orders.len()
    }

    /// Whether there are no orders.
    pub fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }
}

/// Look up an order: status, items, total, carrier, tracking number and delivery date.
#[tool(params(
    order_id = "The order id the ticket gives: NW- and five digits (customers sometimes mistype it)."
))]
pub async fn lookup_order(orders: State<OrderBook>, order_id: String) -> Result<Order, NotFound> {
    orders.find(&order_id).cloned()
}

/// The refund state of an order: its status, amount, request date and reason.
#[agent_type]
#[derive(Debug)]
pub struct RefundView {
    /// The order id.
    pub order_id: String,
    /// The refund, or null when none was ever requested.
    pub refund: Option<Refund>,
}

/// Get the refund of an order, if any: requested, approved, rejected or paid, with the
/// amount and dates.
#[tool(params(order_id = "The order id the ticket gives: NW- and five digits."))]
pub async fn refund_status(
    orders: State<OrderBook>,
    order_id: String,
) -> Result<RefundView, NotFound> {
    let order = orders.find(&order_id)?;
    Ok(RefundView {
        order_id: order.order_id.clone(),
        refund: order.refund.clone(),
    })
}

/// The system prompt of the triage agent.
pub const SYSTEM_PROMPT: &str = "You triage support tickets for Northwind Outfitters, an outdoor \
gear shop. Today is 2026-05-18. For each ticket: find the order it is about with lookup_order \
(and refund_status for refund questions), compare what the customer says with the records, \
then give your triage decision. Security and legal tickets are always severity 3 or 4. Hand the ticket to a human \
with escalate_to_human only when it cannot be triaged at all.";

/// A sentence for the system prompt on how to judge severity, for models that rate
/// every ticket by its tone (one of the prompts `examples/sweep.rs --prompts` compares).
pub const SEVERITY_RULE: &str = " Judge severity by what happened to the customer, as the \
severity field defines each level; an angry or urgent tone alone does not raise it.";

/// Holds the answer's `order_id` to what `lookup_order` found in the run (the output
/// validator of [`base_config`]): empty while a lookup found the order, or an id a lookup
/// said does not exist, is fed back to the model as a correction naming the id.
///
/// # Errors
/// The correction, as `/order_id: ...`.
pub fn order_found(answer: &Triage, run: &OutputContext<'_>) -> Result<(), String> {
    let found: Vec<String> = run
        .results_of("lookup_order")
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(&r.content).ok())
        .filter_map(|v| v["order_id"].as_str().map(str::to_owned))
        .collect();
    match &answer.order_id {
        None if !found.is_empty() => Err(format!(
            "/order_id: lookup_order found {} in this run; set order_id to the id of the \
             order the ticket is about",
            found.join(" and ")
        )),
        Some(id)
            if !found.contains(id)
                && run
                    .tool_results()
                    .any(|r| r.is_error && r.content.contains(id.as_str())) =>
        {
            Err(format!(
                "/order_id: lookup_order found no order {id}; set order_id to null"
            ))
        }
        _ => Ok(()),
    }
}

/// The folder of the example data (`examples/data`).
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

/// The triage config, before its model is chosen: prompt, tools, state, budgets.
///
/// # Errors
/// A message when `orders.json` cannot be loaded.
pub fn base_config(data: &Path) -> Result<AgentConfigBuilder<Triage>, String> {
    let orders = OrderBook::load(&data.join("orders.json"))?;
    Ok(AgentConfig::builder("ticket-triage")
        .system_prompt(SYSTEM_PROMPT)
        .tools(tools![lookup_order, refund_status])
        .state(orders)
        .output_validator_with(order_found)
        .escalation(true)
        .max_llm_calls(8)
        .max_tool_calls(6)
        .max_tokens(1024)
        .temperature(0.0))
}

/// Builds the triage config for a model choice (see [`ModelChoice`]).
///
/// # Errors
/// The [`ConfigError`] of `build()`, as text, or the data loading error.
pub fn triage_config(data: &Path, choice: &ModelChoice) -> Result<AgentConfig<Triage>, String> {
    let builder = base_config(data)?;
    choice
        .apply(builder)
        .build()
        .map_err(|e: ConfigError| format!("invalid config: {e}"))
}

/// Durable runs for the triage config: checkpoints in `store`, and every call of the
/// tools named in `approve` waits for a person's approval (the run pauses; see the
/// `runs` example's `pending`, `approve`, `deny` and `resume`).
pub fn with_approvals(
    builder: AgentConfigBuilder<Triage>,
    store: &agent_store::Store,
    approve: &[String],
) -> AgentConfigBuilder<Triage> {
    let builder = builder.checkpoints(store.clone());
    if approve.is_empty() {
        return builder;
    }
    let names = approve.to_vec();
    builder.approval(move |call, _| names.contains(&call.name))
}

/// One ticket: its file stem, text and attachments.
#[derive(Debug, Clone)]
pub struct Ticket {
    /// The file name without `.txt`, like `001-parcel-not-arrived`.
    pub name: String,
    /// The ticket text.
    pub text: String,
    /// The files beside the ticket that share its stem (`002-dented-bottle.png`), in
    /// file-name order, each a part whose media type was sniffed from its bytes.
    pub attachments: Vec<Part>,
}

impl Ticket {
    /// The run's input for models that take `caps` (one per model the input may go
    /// to, like a sweep's variants): the text and every attachment all of them take; an
    /// attachment one of them does not take is named in a line of text instead
    /// (`[attached: 002-dented-bottle.png, image image/png, 430 bytes; not shown: the
    /// model takes no images]`), so the run still happens and the model knows there
    /// was one.
    pub fn input(&self, caps: &[ContentCapabilities]) -> Input {
        let mut text = self.text.clone();
        let mut parts = Vec::new();
        for part in &self.attachments {
            match caps.iter().try_for_each(|c| c.check(part)) {
                Ok(()) => parts.push(part.clone()),
                Err(why) => {
                    let name = part
                        .media()
                        .and_then(|m| m.name.as_deref())
                        .unwrap_or("file");
                    text.push_str(&format!(
                        "\n[attached: {name}, {}; not shown: {why}]",
                        part.describe()
                    ));
                }
            }
        }
        Input::text(text).parts_from(parts)
    }
}

/// The tickets of a folder (`*.txt`), sorted by file name, each with its attachments
/// (the other files whose name starts with the ticket's stem and a dot).
///
/// # Errors
/// A message naming the folder or file that cannot be read, or an attachment whose
/// type cannot be told from its bytes.
pub fn load_tickets(dir: &Path) -> Result<Vec<Ticket>, String> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let (texts, others): (Vec<PathBuf>, Vec<PathBuf>) = paths
        .into_iter()
        .partition(|p| p.extension().is_some_and(|x| x == "txt"));
    texts
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let attachments = others
                .iter()
                .filter(|o| o.file_stem().is_some_and(|s| *s.to_string_lossy() == *name))
                .map(|o| Part::from_path(o).map_err(|e| format!("{}: {e}", o.display())))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Ticket {
                name,
                text,
                attachments,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ids_are_found_however_customers_type_them() {
        let book = OrderBook::load(&data_dir().join("orders.json")).unwrap();
        assert_eq!(book.len(), 30);
        for typed in ["NW-10225", "nw-10225", "NW 1O225", " NW10225"] {
            assert_eq!(book.find(typed).unwrap().order_id, "NW-10225", "{typed}");
        }
        assert!(book.find("NW-10217").is_err());
        assert!(book.find("hello").is_err());
    }

    #[test]
    fn every_ticket_loads() {
        let tickets = load_tickets(&data_dir().join("tickets")).unwrap();
        assert!(tickets.len() >= 20);
        assert!(tickets.iter().all(|t| t.text.starts_with("Subject: ")));
        let with: Vec<(&str, Vec<String>)> = tickets
            .iter()
            .filter(|t| !t.attachments.is_empty())
            .map(|t| {
                let types = t
                    .attachments
                    .iter()
                    .map(|p| p.media().unwrap().media_type.clone());
                (t.name.as_str(), types.collect())
            })
            .collect();
        assert_eq!(
            with,
            [
                ("002-dented-bottle", vec!["image/png".to_string()]),
                (
                    "020-partial-refund-dispute",
                    vec!["application/pdf".to_string()]
                ),
            ]
        );
    }

    #[test]
    fn an_attachment_the_model_cannot_take_is_named_in_the_text() {
        let tickets = load_tickets(&data_dir().join("tickets")).unwrap();
        let bottle = tickets
            .iter()
            .find(|t| t.name == "002-dented-bottle")
            .unwrap();

        let seen = bottle.input(&[ContentCapabilities::ANY]);
        assert_eq!(seen.as_text(), bottle.text);
        assert_eq!(seen.parts().len(), 1);
        assert_eq!(seen.parts()[0].byte_len(), 430);

        let named = bottle.input(&[ContentCapabilities::ANY, ContentCapabilities::TEXT_ONLY]);
        assert!(named.parts().is_empty());
        assert!(named.as_text().starts_with(&bottle.text));
        assert!(
            named.as_text().ends_with(
                "[attached: 002-dented-bottle.png, image image/png, 430 bytes; \
                 not shown: the model takes no images]"
            ),
            "{}",
            named.as_text()
        );
    }

    #[test]
    fn the_order_check_holds_the_answer_to_what_the_lookup_found() {
        use agent_core::llm::{Message, ToolResult};
        let answer = |order_id: Option<&str>| Triage {
            queue: Queue::Shipping,
            severity: 2,
            order_id: order_id.map(str::to_owned),
            summary: "the parcel is late".into(),
            claims_match_records: None,
        };
        let found = vec![Message::tool_results(vec![ToolResult::ok(
            "1",
            "lookup_order",
            r#"{"order_id":"NW-10231","status":"shipped"}"#,
        )])];
        let run = OutputContext::new(&found);
        assert_eq!(
            order_found(&answer(None), &run).unwrap_err(),
            "/order_id: lookup_order found NW-10231 in this run; set order_id to the id of \
             the order the ticket is about"
        );
        assert!(order_found(&answer(Some("NW-10231")), &run).is_ok());

        let missing = vec![Message::tool_results(vec![ToolResult::error(
            "1",
            "lookup_order",
            NotFound("NW-10217".into()).to_string(),
        )])];
        let run = OutputContext::new(&missing);
        assert!(order_found(&answer(None), &run).is_ok());
        assert_eq!(
            order_found(&answer(Some("NW-10217")), &run).unwrap_err(),
            "/order_id: lookup_order found no order NW-10217; set order_id to null"
        );
        // No lookup at all: nothing to hold the answer to.
        assert!(order_found(&answer(Some("NW-10217")), &OutputContext::new(&[])).is_ok());
    }

    #[test]
    fn security_and_legal_tickets_are_never_low_severity() {
        let t = Triage {
            severity: 2,
            queue: Queue::Legal,
            order_id: None,
            summary: "threatens to sue".into(),
            claims_match_records: None,
        };
        assert!(t.check().unwrap_err().starts_with("/severity:"));
        assert!(Triage { severity: 3, ..t }.check().is_ok());
    }
}
