//! [`RateLimiter`]: one request rate per provider shared by every worker, kept in a
//! JetStream key-value bucket; [`RateLimited`]: an LLM client that waits for it.

use std::sync::Arc;
use std::time::Duration;

use agent_core::llm::{
    ContentCapabilities, LlmClient, LlmError, LlmFuture, LlmRequest, OutputCapabilities, Reasoning,
    StreamSink,
};
use async_nats::jetstream::{kv, stream};

use crate::error::QueueError;
use crate::queue::Queue;
use crate::registry::now_ms;

/// A request budget per one-second window, shared by every process that opens the same
/// limiter on the same queue: ten workers with a limit of 50 per second send 50 per
/// second between them, not 500.
///
/// The count of the current window lives in the bucket `<NS>_RATE`, one key per
/// limiter name (the provider); a request takes a slot with a compare-and-set on the
/// key's revision, so two workers never take the same slot. When the window is full it
/// waits for the next one. Windows follow each worker's wall clock (whole seconds since
/// the Unix epoch): workers on different hosts need synchronised clocks (NTP), else a
/// window may be counted twice. Fixed windows allow up to twice the rate across a
/// window boundary for an instant; the average over any whole window is the limit.
#[derive(Clone)]
pub struct RateLimiter {
    kv: kv::Store,
    key: String,
    per_second: u32,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("key", &self.key)
            .field("per_second", &self.per_second)
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter of `per_second` requests (at least 1) named `name` (the provider:
    /// letters, digits, `_`, `-`), shared through `queue`'s bucket (created if missing).
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a bad name; [`QueueError::Nats`] when the bucket
    /// cannot be opened.
    pub async fn open(queue: &Queue, name: &str, per_second: u32) -> Result<Self, QueueError> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(QueueError::invalid(format!(
                "rate limiter name {name:?}: use letters, digits, '_' and '-'"
            )));
        }
        let bucket = queue.stream_name("RATE");
        let kv = match queue.js.get_key_value(bucket.as_str()).await {
            Ok(kv) => kv,
            Err(_) => {
                // The bucket's stream, made as a key-value bucket's stream is made, with
                // `create_stream`: the client's own `create_key_value` first reads the
                // account info, whose shape servers before 2.10 do not match.
                queue
                    .js
                    .get_or_create_stream(stream::Config {
                        name: format!("KV_{bucket}"),
                        subjects: vec![format!("$KV.{bucket}.>")],
                        max_messages_per_subject: 1,
                        max_age: Duration::from_secs(3600),
                        discard: stream::DiscardPolicy::New,
                        allow_rollup: true,
                        deny_delete: true,
                        allow_direct: true,
                        ..Default::default()
                    })
                    .await
                    .map_err(QueueError::nats)?;
                queue
                    .js
                    .get_key_value(bucket.as_str())
                    .await
                    .map_err(QueueError::nats)?
            }
        };
        Ok(Self {
            kv,
            key: name.to_owned(),
            per_second: per_second.max(1),
        })
    }

    /// The limit (requests per second).
    pub fn per_second(&self) -> u32 {
        self.per_second
    }

    /// Waits for a slot and takes it; returns the window it was taken in (whole
    /// seconds since the Unix epoch).
    ///
    /// # Errors
    /// [`QueueError::Nats`] when the bucket cannot be read or written.
    pub async fn acquire(&self) -> Result<u64, QueueError> {
        loop {
            let now = now_ms();
            let window = now / 1000;
            let entry = self
                .kv
                .entry(self.key.as_str())
                .await
                .map_err(QueueError::nats)?;
            let (stored_window, count) = entry
                .as_ref()
                .and_then(|e| parse(&e.value))
                .unwrap_or((0, 0));
            let count = if stored_window == window { count } else { 0 };
            if count >= self.per_second {
                // Full: wait for the next window (a little jitter spreads the workers).
                let wait = 1000 - now % 1000 + fastrand::u64(0..20);
                tokio::time::sleep(Duration::from_millis(wait)).await;
                continue;
            }
            let value = format!("{window}:{}", count + 1);
            let taken = match &entry {
                Some(e) => self
                    .kv
                    .update(self.key.as_str(), value.into(), e.revision)
                    .await
                    .map(drop)
                    .map_err(|e| {
                        (
                            e.kind() == kv::UpdateErrorKind::WrongLastRevision,
                            e.to_string(),
                        )
                    }),
                None => self
                    .kv
                    .create(self.key.as_str(), value.into())
                    .await
                    .map(drop)
                    .map_err(|e| {
                        (
                            e.kind() == kv::CreateErrorKind::AlreadyExists,
                            e.to_string(),
                        )
                    }),
            };
            match taken {
                Ok(()) => return Ok(window),
                // Another worker took a slot first: read again.
                Err((true, _)) => tokio::task::yield_now().await,
                Err((false, e)) => return Err(QueueError::nats(e)),
            }
        }
    }
}

fn parse(value: &[u8]) -> Option<(u64, u32)> {
    let text = std::str::from_utf8(value).ok()?;
    let (window, count) = text.split_once(':')?;
    Some((window.parse().ok()?, count.parse().ok()?))
}

/// An LLM client that takes a slot of a shared [`RateLimiter`] before every request,
/// plain or streamed. A limiter failure (NATS unreachable) is a transient provider
/// error, so the run's retry policy and budgets apply to it. Everything else is the
/// inner client's: its streaming, its output, content, reasoning and prompt-cache
/// capabilities, its temperature rules.
pub struct RateLimited {
    inner: Arc<dyn LlmClient>,
    limiter: RateLimiter,
}

impl std::fmt::Debug for RateLimited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimited")
            .field("provider", &self.inner.provider())
            .field("limiter", &self.limiter)
            .finish()
    }
}

impl RateLimited {
    /// `inner`, limited by `limiter`.
    pub fn new(inner: Arc<dyn LlmClient>, limiter: RateLimiter) -> Self {
        Self { inner, limiter }
    }
}

impl LlmClient for RateLimited {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        Box::pin(async move {
            self.limiter
                .acquire()
                .await
                .map_err(|e| LlmError::transient(format!("rate limiter: {e}")))?;
            self.inner.complete(request).await
        })
    }

    fn complete_streaming<'a>(
        &'a self,
        request: &'a LlmRequest,
        sink: &'a mut dyn StreamSink,
    ) -> LlmFuture<'a> {
        Box::pin(async move {
            self.limiter
                .acquire()
                .await
                .map_err(|e| LlmError::transient(format!("rate limiter: {e}")))?;
            self.inner.complete_streaming(request, sink).await
        })
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn output_capabilities(&self, model: &str) -> OutputCapabilities {
        self.inner.output_capabilities(model)
    }

    fn effective_temperature(&self, model: &str, requested: f32) -> Option<f32> {
        self.inner.effective_temperature(model, requested)
    }

    fn prompt_cache_ttls(&self, model: &str) -> &'static [agent_core::output::PromptCacheTtl] {
        self.inner.prompt_cache_ttls(model)
    }

    fn check_reasoning(
        &self,
        model: &str,
        reasoning: &Reasoning,
        max_tokens: u32,
    ) -> Result<(), &'static str> {
        self.inner.check_reasoning(model, reasoning, max_tokens)
    }

    fn content_capabilities(&self, model: &str) -> ContentCapabilities {
        self.inner.content_capabilities(model)
    }
}
