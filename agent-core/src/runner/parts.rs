//! The conversation's parts (images, documents, audio) made fit for the model a call
//! goes to, before the request: a part the user gave that the model cannot take is an
//! error naming it; a part a tool returned goes where the model can see it (in the
//! result, or in a user message right after the results, with a note naming the call),
//! or, when the model takes no such part, is replaced by a note. Never sent for the
//! provider to reject, never dropped silently.

use crate::config::Compiled;
use crate::content::Part;
use crate::error::AgentError;
use crate::llm::ContentCapabilities;
use crate::message::Message;

/// The text that opens a user message holding parts that tools returned (moved out of
/// results for a model that takes no parts in tool results).
pub(crate) const MOVED_PARTS: &str = "Parts the tool results above returned";

/// A part the user gave (in the input or the history) that the model cannot take.
pub(crate) struct Refused<'m> {
    /// Its place among the conversation's parts (0-based).
    pub(crate) index: usize,
    pub(crate) part: &'m Part,
    pub(crate) reason: String,
}

impl Refused<'_> {
    /// The refused part's media type; empty for a part without one.
    pub(crate) fn media_type(&self) -> String {
        self.part
            .media()
            .map(|m| m.media_type.clone())
            .unwrap_or_default()
    }
}

/// Whether the parts the user gave fit `caps`: the first that does not, if any (a
/// request's part count counts too).
pub(crate) fn check_given<'m>(
    caps: &ContentCapabilities,
    messages: &'m [Message],
) -> Option<Refused<'m>> {
    let mut index = 0;
    let mut totals = Totals::default();
    let images = image_count(messages);
    for message in messages {
        let Message::User { content, parts } = message else {
            message.parts().for_each(|part| totals.add(part));
            continue;
        };
        let moved = content.starts_with(MOVED_PARTS);
        for part in parts.iter().filter(|p| p.media().is_some()) {
            totals.add(part);
            if !moved && let Err(reason) = caps.check_among(part, images) {
                return Some(Refused {
                    index,
                    part,
                    reason,
                });
            }
            index += 1;
        }
    }
    let counts = (totals.images, totals.documents, totals.parts);
    let bytes = (totals.bytes, totals.document_bytes);
    let reason = caps.check_totals(counts, bytes, totals.pages)?;
    let last = messages.iter().flat_map(Message::parts).last()?;
    Some(Refused {
        index: totals.parts.saturating_sub(1),
        part: last,
        reason,
    })
}

/// Whether every agent the run may hand the conversation over to (its handoffs, and
/// theirs, each agent once) can take the parts the user gave with some model of its
/// chain: the first that cannot, as [`AgentError::UnsupportedHandoffContent`] naming
/// the agent, its last model, the part and why. A chain's model that cannot is skipped
/// at the handoff, as a fallback model is, so one model of the chain is enough.
pub(crate) fn check_handoffs<T>(agent: &Compiled<T>, messages: &[Message]) -> Option<AgentError> {
    let mut seen: Vec<&str> = vec![agent.name.as_str()];
    let mut queue: Vec<&Compiled<T>> = agent.handoffs.iter().map(|h| &*h.config.inner).collect();
    while let Some(target) = queue.pop() {
        if seen.contains(&target.name.as_str()) {
            continue;
        }
        seen.push(&target.name);
        let mut last = None;
        for model in &target.models {
            let caps = model.client.content_capabilities(&model.wire_model);
            match check_given(&caps, messages) {
                None => {
                    last = None;
                    break;
                }
                Some(refused) => last = Some((model, refused)),
            }
        }
        if let Some((model, refused)) = last {
            return Some(AgentError::UnsupportedHandoffContent {
                agent: target.name.clone(),
                model: model.name.clone(),
                index: refused.index,
                kind: refused.part.kind(),
                media_type: refused.media_type(),
                reason: refused.reason,
            });
        }
        queue.extend(target.handoffs.iter().map(|h| &*h.config.inner));
    }
    None
}

/// The parts of a conversation counted, and their bytes summed.
#[derive(Default)]
struct Totals {
    parts: usize,
    images: usize,
    documents: usize,
    bytes: usize,
    /// The bytes of the documents.
    document_bytes: usize,
    /// The PDF pages of the documents given as bytes.
    pages: usize,
}

impl Totals {
    fn add(&mut self, part: &Part) {
        if part.media().is_none() {
            return;
        }
        self.parts += 1;
        match part.kind() {
            crate::content::Kind::Image => self.images += 1,
            crate::content::Kind::Document => {
                self.documents += 1;
                self.document_bytes += part.byte_len();
            }
            _ => {}
        }
        self.bytes += part.byte_len();
        self.pages += crate::content::pdf_pages_of(part);
    }
}

