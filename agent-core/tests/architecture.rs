//! The layers of `docs/architecture.md` hold in the code: no module of `agent-core/src`
//! imports a layer above its own, every module is placed in a layer, no source file of the
//! workspace outgrows the size the plan allows, and no folder of any crate has a module
//! cycle (the rule is in `module_graph/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::module_graph;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use module_graph::{ModuleTree, Tangle};

/// The longest a file of `src/` may be, in lines.
const MAX_LINES: usize = 650;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn workspace() -> PathBuf {
    root().join("..")
}

/// The workspace's member crates (their folders), from its `Cargo.toml`.
fn members() -> Vec<String> {
    let manifest = fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("the workspace's members");
    let list = line.split_once('[').unwrap().1.split_once(']').unwrap().0;
    let members: Vec<String> = list
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    assert!(members.contains(&"agent-store".to_owned()), "{members:?}");
    members
}

/// A crate's sources, keyed by path relative to its folder (`/`-separated): every file
/// of `src/` and the files its manifest names for `[[bin]]` and `[[example]]` targets
/// (the examples crate's programs). The second value lists the crate roots among them
/// (`src/lib.rs`, `src/main.rs`, `src/bin/*`, the named targets).
fn crate_sources(member: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let dir = workspace().join(member);
    let mut files = Vec::new();
    rust_files(&dir.join("src"), &mut files);
    let mut roots = Vec::new();
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let mut section = "";
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if (section == "[[bin]]" || section == "[[example]]")
            && let Some(path) = line.strip_prefix("path")
        {
            let path = path
                .trim_start()
                .trim_start_matches('=')
                .trim()
                .trim_matches('"');
            roots.push(path.to_owned());
            let path = dir.join(path);
            if !files.contains(&path) {
                files.push(path);
            }
        }
    }
    let mut sources = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&dir).unwrap();
        let key = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        sources.insert(key, fs::read_to_string(&file).unwrap());
    }
    for key in sources.keys() {
        let parts: Vec<&str> = key.split('/').collect();
        let is_root = matches!(
            parts.as_slice(),
            ["src", "lib.rs" | "main.rs"] | ["src", "bin", _] | ["src", "bin", _, "main.rs"]
        );
        if is_root && !roots.contains(key) {
            roots.push(key.clone());
        }
    }
    roots.sort();
    (sources, roots)
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
    let mut too_long = Vec::new();
    let mut counted = 0;
    for member in members() {
        let (sources, _) = crate_sources(&member);
        for (file, text) in sources {
            counted += 1;
            let lines = text.lines().count();
            if lines > MAX_LINES {
                too_long.push(format!("{member}/{file} ({lines} lines)"));
            }
        }
    }
    assert!(counted > 100, "only {counted} source files found");
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
    assert_eq!(names.get("durable").map(|l| l.1.as_str()), Some("runner"));
    assert_eq!(names.get("prelude").map(|l| l.1.as_str()), Some("runner"));
    let code = "use super::super::stores::ms;\nuse super::Run;\nlet a = super::super::run_agent;";
    let at_depth_2: Vec<String> = root_paths_through_super(code, 2).into_iter().collect();
    assert_eq!(at_depth_2, ["run_agent", "stores"]);
    let at_depth_1: Vec<String> = root_paths_through_super(code, 1).into_iter().collect();
    assert_eq!(at_depth_1, ["Run", "run_agent", "stores"]);
}

