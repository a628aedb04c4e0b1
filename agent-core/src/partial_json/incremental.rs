//! Incremental lenient parsing of a JSON document that arrives in pieces: the value
//! [`parse_partial`] gives for the text so far, kept up to date piece by piece, so
//! that the work per piece is proportional to the piece (times the nesting depth), not
//! to the text before it.
//!
//! The parser keeps its lexer state across pieces (the open containers, whether it is
//! in a string and in which escape, a number or literal not yet ended, a key not yet
//! closed) and the value tree itself, with the path to the open node. What a piece adds
//! is appended to the tree in place: a string's new characters to the string, a new
//! member to its object, a new item to its array.
//!
//! The leniency is [`parse_partial`]'s, exactly: an open string is in the value as far
//! as it goes (a half-written escape left out); open objects and arrays are in it; a
//! member whose value has not started, a half-written key, a number that is not a
//! number yet (`-`, `1.`, `1e`) or a half-written literal (`tru`) is left out; a string
//! that stops right after the first half of a surrogate pair (`"\ud83d`) is left out
//! too, since it cannot be closed into valid JSON.
//!
//! **Poisoned state.** Text that cannot be the beginning of a JSON object or array (a
//! syntax error, a root that is not `{` or `[`, text after the root closed, a control
//! character in a string, a lone surrogate, a number out of `f64` range, nesting deeper
//! than serde_json's limit) or that this parser does not follow (a key repeated in one
//! object) poisons it: from then on [`IncrementalJson::value`] is
//! [`parse_partial`] of the whole text received, worked out at each call (the old,
//! whole-text cost), so the answer is the same in every case.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::whole::parse_partial;
use number::NumState;

mod number;

/// serde_json's recursion limit: a document nested this deep does not parse.
const MAX_DEPTH: usize = 128;

/// A JSON document received in pieces ([`push`](Self::push)), parsed as it arrives;
/// [`value`](Self::value) is what [`parse_partial`] gives for the text so far.
#[derive(Debug, Default)]
pub(crate) struct IncrementalJson {
    /// Everything pushed, for the poisoned state.
    text: String,
    /// The value so far (`None` until the root opens).
    root: Option<Value>,
    /// The open containers, the root first.
    frames: Vec<Frame>,
    /// The token being read.
    lex: Lex,
    /// The root container has closed.
    done: bool,
    /// The text is not (the beginning of) JSON this parser follows.
    poisoned: bool,
    /// The tree changed since [`mark_seen`](Self::mark_seen) other than through the
    /// value being read (whose change is told by `seen`).
    changed: bool,
    /// What the value being read looked like at the last `mark_seen` (absent when it
    /// began after it).
    seen: Sig,
    /// A string value taken out of the tree while it ends in a lone high surrogate.
    held: String,
}

/// An open object or array.
#[derive(Debug)]
struct Frame {
    object: bool,
    expect: Expect,
    /// In an object: the key of the member being read (or last read).
    key: String,
}

/// What an open container expects next (outside a token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Right after `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object.
    Key,
    /// After a key.
    Colon,
    /// After `:`, or after `,` in an array.
    Value,
    /// Right after `[`: a value or `]`.
    ValueOrClose,
    /// After a value.
    CommaOrClose,
}

/// The token being read.
#[derive(Debug, Default)]
enum Lex {
    /// None: between tokens.
    #[default]
    Between,
    /// A key, read into the innermost frame's `key`.
    Key(Esc),
    /// A string value: in the tree (`present`) or held out of it; `len` bytes so far.
    Str { esc: Esc, present: bool, len: usize },
    /// A number: its text, its grammar state, and its value when it is one.
    Num {
        text: String,
        state: NumState,
        value: Option<Value>,
    },
    /// A literal (`true`, `false`, `null`): `got` bytes of it read.
    Lit { word: &'static [u8], got: usize },
}

/// Where a string is in an escape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Esc {
    /// Not in one.
    #[default]
    None,
    /// After `\`.
    Backslash,
    /// After `\u` and `got` hex digits.
    Hex { code: u32, got: u8 },
    /// After a whole high surrogate (`\ud83d`): a low one must follow.
    High(u32),
    /// After a high surrogate and `\`.
    HighBackslash(u32),
    /// After a high surrogate, `\u` and `got` hex digits.
    HighHex { high: u32, code: u32, got: u8 },
}

/// What the value being read looks like, to tell whether it changed.
#[derive(Clone, Debug, Default, PartialEq)]
enum Sig {
    /// Not in the tree (or no value being read).
    #[default]
    Absent,
    /// A string of this many bytes (strings only grow while read).
    Str(usize),
    /// A number or literal.
    Scalar(Value),
}

