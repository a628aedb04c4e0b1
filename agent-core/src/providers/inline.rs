//! What the Anthropic, Bedrock and Gemini wires share to send a part's bytes inside a
//! JSON body: the bytes as base64 (written straight into the body, never held as a
//! second copy), and a media type without its parameters.

use base64::display::Base64Display;
use base64::engine::general_purpose::STANDARD;
use serde::{Serialize, Serializer};

use crate::content::Part;
use crate::llm::LlmError;

/// Bytes serialized as a standard base64 string (with padding).
pub(crate) struct Base64<'a>(pub(crate) &'a [u8]);

impl Serialize for Base64<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&Base64Display::new(self.0, &STANDARD))
    }
}

/// `media_type` without parameters (`text/plain; charset=utf-8` → `text/plain`).
pub(crate) fn base_type(media_type: &str) -> &str {
    media_type.split(';').next().unwrap_or_default().trim()
}

/// The permanent error of a part a wire cannot encode (the runner's capability check
/// refuses such parts before any request; this covers a history built by hand). Names
/// the part (type, size or source), never its bytes.
pub(crate) fn unsendable(provider: &str, part: &Part, why: &str) -> LlmError {
    LlmError::permanent(format!(
        "the {provider} request cannot carry the part ({}): {why}",
        part.describe()
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn base64_is_written_as_a_json_string() {
        assert_eq!(
            serde_json::to_string(&Base64(b"hello")).unwrap(),
            "\"aGVsbG8=\""
        );
        assert_eq!(serde_json::to_string(&Base64(b"")).unwrap(), "\"\"");
        assert_eq!(base_type("text/plain; charset=utf-8"), "text/plain");
        assert_eq!(base_type("image/png"), "image/png");
    }
}