/// The module cycles agent-core still has, each as its tangle: a folder, the modules of
/// it that all reach one another, and how many elementary cycles run among them. Each is
/// being taken apart; `no_folder_has_a_module_cycle` fails on a tangle not listed here,
/// on a listed tangle with more cycles than listed (a new cycle among its modules), and
/// on an entry that no longer occurs as written (a tangle that shrank is written anew,
/// one that is gone is deleted): the list only shrinks. No other crate has an entry.
const KNOWN_CYCLES: &[&str] = &[
    // builder.rs and mod.rs use each other (`AgentConfig::compile`, `AgentConfigBuilder::from_settings`); the children use both.
    "agent-core/src/config/: builder, checks, compaction, fallback, fingerprint, guardrails, handoff, mod.rs, params, stores, table (68 cycles)",
    // category.rs and text.rs use mod.rs's `AgentError` and `Ending`; mod.rs uses `Category` and the texts.
    "agent-core/src/error/: category, mod.rs, text (2 cycles)",
    // Each grader uses mod.rs's `Grade` and `RunGrader`; mod.rs re-exports the graders.
    "agent-core/src/eval/grader/: composite, ground_truth, heuristic, judge, mod.rs (5 cycles)",
    // error.rs and sink.rs use mod.rs's `TokenUsage`, `LlmResponse`; mod.rs re-exports them.
    "agent-core/src/llm/: error, mod.rs, sink (2 cycles)",
    // answer.rs uses mod.rs's `OutputSpec`; mod.rs uses the answer parser.
    "agent-core/src/output/: answer, mod.rs (1 cycles)",
    // table.rs builds mod.rs's `ModelPrice`; mod.rs uses `table::DEFAULT_TABLE`.
    "agent-core/src/pricing/: mod.rs, table (1 cycles)",
    // The adapters and glue use mod.rs's `ApiKey`, `ProviderOptions`; mod.rs re-exports the adapters.
    // vertex (Vertex AI) joined it as every adapter does: it uses `ProviderOptions`, the
    // glue and the Gemini and Anthropic adapters; mod.rs re-exports `VertexClient`.
    // batch (the provider batch APIs) joined it the same way: its HTTP calls use `http`
    // and `classify`, the OpenAI and Anthropic adapters implement its wire, mod.rs
    // re-exports `ProviderBatch`.
    "agent-core/src/providers/: anthropic, batch, bedrock, classify, embeddings, eventstream, gemini, glue, http, mod.rs, openai, routing, sse, vertex (369 cycles)",
    // wire.rs uses mod.rs's `clamp_temperature`; mod.rs uses wire, response and stream.
    "agent-core/src/providers/anthropic/: mod.rs, response, stream, wire (3 cycles)",
    // wire.rs uses mod.rs's `UNSIGNED_CALL`; mod.rs uses wire.
    "agent-core/src/providers/gemini/: mod.rs, wire (1 cycles)",
    // responses/ uses mod.rs's `AZURE_PROVIDER`, `azure_auth`, `OpenAiClient::DEFAULT_BASE_URL`; mod.rs re-exports its client.
    "agent-core/src/providers/openai/: mod.rs, responses (1 cycles)",
    // chunk.rs uses stream.rs's `ChunkAssembler`; stream.rs uses `chunk::read`.
    "agent-core/src/providers/openai/stream/: chunk, stream.rs (1 cycles)",
    // The store traits' files use mod.rs's `StoreFuture` (checkpoint.rs also `StoreError`); mod.rs re-exports the traits.
    "agent-core/src/store/: checkpoint, diff, feedback, memory, mod.rs, retrieval, trace (6 cycles)",
    // comparison.rs uses mod.rs's `Sample` and `Variant`; mod.rs builds the `Comparison`.
    "agent-core/src/eval/sweep/: comparison, mod.rs (1 cycles)",
];

/// The code of each of a crate's sources, comments and test code stripped.
fn stripped(sources: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    sources
        .iter()
        .map(|(file, text)| (file.clone(), code_of(text)))
        .collect()
}

