//! The layers of `docs/architecture.md` hold in the code: no module of `agent-core/src`
//! imports a layer above its own, every module is placed in a layer, and no source file
//! outgrows the size the plan allows.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The longest a file of `src/` may be, in lines.
const MAX_LINES: usize = 650;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// module name -> (layer number, layer name), from the table in docs/architecture.md.
fn layers() -> BTreeMap<String, (u32, String)> {
    let doc = fs::read_to_string(root().join("../docs/architecture.md")).unwrap();
    let mut out = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            continue;
        }
        let Some((number, name)) = cells[1].split_once(' ') else {
            continue;
        };
        let Ok(number) = number.parse::<u32>() else {
            continue;
        };
        for module in cells[2].split(',') {
            let module = module.trim().trim_matches('`');
            assert!(!module.is_empty(), "empty module cell in: {line}");
            let previous = out.insert(module.to_owned(), (number, name.to_owned()));
            assert!(previous.is_none(), "{module} is in two layers");
        }
    }
    assert!(
        out.len() > 10,
        "the layer table was not found in docs/architecture.md"
    );
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments, string literals' contents, and `#[cfg(test)]`
/// items (unit tests may use any layer).
fn code_of(source: &str) -> String {
    let mut code = String::new();
    let mut skip_depth: Option<i64> = None;
    let mut depth: i64 = 0;
    let mut pending_test = false;
    for line in source.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        let line = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            pending_test = true;
            continue;
        }
        let opens = line.matches('{').count() as i64;
        let closes = line.matches('}').count() as i64;
        if pending_test {
            pending_test = false;
            if opens > closes {
                skip_depth = Some(depth);
            } else {
                // A one-line test item (`mod tests;`, `use ..;`).
                continue;
            }
        }
        depth += opens - closes;
        if let Some(at) = skip_depth {
            if depth <= at {
                skip_depth = None;
            }
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// Every top-level module a piece of code names through `crate::`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `agent_core::..`, `$crate::..`-like names
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::B, c}`: the first segment of each top-level entry.
            let mut level = 0;
            let mut entry = String::new();
            let mut first = true;
            for c in group.chars() {
                match c {
                    '{' => level += 1,
                    '}' if level == 0 => break,
                    '}' => level -= 1,
                    ',' if level == 0 => {
                        first = true;
                        continue;
                    }
                    _ => {}
                }
                if level == 0 && first {
                    if c.is_alphanumeric() || c == '_' {
                        entry.push(c);
                    } else if !entry.is_empty() {
                        out.insert(std::mem::take(&mut entry));
                        first = false;
                    }
                }
            }
            if !entry.is_empty() {
                out.insert(entry);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.insert(name);
        }
    }
    out
}

/// The names the root re-exports (`pub use module::{A, b}`), and the facade modules it
/// declares inline (`pub mod eval { pub use crate::grader::..; }`), with the layer they
/// come from: `crate::run_agent` is the runner's, `crate::eval::..` the evaluation's.
fn root_names(layers: &BTreeMap<String, (u32, String)>) -> BTreeMap<String, (u32, String)> {
    let lib = code_of(&fs::read_to_string(root().join("src/lib.rs")).unwrap());
    let mut out = BTreeMap::new();
    let mut rest = lib.as_str();
    while let Some(i) = rest.find("pub use ") {
        rest = &rest[i + "pub use ".len()..];
        let end = rest.find(';').unwrap_or(rest.len());
        let statement = &rest[..end];
        let Some((module, names)) = statement.split_once("::") else {
            continue;
        };
        let Some(layer) = layers.get(module.trim()) else {
            continue;
        };
        let names = names.trim().trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            // `a::B` gives `B`; `X as Y` gives `Y`; `self` is the module itself.
            let name = name.rsplit(" as ").next().unwrap_or(name);
            let name = name.rsplit("::").next().unwrap_or(name).trim();
            if !name.is_empty() && name != "self" {
                out.insert(name.to_owned(), layer.clone());
            }
        }
    }
    // Facades: each takes the highest layer it re-exports from.
    let mut rest = lib.as_str();
    while let Some(i) = rest.find("pub mod ") {
        rest = &rest[i + "pub mod ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest[name.len()..].trim_start();
        if !after.starts_with('{') {
            continue;
        }
        let body_end = after.find("\n}").unwrap_or(after.len());
        let body = &after[..body_end];
        let highest = crate_paths(body)
            .iter()
            .filter_map(|used| layers.get(used).or_else(|| out.get(used)))
            .max_by_key(|(n, _)| *n)
            .cloned();
        if let Some(layer) = highest {
            out.insert(name, layer);
        }
    }
    out
}

/// The items of the crate root a file names through `super::` chains that climb to the
/// root (`super::super::stores::ms` in `src/runner/checkpoint.rs`).
fn root_paths_through_super(code: &str, depth: usize) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("super::") {
        let before = rest[..i].chars().last();
        rest = &rest[i..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            rest = &rest["super::".len()..];
            continue;
        }
        let mut climbs = 0;
        while let Some(next) = rest.strip_prefix("super::") {
            climbs += 1;
            rest = next;
        }
        if climbs >= depth {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let layers = layers();
    let reexported = root_names(&layers);
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    let mut unplaced = BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" {
            continue; // the root sees every layer
        }
        let Some(&(own, ref own_name)) = layers.get(&top) else {
            unplaced.insert(top);
            continue;
        };
        let code = code_of(&fs::read_to_string(file).unwrap());
        // How many `super::` reach the root: `runner/mod.rs` is one level down,
        // `runner/checkpoint.rs` two.
        let mut depth = relative.components().count();
        if relative.file_name().is_some_and(|f| f == "mod.rs") {
            depth -= 1;
        }
        let used_paths = crate_paths(&code)
            .into_iter()
            .chain(root_paths_through_super(&code, depth));
        for used in used_paths {
            if used == top {
                continue;
            }
            // A module, else a name the root re-exports from one (or a facade); names
            // defined at the root itself (macros) are not layers.
            let Some(&(layer, ref name)) = layers.get(&used).or_else(|| reexported.get(&used))
            else {
                continue;
            };
            if layer > own {
                violations.push(format!(
                    "{} (layer {own} {own_name}) imports `{used}` (layer {layer} {name})",
                    relative.display()
                ));
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules not placed in docs/architecture.md's layer table: {unplaced:?}"
    );
    assert!(
        violations.is_empty(),
        "upward imports:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_module_the_root_declares_is_in_the_table() {
    let layers = layers();
    let lib = fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let declared: BTreeSet<String> = lib
        .lines()
        .map(str::trim)
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))
        })
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_owned)
        .collect();
    assert!(declared.contains("runner"), "{declared:?}");
    let missing: Vec<_> = declared
        .iter()
        .filter(|m| !layers.contains_key(*m))
        .collect();
    assert!(
        missing.is_empty(),
        "declared but not in the table: {missing:?}"
    );
    let stale: Vec<_> = layers.keys().filter(|m| !declared.contains(*m)).collect();
    assert!(stale.is_empty(), "in the table but not declared: {stale:?}");
}

#[test]
fn no_source_file_outgrows_the_plan() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let too_long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = fs::read_to_string(f).unwrap().lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(
        too_long.is_empty(),
        "files over {MAX_LINES} lines (split them by concern): {too_long:?}"
    );
}

#[test]
fn the_scanner_sees_upward_paths() {
    // The checks above are only as good as the scanner: it must find each form of path.
    let code = code_of(
        "use crate::config::AgentConfig;\n\
         use crate::{runner::run, stream::{A, B}, error};\n\
         // use crate::sweep::Commented;\n\
         let x = crate::batch::run();\n\
         #[cfg(test)]\nmod tests {\n    use crate::grader::G;\n}\n\
         let y = agent_core::turns::T;\n",
    );
    let paths = crate_paths(&code);
    let want: BTreeSet<String> = ["config", "runner", "stream", "error", "batch"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(paths, want);
}

#[test]
fn root_re_exports_and_super_chains_resolve_to_their_layers() {
    let layers = layers();
    let names = root_names(&layers);
    assert_eq!(names.get("run_agent").map(|l| l.1.as_str()), Some("runner"));
    assert_eq!(
        names.get("AgentConfig").map(|l| l.1.as_str()),
        Some("config")
    );
    assert_eq!(names.get("eval").map(|l| l.1.as_str()), Some("evaluation"));
    assert_eq!(names.get("prelude").map(|l| l.1.as_str()), Some("runner"));
    let code = "use super::super::stores::ms;\nuse super::Run;\nlet a = super::super::run_agent;";
    let at_depth_2: Vec<String> = root_paths_through_super(code, 2).into_iter().collect();
    assert_eq!(at_depth_2, ["run_agent", "stores"]);
    let at_depth_1: Vec<String> = root_paths_through_super(code, 1).into_iter().collect();
    assert_eq!(at_depth_1, ["Run", "run_agent", "stores"]);
}
