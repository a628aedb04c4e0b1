//! Reasoning a model writes into its answer text: `<think>`-style blocks, fenced
//! reasoning, and the analysis channel of the harmony format, found so that none of it
//! is ever read as the answer (native and prompted output modes).
//!
//! The variants seen from open-weight models and the servers that run them:
//! - a closed block: `<think>..</think>` (DeepSeek-R1, Qwen3, QwQ), `<thinking>`,
//!   `<thought>`, `<reasoning>`, `<reflection>`, in any case, anywhere in the text,
//!   before or after the answer, drafts of the answer inside;
//! - a block never closed (the output cap cut it, or the model never closed it):
//!   everything from the opening tag on is reasoning;
//! - a closing tag with no opening one: the chat template put `<think>` in the prompt
//!   (DeepSeek-R1's does), so everything before it is reasoning;
//! - a fenced block whose info string names reasoning (```` ```thinking ````);
//! - the harmony format served raw (gpt-oss): only the `final` channel is the answer.

use std::borrow::Cow;

/// The tag names of reasoning blocks, matched case-insensitively.
const TAGS: [&str; 5] = ["think", "thinking", "thought", "reasoning", "reflection"];

/// The info strings of fenced reasoning blocks, matched case-insensitively.
const FENCES: [&str; 4] = ["think", "thinking", "thought", "reasoning"];

/// The harmony format's start of the final channel's message.
const HARMONY_FINAL: &str = "<|channel|>final<|message|>";

/// The text without the reasoning in it: what may hold the answer. Borrowed when the
/// text has none.
pub(crate) fn without_reasoning(text: &str) -> Cow<'_, str> {
    if let Some(at) = text.find(HARMONY_FINAL) {
        let rest = &text[at + HARMONY_FINAL.len()..];
        let end = ["<|return|>", "<|end|>", "<|call|>"]
            .iter()
            .filter_map(|marker| rest.find(marker))
            .min()
            .unwrap_or(rest.len());
        return Cow::Owned(without_reasoning(&rest[..end]).into_owned());
    }
    if !text.contains('<') && !text.contains("```") {
        return Cow::Borrowed(text);
    }
    let mut text = Cow::Borrowed(text);
    // A closing tag before any opening one: the opening was in the prompt.
    if let Some((close_at, close_len)) = first_tag(&text, true)
        && first_tag(&text, false).is_none_or(|(open_at, _)| open_at > close_at)
    {
        text = Cow::Owned(text[close_at + close_len..].to_owned());
    }
    while let Some((open_at, open_len)) = first_tag(&text, false) {
        let after = open_at + open_len;
        let end = match first_tag(&text[after..], true) {
            Some((close_at, close_len)) => after + close_at + close_len,
            // Never closed: the rest is reasoning.
            None => text.len(),
        };
        let mut out = String::with_capacity(text.len() - (end - open_at));
        out.push_str(&text[..open_at]);
        out.push_str(&text[end..]);
        text = Cow::Owned(out);
    }
    strip_fences(text)
}

/// Whether the text holds reasoning still open at its end (a streamed reply whose
/// `<think>` block has not closed yet): nothing in it is the answer so far.
pub(crate) fn reasoning_open(text: &str) -> bool {
    let mut rest = text;
    loop {
        let Some((open_at, open_len)) = first_tag(rest, false) else {
            return false;
        };
        rest = &rest[open_at + open_len..];
        match first_tag(rest, true) {
            Some((close_at, close_len)) => rest = &rest[close_at + close_len..],
            None => return true,
        }
    }
}

/// The first opening (`closing`: closing) reasoning tag: its byte offset and length.
/// An opening tag may carry attributes (`<think type="draft">`).
fn first_tag(text: &str, closing: bool) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = text[from..].find('<') {
        let at = from + found;
        from = at + 1;
        let mut name_at = at + 1;
        if closing {
            if bytes.get(name_at) != Some(&b'/') {
                continue;
            }
            name_at += 1;
        }
        for tag in TAGS {
            let end = name_at + tag.len();
            let Some(name) = bytes.get(name_at..end) else {
                continue;
            };
            if !name.eq_ignore_ascii_case(tag.as_bytes()) {
                continue;
            }
            match bytes.get(end) {
                Some(b'>') => return Some((at, end + 1 - at)),
                Some(b' ' | b'\t' | b'\n') if !closing => {
                    if let Some(close) = text[end..].find('>') {
                        return Some((at, end + close + 1 - at));
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// The text without fenced blocks whose info string names reasoning.
fn strip_fences(text: Cow<'_, str>) -> Cow<'_, str> {
    let mut changed = false;
    let mut rest: &str = &text;
    let mut kept = String::new();
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let line_end = after.find('\n').unwrap_or(after.len());
        let info = after[..line_end].trim();
        let reasoning = FENCES.iter().any(|f| info.eq_ignore_ascii_case(f));
        let body = &after[line_end.min(after.len())..];
        let close = body.find("```").map(|c| c + 3);
        if reasoning {
            kept.push_str(&rest[..open]);
            changed = true;
            rest = match close {
                Some(c) => &body[c..],
                None => "",
            };
        } else {
            let end = open + 3 + line_end + close.unwrap_or(body.len());
            kept.push_str(&rest[..end.min(rest.len())]);
            rest = &rest[end.min(rest.len())..];
        }
    }
    if changed {
        kept.push_str(rest);
        Cow::Owned(kept)
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_open_and_orphan_blocks_are_removed() {
        assert_eq!(without_reasoning("<think>a {\"x\":1}</think>B"), "B");
        assert_eq!(
            without_reasoning("A <THINKING type=\"draft\">x</Thinking> B <thought>y</thought>"),
            "A  B "
        );
        assert_eq!(without_reasoning("A <think>never closed {\"x\":"), "A ");
        assert_eq!(
            without_reasoning("drafts {\"x\":1}</think>\n{\"x\":2}"),
            "\n{\"x\":2}"
        );
        assert_eq!(without_reasoning("a < b <thinker>"), "a < b <thinker>");
        assert_eq!(
            without_reasoning("```thinking\n{\"x\":1}\n```\n```json\n{\"x\":2}\n```"),
            "\n```json\n{\"x\":2}\n```"
        );
        assert_eq!(
            without_reasoning(
                "<|channel|>analysis<|message|>{\"x\":1}<|end|><|start|>assistant<|channel|>final<|message|>{\"x\":2}<|return|>"
            ),
            "{\"x\":2}"
        );
        assert!(matches!(
            without_reasoning("plain {\"x\":1}"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn open_reasoning_is_told_from_closed() {
        assert!(reasoning_open("<think>still going {\"x\""));
        assert!(reasoning_open("<think>a</think> b <thinking>c"));
        assert!(!reasoning_open("<think>a</think>{\"x\":"));
        assert!(!reasoning_open("{\"x\": 1}"));
    }
}