/// What is wrong between the tangles found and an allow-list of them (`folder: modules
/// (N cycles)`): tangles not listed, listed tangles with more or fewer cycles, entries no
/// longer found.
fn allow_list_failures(tangles: &[Tangle], allowed: &[&str]) -> Vec<String> {
    // Entry: `folder: modules (N cycles)`; by `folder: modules`, the listed count.
    let mut known: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in allowed {
        let (key, count) = entry
            .strip_suffix(" cycles)")
            .and_then(|e| e.rsplit_once(" ("))
            .unwrap_or_else(|| panic!("`{entry}` is not `folder: modules (N cycles)`"));
        let count: usize = count.parse().unwrap();
        assert!(
            known.insert(key, count).is_none(),
            "`{key}` is listed twice"
        );
    }
    let mut failures = Vec::new();
    for tangle in tangles {
        let count = tangle.cycles.len();
        let listed = known.get(tangle.key.as_str()).copied();
        if listed == Some(count) {
            continue;
        }
        let shown = 5.min(count);
        let more = match count - shown {
            0 => String::new(),
            n => format!("\n    and {n} more cycles"),
        };
        let cycles = format!(
            "    {}{more}\n  its imports:\n    {}",
            tangle.cycles[..shown].join("\n    "),
            tangle.edges.join("\n    "),
        );
        failures.push(match listed {
            None => format!("module cycle in {}\n{cycles}", tangle.key),
            Some(n) if n < count => format!(
                "new module cycles among {}: KNOWN_CYCLES lists {n}, now {count}\n{cycles}",
                tangle.key
            ),
            Some(n) => format!(
                "KNOWN_CYCLES lists {n} cycles for `{}`, now {count}: write `{} ({count} cycles)`",
                tangle.key, tangle.key
            ),
        });
    }
    let found: BTreeSet<&str> = tangles.iter().map(|t| t.key.as_str()).collect();
    for entry in known.keys().filter(|k| !found.contains(*k)) {
        let folder = entry.split_once(": ").map_or(*entry, |(f, _)| f);
        let now: Vec<String> = tangles
            .iter()
            .filter(|t| t.key.starts_with(&format!("{folder}: ")))
            .map(|t| format!("{} ({} cycles)", t.key, t.cycles.len()))
            .collect();
        failures.push(if now.is_empty() {
            format!("KNOWN_CYCLES lists `{entry}`, which no longer occurs: delete it")
        } else {
            format!(
                "KNOWN_CYCLES lists `{entry}`, which no longer occurs as written: replace it \
                 with what is left of it among this folder's tangles, {now:?}"
            )
        });
    }
    failures
}

#[test]
fn no_folder_has_a_module_cycle() {
    let mut tangles = Vec::new();
    for member in members() {
        let (sources, roots) = crate_sources(&member);
        let code = stripped(&sources);
        for root in roots {
            tangles.extend(ModuleTree::load(&member, &code, &root).unwrap().tangles());
        }
    }
    let failures = allow_list_failures(&tangles, KNOWN_CYCLES);
    assert!(
        failures.is_empty(),
        "module cycles (the rule is in docs/architecture.md):\n{}",
        failures.join("\n")
    );
}

/// A crate in memory: (path, code) pairs, `src/lib.rs` its root.
fn demo(files: &[(&str, &str)]) -> ModuleTree {
    let files: BTreeMap<String, String> = files
        .iter()
        .map(|(path, text)| ((*path).to_owned(), code_of(text)))
        .collect();
    ModuleTree::load("demo", &files, "src/lib.rs").unwrap()
}

#[test]
fn the_cycle_check_finds_a_two_cycle() {
    let tree = demo(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "src/b.rs",
            "pub struct B;\npub fn make() -> crate::a::A { todo() }\n",
        ),
    ]);
    assert_eq!(tree.cycles(), ["demo/src/: a -> b -> a"]);
    let tangles = tree.tangles();
    assert_eq!(tangles.len(), 1);
    assert_eq!(tangles[0].key, "demo/src/: a, b");
    assert_eq!(
        tangles[0].edges,
        [
            "a -> b (src/a.rs: crate::b::B)",
            "b -> a (src/b.rs: crate::a::A)"
        ]
    );
}

#[test]
fn the_cycle_check_finds_a_three_cycle_through_each_form_of_path() {
    // `super::` between siblings, a `use` group, a child named from the parent's file.
    let tree = demo(&[
        ("src/lib.rs", "mod top;\n"),
        (
            "src/top/mod.rs",
            "mod a;\nmod b;\nmod c;\nuse a::A;\npub(crate) struct Shared;\n",
        ),
        ("src/top/a.rs", "pub struct A;\nfn f() { super::b::g(); }\n"),
        (
            "src/top/b.rs",
            "use super::{c::C, Shared};\npub fn g() {}\n",
        ),
        ("src/top/c.rs", "pub struct C;\n"),
    ]);
    assert_eq!(tree.cycles(), ["demo/src/top/: a -> b -> mod.rs -> a"]);
    // In order, with the parent's own items (`Shared`) as the node `mod.rs`.
    let tangles = tree.tangles();
    assert_eq!(tangles[0].key, "demo/src/top/: a, b, mod.rs");
    assert_eq!(tangles[0].cycles, ["a -> b -> mod.rs -> a"]);
}

