//! The JSON side of blobs (the store side is `blobs.rs`): a part's inline bytes (`"source":{"bytes":"<base64>"}`)
//! swapped for a reference (`"source":{"blob":{"sha256":"<hex>","size":<bytes>}}`) when
//! stored, and back when loaded.
//!
//! The swap works on the JSON text, not on a parsed value: the JSON the store is given
//! is serde_json's compact output, in which an unescaped `"` is always structural (a
//! `"` inside a string is written `\"`), so `"source":{"bytes":"` can only be a
//! `source` key whose value is an object whose first key is `bytes`, that is a part's
//! [`Source::Bytes`](agent_core::content::Source::Bytes). Everything else of the text
//! stays byte for byte, and only canonical base64 (standard, padded: what
//! [`Bytes`] serializes to) is swapped, so a load gives back exactly the text that was
//! stored. Text without the pattern (a text-only run) is not copied.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use agent_core::content::{Bytes, Part};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// What precedes a part's inline bytes in compact JSON.
const INLINE: &str = "\"source\":{\"bytes\":\"";
/// What every reference holds (and no inline part does): the `LIKE` pattern of
/// [`Store::collect_blobs`](crate::Store::collect_blobs).
pub(crate) const REF_MARK: &str = "\"blob\":{\"sha256\":\"";
/// What precedes a reference's hash.
const REF: &str = "\"source\":{\"blob\":{\"sha256\":\"";

/// The bytes of one part, to be stored once in the `blobs` table.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct BlobRow {
    /// 64 lowercase hex digits.
    pub(crate) sha256: String,
    /// The part's media type (sniffed from the bytes when the JSON does not give it).
    pub(crate) media_type: String,
    pub(crate) bytes: Bytes,
}

impl std::fmt::Debug for BlobRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BlobRow(sha256:{}, {}, {} bytes)",
            self.sha256,
            self.media_type,
            self.bytes.len()
        )
    }
}

/// The blobs a store met last, by their base64 text: the same image comes in every
/// checkpoint of a run and often in many runs, and is decoded and hashed once while it
/// stays here (a text compare instead). At most [`RECENT_ENTRIES`] blobs and
/// [`RECENT_TEXT`] bytes of base64; the oldest goes first.
#[derive(Default)]
pub(crate) struct Recent {
    entries: Mutex<VecDeque<(String, BlobRow)>>,
}

/// How many blobs [`Recent`] keeps.
const RECENT_ENTRIES: usize = 32;
/// How much base64 text [`Recent`] keeps, in bytes (a blob larger than a quarter of it
/// is not kept).
const RECENT_TEXT: usize = 32 << 20;

impl Recent {
    fn get(&self, base64: &str) -> Option<BlobRow> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .find(|(text, _)| text.len() == base64.len() && text == base64)
            .map(|(_, row)| row.clone())
    }

    fn put(&self, base64: &str, row: &BlobRow) {
        if base64.len() > RECENT_TEXT / 4 {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut total: usize = entries.iter().map(|(t, _)| t.len()).sum::<usize>() + base64.len();
        while entries.len() >= RECENT_ENTRIES || total > RECENT_TEXT {
            match entries.pop_front() {
                Some((text, _)) => total -= text.len(),
                None => break,
            }
        }
        entries.push_back((base64.to_owned(), row.clone()));
    }
}

