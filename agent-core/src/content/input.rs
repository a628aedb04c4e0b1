//! [`Input`]: a run's input, its text and parts.

use super::part::Part;

/// A run's input: its text, and the parts that go with it (images, documents, audio,
/// more text), in order. What [`run_agent`](crate::run_agent) and its siblings take: a
/// string converts into an input of that text alone.
///
/// ```
/// use agent_core::content::{Input, Part};
///
/// let photo = Part::from_bytes_as(vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a], "image/png")?;
/// let input = Input::text("The unit arrived cracked, photo attached.").part(photo);
/// assert_eq!(input.parts().len(), 1);
/// # Ok::<(), agent_core::content::ContentError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Input {
    text: String,
    parts: Vec<Part>,
}

impl Input {
    /// An input of this text.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            parts: Vec::new(),
        }
    }

    /// This input with one more part after the others.
    #[must_use]
    pub fn part(mut self, part: Part) -> Self {
        self.parts.push(part);
        self
    }

    /// This input with more parts after the others.
    #[must_use]
    pub fn parts_from(mut self, parts: impl IntoIterator<Item = Part>) -> Self {
        self.parts.extend(parts);
        self
    }

    /// The input's text (what records, guardrails and graders see as the input).
    pub fn as_text(&self) -> &str {
        &self.text
    }

    /// The parts after the text.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The text and the parts.
    pub fn into_parts(self) -> (String, Vec<Part>) {
        (self.text, self.parts)
    }
}

impl From<String> for Input {
    fn from(text: String) -> Self {
        Input::text(text)
    }
}

impl From<&str> for Input {
    fn from(text: &str) -> Self {
        Input::text(text)
    }
}

impl From<&String> for Input {
    fn from(text: &String) -> Self {
        Input::text(text.clone())
    }
}

impl From<std::borrow::Cow<'_, str>> for Input {
    fn from(text: std::borrow::Cow<'_, str>) -> Self {
        Input::text(text.into_owned())
    }
}

impl From<Box<str>> for Input {
    fn from(text: Box<str>) -> Self {
        Input::text(String::from(text))
    }
}

impl From<Part> for Input {
    fn from(part: Part) -> Self {
        Vec::from([part]).into()
    }
}

/// Parts in order: the leading text parts are the input's text (joined), the rest its
/// parts.
impl From<Vec<Part>> for Input {
    fn from(parts: Vec<Part>) -> Self {
        let lead = parts
            .iter()
            .take_while(|p| matches!(p, Part::Text { .. }))
            .count();
        let mut parts = parts;
        let rest = parts.split_off(lead);
        let text = parts
            .iter()
            .filter_map(Part::as_text)
            .collect::<Vec<_>>()
            .join("\n");
        Input { text, parts: rest }
    }
}