#[test]
fn a_mod_declaration_alone_is_not_an_edge() {
    let parent_declares = [
        ("src/lib.rs", "pub mod a;\nmod b;\npub struct Root;\n"),
        (
            "src/a.rs",
            "use crate::Root;\nuse crate::b::B;\npub struct A;\n",
        ),
        ("src/b.rs", "pub struct B;\n"),
    ];
    assert_eq!(demo(&parent_declares).cycles(), Vec::<String>::new());
    // The same root importing from `a` makes the cycle.
    let mut parent_imports = parent_declares;
    parent_imports[0].1 = "pub mod a;\nmod b;\npub struct Root;\npub use a::A;\n";
    assert_eq!(
        demo(&parent_imports).cycles(),
        ["demo/src/: a -> lib.rs -> a"]
    );
}

#[test]
fn the_cycle_check_follows_re_exports_and_skips_tests_and_comments() {
    let tree = demo(&[
        (
            "src/lib.rs",
            "mod a;\nmod b;\nmod runner;\nmod stream;\npub use b::B;\n",
        ),
        // `crate::B` is b's (the root re-exports it): an edge a -> b, not a -> lib.rs.
        ("src/a.rs", "use crate::B;\npub struct A;\n"),
        (
            "src/b.rs",
            "pub struct B;\n// use crate::a::A;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n\
             const S: &str = \"crate::a::A\";\n",
        ),
        // A nested file's path counts in the folder holding both ends.
        ("src/runner/mod.rs", "mod turn;\n"),
        ("src/runner/turn.rs", "use crate::stream::Sink;\n"),
        (
            "src/stream.rs",
            "pub struct Sink;\nfn go() { crate::runner::run(); }\n",
        ),
    ]);
    assert_eq!(tree.cycles(), ["demo/src/: runner -> stream -> runner"]);
}

#[test]
fn the_allow_list_only_shrinks() {
    let two = demo(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A;\n"),
        ("src/b.rs", "use crate::a::A;\npub struct B;\n"),
        ("src/c.rs", "pub struct C;\n"),
    ]);
    let tangles = two.tangles();
    assert!(allow_list_failures(&tangles, &["demo/src/: a, b (1 cycles)"]).is_empty());
    // Not listed.
    let failures = allow_list_failures(&tangles, &[]);
    assert_eq!(failures.len(), 1);
    assert!(failures[0].starts_with("module cycle in demo/src/: a, b\n    a -> b -> a"));
    // Listed, but gone or smaller than listed.
    let failures = allow_list_failures(&tangles, &["demo/src/: a, b, c (2 cycles)"]);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures[1].contains("no longer occurs as written"));
    assert!(failures[1].contains("demo/src/: a, b (1 cycles)"));
    let failures = allow_list_failures(&tangles, &["demo/src/: a, b (2 cycles)"]);
    assert_eq!(
        failures,
        [
            "KNOWN_CYCLES lists 2 cycles for `demo/src/: a, b`, now 1: write `demo/src/: a, b (1 cycles)`"
        ]
    );
    // A new cycle among listed modules: b -> c -> a -> b beside a <-> b.
    let three = demo(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "src/b.rs",
            "use crate::a::A;\nuse crate::c::C;\npub struct B;\n",
        ),
        ("src/c.rs", "pub struct C(crate::a::A);\n"),
    ]);
    let failures = allow_list_failures(&three.tangles(), &["demo/src/: a, b (1 cycles)"]);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures[0].starts_with("module cycle in demo/src/: a, b, c"));
    let failures = allow_list_failures(&three.tangles(), &["demo/src/: a, b, c (1 cycles)"]);
    assert!(
        failures[0]
            .starts_with("new module cycles among demo/src/: a, b, c: KNOWN_CYCLES lists 1, now 2"),
        "{failures:?}"
    );
    // Gone entirely.
    let failures = allow_list_failures(
        &demo(&[("src/lib.rs", "")]).tangles(),
        &["demo/src/: a, b (1 cycles)"],
    );
    assert_eq!(
        failures,
        ["KNOWN_CYCLES lists `demo/src/: a, b`, which no longer occurs: delete it"]
    );
}
