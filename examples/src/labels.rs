//! Labels for the bundled tickets (`examples/data/labels.json`) and the accuracy of a
//! batch against them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use agent_core::AgentResult;
use serde_json::Value;

/// The expected fields of one ticket, as a person read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// Expected severity, 1 to 4.
    pub severity: u8,
    /// Expected queue, as serialized (`"shipping"`, ...).
    pub queue: String,
    /// The order the answer should name: the order the ticket is about when it exists
    /// in `orders.json`; `None` when the ticket names none, names one that does not
    /// exist, or the file leaves the key out.
    pub order_id: Option<String>,
}

/// Labels by ticket name (the file stem).
pub type Labels = BTreeMap<String, Label>;

/// Loads a labels file: `{"<ticket>": {"severity": N, "queue": "...", "order_id": "NW-..."
/// or null}, ...}` (`order_id` optional).
///
/// # Errors
/// A message naming the file when it cannot be read or has the wrong shape.
pub fn load(path: &Path) -> Result<Labels, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let raw: BTreeMap<String, Value> =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    raw.into_iter()
        .map(|(name, v)| {
            let severity = v["severity"]
                .as_u64()
                .and_then(|n| u8::try_from(n).ok())
                .ok_or_else(|| format!("{}: {name}: severity must be 1..4", path.display()))?;
            let queue = v["queue"]
                .as_str()
                .ok_or_else(|| format!("{}: {name}: queue must be a string", path.display()))?
                .to_owned();
            let order_id = match &v["order_id"] {
                Value::Null => None,
                Value::String(id) => Some(id.clone()),
                _ => {
                    return Err(format!(
                        "{}: {name}: order_id must be a string or null",
                        path.display()
                    ));
                }
            };
            Ok((
                name,
                Label {
                    severity,
                    queue,
                    order_id,
                },
            ))
        })
        .collect()
}

/// The best constant guess over a set of labels: the most common queue and the most
/// common severity, answered for every ticket, and how many labels each gets right. A
/// model's accuracy means something only above this line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    /// The most common labeled queue (ties: the first in name order).
    pub queue: String,
    /// The most common labeled severity (ties: the lowest).
    pub severity: u8,
    /// Labels whose queue is `queue`.
    pub queue_right: usize,
    /// Labels whose severity is `severity`.
    pub severity_exact: usize,
    /// Labels whose severity is at most one away from `severity`.
    pub severity_within_one: usize,
    /// Labels whose queue and severity are both the guess.
    pub both: usize,
}

impl Baseline {
    /// The constant guess for `labels` (all of them count, as every ticket gets the
    /// guess); the default for no labels.
    pub fn of<'a>(labels: impl IntoIterator<Item = &'a Label> + Clone) -> Self {
        let mut queues: BTreeMap<&str, usize> = BTreeMap::new();
        let mut severities: BTreeMap<u8, usize> = BTreeMap::new();
        for label in labels.clone() {
            *queues.entry(label.queue.as_str()).or_default() += 1;
            *severities.entry(label.severity).or_default() += 1;
        }
        // `max_by_key` keeps the last of equals: iterate in reverse for the first.
        let Some((queue, _)) = queues.iter().rev().max_by_key(|(_, n)| **n) else {
            return Self::default();
        };
        let Some((&severity, _)) = severities.iter().rev().max_by_key(|(_, n)| **n) else {
            return Self::default();
        };
        let mut guess = Self {
            queue: (*queue).to_owned(),
            severity,
            ..Self::default()
        };
        for label in labels {
            let queue = label.queue == guess.queue;
            let exact = label.severity == severity;
            guess.queue_right += usize::from(queue);
            guess.severity_exact += usize::from(exact);
            guess.severity_within_one += usize::from(label.severity.abs_diff(severity) <= 1);
            guess.both += usize::from(queue && exact);
        }
        guess
    }
}

/// Accuracy of a batch against labels, per field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accuracy {
    /// Tickets that have a label.
    pub labeled: usize,
    /// Of those, the ones answered (a validated value).
    pub answered: usize,
    /// Answered with the labeled severity.
    pub severity_exact: usize,
    /// Answered with a severity at most one away from the label.
    pub severity_within_one: usize,
    /// Answered with the labeled queue.
    pub queue: usize,
    /// Answered with both fields as labeled.
    pub both: usize,
    /// Labeled tickets whose label names an order (it exists in the records).
    pub orders: usize,
    /// Of those, answered with exactly that `order_id`.
    pub order_id_right: usize,
    /// Answers with an `order_id` other than the label's (a wrong id, or an id where
    /// the label has none).
    pub order_id_wrong: usize,
    /// The best constant guess over the same labeled tickets.
    pub baseline: Baseline,
}

