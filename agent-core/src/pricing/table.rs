//! The default pricing table: list prices published by the providers, with the page each
//! was read from and when (the same rows, with notes, are in `docs/pricing.md`).
//!
//! Rates are USD per million tokens, standard (non-batch) processing:
//! `(input, cache read, cache write, output)`.
//!
//! - Anthropic: the "Model pricing" table of
//!   <https://platform.claude.com/docs/en/docs/about-claude/pricing> (where
//!   <https://docs.anthropic.com/en/docs/about-claude/pricing> leads), read 2026-12-01 in
//!   the copy whose newest row is Claude Opus 4.6; Opus 4.7 and 4.8 from the later copy at
//!   <https://platform.claude.com/docs/en/about-claude/pricing>, read 2026-12-01. Cache
//!   write is the 5-minute rate (1.25x input; a 1-hour write is billed 2x input), cache
//!   read the "cache hits and refreshes" rate (0.1x input).
//! - OpenAI: the "Text tokens" table of <https://platform.openai.com/docs/pricing> (also at
//!   <https://openai.com/api/pricing>), whose published copy could not be read here on
//!   2026-12-01; the rates are those recorded from that page by `pydantic/genai-prices`
//!   (`prices/providers/openai.yml`, commit 47df840 of 2026-08-21), whose check date is
//!   given per row. Cache read is the "cached input" rate; OpenAI bills no separate cache
//!   write, so writes are priced as input. A model without a cached-input rate prices
//!   cached tokens as input.
//!
//! - Gemini: the "Standard" rows of <https://ai.google.dev/gemini-api/docs/pricing> for
//!   prompts of 200K tokens or fewer, read 2026-12-01 through third-party copies (the page
//!   itself could not be read here): Gemini 2.5 Pro $1.25 / $10 with context caching at
//!   $0.125, as quoted on Google's developer forum
//!   (<https://discuss.ai.google.dev/t/question-about-gemini-api-caching-pricing/107349>);
//!   2.5 Flash $0.30 / $2.50 and 2.5 Flash-Lite $0.10 / $0.40, their cached input at the
//!   90% discount Google states for implicit caching of 2.5 and later models
//!   (<https://cloud.google.com/vertex-ai/generative-ai/docs/context-cache/context-cache-overview>).
//!   Implicit caching bills no write, so writes are priced as input.
//!
//! A row with no price (`None`) leaves every model under that prefix unpriced unless a
//! longer row prices it: it keeps a newer model (`gpt-5.4`, `claude-opus-4-9`) from being
//! priced as the older one whose name is a prefix of its own (`gpt-5`, `claude-opus-4`).

use crate::pricing::ModelPrice;

/// Anthropic rates: input, cache read, 5-minute cache write, output (USD per million
/// tokens); a 1-hour cache write is 2x input ("1h cache writes" column of the same table).
const fn anthropic(input: f64, read: f64, write: f64, output: f64) -> Option<ModelPrice> {
    Some(
        ModelPrice::new(input, output)
            .with_cache(read, write)
            .with_cache_write_1h(input * 2.0),
    )
}

/// Gemini rates (prompts of 200K tokens or fewer): input, cached input, output (USD per
/// million tokens); implicit caching bills no write, so writes are priced as input.
const fn gemini(input: f64, cached: f64, output: f64) -> Option<ModelPrice> {
    Some(ModelPrice::new(input, output).with_cache(cached, input))
}

/// OpenAI rates: input, cached input, output (USD per million tokens); a cache write is
/// priced as input.
const fn openai(input: f64, cached: f64, output: f64) -> Option<ModelPrice> {
    Some(ModelPrice::new(input, output).with_cache(cached, input))
}

/// OpenAI rates for a model without a cached-input rate: input, output.
const fn openai_uncached(input: f64, output: f64) -> Option<ModelPrice> {
    Some(ModelPrice::new(input, output))
}

