//! The wire JSON of a config's tool definitions and output schema, encoded once.
//!
//! A config hands every request the same `Arc` of tool definitions (and of its output
//! spec), so an adapter can transform and serialize them on the first request and
//! reuse the bytes after: the schema transforms clone and walk whole JSON trees, which
//! cost about a fifth of the client's CPU per LLM call when done per request. The
//! cache is keyed by the `Arc`'s address and holds a `Weak` to it, so an entry is only
//! reused while that very `Arc` is alive (a freed address reused by another config is
//! detected and re-encoded).

use std::sync::{Arc, Mutex, PoisonError, Weak};

use serde_json::value::RawValue;

/// How many distinct `Arc`s one adapter remembers (a config uses two or three: the
/// ordinary tool set, the wrap-up set, the output spec; `with_` variants sharing the
/// adapter add theirs).
const CAPACITY: usize = 32;

struct Entry<T: ?Sized> {
    source: Weak<T>,
    encoded: Arc<RawValue>,
}

/// A small cache from an `Arc<T>` to its encoded JSON.
pub(crate) struct EncodeCache<T: ?Sized> {
    entries: Mutex<Vec<Entry<T>>>,
}

impl<T: ?Sized> Default for EncodeCache<T> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(Vec::new()),
        }
    }
}

impl<T: ?Sized> EncodeCache<T> {
    /// The encoding of `source`: cached, or made by `encode` and remembered.
    ///
    /// # Errors
    /// The error of `encode`.
    pub(crate) fn get_or_encode<E>(
        &self,
        source: &Arc<T>,
        encode: impl FnOnce(&T) -> Result<Box<RawValue>, E>,
    ) -> Result<Arc<RawValue>, E> {
        let weak = Arc::downgrade(source);
        {
            let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(hit) = entries.iter().find(|e| Weak::ptr_eq(&e.source, &weak)) {
                return Ok(Arc::clone(&hit.encoded));
            }
        }
        let encoded: Arc<RawValue> = Arc::from(encode(source)?);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        // Dropped configs leave dead entries; clear them, then make room.
        entries.retain(|e| e.source.strong_count() > 0);
        if entries.len() >= CAPACITY {
            entries.remove(0);
        }
        entries.push(Entry {
            source: weak,
            encoded: Arc::clone(&encoded),
        });
        Ok(encoded)
    }
}

/// The caches of one adapter: its tool sets and its output specs.
#[derive(Default)]
pub(crate) struct WireCache {
    /// Encoded `tools` arrays, by tool set.
    pub(crate) tools: EncodeCache<[crate::tool::ToolDefinition]>,
    /// Encoded `tools` arrays with a prompt-cache breakpoint on the last tool.
    pub(crate) tools_marked: EncodeCache<[crate::tool::ToolDefinition]>,
    /// As `tools_marked`, the breakpoint with a 5-minute TTL.
    pub(crate) tools_marked_5m: EncodeCache<[crate::tool::ToolDefinition]>,
    /// As `tools_marked`, the breakpoint with a 1-hour TTL.
    pub(crate) tools_marked_1h: EncodeCache<[crate::tool::ToolDefinition]>,
    /// Encoded structured-output settings, by output spec.
    pub(crate) output: EncodeCache<crate::llm::OutputSpec>,
}

/// Serializes `value` into a raw JSON value.
///
/// # Errors
/// serde_json's error (it has none for the adapters' types).
pub(crate) fn raw<S: serde::Serialize + ?Sized>(
    value: &S,
) -> Result<Box<RawValue>, serde_json::Error> {
    serde_json::value::to_raw_value(value)
}

