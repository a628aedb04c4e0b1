//! Each workspace crate's integration tests are one test binary: its `Cargo.toml` sets
//! `autotests = false` and declares the `[[test]]` targets, and every file of its
//! `tests/` folder (`name.rs`, or a folder `name/mod.rs`) is either a module declared in
//! a target's main file (`mod name;`) or a target of its own. A file that is neither is
//! never built or run, silently; these tests name it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace's root folder.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The members of the workspace, from its `Cargo.toml`.
fn members(root: &Path) -> Vec<String> {
    let manifest: toml::Table = fs::read_to_string(root.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    manifest["workspace"]["members"]
        .as_array()
        .expect("workspace.members is an array")
        .iter()
        .map(|m| m.as_str().expect("a member is a path").to_owned())
        .collect()
}

/// The names of the modules a file declares at its top level from files (`mod name;`,
/// `pub mod name;`, `pub(crate) mod name;`), comments left out.
fn declared_modules(source: &str) -> BTreeSet<String> {
    source
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with("//"))
        .filter_map(|line| {
            let line = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            let name = line.strip_prefix("mod ")?.strip_suffix(';')?.trim();
            Some(name.to_owned())
        })
        .collect()
}

/// What is wrong with the test layout of the crate in `dir` (named `member` in the
/// messages): one message per problem, empty when none. A crate without `tests/` has
/// nothing to check.
fn problems(dir: &Path, member: &str) -> Vec<String> {
    let tests = dir.join("tests");
    if !tests.is_dir() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let manifest: toml::Table = fs::read_to_string(dir.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    if manifest["package"]
        .get("autotests")
        .and_then(toml::Value::as_bool)
        != Some(false)
    {
        out.push(format!(
            "{member}/Cargo.toml lacks `autotests = false` in [package]: cargo would build \
             each file of {member}/tests/ as a test binary of its own"
        ));
    }
    // The test targets' main files, relative to the crate (cargo's default path of a
    // `[[test]]` without one is `tests/<name>.rs`).
    let targets: Vec<String> = manifest
        .get("test")
        .and_then(toml::Value::as_array)
        .map(|targets| {
            targets
                .iter()
                .map(|t| match t.get("path").and_then(toml::Value::as_str) {
                    Some(path) => path.to_owned(),
                    None => format!("tests/{}.rs", t["name"].as_str().unwrap()),
                })
                .collect()
        })
        .unwrap_or_default();
    if targets.is_empty() {
        out.push(format!(
            "{member}/Cargo.toml declares no [[test]] target for {member}/tests/"
        ));
    }
    let mut declared = BTreeSet::new();
    for target in &targets {
        match fs::read_to_string(dir.join(target)) {
            Ok(source) => declared.extend(declared_modules(&source)),
            Err(e) => out.push(format!("{member}/{target}, a [[test]] target: {e}")),
        }
    }
    let mut entries: Vec<PathBuf> = fs::read_dir(&tests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let file_name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let (name, shown) = if path.is_dir() {
            if !path.join("mod.rs").is_file() {
                continue; // fixtures, snapshots: not code
            }
            (
                file_name.clone(),
                format!("{member}/tests/{file_name}/mod.rs"),
            )
        } else if let Some(stem) = file_name.strip_suffix(".rs") {
            if targets.iter().any(|t| *t == format!("tests/{file_name}")) {
                continue; // a target's main file
            }
            (stem.to_owned(), format!("{member}/tests/{file_name}"))
        } else {
            continue;
        };
        if !declared.contains(&name) {
            out.push(format!(
                "{shown} is not a module of any test target of {member}, so it is never \
                 built or run: declare it in {member}/{} (`pub mod {name};`)",
                targets.first().map_or("tests/main.rs", String::as_str)
            ));
        }
    }
    out
}

#[test]
fn every_file_of_each_crates_tests_is_in_its_test_binary() {
    let root = workspace();
    let members = members(&root);
    assert!(members.len() >= 7, "workspace members: {members:?}");
    let mut checked = 0;
    let mut all = Vec::new();
    for member in &members {
        if root.join(member).join("tests").is_dir() {
            checked += 1;
        }
        all.extend(problems(&root.join(member), member));
    }
    // agent-core, agent-store, agent-mcp, agent-worker, agent-dashboard, examples, tests.
    assert!(checked >= 7, "crates with tests/ checked: {checked}");
    assert!(all.is_empty(), "test layout:\n{}", all.join("\n"));
}

#[test]
fn declared_modules_are_read_from_mod_lines_only() {
    let source = "//! Doc.\n#[macro_use]\nmod common;\n\npub mod approvals;\n\
                  pub(crate) mod batch;\n// mod commented;\nuse crate::common;\n\
                  mod inline {\n}\n";
    assert_eq!(
        declared_modules(source),
        BTreeSet::from(["approvals", "batch", "common"].map(String::from))
    );
}

/// A crate made up in a temporary folder, its `Cargo.toml` and files given.
fn made_up_crate(name: &str, manifest: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("layout-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("tests")).unwrap();
    fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    for (path, text) in files {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    dir
}

#[test]
fn an_undeclared_file_and_a_missing_autotests_are_named() {
    let dir = made_up_crate(
        "bad",
        "[package]\nname = \"bad\"\n\n[[test]]\nname = \"integration\"\npath = \"tests/main.rs\"\n",
        &[
            ("tests/main.rs", "mod common;\npub mod declared;\n"),
            ("tests/declared.rs", ""),
            ("tests/forgotten.rs", ""),
            ("tests/common/mod.rs", ""),
            ("tests/helpers/mod.rs", ""),
            ("tests/fixtures/a.json", "{}"),
        ],
    );
    assert_eq!(
        problems(&dir, "bad"),
        [
            "bad/Cargo.toml lacks `autotests = false` in [package]: cargo would build each \
             file of bad/tests/ as a test binary of its own",
            "bad/tests/forgotten.rs is not a module of any test target of bad, so it is never \
             built or run: declare it in bad/tests/main.rs (`pub mod forgotten;`)",
            "bad/tests/helpers/mod.rs is not a module of any test target of bad, so it is \
             never built or run: declare it in bad/tests/main.rs (`pub mod helpers;`)",
        ]
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_target_of_its_own_counts_as_declared() {
    let dir = made_up_crate(
        "own",
        "[package]\nname = \"own\"\nautotests = false\n\n[[test]]\nname = \"integration\"\n\
         path = \"tests/main.rs\"\n\n[[test]]\nname = \"stdio\"\nharness = false\n",
        &[
            ("tests/main.rs", "pub mod http;\n"),
            ("tests/http.rs", ""),
            ("tests/stdio.rs", "fn main() {}\n"),
        ],
    );
    assert_eq!(problems(&dir, "own"), Vec::<String>::new());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_crate_with_tests_but_no_test_target_is_named() {
    let dir = made_up_crate(
        "none",
        "[package]\nname = \"none\"\nautotests = false\n",
        &[("tests/alone.rs", "")],
    );
    assert_eq!(
        problems(&dir, "none"),
        [
            "none/Cargo.toml declares no [[test]] target for none/tests/",
            "none/tests/alone.rs is not a module of any test target of none, so it is never \
             built or run: declare it in none/tests/main.rs (`pub mod alone;`)",
        ]
    );
    fs::remove_dir_all(&dir).unwrap();
}