impl Accuracy {
    /// Compares each answered result's JSON output (`severity`, `queue`) with the label
    /// of its ticket; tickets without a label are not counted.
    pub fn measure<T>(labels: &Labels, runs: &[(&str, &AgentResult<T>)]) -> Self {
        let mut acc = Accuracy {
            baseline: Baseline::of(runs.iter().filter_map(|(ticket, _)| labels.get(*ticket))),
            ..Accuracy::default()
        };
        for (ticket, result) in runs {
            let Some(label) = labels.get(*ticket) else {
                continue;
            };
            acc.labeled += 1;
            acc.orders += usize::from(label.order_id.is_some());
            if result.outcome.is_err() {
                continue;
            }
            acc.answered += 1;
            let answer = crate::cli::answer_json(&result.output);
            let order = answer["order_id"].as_str();
            match (order, label.order_id.as_deref()) {
                (Some(got), Some(want)) if got == want => acc.order_id_right += 1,
                (Some(_), _) => acc.order_id_wrong += 1,
                (None, _) => {}
            }
            let Some(got) = answer_fields(&result.output) else {
                continue;
            };
            let severity = got.0 == u64::from(label.severity);
            let near = got.0.abs_diff(u64::from(label.severity)) <= 1;
            let queue = got.1 == label.queue;
            acc.severity_exact += usize::from(severity);
            acc.severity_within_one += usize::from(near);
            acc.queue += usize::from(queue);
            acc.both += usize::from(severity && queue);
        }
        acc
    }
}

/// `(severity, queue)` of an answer's JSON (see [`crate::cli::answer_json`]).
fn answer_fields(output: &str) -> Option<(u64, String)> {
    let value = crate::cli::answer_json(output);
    Some((
        value["severity"].as_u64()?,
        value["queue"].as_str()?.to_owned(),
    ))
}

fn pct(n: usize, of: usize) -> String {
    if of == 0 {
        "n/a".to_owned()
    } else {
        format!("{n}/{of} ({:.0}%)", n as f64 * 100.0 / of as f64)
    }
}

