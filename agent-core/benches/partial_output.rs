//! The cost of a streamed answer's partial values per delta: a `submit_output` call's
//! arguments sent through the runner's sink (`TurnSink`, reached through the hidden
//! `agent_core::__bench::bench_partial_output`) 4 bytes per delta, with a flush after
//! each, on the incremental path and on the whole-text path (the whole answer parsed
//! again at each flush, as before the incremental parser).
//!
//! ```text
//! cargo bench -p agent-core --bench partial_output               # wall clock, all sizes
//! target/release/deps/partial_output-HASH new|old SIZE_KIB DELTAS  # one run, for callgrind
//! ```
//!
//! One run: the first SIZE_KIB KiB of the answer as one delta, then DELTAS deltas of 4
//! bytes, then the end of the turn. Under `valgrind --tool=callgrind`, the difference
//! between DELTAS = K and DELTAS = 2K, divided by K, is the instructions per delta with
//! an answer of about SIZE_KIB KiB (the setup and the first piece cancel out; see
//! `bench/HISTORY.md`, "Streamed partial answers").
//!
//! The answer: an object with a long string field (`summary`, half of SIZE_KIB) and an
//! array of small objects (`items`: numbers, strings, a nested array, literals): twice
//! SIZE_KIB plus 64 KiB in all, whatever DELTAS is (at most that many bytes / 4).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use agent_core::__bench::bench_partial_output;

/// An answer of at least `len` bytes (ASCII, so every byte is a char boundary).
fn answer(summary: usize, len: usize) -> String {
    let mut text = String::with_capacity(len + 256);
    text.push_str("{\"summary\": \"");
    let words = [
        "parcel ",
        "late ",
        "tracking ",
        "\\\"stuck\\\" ",
        "since ",
        "Monday\\n",
    ];
    let mut n = 0;
    while text.len() < summary {
        text.push_str(words[n % words.len()]);
        n += 1;
    }
    text.push_str("\", \"items\": [");
    let mut id = 0u64;
    while text.len() < len {
        if id > 0 {
            text.push_str(", ");
        }
        write!(
            text,
            "{{\"id\": {id}, \"sku\": \"A-{:05}\", \"qty\": {}, \"price\": {}.{:02}, \"tags\": [\"x\", \"y\"], \"ok\": {}, \"note\": null}}",
            id * 7919 % 100_000,
            id % 9 + 1,
            id % 500,
            id % 100,
            id.is_multiple_of(2)
        )
        .unwrap();
        id += 1;
    }
    text
}

/// Sends the first `size` bytes of an answer, then `deltas` deltas of 4 bytes.
fn run(incremental: bool, size: usize, deltas: usize) -> usize {
    // The same answer whatever `deltas` is, so that making it cancels out.
    let text = answer(size / 2, 2 * size + 64 * 1024);
    assert!(
        size + deltas * 4 <= text.len(),
        "too many deltas for this size"
    );
    let (prefix, rest) = text.split_at(size);
    let pieces: Vec<&str> = rest.as_bytes()[..deltas * 4]
        .chunks(4)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    bench_partial_output(black_box(prefix), black_box(&pieces), !incremental)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [path, size, deltas] = args.as_slice() {
        let incremental = match path.as_str() {
            "new" => true,
            "old" => false,
            other => panic!("new or old, not {other}"),
        };
        let size: usize = size.parse::<usize>().expect("SIZE_KIB") * 1024;
        let deltas: usize = deltas.parse().expect("DELTAS");
        let sent = run(incremental, size, deltas);
        println!(
            "{path} {} KiB, {deltas} deltas: {sent} partial values sent",
            size / 1024
        );
        return;
    }
    // `cargo bench`: wall clock per delta, two lengths, for each size and path.
    println!("size    path  ns/delta  (values sent in the 2K run)");
    for kib in [1, 16, 256] {
        for (name, incremental, k) in [("new", true, 4096), ("old", false, 64)] {
            let size = kib * 1024;
            let time = |deltas| {
                let start = Instant::now();
                let sent = run(incremental, size, deltas);
                (start.elapsed(), sent)
            };
            let (one, _) = time(k);
            let (two, sent) = time(2 * k);
            let per = two.saturating_sub(one).as_nanos() as f64 / k as f64;
            println!("{kib:>4} KiB {name}  {per:>9.0}  ({sent})");
        }
    }
}