/// `json` with every part's inline bytes replaced by a reference; each blob is pushed
/// onto `blobs` once. Returns `json` itself when it holds no inline bytes.
pub(crate) fn externalize(json: String, blobs: &mut Vec<BlobRow>, recent: &Recent) -> String {
    if !json.contains(INLINE) {
        return json;
    }
    let mut out = String::with_capacity(json.len().min(4096));
    let mut rest = json.as_str();
    let mut done = 0usize;
    while let Some(at) = rest.find(INLINE) {
        let start = at + INLINE.len();
        let Some(len) = rest[start..].find('"') else {
            break;
        };
        let base64 = &rest[start..start + len];
        // The object must close right after the string: `{"bytes":"..."}`.
        let after = start + len + 1;
        let closes = rest[after..].starts_with('}');
        let found = if closes {
            recent.get(base64).or_else(|| {
                canonical_bytes(base64).map(|bytes| {
                    let media_type = media_type_near(&json, done + at, done + after + 1)
                        .map_or_else(|| sniffed(&bytes), str::to_owned);
                    let row = BlobRow {
                        sha256: bytes.sha256(),
                        media_type,
                        bytes,
                    };
                    recent.put(base64, &row);
                    row
                })
            })
        } else {
            None
        };
        match found {
            Some(row) => {
                out.push_str(&rest[..at]);
                out.push_str(REF);
                out.push_str(&row.sha256);
                out.push_str("\",\"size\":");
                out.push_str(&row.bytes.len().to_string());
                out.push_str("}}");
                if !blobs.iter().any(|b| b.sha256 == row.sha256) {
                    blobs.push(row);
                }
                rest = &rest[after + 1..];
                done += after + 1;
            }
            None => {
                out.push_str(&rest[..start]);
                rest = &rest[start..];
                done += start;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The bytes of `base64` when it is exactly what [`Bytes`] serializes to (standard
/// base64 with padding); `None` otherwise (the text stays inline). The standard engine
/// decodes only canonical text (padding required, no stray trailing bits), so decoding
/// is the check: re-encoding what it decodes gives `base64` back.
fn canonical_bytes(base64: &str) -> Option<Bytes> {
    if base64.is_empty() {
        return None;
    }
    STANDARD.decode(base64).ok().map(Bytes::from)
}

/// The media type beside a source in `json`: `,"media_type":"..."` right after it (the
/// field order of `Media`), or `"media_type":"...",` right before it (keys in sorted
/// order). Only a type without escapes.
fn media_type_near(json: &str, source_at: usize, source_end: usize) -> Option<&str> {
    const AFTER: &str = ",\"media_type\":\"";
    if let Some(tail) = json.get(source_end..).and_then(|t| t.strip_prefix(AFTER)) {
        let end = tail.find('"')?;
        let value = &tail[..end];
        return (!value.contains('\\')).then_some(value);
    }
    let head = json.get(..source_at)?.strip_suffix("\",")?;
    let start = head.rfind('"')?;
    let value = &head[start + 1..];
    head[..start].strip_suffix("\"media_type\":")?;
    (!value.contains('\\')).then_some(value)
}

/// The media type sniffed from the bytes, else `application/octet-stream`.
fn sniffed(bytes: &Bytes) -> String {
    Part::from_bytes(bytes.clone())
        .ok()
        .and_then(|p| p.media().map(|m| m.media_type.clone()))
        .unwrap_or_else(|| "application/octet-stream".to_owned())
}

/// The hashes `json` references, each once, in order of first appearance.
pub(crate) fn referenced(json: &str) -> Vec<String> {
    let mut hashes: Vec<String> = Vec::new();
    let mut rest = json;
    while let Some(at) = rest.find(REF) {
        let start = at + REF.len();
        if let Some((hash, _, len)) = parse_ref(&rest[start..])
            && !hashes.iter().any(|h| h == hash)
        {
            hashes.push(hash.to_owned());
            rest = &rest[start + len..];
        } else {
            rest = &rest[start..];
        }
    }
    hashes
}

/// After [`REF`]: `<64 hex>","size":<digits>}}` as (hash, size, length of it all).
fn parse_ref(text: &str) -> Option<(&str, u64, usize)> {
    let hash = text.get(..64)?;
    if !hash
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let tail = text[64..].strip_prefix("\",\"size\":")?;
    let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
    let size: u64 = tail[..digits].parse().ok()?;
    tail[digits..].strip_prefix("}}")?;
    Some((hash, size, 64 + "\",\"size\":".len() + digits + 2))
}

/// `json` with every reference replaced by the inline bytes of `blobs` (by hash).
///
/// # Errors
/// The hash of a reference `blobs` does not hold (the blob is missing from the store),
/// or whose size differs from the stored bytes'.
pub(crate) fn internalize(json: String, blobs: &HashMap<String, Bytes>) -> Result<String, String> {
    if !json.contains(REF) {
        return Ok(json);
    }
    let mut out = String::with_capacity(json.len() * 2);
    let mut rest = json.as_str();
    while let Some(at) = rest.find(REF) {
        let start = at + REF.len();
        let Some((hash, size, len)) = parse_ref(&rest[start..]) else {
            out.push_str(&rest[..start]);
            rest = &rest[start..];
            continue;
        };
        let bytes = blobs
            .get(hash)
            .ok_or_else(|| format!("blob sha256:{hash} is referenced but not stored"))?;
        if u64::try_from(bytes.len()).ok() != Some(size) {
            return Err(format!(
                "blob sha256:{hash} is referenced with {size} bytes but {} are stored",
                bytes.len()
            ));
        }
        out.push_str(&rest[..at]);
        out.push_str(INLINE);
        out.push_str(&bytes.to_base64());
        out.push_str("\"}");
        rest = &rest[start + len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The blobs of `rows`, each hash once, sorted by hash (every transaction inserts them
/// in the same order, so two never wait for each other's blobs in opposite orders).
pub(crate) fn distinct<'a>(rows: impl IntoIterator<Item = &'a BlobRow>) -> Vec<&'a BlobRow> {
    let mut out: Vec<&BlobRow> = rows.into_iter().collect();
    out.sort_by(|a, b| a.sha256.cmp(&b.sha256));
    out.dedup_by(|a, b| a.sha256 == b.sha256);
    out
}

/// The size of a blob as a database integer.
pub(crate) fn db_size(row: &BlobRow) -> i64 {
    i64::try_from(row.bytes.len()).unwrap_or(i64::MAX)
}

/// Inserts the distinct blobs of `$blobs` (an iterator of `&BlobRow`) in the
/// transaction `$tx` of database `$DB`, skipping those already stored.
macro_rules! insert_blobs {
    ($tx:ident, $DB:ident, $blobs:expr) => {{
        let blobs = $crate::blob_refs::distinct($blobs);
        // Blobs may be large: a few per statement.
        for chunk in blobs.chunks(8) {
            let mut q = ::sqlx::QueryBuilder::<$DB>::new(
                "INSERT INTO blobs (sha256, media_type, size, bytes) ",
            );
            q.push_values(chunk, |mut b, r| {
                b.push_bind(r.sha256.as_str())
                    .push_bind(r.media_type.as_str())
                    .push_bind($crate::blob_refs::db_size(r))
                    .push_bind(r.bytes.as_slice());
            });
            q.push(" ON CONFLICT (sha256) DO NOTHING");
            q.build()
                .execute(&mut *$tx)
                .await
                .map_err($crate::errors::db_error)?;
        }
    }};
}

pub(crate) use insert_blobs;

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR-a-small-image";

    fn part_json(bytes: &[u8]) -> String {
        let part = Part::from_bytes(bytes.to_vec()).unwrap();
        serde_json::to_string(&serde_json::json!({"role": "user", "parts": [part]})).unwrap()
    }

    #[test]
    fn bytes_become_a_reference_and_come_back_exactly() {
        let json = part_json(PNG);
        let mut blobs = Vec::new();
        let stored = externalize(json.clone(), &mut blobs, &Recent::default());
        let hash = Bytes::from(PNG).sha256();
        assert_eq!(
            stored,
            format!(
                "{{\"role\":\"user\",\"parts\":[{{\"type\":\"image\",\"source\":{{\"blob\":\
                 {{\"sha256\":\"{hash}\",\"size\":{}}}}},\"media_type\":\"image/png\"}}]}}",
                PNG.len()
            )
        );
        assert_eq!(blobs.len(), 1);
        assert_eq!(blobs[0].media_type, "image/png");
        assert_eq!(blobs[0].bytes.as_slice(), PNG);
        assert!(!format!("{:?}", blobs[0]).contains("PNG"));
        assert_eq!(referenced(&stored), vec![hash.clone()]);
        let map = HashMap::from([(hash, Bytes::from(PNG))]);
        assert_eq!(internalize(stored, &map).unwrap(), json);
    }

    #[test]
    fn text_only_json_is_returned_as_is() {
        let json = "{\"text\":\"\\\"source\\\":{\\\"bytes\\\":\\\"AAAA\\\"}\"}".to_owned();
        let mut blobs = Vec::new();
        assert_eq!(
            externalize(json.clone(), &mut blobs, &Recent::default()),
            json
        );
        assert!(blobs.is_empty());
        assert_eq!(internalize(json.clone(), &HashMap::new()).unwrap(), json);
    }

    #[test]
    fn non_canonical_base64_stays_inline() {
        // Unpadded base64 loads (Bytes accepts it) but would not come back the same.
        let json = "{\"source\":{\"bytes\":\"AAE\"},\"media_type\":\"image/png\"}".to_owned();
        let mut blobs = Vec::new();
        assert_eq!(
            externalize(json.clone(), &mut blobs, &Recent::default()),
            json
        );
        assert!(blobs.is_empty());
    }

    #[test]
    fn the_media_type_before_the_source_is_found_and_a_missing_blob_is_named() {
        let bytes = Bytes::from(&b"%PDF-1.4 a tiny document"[..]);
        let json = format!(
            "[{{\"media_type\":\"application/pdf\",\"source\":{{\"bytes\":\"{}\"}}}}]",
            bytes.to_base64()
        );
        let mut blobs = Vec::new();
        let stored = externalize(json, &mut blobs, &Recent::default());
        assert_eq!(blobs[0].media_type, "application/pdf");
        let error = internalize(stored, &HashMap::new()).unwrap_err();
        assert_eq!(
            error,
            format!(
                "blob sha256:{} is referenced but not stored",
                bytes.sha256()
            )
        );
    }
}
