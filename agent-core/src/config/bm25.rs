//! A small BM25 ranking over tool definitions, for tool search (see
//! `ToolSearch`): each tool is a document of the words of its name,
//! its description and its parameter names; a query's words rank them by Okapi BM25
//! (k1 = 1.2, b = 0.75). Words are lowercased, split at anything not a letter or digit
//! and at lower-to-upper case changes (`getOrder` is `get order`), a trailing `s` is
//! dropped from words of more than three letters (`orders` finds `order`), and a few
//! English stop words are left out.

use std::collections::HashMap;

use crate::tool::ToolDefinition;

const K1: f64 = 1.2;
const B: f64 = 0.75;
const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "i", "in", "is", "it", "of",
    "on", "or", "the", "this", "to", "with",
];

/// The index of one tool table's searchable tools.
pub(crate) struct Bm25 {
    /// Per document (a tool, by its position in the table): its words and their counts.
    docs: Vec<(usize, HashMap<String, u32>, u32)>,
    /// In how many documents each word appears.
    df: HashMap<String, u32>,
    /// The mean document length (words).
    mean_len: f64,
}

impl Bm25 {
    /// An index of `tools` (each with its position in the table).
    pub(crate) fn new<'a>(tools: impl Iterator<Item = (usize, &'a ToolDefinition)>) -> Self {
        let mut docs = Vec::new();
        let mut df: HashMap<String, u32> = HashMap::new();
        let mut total = 0u64;
        for (at, def) in tools {
            let mut counts: HashMap<String, u32> = HashMap::new();
            let mut len = 0u32;
            for word in words_of(def) {
                *counts.entry(word).or_default() += 1;
                len += 1;
            }
            for word in counts.keys() {
                *df.entry(word.clone()).or_default() += 1;
            }
            total += u64::from(len);
            docs.push((at, counts, len));
        }
        let mean_len = if docs.is_empty() {
            1.0
        } else {
            (total as f64 / docs.len() as f64).max(1.0)
        };
        Self { docs, df, mean_len }
    }

    /// The number of tools indexed.
    pub(crate) fn len(&self) -> usize {
        self.docs.len()
    }

    /// The table positions of the tools indexed, in table order.
    pub(crate) fn positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.docs.iter().map(|(at, _, _)| *at)
    }

    /// The table positions of the tools that match `query` best, best first, at most
    /// `limit`; ties keep table order. Tools sharing no word with the query are left out.
    pub(crate) fn search(&self, query: &str, limit: usize) -> Vec<usize> {
        let mut terms = tokens(query);
        terms.sort();
        terms.dedup();
        let n = self.docs.len() as f64;
        let mut scored: Vec<(f64, usize)> = self
            .docs
            .iter()
            .filter_map(|(at, counts, len)| {
                let score: f64 = terms
                    .iter()
                    .filter_map(|t| counts.get(t).map(|tf| (t, f64::from(*tf))))
                    .map(|(t, tf)| {
                        let df = f64::from(self.df.get(t).copied().unwrap_or(0));
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        let norm = K1 * (1.0 - B + B * f64::from(*len) / self.mean_len);
                        idf * tf * (K1 + 1.0) / (tf + norm)
                    })
                    .sum();
                (score > 0.0).then_some((score, *at))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().take(limit).map(|(_, at)| at).collect()
    }
}

/// The words of a tool: its name, description and parameter names (the top-level
/// `properties` of its schema, with their descriptions).
fn words_of(def: &ToolDefinition) -> Vec<String> {
    let mut words = tokens(&def.name);
    words.extend(tokens(&def.description));
    if let Some(props) = def.parameters.get("properties").and_then(|p| p.as_object()) {
        for (name, schema) in props {
            words.extend(tokens(name));
            if let Some(text) = schema.get("description").and_then(|d| d.as_str()) {
                words.extend(tokens(text));
            }
        }
    }
    words
}

/// `text` as search words (see the module docs).
pub(crate) fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if word.is_empty() {
            return;
        }
        let mut w = std::mem::take(word);
        if w.chars().count() > 3 && w.ends_with('s') && !w.ends_with("ss") {
            w.pop();
        }
        if !STOP.contains(&w.as_str()) {
            out.push(w);
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                flush(&mut word, &mut out);
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            word.extend(c.to_lowercase());
        } else {
            flush(&mut word, &mut out);
            prev_lower = false;
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(name: &str, description: &str, params: &[&str]) -> ToolDefinition {
        let props: serde_json::Map<String, serde_json::Value> = params
            .iter()
            .map(|p| ((*p).to_owned(), json!({"type": "string"})))
            .collect();
        ToolDefinition::new(
            name,
            description,
            json!({"type": "object", "properties": props}),
        )
    }

    #[test]
    fn words_are_split_lowercased_and_stemmed() {
        assert_eq!(
            tokens("getOrderStatus of the orders_v2, HTTPServer"),
            ["get", "order", "statu", "order", "v2", "httpserver"]
        );
        assert!(tokens("the a of").is_empty());
    }

    #[test]
    fn the_tool_whose_words_match_ranks_first_and_others_are_left_out() {
        let tools = [
            def(
                "create_issue",
                "Create an issue in a repository.",
                &["title"],
            ),
            def(
                "refund_order",
                "Refund an order, fully or in part.",
                &["order_id"],
            ),
            def("get_weather", "The weather forecast for a city.", &["city"]),
            def("list_orders", "List a customer's orders.", &["customer_id"]),
        ];
        let index = Bm25::new(tools.iter().enumerate());
        assert_eq!(index.len(), 4);
        assert_eq!(index.search("refund an order", 5), [1, 3]);
        assert_eq!(index.search("refund an order", 1), [1]);
        assert_eq!(index.search("weather in Paris", 5), [2]);
        assert!(index.search("quantum teleport", 5).is_empty());
        assert!(index.search("", 5).is_empty());
    }
}
