//! A short smoke of every fuzz target (`agent_core::fuzzing`, the `fuzz/` crate), on the
//! stable toolchain and in seconds: each target's seed corpus (`fuzz/seeds/NAME/`, made
//! from the recorded replies of `tests/fixtures/` by `fuzz/seeds.py`), then a few
//! hundred deterministic pseudo-random mutations of its seeds per target (bytes
//! flipped, set, inserted, removed, repeated; seeds cut and spliced). Every input must
//! end in a typed outcome: no panic, no broken promise. The long runs are
//! `scripts/fuzz.sh` (libFuzzer, see CONTRIBUTING.md); the regression tests of what
//! they found are at the end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::PathBuf;

use agent_core::fuzzing::{TARGETS, Target};

/// Mutated inputs per target.
const MUTATIONS: usize = 400;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// A target's seeds, in name order.
fn seeds(target: &Target) -> Vec<(String, Vec<u8>)> {
    let dir = fuzz_dir().join("seeds").join(target.name);
    let mut seeds: Vec<(String, Vec<u8>)> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read(&path).unwrap())
        })
        .collect();
    seeds.sort();
    seeds
}

/// Bytes the decoders look for: JSON and SSE punctuation, and the edges of a byte.
const INTERESTING: &[u8] = b"{}[]\":,\\\n\r 0-.eE\x00\x7f\x80\xff";

/// One mutation of `input` (in place), `other` a seed to splice from.
fn mutate(rng: &mut fastrand::Rng, input: &mut Vec<u8>, other: &[u8]) {
    let len = input.len();
    match rng.u8(0..8) {
        0 if len > 0 => {
            let at = rng.usize(0..len);
            input[at] ^= 1 << rng.u8(0..8);
        }
        1 if len > 0 => {
            let at = rng.usize(0..len);
            input[at] = INTERESTING[rng.usize(0..INTERESTING.len())];
        }
        2 => {
            let at = rng.usize(0..=len);
            input.insert(at, INTERESTING[rng.usize(0..INTERESTING.len())]);
        }
        3 if len > 0 => {
            let from = rng.usize(0..len);
            let to = (from + rng.usize(1..=16)).min(len);
            input.drain(from..to);
        }
        4 if len > 0 => {
            let from = rng.usize(0..len);
            let to = (from + rng.usize(1..=64)).min(len);
            let piece = input[from..to].to_vec();
            let at = rng.usize(0..=input.len());
            input.splice(
                at..at,
                piece
                    .iter()
                    .copied()
                    .cycle()
                    .take(piece.len() * rng.usize(1..=8)),
            );
        }
        5 if len > 0 => input.truncate(rng.usize(0..len)),
        6 if !other.is_empty() => {
            let cut = rng.usize(0..=len);
            let from = rng.usize(0..other.len());
            input.truncate(cut);
            input.extend_from_slice(&other[from..]);
        }
        _ if len > 0 => input[0] = rng.u8(..),
        _ => input.push(rng.u8(..)),
    }
}

fn run(target: &Target, name: &str, input: &[u8]) {
    if let Err(broken) = (target.run)(input) {
        panic!(
            "{} on {name} ({} bytes: {:?}): {broken}",
            target.name,
            input.len(),
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn every_target_has_a_binary_and_seeds() {
    let manifest = fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    let mut binaries: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "agent-core-fuzz")
        .collect();
    binaries.sort_unstable();
    let mut names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    names.sort_unstable();
    assert_eq!(binaries, names);
    let mut folders: Vec<String> = fs::read_dir(fuzz_dir().join("seeds"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    assert_eq!(folders, names);
    for target in TARGETS {
        let path = fuzz_dir().join(format!("fuzz_targets/{}.rs", target.name));
        let source = fs::read_to_string(&path).unwrap();
        assert!(
            source.contains(&format!("check(\"{}\"", target.name)),
            "{}",
            path.display()
        );
        assert!(seeds(target).len() >= 5, "{}: too few seeds", target.name);
    }
}

#[test]
fn every_target_takes_its_seeds_and_their_mutations() {
    for target in TARGETS {
        let seeds = seeds(target);
        for (name, seed) in &seeds {
            run(target, name, seed);
        }
        // Seeded per target: the same inputs on every run.
        let mut rng = fastrand::Rng::with_seed(0x5eed ^ target.name.len() as u64);
        for i in 0..MUTATIONS {
            let (name, seed) = &seeds[i % seeds.len()];
            let other = &seeds[rng.usize(0..seeds.len())].1;
            let mut input = seed.clone();
            for _ in 0..rng.usize(1..=4) {
                mutate(&mut rng, &mut input, other);
            }
            run(target, &format!("mutation {i} of {name}"), &input);
        }
    }
}

#[test]
fn empty_and_tiny_inputs_are_typed_outcomes() {
    for target in TARGETS {
        for input in [
            &b""[..],
            b"\0",
            b"\x01",
            b"{",
            b"\0data: [DONE]\n\n",
            b"\xff\xff",
        ] {
            run(target, "a tiny input", input);
        }
    }
}
