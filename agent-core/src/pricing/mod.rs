//! Prices per model, for the `max_cost_usd` budget and the usage report.

mod table;
mod windows;

pub use windows::ContextWindow;

use serde::{Deserialize, Serialize};

use crate::llm::TokenUsage;

/// The share of the listed price a provider batch job bills (0.5): OpenAI's Batch API
/// and Anthropic's Message Batches both bill every token at 50 % of the standard rates
/// (sources: <https://platform.openai.com/docs/guides/batch>, "50% lower costs";
/// <https://docs.anthropic.com/en/docs/build-with-claude/batch-processing>, "Pricing":
/// 50 % of standard API prices), prompt-cache reads and writes included at Anthropic.
pub const BATCH_PRICE_FACTOR: f64 = 0.5;

/// The price of one model, in USD per million tokens (MTok): input, output, and the
/// prompt-cache read and write rates.
///
/// Build one with [`ModelPrice::new`] (input, output) and
/// [`with_cache`](Self::with_cache) (cache read, cache write), and hand it to the builder
/// with `.price(prefix, price)` or put it in a [`Pricing`] table with [`Pricing::set`]:
///
/// ```
/// use agent_core::ModelPrice;
///
/// // Anthropic's Claude Sonnet 4.5 list price: $3 in, $15 out, $0.30 cache read,
/// // $3.75 5-minute cache write.
/// let price = ModelPrice::new(3.0, 15.0).with_cache(0.3, 3.75);
/// assert!(price.is_valid());
/// ```
///
/// Every rate must be finite and non-negative, else `build()` fails with a
/// `ConfigError`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelPrice {
    /// USD per million input tokens not read from the cache.
    pub input_per_mtok: f64,
    /// USD per million output tokens.
    pub output_per_mtok: f64,
    /// USD per million input tokens read from the prompt cache.
    pub cache_read_per_mtok: f64,
    /// USD per million input tokens written to the prompt cache (the default TTL's rate:
    /// Anthropic's and Bedrock's 5-minute write).
    pub cache_write_per_mtok: f64,
    /// USD per million input tokens written to the prompt cache with a one-hour TTL
    /// (`PromptCacheTtl::OneHour`; Anthropic bills 2x input, source:
    /// <https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#pricing>);
    /// `None`: the same as [`cache_write_per_mtok`](Self::cache_write_per_mtok).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h_per_mtok: Option<f64>,
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
            cache_write_1h_per_mtok: None,
        }
    }

    /// Sets the rate of cache writes with a one-hour TTL (USD per million tokens; see
    /// [`cache_write_1h_per_mtok`](Self::cache_write_1h_per_mtok)).
    #[must_use]
    pub const fn with_cache_write_1h(mut self, write_per_mtok: f64) -> Self {
        self.cache_write_1h_per_mtok = Some(write_per_mtok);
        self
    }

    /// This price as billed for a config whose prompt cache has `ttl`: with
    /// `OneHour`, cache writes at the one-hour rate (when one is set); else unchanged.
    #[must_use]
    pub fn for_cache_ttl(self, ttl: crate::output::PromptCacheTtl) -> Self {
        match (ttl, self.cache_write_1h_per_mtok) {
            (crate::output::PromptCacheTtl::OneHour, Some(rate)) => Self {
                cache_write_per_mtok: rate,
                ..self
            },
            _ => self,
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
            self.cache_write_1h_per_mtok.unwrap_or(0.0),
        ]
        .iter()
        .all(|r| r.is_finite() && *r >= 0.0)
    }

    /// The cost of one LLM call's usage (USD). `input_tokens` includes the cached
    /// tokens, which are priced at the cache rates instead of the input rate. A call
    /// made through a provider batch job ([`TokenUsage::batch`]) costs
    /// [`BATCH_PRICE_FACTOR`] of that.
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        let cached = usage
            .cache_read_tokens
            .saturating_add(usage.cache_write_tokens);
        let plain = usage.input_tokens.saturating_sub(cached);
        let listed = (plain as f64 * self.input_per_mtok
            + usage.cache_read_tokens as f64 * self.cache_read_per_mtok
            + usage.cache_write_tokens as f64 * self.cache_write_per_mtok
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0;
        if usage.batch {
            listed * BATCH_PRICE_FACTOR
        } else {
            listed
        }
    }
}

