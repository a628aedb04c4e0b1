//! What one file says, read from its code: the modules it declares, the names it defines
//! and binds, and every path in it.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

fn ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The tokens of a piece of code, without literals and block comments. `$crate` is the
/// identifier `crate`.
fn lex(code: &str) -> Vec<Tok> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '*' {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && at(i + 1) == '/') {
                i += 1;
            }
            i += 2;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3; // a char literal
            } else {
                i += 1; // a lifetime: its name is skipped as an identifier
                while ident_char(at(i)) {
                    i += 1;
                }
            }
        } else if c == '$' && chars[i + 1..].starts_with(&['c', 'r', 'a', 't', 'e']) {
            out.push(Tok::Ident("crate".to_owned()));
            i += 6;
        } else if ident_start(c) {
            let start = i;
            while ident_char(at(i)) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // Raw strings (`r"..."`, `br#"..."#`); `r#name` is a raw identifier.
            if (word == "r" || word == "br")
                && (at(i) == '"' || (at(i) == '#' && !ident_start(at(i + 1))))
            {
                let mut hashes = 0;
                while at(i) == '#' {
                    hashes += 1;
                    i += 1;
                }
                i += 1;
                loop {
                    if i >= chars.len() {
                        break;
                    }
                    if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
            } else if word == "r" && at(i) == '#' {
                i += 1; // `r#type`: the name follows
            } else if word == "b" && at(i) == '\'' {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            } else {
                out.push(Tok::Ident(word));
            }
        } else if c.is_ascii_digit() {
            while ident_char(at(i)) {
                i += 1;
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push(Tok::Sep);
            i += 2;
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// One leaf of a path or `use` tree: the full path and, in a `use`, the name it binds
/// (`None` for a glob).
#[derive(Debug)]
struct Leaf {
    path: Vec<String>,
    binds: Option<String>,
}

/// Parses a path or a `use` tree at `toks[i]` under `prefix`; returns the index after it.
fn parse_tree(toks: &[Tok], mut i: usize, prefix: Vec<String>, out: &mut Vec<Leaf>) -> usize {
    let mut path = prefix;
    loop {
        match toks.get(i) {
            Some(Tok::Sep) => i += 1,
            Some(Tok::Ident(s)) => {
                if s == "self" && !path.is_empty() && toks.get(i + 1) != Some(&Tok::Sep) {
                    i += 1; // `{self, ..}`: the prefix itself
                } else {
                    path.push(s.clone());
                    i += 1;
                    if toks.get(i) == Some(&Tok::Sep) {
                        i += 1;
                        continue;
                    }
                }
                let mut binds = path.last().cloned();
                if toks.get(i) == Some(&Tok::Ident("as".to_owned()))
                    && let Some(Tok::Ident(name)) = toks.get(i + 1)
                {
                    binds = Some(name.clone());
                    i += 2;
                }
                out.push(Leaf { path, binds });
                return i;
            }
            Some(Tok::Punct('*')) => {
                out.push(Leaf { path, binds: None });
                return i + 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match toks.get(i) {
                        None => return i,
                        Some(Tok::Punct('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        Some(_) => {
                            let next = parse_tree(toks, i, path.clone(), out);
                            i = if next == i { i + 1 } else { next };
                        }
                    }
                }
            }
            _ => {
                // `Vec::<u8>`, `<T as X>::`: the path ends here.
                if !path.is_empty() {
                    out.push(Leaf {
                        binds: path.last().cloned(),
                        path,
                    });
                }
                return i;
            }
        }
    }
}

/// What one file says: the modules it declares, the names it defines and binds, and every
/// path in its code.
#[derive(Debug, Default)]
pub(crate) struct FileScan {
    pub(crate) declared: Vec<String>,
    pub(crate) items: BTreeSet<String>,
    pub(crate) uses: BTreeMap<String, Vec<String>>,
    pub(crate) globs: Vec<Vec<String>>,
    pub(crate) paths: Vec<Vec<String>>,
}

const ITEM_KEYWORDS: [&str; 8] = [
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

pub(crate) fn scan(code: &str) -> FileScan {
    let toks = lex(code);
    let mut out = FileScan::default();
    let mut depth = 0usize;
    // The brace depths inside inline `mod x { .. }` items.
    let mut inline: Vec<usize> = Vec::new();
    let mut i = 0;
    let ident = |i: usize| match toks.get(i) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(word) if word == "mod" => {
                if let Some(name) = ident(i + 1) {
                    match toks.get(i + 2) {
                        Some(Tok::Punct(';')) if inline.is_empty() => {
                            out.declared.push(name.to_owned());
                        }
                        Some(Tok::Punct('{')) => {
                            out.items.insert(name.to_owned());
                            inline.push(depth + 1);
                        }
                        _ => {}
                    }
                }
                i += 2;
            }
            Tok::Ident(word) if ITEM_KEYWORDS.contains(&word.as_str()) => {
                if let Some(name) = ident(i + 1) {
                    out.items.insert(name.to_owned());
                }
                i += 1;
            }
            Tok::Ident(word) if word == "macro_rules" => {
                if let (Some(Tok::Punct('!')), Some(name)) = (toks.get(i + 1), ident(i + 2)) {
                    out.items.insert(name.to_owned());
                }
                i += 3;
            }
            Tok::Ident(word)
                if word == "use"
                    || (toks.get(i + 1) == Some(&Tok::Sep)
                        && (i == 0 || toks[i - 1] != Tok::Sep)) =>
            {
                let is_use = word == "use";
                let mut leaves = Vec::new();
                let start = if is_use { i + 1 } else { i };
                let next = parse_tree(&toks, start, Vec::new(), &mut leaves);
                i = next.max(i + 1);
                for leaf in leaves {
                    let Some(path) = leave_inline(leaf.path, inline.len()) else {
                        continue;
                    };
                    if is_use && inline.is_empty() {
                        match &leaf.binds {
                            Some(name) if name != "_" => {
                                out.uses.insert(name.clone(), path.clone());
                            }
                            Some(_) => {}
                            None => out.globs.push(path.clone()),
                        }
                    }
                    out.paths.push(path);
                }
            }
            Tok::Sep => {
                // `::std::..`, `<T as X>::..`: not a path into this crate; skip its names.
                i += 1;
                while matches!(toks.get(i), Some(Tok::Ident(_) | Tok::Sep)) {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// A path written inside `inline` nested inline modules, as seen from the file's module:
/// the first `super`s (and `self`) stay in the file, so the path is dropped.
fn leave_inline(mut path: Vec<String>, inline: usize) -> Option<Vec<String>> {
    if inline == 0 {
        return Some(path);
    }
    let supers = path.iter().take_while(|s| *s == "super").count();
    if path.first().is_some_and(|s| s == "self") || (supers > 0 && supers <= inline) {
        return None;
    }
    if supers > inline {
        path.drain(..inline);
    }
    Some(path)
}