/// The container the innermost frame stands for.
fn innermost<'a>(root: &'a mut Option<Value>, frames: &[Frame]) -> Option<&'a mut Value> {
    let (_, outer) = frames.split_last()?;
    let mut node = root.as_mut()?;
    for frame in outer {
        node = match node {
            Value::Object(map) => map.get_mut(&frame.key)?,
            Value::Array(items) => items.last_mut()?,
            _ => return None,
        };
    }
    Some(node)
}

impl IncrementalJson {
    /// An empty document.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Whether the parser fell back to whole-text parsing (see the module docs).
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// What [`parse_partial`] gives for the text pushed so far: the tree (borrowed),
    /// or, once poisoned, `parse_partial` of the whole text (owned).
    pub(crate) fn value(&self) -> Option<Cow<'_, Value>> {
        if self.poisoned {
            return parse_partial(&self.text).map(Cow::Owned);
        }
        self.root.as_ref().map(Cow::Borrowed)
    }

    /// Whether the value changed since the last [`mark_seen`](Self::mark_seen) (or
    /// since the start). Exact: a value that changed and came back (`1.5` to `1.50`)
    /// has not changed. Always `true` once poisoned (the parser no longer knows).
    pub(crate) fn changed(&self) -> bool {
        self.poisoned || self.changed || self.sig() != self.seen
    }

    /// The value as it is now has been seen: [`changed`](Self::changed) is `false`
    /// until it changes again.
    pub(crate) fn mark_seen(&mut self) {
        self.changed = false;
        self.seen = self.sig();
    }

    /// Parses the next piece of the document.
    pub(crate) fn push(&mut self, piece: &str) {
        crate::llm::push_piece(&mut self.text, piece);
        if self.poisoned {
            return;
        }
        if self.feed(piece).is_none() {
            self.poison();
        }
    }

    fn poison(&mut self) {
        self.poisoned = true;
        self.root = None;
        self.frames.clear();
        self.held.clear();
        self.lex = Lex::Between;
    }

    /// The current value being read, as a [`Sig`].
    fn sig(&self) -> Sig {
        match &self.lex {
            Lex::Str {
                present: true, len, ..
            } => Sig::Str(*len),
            Lex::Num {
                value: Some(value), ..
            } => Sig::Scalar(value.clone()),
            _ => Sig::Absent,
        }
    }

    /// Ends the value being read: its change since the last `mark_seen` is kept in
    /// `changed`.
    fn end_value(&mut self) -> Option<()> {
        if self.sig() != self.seen {
            self.changed = true;
        }
        self.seen = Sig::Absent;
        self.lex = Lex::Between;
        self.frames.last_mut()?.expect = Expect::CommaOrClose;
        Some(())
    }

    /// Puts `value` in the innermost container as its member being read.
    fn insert(&mut self, value: Value) -> Option<()> {
        let Some(frame) = self.frames.last() else {
            // The root.
            if self.root.is_some() {
                return None;
            }
            self.root = Some(value);
            return Some(());
        };
        let key = frame.object.then(|| frame.key.clone());
        match (innermost(&mut self.root, &self.frames)?, key) {
            (Value::Object(map), Some(key)) => {
                map.insert(key, value);
            }
            (Value::Array(items), None) => items.push(value),
            _ => return None,
        }
        Some(())
    }

    /// The innermost container's member being read.
    fn current(&mut self) -> Option<&mut Value> {
        let frame = self.frames.last()?;
        match innermost(&mut self.root, &self.frames)? {
            Value::Object(map) => map.get_mut(&frame.key),
            Value::Array(items) => items.last_mut(),
            _ => None,
        }
    }

    /// Takes the innermost container's member being read out of the tree.
    fn remove(&mut self) -> Option<Value> {
        let frame = self.frames.last()?;
        match innermost(&mut self.root, &self.frames)? {
            // The last member: removing it keeps the others' order.
            Value::Object(map) => map.remove(&frame.key),
            Value::Array(items) => items.pop(),
            _ => None,
        }
    }

    /// Appends to the string being read (a key, or a value in the tree or held).
    fn append(&mut self, s: &str) -> Option<()> {
        if s.is_empty() {
            return Some(());
        }
        match self.lex {
            Lex::Key(_) => self.frames.last_mut()?.key.push_str(s),
            Lex::Str {
                present: true,
                ref mut len,
                ..
            } => {
                *len += s.len();
                match self.current()? {
                    Value::String(string) => crate::llm::push_piece(string, s),
                    _ => return None,
                }
            }
            Lex::Str { present: false, .. } => self.held.push_str(s),
            _ => return None,
        }
        Some(())
    }

    fn append_char(&mut self, c: char) -> Option<()> {
        let mut buf = [0; 4];
        self.append(c.encode_utf8(&mut buf))
    }

    fn set_esc(&mut self, new: Esc) {
        match &mut self.lex {
            Lex::Key(esc) | Lex::Str { esc, .. } => *esc = new,
            _ => {}
        }
    }

    /// Handles one byte of an escape (`esc` is not `Esc::None`).
    fn escape_byte(&mut self, esc: Esc, b: u8) -> Option<()> {
        let hex = |b: u8| char::from(b).to_digit(16);
        match esc {
            Esc::None => return None,
            Esc::Backslash => {
                let c = match b {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        self.set_esc(Esc::Hex { code: 0, got: 0 });
                        return Some(());
                    }
                    _ => return None,
                };
                self.set_esc(Esc::None);
                self.append_char(c)?;
            }
            Esc::Hex { code, got } => {
                let code = code << 4 | hex(b)?;
                if got < 3 {
                    self.set_esc(Esc::Hex { code, got: got + 1 });
                    return Some(());
                }
                match code {
                    0xD800..=0xDBFF => {
                        // Not valid JSON until its low half comes: out of the tree.
                        self.set_esc(Esc::High(code));
                        if let Lex::Str { present, .. } = &mut self.lex {
                            *present = false;
                            let held = match self.remove()? {
                                Value::String(s) => s,
                                _ => return None,
                            };
                            self.held = held;
                        }
                    }
                    0xDC00..=0xDFFF => return None,
                    _ => {
                        self.set_esc(Esc::None);
                        self.append_char(char::from_u32(code)?)?;
                    }
                }
            }
            Esc::High(high) if b == b'\\' => self.set_esc(Esc::HighBackslash(high)),
            Esc::HighBackslash(high) if b == b'u' => self.set_esc(Esc::HighHex {
                high,
                code: 0,
                got: 0,
            }),
            Esc::HighHex { high, code, got } => {
                let code = code << 4 | hex(b)?;
                if got < 3 {
                    self.set_esc(Esc::HighHex {
                        high,
                        code,
                        got: got + 1,
                    });
                    return Some(());
                }
                if !(0xDC00..=0xDFFF).contains(&code) {
                    return None;
                }
                let c = char::from_u32(0x1_0000 + ((high - 0xD800) << 10 | (code - 0xDC00)))?;
                self.set_esc(Esc::None);
                if let Lex::Str { present, .. } = &mut self.lex {
                    // Back in the tree, whole.
                    *present = true;
                    let mut held = std::mem::take(&mut self.held);
                    held.push_str(c.encode_utf8(&mut [0; 4]));
                    self.insert(Value::String(held))?;
                    if let Lex::Str { len, .. } = &mut self.lex {
                        *len += c.len_utf8();
                    }
                } else {
                    self.append_char(c)?;
                }
            }
            Esc::High(_) | Esc::HighBackslash(_) => return None,
        }
        Some(())
    }

    /// Brings the tree in line with the number being read (in it when it is one).
    fn sync_number(&mut self) -> Option<()> {
        let Lex::Num { text, state, value } = &mut self.lex else {
            return Some(());
        };
        let new = if state.complete() {
            serde_json::from_str::<Value>(text).ok()
        } else {
            None
        };
        if *value == new {
            return Some(());
        }
        let old = std::mem::replace(value, new.clone());
        match (old, new) {
            (None, Some(v)) => self.insert(v),
            (Some(_), Some(v)) => {
                *self.current()? = v;
                Some(())
            }
            (Some(_), None) => self.remove().map(drop),
            (None, None) => Some(()),
        }
    }

    /// Parses `piece`; `None` when the text is not JSON this parser follows.
    fn feed(&mut self, piece: &str) -> Option<()> {
        let bytes = piece.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match &mut self.lex {
                Lex::Key(esc) | Lex::Str { esc, .. } => {
                    let esc = *esc;
                    if esc != Esc::None {
                        self.escape_byte(esc, bytes[i])?;
                        i += 1;
                        continue;
                    }
                    // A run of plain characters, appended at once.
                    let run = bytes[i..]
                        .iter()
                        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                        .map_or(bytes.len(), |at| i + at);
                    self.append(piece.get(i..run)?)?;
                    i = run;
                    match bytes.get(i) {
                        None => {}
                        Some(b'"') => {
                            i += 1;
                            self.end_string()?;
                        }
                        Some(b'\\') => {
                            i += 1;
                            self.set_esc(Esc::Backslash);
                        }
                        Some(_) => return None,
                    }
                }
                Lex::Num { text, state, .. } => {
                    let start = i;
                    while let Some(&b) = bytes.get(i) {
                        if !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                            break;
                        }
                        *state = state.next(b)?;
                        i += 1;
                    }
                    text.push_str(piece.get(start..i)?);
                    let ended = i < bytes.len();
                    self.sync_number()?;
                    if ended {
                        // A byte that is not part of a number ends it.
                        match &self.lex {
                            Lex::Num { value: Some(_), .. } => self.end_value()?,
                            _ => return None,
                        }
                    }
                }
                Lex::Lit { word, got } => {
                    if bytes[i] != *word.get(*got)? {
                        return None;
                    }
                    *got += 1;
                    i += 1;
                    if *got == word.len() {
                        let value = match word.first() {
                            Some(b't') => Value::Bool(true),
                            Some(b'f') => Value::Bool(false),
                            _ => Value::Null,
                        };
                        self.lex = Lex::Between;
                        self.insert(value)?;
                        self.changed = true;
                        self.frames.last_mut()?.expect = Expect::CommaOrClose;
                    }
                }
                Lex::Between => {
                    i = self.between(piece, i)?;
                }
            }
        }
        Some(())
    }

    /// Handles the character at `i` between tokens; the index after it.
    fn between(&mut self, piece: &str, i: usize) -> Option<usize> {
        let bytes = piece.as_bytes();
        let b = bytes[i];
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            return Some(i + 1);
        }
        if self.done {
            return None;
        }
        let Some(frame) = self.frames.last_mut() else {
            // Before the root: `parse_partial` trims any whitespace.
            let c = piece.get(i..)?.chars().next()?;
            if c.is_whitespace() {
                return Some(i + c.len_utf8());
            }
            if b != b'{' && b != b'[' {
                return None;
            }
            self.open(b == b'{')?;
            return Some(i + 1);
        };
        match (frame.expect, b) {
            (Expect::KeyOrClose | Expect::Key, b'"') => {
                frame.key.clear();
                self.lex = Lex::Key(Esc::None);
            }
            (Expect::Colon, b':') => frame.expect = Expect::Value,
            (Expect::CommaOrClose, b',') => {
                frame.expect = if frame.object {
                    Expect::Key
                } else {
                    Expect::Value
                };
            }
            (Expect::KeyOrClose, b'}') | (Expect::ValueOrClose, b']') => self.close()?,
            (Expect::CommaOrClose, b'}' | b']') => {
                if frame.object != (b == b'}') {
                    return None;
                }
                self.close()?;
            }
            (Expect::Value | Expect::ValueOrClose, _) => self.start_value(b)?,
            _ => return None,
        }
        Some(i + 1)
    }

    /// Starts a value with byte `b`.
    fn start_value(&mut self, b: u8) -> Option<()> {
        self.seen = Sig::Absent;
        match b {
            b'{' | b'[' => self.open(b == b'{')?,
            b'"' => {
                self.insert(Value::String(String::new()))?;
                self.lex = Lex::Str {
                    esc: Esc::None,
                    present: true,
                    len: 0,
                };
            }
            b'-' | b'0'..=b'9' => {
                let state = match b {
                    b'-' => NumState::Minus,
                    b'0' => NumState::Zero,
                    _ => NumState::Int,
                };
                self.lex = Lex::Num {
                    text: String::from(char::from(b)),
                    state,
                    value: None,
                };
                self.sync_number()?;
            }
            b't' | b'f' | b'n' => {
                let word: &'static [u8] = match b {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                self.lex = Lex::Lit { word, got: 1 };
            }
            _ => return None,
        }
        Some(())
    }

    /// Opens an object or an array as the member being read (or the root).
    fn open(&mut self, object: bool) -> Option<()> {
        if self.frames.len() + 1 >= MAX_DEPTH {
            return None;
        }
        let value = if object {
            Value::Object(Map::new())
        } else {
            Value::Array(Vec::new())
        };
        self.insert(value)?;
        self.changed = true;
        self.frames.push(Frame {
            object,
            expect: if object {
                Expect::KeyOrClose
            } else {
                Expect::ValueOrClose
            },
            key: String::new(),
        });
        Some(())
    }

    /// Closes the innermost container.
    fn close(&mut self) -> Option<()> {
        self.frames.pop()?;
        match self.frames.last_mut() {
            Some(parent) => parent.expect = Expect::CommaOrClose,
            None => self.done = true,
        }
        Some(())
    }

    /// The closing quote of a key or a string value.
    fn end_string(&mut self) -> Option<()> {
        match self.lex {
            Lex::Key(_) => {
                self.lex = Lex::Between;
                // A repeated key would replace a member the fallback of
                // `parse_partial` may still show: not followed.
                let frame = self.frames.last()?;
                match innermost(&mut self.root, &self.frames)? {
                    Value::Object(map) if !map.contains_key(&frame.key) => {}
                    _ => return None,
                }
                self.frames.last_mut()?.expect = Expect::Colon;
                Some(())
            }
            Lex::Str { present: true, .. } => self.end_value(),
            _ => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