/// Makes the parts tools returned fit `caps`, in place: a part the model cannot take at
/// all is replaced by a note in its result's text; when the model takes no parts in tool
/// results, the others move to a user message right after the results, which names the
/// call each came from. Parts in a user message of moved parts that the model cannot
/// take become notes in that message. Returns whether anything changed.
pub(crate) fn fit_results(caps: &ContentCapabilities, messages: &mut Vec<Message>) -> bool {
    let images = image_count(messages);
    let mut changed = false;
    let mut at = 0;
    while at < messages.len() {
        let mut moved: Vec<Part> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        match &mut messages[at] {
            Message::Tool { results } => {
                for result in results.iter_mut().filter(|r| !r.parts.is_empty()) {
                    for part in std::mem::take(&mut result.parts) {
                        if part.media().is_none() {
                            result.parts.push(part);
                        } else if let Err(reason) = caps.check_among(&part, images) {
                            result.content.push_str(&note(&part, &reason));
                            changed = true;
                        } else if caps.parts_in_tool_results {
                            result.parts.push(part);
                        } else {
                            names.push(format!(
                                "{} (call {}: {})",
                                part.describe(),
                                result.call_id,
                                result.name
                            ));
                            moved.push(part);
                        }
                    }
                }
            }
            Message::User { content, parts } if content.starts_with(MOVED_PARTS) => {
                for part in std::mem::take(parts) {
                    match caps.check_among(&part, images) {
                        Ok(()) => parts.push(part),
                        Err(reason) => {
                            content.push_str(&note(&part, &reason));
                            changed = true;
                        }
                    }
                }
            }
            _ => {}
        }
        if !moved.is_empty() {
            let text = format!("{MOVED_PARTS}, in order: {}.", names.join("; "));
            messages.insert(at + 1, Message::user_with(text, moved));
            changed = true;
            at += 1;
        }
        at += 1;
    }
    changed
}

/// The images of a conversation (what a request of it carries).
fn image_count(messages: &[Message]) -> usize {
    messages
        .iter()
        .flat_map(Message::parts)
        .filter(|p| p.kind() == crate::content::Kind::Image)
        .count()
}

/// The note that stands for a part the model cannot see.
fn note(part: &Part, reason: &str) -> String {
    format!("\n[{}: not shown to this model: {reason}]", part.describe())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{COMMON_IMAGES, PDF};
    use crate::message::ToolResult;

    const PNG: &[u8] = &[
        0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d,
    ];

    fn image() -> Part {
        Part::from_bytes(PNG.to_vec()).unwrap()
    }

    fn caps(in_results: bool) -> ContentCapabilities {
        ContentCapabilities {
            image_types: COMMON_IMAGES,
            document_types: PDF,
            parts_in_tool_results: in_results,
            ..ContentCapabilities::TEXT_ONLY
        }
    }

    #[test]
    fn a_given_part_the_model_cannot_take_is_named() {
        let url = Part::from_url("https://x.test/a.png", "image/png").unwrap();
        let messages = vec![Message::user_with("look", vec![image(), url])];
        let refused = check_given(&caps(true), &messages).unwrap();
        assert_eq!(refused.index, 1);
        assert!(refused.reason.contains("no URL"), "{}", refused.reason);
        assert!(check_given(&ContentCapabilities::ANY, &messages).is_none());
        let text_only = check_given(&ContentCapabilities::TEXT_ONLY, &messages).unwrap();
        assert_eq!(text_only.index, 0);
        assert_eq!(text_only.reason, "the model takes no images");
    }

    /// A PDF of `pages` page objects (uncompressed, as a simple writer makes them).
    fn pdf(pages: usize) -> Part {
        let mut bytes = b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 1 >> endobj\n".to_vec();
        for i in 0..pages {
            bytes.extend(format!("{} 0 obj << /Type /Page >> endobj\n", i + 2).bytes());
        }
        bytes.extend(b"%%EOF\n");
        Part::from_bytes_as(bytes, "application/pdf").unwrap()
    }

    #[test]
    fn the_pdf_pages_of_a_request_are_counted_against_the_models_limit() {
        let limited = ContentCapabilities {
            max_pdf_pages: Some(100),
            source: "https://docs.anthropic.com/en/docs/build-with-claude/pdf-support",
            ..caps(true)
        };
        // 60 + 40 pages: at the limit, taken.
        let messages = vec![
            Message::user_with("first", vec![pdf(60)]),
            Message::user_with("second", vec![pdf(40)]),
        ];
        assert!(check_given(&limited, &messages).is_none());
        // One page more, in a later message: refused, naming the limit and its source.
        let mut messages = messages;
        messages.push(Message::user_with("third", vec![pdf(1)]));
        let refused = check_given(&limited, &messages).unwrap();
        assert_eq!(refused.index, 2);
        assert_eq!(
            refused.reason,
            "the conversation holds 101 PDF pages, more than the 100 a request may carry \
             (source: https://docs.anthropic.com/en/docs/build-with-claude/pdf-support)"
        );
        // Unlimited: taken.
        assert!(check_given(&caps(true), &messages).is_none());
    }

    #[test]
    fn tool_parts_move_after_the_results_or_become_notes() {
        let result = ToolResult::ok("c1", "screenshot", "done").with_parts(vec![image()]);
        let mut messages = vec![Message::user("go"), Message::tool_results(vec![result])];
        let kept = messages.clone();
        assert!(!fit_results(&caps(true), &mut messages));
        assert_eq!(messages, kept);
        assert!(fit_results(&caps(false), &mut messages));
        assert_eq!(messages.len(), 3);
        let Message::User { content, parts } = &messages[2] else {
            panic!("{:?}", messages[2]);
        };
        assert!(content.contains("call c1: screenshot"), "{content}");
        assert_eq!(parts.len(), 1);
        assert_eq!(messages[1].parts().count(), 0);
        // A text-only model after a switch: the moved part becomes a note.
        assert!(fit_results(&ContentCapabilities::TEXT_ONLY, &mut messages));
        let Message::User { content, parts } = &messages[2] else {
            panic!();
        };
        assert!(parts.is_empty());
        assert!(
            content.contains(
                "image image/png, 12 bytes: not shown to this model: the model takes no images"
            ),
            "{content}"
        );
    }
}
