//! What the Anthropic, Bedrock and Gemini wires share to send parts: the bytes as
//! base64 inside a JSON body (written straight into the body, never held as a second
//! copy), a media type without its parameters, the error of a part a wire cannot
//! encode, and a Claude model's version (Anthropic's API and Bedrock judge its parts
//! by it).

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

/// A Claude model's (major, minor) version from its name, on Anthropic's API or
/// Bedrock (`claude-sonnet-4-5-20250929` is 4.5, `claude-3-5-sonnet-20241022` 3.5,
/// `claude-3-haiku-20240307` 3.0: a number of 100 or more after the major version is
/// a date, i.e. minor 0); `None` for a name without one (`claude-v2:1`).
pub(crate) fn claude_version(model: &str) -> Option<(u64, u64)> {
    let numbers: Vec<u64> = model
        .split('-')
        .skip(1)
        .filter_map(|part| part.parse::<u64>().ok())
        .collect();
    match numbers.as_slice() {
        [major, minor, ..] if *minor < 100 => Some((*major, *minor)),
        [major, ..] => Some((*major, 0)),
        [] => None,
    }
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