/// Serializes the body of `request` into a buffer sized by [`size_hint`] instead of
/// serde_json's 128 bytes, which grow four or five times (each a copy) for an ordinary
/// request. `known`: the bytes of the parts the adapter knows exactly (its cached tool
/// definitions and output schema); `None` allows [`TOOL_BYTES`] per tool.
///
/// # Errors
/// serde_json's error (it has none for the adapters' types).
pub(crate) fn request_body<S: serde::Serialize + ?Sized>(
    value: &S,
    request: &crate::llm::LlmRequest,
    known: Option<usize>,
) -> Result<Vec<u8>, serde_json::Error> {
    let fixed = known.unwrap_or(TOOL_BYTES * request.tools.len());
    body(value, size_hint(request, fixed))
}

/// Serializes `value` into a buffer of `hint` bytes; a buffer left much larger than its
/// body is shrunk, so a run waiting on its reply holds no more than the body.
///
/// # Errors
/// serde_json's error.
fn body<S: serde::Serialize + ?Sized>(
    value: &S,
    hint: usize,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut buffer = Vec::with_capacity(hint);
    serde_json::to_writer(&mut buffer, value)?;
    if buffer.capacity() - buffer.len() > SLACK {
        buffer.shrink_to_fit();
    }
    Ok(buffer)
}

/// An allowance per tool definition for [`request_body`] where the adapter does not
/// know the encoded size (bytes).
const TOOL_BYTES: usize = 384;

/// Spare bytes [`body`] leaves in a buffer rather than shrink it (a shrink is a call to
/// the allocator).
const SLACK: usize = 256;

/// An estimate of a request body's size in bytes (`fixed`: the bytes known exactly,
/// such as cached tool definitions): the texts it carries, plus an allowance for the
/// JSON around them. Low for arguments and escapes, which only costs a growth.
fn size_hint(request: &crate::llm::LlmRequest, fixed: usize) -> usize {
    use crate::message::Message;
    let texts: usize = request
        .messages
        .iter()
        .map(|m| match m {
            Message::User { content, parts } => {
                content.len()
                    + 32
                    + parts
                        .iter()
                        .map(|p| p.byte_len() / 3 * 4 + 96)
                        .sum::<usize>()
            }
            Message::Assistant {
                text, tool_calls, ..
            } => {
                text.len()
                    + 48
                    + tool_calls
                        .iter()
                        .map(|c| c.id.len() + c.name.len() + 160)
                        .sum::<usize>()
            }
            Message::Tool { results } => results
                .iter()
                .map(|r| r.content.len() + r.call_id.len() + 64)
                .sum(),
            Message::Paused { text, .. } => text.len() + 256,
        })
        .sum();
    256 + fixed + request.system.as_ref().map_or(0, String::len) + texts
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn an_arc_is_encoded_once_and_a_freed_one_never_matches() {
        let cache: EncodeCache<[u32]> = EncodeCache::default();
        let calls = AtomicU32::new(0);
        let encode = |v: &[u32]| {
            calls.fetch_add(1, Ordering::SeqCst);
            raw(v)
        };
        let a: Arc<[u32]> = Arc::from(vec![1, 2]);
        assert_eq!(cache.get_or_encode(&a, encode).unwrap().get(), "[1,2]");
        assert_eq!(cache.get_or_encode(&a, encode).unwrap().get(), "[1,2]");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let clone = Arc::clone(&a);
        assert_eq!(cache.get_or_encode(&clone, encode).unwrap().get(), "[1,2]");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "a clone is the same Arc");
        drop((a, clone));
        let b: Arc<[u32]> = Arc::from(vec![3]);
        assert_eq!(cache.get_or_encode(&b, encode).unwrap().get(), "[3]");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_body_is_the_bytes_serde_json_writes_in_a_buffer_near_its_size() {
        let value = serde_json::json!({"model": "m", "messages": ["x".repeat(3000)]});
        let expected = serde_json::to_vec(&value).unwrap();
        for hint in [0, 16, 3000, 3100, 64 * 1024] {
            let bytes = body(&value, hint).unwrap();
            assert_eq!(bytes, expected, "hint {hint}");
            assert!(
                bytes.capacity() - bytes.len() <= SLACK,
                "hint {hint}: capacity {} for {} bytes",
                bytes.capacity(),
                bytes.len()
            );
        }
    }
}