impl fmt::Display for Accuracy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "accuracy against labels ({} labeled, {} answered)",
            self.labeled, self.answered
        )?;
        writeln!(
            f,
            "{:<28} {:>18} {:>18}",
            "field", "of answered", "of labeled"
        )?;
        writeln!(f, "{}", "-".repeat(66))?;
        for (name, n) in [
            ("severity (exact)", self.severity_exact),
            ("severity (within 1)", self.severity_within_one),
            ("queue", self.queue),
            ("severity and queue", self.both),
        ] {
            writeln!(
                f,
                "{name:<28} {:>18} {:>18}",
                pct(n, self.answered),
                pct(n, self.labeled)
            )?;
        }
        writeln!(
            f,
            "{:<28} {:>18} {:>18}",
            "order id (right)",
            "",
            pct(self.order_id_right, self.orders)
        )?;
        writeln!(
            f,
            "order id (wrong or stray)    {:>18}",
            pct(self.order_id_wrong, self.answered)
        )?;
        let b = &self.baseline;
        writeln!(
            f,
            "constant guess (queue={}, severity={}), of labeled: severity exact {}, within 1 {}, queue {}, both {}",
            b.queue,
            b.severity,
            pct(b.severity_exact, self.labeled),
            pct(b.severity_within_one, self.labeled),
            pct(b.queue_right, self.labeled),
            pct(b.both, self.labeled),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_labels_cover_every_ticket() {
        let labels = load(&crate::triage::data_dir().join("labels.json")).unwrap();
        let book =
            crate::triage::OrderBook::load(&crate::triage::data_dir().join("orders.json")).unwrap();
        let tickets =
            crate::triage::load_tickets(&crate::triage::data_dir().join("tickets")).unwrap();
        assert_eq!(labels.len(), tickets.len());
        for t in &tickets {
            let label = &labels[&t.name];
            assert!((1..=4).contains(&label.severity), "{}", t.name);
            // An order label is an order that exists, and its ticket names it.
            if let Some(id) = &label.order_id {
                assert!(book.find(id).is_ok(), "{}: {id}", t.name);
                let digits = &id[3..];
                assert!(
                    t.text.replace('O', "0").contains(digits),
                    "{} does not name {id}",
                    t.name
                );
            }
        }
        let named = labels.values().filter(|l| l.order_id.is_some()).count();
        assert_eq!(named, 24);
    }

    #[tokio::test]
    async fn accuracy_counts_each_field_over_answered_and_labeled_tickets() {
        use agent_core::testing::ScriptedModel;
        use agent_core::{AgentConfig, run_agent};
        let labels: Labels = [
            ("a", 2, "shipping"),
            ("b", 3, "billing"),
            ("c", 1, "spam"),
            ("d", 4, "legal"),
        ]
        .into_iter()
        .map(|(n, s, q)| {
            (
                n.to_owned(),
                Label {
                    severity: s,
                    queue: q.to_owned(),
                    order_id: (n == "a").then(|| "NW-1".to_owned()),
                },
            )
        })
        .collect();
        // a: both right; b: severity off by one, queue right; c: queue wrong;
        // d: not answered; e: no label.
        let model = ScriptedModel::new()
            .text(r#"{"severity": 2, "queue": "shipping", "order_id": "NW-1"}"#)
            .text(r#"{"severity": 2, "queue": "billing", "order_id": "NW-2"}"#)
            .text(r#"{"severity": 1, "queue": "feedback"}"#)
            .fail(agent_core::llm::LlmError::permanent("down"))
            .text(r#"{"severity": 1, "queue": "spam"}"#);
        let config: AgentConfig<String> = AgentConfig::builder("t").llm(model).build().unwrap();
        let mut results = Vec::new();
        for name in ["a", "b", "c", "d", "e"] {
            results.push((name, run_agent(&config, name).await));
        }
        let runs: Vec<(&str, &AgentResult<String>)> =
            results.iter().map(|(n, r)| (*n, r)).collect();
        let acc = Accuracy::measure(&labels, &runs);
        assert_eq!(
            acc,
            Accuracy {
                labeled: 4,
                answered: 3,
                severity_exact: 2,
                severity_within_one: 3,
                queue: 2,
                both: 1,
                orders: 1,
                order_id_right: 1,
                order_id_wrong: 1,
                // Four labels, one queue each (ties: the first name, billing); severities
                // 1, 2, 3, 4 (ties: the lowest, 1).
                baseline: Baseline {
                    queue: "billing".into(),
                    severity: 1,
                    queue_right: 1,
                    severity_exact: 1,
                    severity_within_one: 2,
                    both: 0,
                },
            }
        );
        let table = acc.to_string();
        let queue_line = table.lines().find(|l| l.starts_with("queue")).unwrap();
        assert_eq!(
            queue_line.split_whitespace().collect::<Vec<_>>(),
            ["queue", "2/3", "(67%)", "2/4", "(50%)"]
        );
    }

    #[test]
    fn the_constant_guess_of_the_bundled_labels() {
        let labels = load(&crate::triage::data_dir().join("labels.json")).unwrap();
        let guess = Baseline::of(labels.values());
        // From labels.json: billing, returns and shipping are 7 each (the tie goes to
        // the first name), severity 2 is the most common (12 of 29); every label but
        // the severity 4s is within one of 2.
        assert_eq!((guess.queue.as_str(), guess.severity), ("billing", 2));
        assert_eq!(guess.queue_right, 7);
        assert_eq!(guess.severity_exact, 12);
        assert_eq!(guess.severity_within_one, 27);
        assert_eq!(
            guess.severity_exact,
            labels.values().filter(|l| l.severity == 2).count()
        );
        assert_eq!(
            guess.severity_within_one,
            labels.values().filter(|l| l.severity != 4).count()
        );
    }

    #[test]
    fn answer_fields_reads_bare_and_embedded_json() {
        assert_eq!(
            answer_fields(r#"{"severity": 3, "queue": "billing"}"#),
            Some((3, "billing".into()))
        );
        assert_eq!(
            answer_fields("```json\n{\"severity\": 1, \"queue\": \"spam\"}\n```"),
            Some((1, "spam".into()))
        );
        assert_eq!(answer_fields("no json"), None);
    }
}
