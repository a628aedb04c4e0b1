//! [`Bytes`]: a part's bytes, shared and never shown.

use std::fmt;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use super::error::ContentError;

/// The bytes of an image, a document or audio: shared (a clone copies a pointer), and
/// never shown: `Debug` prints the size and the first 12 hex digits of the SHA-256, not
/// the bytes. Serialized as standard base64.
#[derive(Clone, PartialEq, Eq)]
pub struct Bytes(Arc<[u8]>);

impl Bytes {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The SHA-256 of the bytes, as 64 lowercase hex digits (what stores address them
    /// by).
    pub fn sha256(&self) -> String {
        let digest = Sha256::digest(&self.0);
        let mut out = String::with_capacity(64);
        for byte in digest {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        out
    }

    /// The bytes as standard base64 (with padding).
    pub fn to_base64(&self) -> String {
        STANDARD.encode(&self.0)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hash = self.sha256();
        write!(f, "<{} bytes, sha256:{}>", self.0.len(), &hash[..12])
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(bytes: Vec<u8>) -> Self {
        Bytes(bytes.into())
    }
}

impl From<&[u8]> for Bytes {
    fn from(bytes: &[u8]) -> Self {
        Bytes(bytes.into())
    }
}

impl From<Arc<[u8]>> for Bytes {
    fn from(bytes: Arc<[u8]>) -> Self {
        Bytes(bytes)
    }
}

impl<const N: usize> From<&[u8; N]> for Bytes {
    fn from(bytes: &[u8; N]) -> Self {
        Bytes(bytes.as_slice().into())
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Bytes {
    /// The bytes of standard base64 text, with or without padding (whitespace around it
    /// ignored): for base64 whose media type is not given, to pass to
    /// [`Part::from_bytes`](super::Part::from_bytes), which sniffs it.
    ///
    /// # Errors
    /// [`ContentError::Base64`] when the text is not base64.
    pub fn from_base64(text: &str) -> Result<Self, ContentError> {
        decode_base64(text)
    }
}

/// Decodes standard base64, with or without padding (whitespace around it ignored).
pub(crate) fn decode_base64(text: &str) -> Result<Bytes, ContentError> {
    let text = text.trim();
    let decoded = if text.ends_with('=') {
        STANDARD.decode(text)
    } else {
        STANDARD_NO_PAD.decode(text)
    };
    decoded.map(Bytes::from).map_err(|e| ContentError::Base64 {
        reason: e.to_string(),
    })
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        decode_base64(&text).map_err(serde::de::Error::custom)
    }
}