/// Every row of [`Pricing::default`](crate::pricing::Pricing): a model-name prefix and its price
/// (`None`: unpriced on purpose).
pub(crate) const DEFAULT_TABLE: &[(&str, Option<ModelPrice>)] = &[
    // The built-in scripted model: free.
    ("test", Some(ModelPrice::new(0.0, 0.0))),
    // --- Anthropic (platform.claude.com pricing page, read 2026-12-01) ---
    // Claude Opus 4: `claude-opus-4-0`, `claude-opus-4-20250514`.
    ("claude-opus-4", anthropic(15.0, 1.5, 18.75, 75.0)),
    ("claude-opus-4-0", anthropic(15.0, 1.5, 18.75, 75.0)),
    ("claude-opus-4-2025", anthropic(15.0, 1.5, 18.75, 75.0)),
    // An Opus 4.x not listed here is unpriced, not priced as Opus 4.
    ("claude-opus-4-", None),
    // Claude Opus 4.1.
    ("claude-opus-4-1", anthropic(15.0, 1.5, 18.75, 75.0)),
    // Claude Opus 4.5.
    ("claude-opus-4-5", anthropic(5.0, 0.5, 6.25, 25.0)),
    // Claude Opus 4.6.
    ("claude-opus-4-6", anthropic(5.0, 0.5, 6.25, 25.0)),
    // Claude Opus 4.7 (later copy of the page, read 2026-12-01).
    ("claude-opus-4-7", anthropic(5.0, 0.5, 6.25, 25.0)),
    // Claude Opus 4.8 (later copy of the page, read 2026-12-01).
    ("claude-opus-4-8", anthropic(5.0, 0.5, 6.25, 25.0)),
    // Claude Sonnet 4: `claude-sonnet-4-0`, `claude-sonnet-4-20250514`.
    ("claude-sonnet-4", anthropic(3.0, 0.3, 3.75, 15.0)),
    ("claude-sonnet-4-0", anthropic(3.0, 0.3, 3.75, 15.0)),
    ("claude-sonnet-4-2025", anthropic(3.0, 0.3, 3.75, 15.0)),
    // A Sonnet 4.x not listed here is unpriced.
    ("claude-sonnet-4-", None),
    // Claude Sonnet 4.5.
    ("claude-sonnet-4-5", anthropic(3.0, 0.3, 3.75, 15.0)),
    // Claude Sonnet 4.6.
    ("claude-sonnet-4-6", anthropic(3.0, 0.3, 3.75, 15.0)),
    // Claude Sonnet 3.7 (deprecated).
    ("claude-3-7-sonnet", anthropic(3.0, 0.3, 3.75, 15.0)),
    // Claude Haiku 4.5.
    ("claude-haiku-4-5", anthropic(1.0, 0.1, 1.25, 5.0)),
    // Claude Haiku 3.5.
    ("claude-3-5-haiku", anthropic(0.8, 0.08, 1.0, 4.0)),
    // Claude Haiku 3.
    ("claude-3-haiku", anthropic(0.25, 0.03, 0.3, 1.25)),
    // Claude Opus 3 (deprecated).
    ("claude-3-opus", anthropic(15.0, 1.5, 18.75, 75.0)),
    // --- OpenAI (platform.openai.com/docs/pricing, via genai-prices; check date per row) ---
    // gpt-5, also `gpt-5-2025-08-07`, `gpt-5-chat-latest`, `gpt-5-codex` (2025-11-13).
    ("gpt-5", openai(1.25, 0.125, 10.0)),
    // gpt-5-mini (2025-11-13).
    ("gpt-5-mini", openai(0.25, 0.025, 2.0)),
    // gpt-5-nano (2025-11-13).
    ("gpt-5-nano", openai(0.05, 0.005, 0.4)),
    // gpt-5-pro, no cached-input rate (2025-11-13).
    ("gpt-5-pro", openai_uncached(15.0, 120.0)),
    // A gpt-5.x not listed here is unpriced, not priced as gpt-5.
    ("gpt-5.", None),
    // gpt-5.1, also `-codex`, `-codex-max`, `-chat-latest` (2025-11-13).
    ("gpt-5.1", openai(1.25, 0.125, 10.0)),
    // gpt-5.1-codex-mini (2025-11-13).
    ("gpt-5.1-codex-mini", openai(0.25, 0.025, 2.0)),
    // gpt-5.2, also `-chat-latest`, `-codex` (2025-12-11).
    ("gpt-5.2", openai(1.75, 0.175, 14.0)),
    // gpt-5.2-pro, no cached-input rate (2025-12-11).
    ("gpt-5.2-pro", openai_uncached(21.0, 168.0)),
    // gpt-4.1 (2025-07-04).
    ("gpt-4.1", openai(2.0, 0.5, 8.0)),
    // gpt-4.1-mini (2025-07-04).
    ("gpt-4.1-mini", openai(0.4, 0.1, 1.6)),
    // gpt-4.1-nano (2025-07-04).
    ("gpt-4.1-nano", openai(0.1, 0.025, 0.4)),
    // gpt-4o (2025-07-04).
    ("gpt-4o", openai(2.5, 1.25, 10.0)),
    // The first gpt-4o snapshot, priced apart on the page, no cached-input rate.
    ("gpt-4o-2024-05-13", openai_uncached(5.0, 15.0)),
    // gpt-4o-mini (2025-07-04).
    ("gpt-4o-mini", openai(0.15, 0.075, 0.6)),
    // chatgpt-4o-latest, no cached-input rate.
    ("chatgpt-4o-latest", openai_uncached(5.0, 15.0)),
    // o1, also `o1-preview` (2025-07-04).
    ("o1", openai(15.0, 7.5, 60.0)),
    // o1-mini (2025-07-04).
    ("o1-mini", openai(1.1, 0.55, 4.4)),
    // o1-pro, no cached-input rate (2025-07-04).
    ("o1-pro", openai_uncached(150.0, 600.0)),
    // o3, at the rate of 2025-06-10 on (2025-07-12).
    ("o3", openai(2.0, 0.5, 8.0)),
    // o3-mini (2025-07-04).
    ("o3-mini", openai(1.1, 0.55, 4.4)),
    // o3-pro, no cached-input rate.
    ("o3-pro", openai_uncached(20.0, 80.0)),
    // o3-deep-research.
    ("o3-deep-research", openai(10.0, 2.5, 40.0)),
    // o4-mini (2025-07-04).
    ("o4-mini", openai(1.1, 0.275, 4.4)),
    // o4-mini-deep-research.
    ("o4-mini-deep-research", openai(2.0, 0.5, 8.0)),
    // --- Gemini (ai.google.dev/gemini-api/docs/pricing, prompts <= 200K tokens) ---
    // Gemini 2.5 Pro; a `gemini-2.5-pro-*` variant (TTS, previews) is unpriced.
    ("gemini-2.5-pro", gemini(1.25, 0.125, 10.0)),
    ("gemini-2.5-pro-", None),
    // Gemini 2.5 Flash; a `gemini-2.5-flash-*` variant (image, TTS, live) is unpriced.
    ("gemini-2.5-flash", gemini(0.30, 0.03, 2.50)),
    ("gemini-2.5-flash-", None),
    // Gemini 2.5 Flash-Lite (and its previews).
    ("gemini-2.5-flash-lite", gemini(0.10, 0.01, 0.40)),
];