/// A pricing table: model-name prefixes to prices; the longest matching prefix wins.
///
/// The table is looked up with the name given to the builder's `.model(..)`
/// (`"claude-sonnet-4-5"`, `"ollama/llama3.2"`), or, with a client of your own
/// (`.llm(..)`), with the model name that client reports.
///
/// [`Pricing::default`] holds the list prices the providers publish (standard processing,
/// not batch), each with the page it was read from and the date, for:
/// - Anthropic: Claude Opus 4, 4.1, 4.5, 4.6, 4.7, 4.8; Sonnet 4, 4.5, 4.6, 3.7; Haiku
///   4.5, 3.5, 3; Opus 3 (source: <https://platform.claude.com/docs/en/docs/about-claude/pricing>,
///   read 2026-12-01). Cache writes are priced at the 5-minute rate (1.25x input), cache
///   reads at 0.1x input.
/// - OpenAI: `gpt-5`, `gpt-5-mini`, `gpt-5-nano`, `gpt-5-pro`, `gpt-5.1`,
///   `gpt-5.1-codex-mini`, `gpt-5.2`, `gpt-5.2-pro`, `gpt-4.1` (and `-mini`, `-nano`),
///   `gpt-4o` (and `-mini`, the `2024-05-13` snapshot), `chatgpt-4o-latest`, `o1` (and
///   `-mini`, `-pro`), `o3` (and `-mini`, `-pro`, `-deep-research`), `o4-mini` (and
///   `-deep-research`) (source: <https://platform.openai.com/docs/pricing>). Cached input is
///   the cache read rate; cache writes are priced as input.
/// - Gemini: `gemini-2.5-pro`, `gemini-2.5-flash`, `gemini-2.5-flash-lite`, at the rates
///   for prompts of 200K tokens or fewer (source:
///   <https://ai.google.dev/gemini-api/docs/pricing>, through the copies named in
///   `docs/pricing.md`). Cached input (implicit caching) is the cache read rate, 0.1x
///   input; implicit caching bills no write, so writes are priced as input.
/// - `test` (the built-in scripted model): zero.
///
/// A name routed to the OpenAI Responses API (`openai-responses/gpt-5-mini`) is priced as
/// the model it names (`gpt-5-mini`: OpenAI bills both APIs alike) unless the table has
/// an entry for the prefixed name itself.
///
/// A Claude model on AWS Bedrock through the global cross-Region inference profile
/// (`bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0`) is priced as the
/// Anthropic model it names (`claude-sonnet-4-5-...`); Bedrock's other Claude ids
/// (in-Region `anthropic.`, geographic `us.` / `eu.` / `apac.` profiles) cost about 10%
/// more for the 4.5 and later models and are unpriced, as is every other Bedrock model
/// (`docs/pricing.md`, "AWS Bedrock").
///
/// Everything else is unpriced: local models (`ollama/`, `dispatch/`), other Gemini
/// models, and any model of a
/// routable family that is not listed (newer versions such as `gpt-5.4` or
/// `claude-sonnet-5`, legacy ones such as `gpt-4-turbo`), which is never priced as an
/// older model whose name is a prefix of its own. `docs/pricing.md` lists every row with
/// its source and what a single rate cannot express (long-context tiers, 1-hour cache
/// writes).
///
/// An unpriced model has `Usage::cost_usd == None`, and a config with `max_cost_usd` for
/// it fails to build with `ConfigError::MissingPrice`. Prices change: supply your own
/// with the builder's `.price(prefix, ModelPrice)` (one prefix, on top of the default
/// table) or `.pricing(table)` (a whole table, e.g. one built from [`Pricing::empty`] with
/// [`Pricing::set`]):
///
/// ```
/// use agent_core::{ModelPrice, Pricing};
///
/// let mut table = Pricing::default();
/// // A local model served on your own hardware: free.
/// table.set("dispatch/", ModelPrice::new(0.0, 0.0));
/// // A negotiated rate: USD per million input, output, cache read, cache write tokens.
/// table.set("claude-sonnet-4-5", ModelPrice::new(2.4, 12.0).with_cache(0.24, 3.0));
/// assert_eq!(table.price_of("dispatch/gemma"), Some(ModelPrice::new(0.0, 0.0)));
/// assert_eq!(table.price_of("claude-sonnet-4-5-20250929").map(|p| p.input_per_mtok), Some(2.4));
/// assert_eq!(table.price_of("ollama/llama3.2"), None);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Pricing {
    /// Prefixes and their prices; `None` leaves the prefix unpriced on purpose.
    entries: Vec<(String, Option<ModelPrice>)>,
}

