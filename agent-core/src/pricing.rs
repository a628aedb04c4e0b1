//! Prices per model, for the `max_cost_usd` budget and the usage report.

use serde::{Deserialize, Serialize};

use crate::llm::TokenUsage;

/// The price of one model, in USD per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelPrice {
    /// USD per million input tokens not read from the cache.
    pub input_per_mtok: f64,
    /// USD per million output tokens.
    pub output_per_mtok: f64,
    /// USD per million input tokens read from the prompt cache.
    pub cache_read_per_mtok: f64,
    /// USD per million input tokens written to the prompt cache.
    pub cache_write_per_mtok: f64,
}

impl ModelPrice {
    /// A price with input and output rates (USD per million tokens); cache reads and
    /// writes are priced as input until set with [`with_cache`](Self::with_cache).
    pub const fn new(input_per_mtok: f64, output_per_mtok: f64) -> Self {
        Self {
            input_per_mtok,
            output_per_mtok,
            cache_read_per_mtok: input_per_mtok,
            cache_write_per_mtok: input_per_mtok,
        }
    }

    /// Sets the cache read and write rates (USD per million tokens).
    #[must_use]
    pub const fn with_cache(mut self, read_per_mtok: f64, write_per_mtok: f64) -> Self {
        self.cache_read_per_mtok = read_per_mtok;
        self.cache_write_per_mtok = write_per_mtok;
        self
    }

    /// Whether every rate is a finite, non-negative number of USD.
    pub fn is_valid(&self) -> bool {
        [
            self.input_per_mtok,
            self.output_per_mtok,
            self.cache_read_per_mtok,
            self.cache_write_per_mtok,
        ]
        .iter()
        .all(|r| r.is_finite() && *r >= 0.0)
    }

    /// The cost of one round trip's usage (USD). `input_tokens` includes the cached
    /// tokens, which are priced at the cache rates instead of the input rate.
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        let cached = usage
            .cache_read_tokens
            .saturating_add(usage.cache_write_tokens);
        let plain = usage.input_tokens.saturating_sub(cached);
        (plain as f64 * self.input_per_mtok
            + usage.cache_read_tokens as f64 * self.cache_read_per_mtok
            + usage.cache_write_tokens as f64 * self.cache_write_per_mtok
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// A pricing table: model-name prefixes to prices; the longest matching prefix wins.
///
/// [`Pricing::default`] holds list prices published by the providers (Anthropic:
/// <https://www.anthropic.com/pricing>, OpenAI: <https://openai.com/api/pricing>, as
/// published in 2025; prices change, so override them with the builder's `price`), and
/// a zero price for the built-in `test` model. Local models (`ollama/`, `dispatch/`) have
/// no default price.
#[derive(Clone, Debug, PartialEq)]
pub struct Pricing {
    entries: Vec<(String, ModelPrice)>,
}

impl Default for Pricing {
    fn default() -> Self {
        let table: [(&str, ModelPrice); 12] = [
            ("test", ModelPrice::new(0.0, 0.0)),
            (
                "claude-opus-4",
                ModelPrice::new(15.0, 75.0).with_cache(1.5, 18.75),
            ),
            (
                "claude-sonnet-4",
                ModelPrice::new(3.0, 15.0).with_cache(0.3, 3.75),
            ),
            (
                "claude-haiku-4",
                ModelPrice::new(1.0, 5.0).with_cache(0.1, 1.25),
            ),
            (
                "claude-3-5-haiku",
                ModelPrice::new(0.8, 4.0).with_cache(0.08, 1.0),
            ),
            ("gpt-5", ModelPrice::new(1.25, 10.0).with_cache(0.125, 1.25)),
            (
                "gpt-5-mini",
                ModelPrice::new(0.25, 2.0).with_cache(0.025, 0.25),
            ),
            (
                "gpt-5-nano",
                ModelPrice::new(0.05, 0.4).with_cache(0.005, 0.05),
            ),
            ("gpt-4.1", ModelPrice::new(2.0, 8.0).with_cache(0.5, 2.0)),
            (
                "gpt-4.1-mini",
                ModelPrice::new(0.4, 1.6).with_cache(0.1, 0.4),
            ),
            ("gpt-4o", ModelPrice::new(2.5, 10.0).with_cache(1.25, 2.5)),
            (
                "gpt-4o-mini",
                ModelPrice::new(0.15, 0.6).with_cache(0.075, 0.15),
            ),
        ];
        Self {
            entries: table
                .into_iter()
                .map(|(prefix, price)| (prefix.to_owned(), price))
                .collect(),
        }
    }
}

impl Pricing {
    /// An empty table.
    pub fn empty() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// Sets the price for every model whose name starts with `prefix` (replacing an
    /// entry with the same prefix).
    pub fn set(&mut self, prefix: impl Into<String>, price: ModelPrice) {
        let prefix = prefix.into();
        self.entries.retain(|(p, _)| *p != prefix);
        self.entries.push((prefix, price));
    }

    /// The price of `model`: the entry with the longest prefix of the name.
    pub fn price_of(&self, model: &str) -> Option<ModelPrice> {
        self.entries
            .iter()
            .filter(|(prefix, _)| model.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, price)| *price)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins() {
        let p = Pricing::default();
        assert_eq!(
            p.price_of("gpt-5-mini-2025-08-07").unwrap().input_per_mtok,
            0.25
        );
        assert_eq!(p.price_of("gpt-5-2025-08-07").unwrap().input_per_mtok, 1.25);
        assert!(p.price_of("dispatch/gemma").is_none());
    }

    #[test]
    fn cost_prices_cached_tokens_at_cache_rates() {
        let price = ModelPrice::new(3.0, 15.0).with_cache(0.3, 3.75);
        let usage = TokenUsage::new(1_000_000, 100_000).with_cache(400_000, 100_000);
        // 500k plain * 3 + 400k * 0.3 + 100k * 3.75 + 100k * 15 = 1.5 + 0.12 + 0.375 + 1.5
        let cost = price.cost(&usage);
        assert!((cost - 3.495).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn set_replaces_and_overrides() {
        let mut p = Pricing::default();
        p.set("dispatch/", ModelPrice::new(0.1, 0.2));
        p.set("dispatch/", ModelPrice::new(0.3, 0.4));
        assert_eq!(p.price_of("dispatch/gemma").unwrap().output_per_mtok, 0.4);
    }
}