impl Default for Pricing {
    fn default() -> Self {
        Self {
            entries: table::DEFAULT_TABLE
                .iter()
                .map(|(prefix, price)| ((*prefix).to_owned(), *price))
                .collect(),
        }
    }
}

impl Pricing {
    /// An empty table: every model unpriced until [`set`](Self::set).
    pub fn empty() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// Sets the price for every model whose name starts with `prefix` (replacing an
    /// entry with the same prefix). A longer prefix in the table still wins for the
    /// names it matches: `set("gpt-5", ..)` does not change the price of `gpt-5-mini`.
    pub fn set(&mut self, prefix: impl Into<String>, price: ModelPrice) {
        let prefix = prefix.into();
        self.entries.retain(|(p, _)| *p != prefix);
        self.entries.push((prefix, Some(price)));
    }

    /// The price of `model`: the entry with the longest prefix of the name, or `None` when
    /// no entry matches or the longest match is unpriced.
    pub fn price_of(&self, model: &str) -> Option<ModelPrice> {
        let entry = |model: &str| {
            self.entries
                .iter()
                .filter(|(prefix, _)| model.starts_with(prefix.as_str()))
                .max_by_key(|(prefix, _)| prefix.len())
        };
        let alias = model
            .strip_prefix("openai-responses/")
            .or_else(|| model.strip_prefix("bedrock/global.anthropic."));
        match (entry(model), alias) {
            (None, Some(name)) => entry(name),
            (found, _) => found,
        }
        .and_then(|(_, price)| *price)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn bedrock_global_claude_ids_are_priced_as_the_anthropic_model() {
        let table = Pricing::default();
        assert_eq!(
            table.price_of("bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            table.price_of("claude-sonnet-4-5-20250929")
        );
        assert!(
            table
                .price_of("bedrock/global.anthropic.claude-haiku-4-5-20251001-v1:0")
                .is_some()
        );
        for unpriced in [
            "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0",
            "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "bedrock/us.amazon.nova-pro-v1:0",
            "bedrock/global.anthropic.claude-sonnet-9-9-v1:0",
        ] {
            assert_eq!(table.price_of(unpriced), None, "{unpriced}");
        }
    }

    /// `(input, cache read, cache write, output)`, USD per million tokens.
    fn rates(model: &str) -> Option<(f64, f64, f64, f64)> {
        Pricing::default().price_of(model).map(|p| {
            (
                p.input_per_mtok,
                p.cache_read_per_mtok,
                p.cache_write_per_mtok,
                p.output_per_mtok,
            )
        })
    }

    #[test]
    fn anthropic_models_resolve_to_their_published_prices() {
        // Page A/A2 of docs/pricing.md: input, cache hit, 5-minute cache write, output.
        let opus_4 = (15.0, 1.5, 18.75, 75.0);
        let opus_4_5 = (5.0, 0.5, 6.25, 25.0);
        let sonnet = (3.0, 0.3, 3.75, 15.0);
        for (model, expected) in [
            ("claude-opus-4", opus_4),
            ("claude-opus-4-0", opus_4),
            ("claude-opus-4-20250514", opus_4),
            ("claude-opus-4-1", opus_4),
            ("claude-opus-4-1-20250805", opus_4),
            ("claude-opus-4-5", opus_4_5),
            ("claude-opus-4-5-20251101", opus_4_5),
            ("claude-opus-4-6", opus_4_5),
            ("claude-opus-4-7", opus_4_5),
            ("claude-opus-4-8", opus_4_5),
            ("claude-sonnet-4", sonnet),
            ("claude-sonnet-4-0", sonnet),
            ("claude-sonnet-4-20250514", sonnet),
            ("claude-sonnet-4-5", sonnet),
            ("claude-sonnet-4-5-20250929", sonnet),
            ("claude-sonnet-4-6", sonnet),
            ("claude-3-7-sonnet-20250219", sonnet),
            ("claude-haiku-4-5", (1.0, 0.1, 1.25, 5.0)),
            ("claude-haiku-4-5-20251001", (1.0, 0.1, 1.25, 5.0)),
            ("claude-3-5-haiku", (0.8, 0.08, 1.0, 4.0)),
            ("claude-3-5-haiku-20241022", (0.8, 0.08, 1.0, 4.0)),
            ("claude-3-haiku-20240307", (0.25, 0.03, 0.3, 1.25)),
            ("claude-3-opus-20240229", opus_4),
        ] {
            assert_eq!(rates(model), Some(expected), "{model}");
        }
    }

    #[test]
    fn openai_models_resolve_to_their_published_prices() {
        // Page O of docs/pricing.md: input, cached input, (write = input), output.
        for (model, expected) in [
            ("gpt-5", (1.25, 0.125, 1.25, 10.0)),
            ("gpt-5-2025-08-07", (1.25, 0.125, 1.25, 10.0)),
            ("gpt-5-chat-latest", (1.25, 0.125, 1.25, 10.0)),
            ("gpt-5-mini", (0.25, 0.025, 0.25, 2.0)),
            ("gpt-5-mini-2025-08-07", (0.25, 0.025, 0.25, 2.0)),
            ("gpt-5-nano", (0.05, 0.005, 0.05, 0.4)),
            ("gpt-5-pro", (15.0, 15.0, 15.0, 120.0)),
            ("gpt-5.1", (1.25, 0.125, 1.25, 10.0)),
            ("gpt-5.1-codex-mini", (0.25, 0.025, 0.25, 2.0)),
            ("gpt-5.2", (1.75, 0.175, 1.75, 14.0)),
            ("gpt-5.2-2025-12-11", (1.75, 0.175, 1.75, 14.0)),
            ("gpt-5.2-pro", (21.0, 21.0, 21.0, 168.0)),
            ("gpt-4.1", (2.0, 0.5, 2.0, 8.0)),
            ("gpt-4.1-2025-04-14", (2.0, 0.5, 2.0, 8.0)),
            ("gpt-4.1-mini", (0.4, 0.1, 0.4, 1.6)),
            ("gpt-4.1-nano", (0.1, 0.025, 0.1, 0.4)),
            ("gpt-4.1-nano-2025-04-14", (0.1, 0.025, 0.1, 0.4)),
            ("gpt-4o", (2.5, 1.25, 2.5, 10.0)),
            ("gpt-4o-2024-08-06", (2.5, 1.25, 2.5, 10.0)),
            ("gpt-4o-2024-05-13", (5.0, 5.0, 5.0, 15.0)),
            ("gpt-4o-mini", (0.15, 0.075, 0.15, 0.6)),
            ("chatgpt-4o-latest", (5.0, 5.0, 5.0, 15.0)),
            ("o1", (15.0, 7.5, 15.0, 60.0)),
            ("o1-2024-12-17", (15.0, 7.5, 15.0, 60.0)),
            ("o1-mini", (1.1, 0.55, 1.1, 4.4)),
            ("o1-pro", (150.0, 150.0, 150.0, 600.0)),
            ("o3", (2.0, 0.5, 2.0, 8.0)),
            ("o3-2025-04-16", (2.0, 0.5, 2.0, 8.0)),
            ("o3-mini", (1.1, 0.55, 1.1, 4.4)),
            ("o3-mini-2025-01-31", (1.1, 0.55, 1.1, 4.4)),
            ("o3-pro", (20.0, 20.0, 20.0, 80.0)),
            ("o3-deep-research", (10.0, 2.5, 10.0, 40.0)),
            ("o4-mini", (1.1, 0.275, 1.1, 4.4)),
            ("o4-mini-2025-04-16", (1.1, 0.275, 1.1, 4.4)),
            ("o4-mini-deep-research", (2.0, 0.5, 2.0, 8.0)),
        ] {
            assert_eq!(rates(model), Some(expected), "{model}");
        }
    }

    #[test]
    fn the_test_model_is_free_and_local_models_are_unpriced() {
        assert_eq!(rates("test"), Some((0.0, 0.0, 0.0, 0.0)));
        assert_eq!(rates("dispatch/gemma"), None);
        assert_eq!(rates("ollama/llama3.2"), None);
    }

    #[test]
    fn a_model_not_listed_is_unpriced_not_priced_as_an_older_one() {
        for model in [
            "gpt-5.3",
            "gpt-5.4",
            "gpt-5.4-mini",
            "gpt-5.5",
            "gpt-5.6-luna",
            "gpt-4",
            "gpt-4-turbo",
            "gpt-3.5-turbo",
            "claude-opus-4-9",
            "claude-sonnet-4-7",
            "claude-opus-5",
            "claude-sonnet-5",
            "claude-haiku-5-5",
            "claude-3-5-sonnet-20241022",
            "o4",
            "chatgpt-5-latest",
        ] {
            assert_eq!(rates(model), None, "{model}");
        }
    }

    #[test]
    fn anthropic_cache_rates_follow_the_published_multipliers() {
        // 5-minute cache write 1.25x input, cache hit 0.1x input; the page rounds Claude
        // Haiku 3's to the cent ($0.30 and $0.03 for $0.3125 and $0.025).
        for (prefix, price) in table::DEFAULT_TABLE {
            let Some(p) = price else { continue };
            if *prefix == "claude-3-haiku" {
                assert_eq!((p.cache_read_per_mtok, p.cache_write_per_mtok), (0.03, 0.3));
            } else if prefix.starts_with("claude-") {
                assert!(
                    (p.cache_write_per_mtok - 1.25 * p.input_per_mtok).abs() < 1e-9,
                    "{prefix}"
                );
                assert!(
                    (p.cache_read_per_mtok - 0.1 * p.input_per_mtok).abs() < 1e-9,
                    "{prefix}"
                );
            } else {
                // OpenAI bills no cache write: writes are input.
                assert_eq!(p.cache_write_per_mtok, p.input_per_mtok, "{prefix}");
            }
            assert!(p.is_valid(), "{prefix}");
        }
    }

    #[test]
    fn the_docs_table_is_the_default_table() {
        let doc = include_str!("../../../docs/pricing.md");
        let mut rows: Vec<(String, Option<ModelPrice>)> = Vec::new();
        for line in doc.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let prefix = cells[1].trim_matches('`').to_owned();
            let price = if cells[2] == "unpriced" {
                None
            } else {
                let n = |i: usize| cells[i].parse::<f64>().unwrap();
                let price = ModelPrice::new(n(2), n(5)).with_cache(n(3), n(4));
                // Anthropic's 1-hour write rate is a rule, not a column: 2x input.
                Some(if prefix.starts_with("claude-") {
                    price.with_cache_write_1h(n(2) * 2.0)
                } else {
                    price
                })
            };
            rows.push((prefix, price));
        }
        assert_eq!(rows, Pricing::default().entries);
    }

    #[test]
    fn the_longest_prefix_wins() {
        let p = Pricing::default();
        assert_eq!(
            p.price_of("gpt-5-mini-2025-08-07").unwrap().input_per_mtok,
            0.25
        );
        assert_eq!(p.price_of("gpt-5-2025-08-07").unwrap().input_per_mtok, 1.25);
        assert_eq!(p.price_of("gpt-5.2-pro").unwrap().output_per_mtok, 168.0);
        assert_eq!(
            p.price_of("openai-responses/gpt-5-2025-08-07"),
            p.price_of("gpt-5-2025-08-07")
        );
        assert_eq!(p.price_of("o3-mini").unwrap().input_per_mtok, 1.1);
        assert_eq!(p.price_of("o3").unwrap().input_per_mtok, 2.0);
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

    #[test]
    fn set_prices_an_unpriced_prefix_and_longer_rows_still_win() {
        let mut p = Pricing::default();
        p.set("gpt-5.", ModelPrice::new(9.0, 9.0));
        assert_eq!(p.price_of("gpt-5.4").unwrap().input_per_mtok, 9.0);
        assert_eq!(p.price_of("gpt-5.2").unwrap().input_per_mtok, 1.75);
        p.set("gpt-5", ModelPrice::new(2.0, 2.0));
        assert_eq!(p.price_of("gpt-5-mini").unwrap().input_per_mtok, 0.25);
        assert_eq!(p.price_of("gpt-5").unwrap().input_per_mtok, 2.0);
    }

    #[test]
    fn an_empty_table_prices_nothing() {
        let mut p = Pricing::empty();
        assert_eq!(p.price_of("claude-sonnet-4-5"), None);
        p.set("claude-", ModelPrice::new(1.0, 2.0));
        assert_eq!(
            p.price_of("claude-sonnet-4-5"),
            Some(ModelPrice::new(1.0, 2.0))
        );
        assert_eq!(p.price_of("gpt-5"), None);
    }
}
