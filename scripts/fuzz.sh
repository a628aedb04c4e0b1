#!/usr/bin/env bash
# fuzz.sh: run every fuzz target of agent-core's decoders (the `fuzz/` crate) with
# libFuzzer, one after the other, for SECONDS each (default 600: ten minutes).
#
# Usage:
#   scripts/fuzz.sh [SECONDS] [TARGET...]   every target (or the ones named) SECONDS each
#   scripts/fuzz.sh --list                  the targets
#   scripts/fuzz.sh --help
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`) and a C++ compiler (libFuzzer is
# built from source by libfuzzer-sys). Runs on the stable toolchain: `--sanitizer none`
# (AddressSanitizer needs nightly's -Zsanitizer; agent-core forbids unsafe code, so the
# sanitizer would watch only dependencies) and no -Zbuild-std.
#
# Each target starts from its checked-in seeds (fuzz/seeds/TARGET/, read only; made by
# fuzz/seeds.py from the recorded replies of agent-core/tests/fixtures) and from what
# earlier runs found (fuzz/corpus/TARGET/, not checked in). An input that takes more
# than 10 s is a hang, one that needs more than 2 GB is a memory failure, and both, like
# a panic or a broken promise (see agent-core/src/fuzzing.rs), stop the target with the
# input saved under fuzz/artifacts/TARGET/. The script goes on to the next target and
# exits 1 if any target failed. Per target it prints libFuzzer's last status line
# (executions, corpus size) and the CPU time used (user + sys seconds).
set -euo pipefail

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }

root=$(cd "$(dirname "$0")/.." && pwd)
fuzz="$root/fuzz"
targets() { sed -n 's/^name = "\([a-z_]*\)"$/\1/p' "$fuzz/Cargo.toml" | grep -v '^agent-core-fuzz$' || true; }

seconds=600
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --list) targets; exit 0 ;;
  '') ;;
  *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$1'" >&2; exit 2 ;;
  *) seconds=$1; shift ;;
esac
if [ "$#" -gt 0 ]; then chosen=("$@"); else mapfile -t chosen < <(targets); fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
  exit 2
fi

cd "$fuzz"
export CARGO_INCREMENTAL=0
cargo fuzz build --sanitizer none
failed=()
for target in "${chosen[@]}"; do
  mkdir -p "corpus/$target" "artifacts/$target"
  log="artifacts/$target/run.log"
  begin=$(date +%s)
  status=0
  # -print_final_stats: executions and the corpus at the end; TIMES() for CPU time.
  /usr/bin/time -f '%U %S' -o "artifacts/$target/time" \
    cargo fuzz run --sanitizer none "$target" "corpus/$target" "seeds/$target" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="artifacts/$target/" \
      >"$log" 2>&1 || status=$?
  cpu=$(awk '{printf "%.1f", $1 + $2}' "artifacts/$target/time" 2>/dev/null || echo '?')
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(find "corpus/$target" -type f | wc -l)
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
    echo "$target: FAILED (exit $status) after $(( $(date +%s) - begin )) s; see fuzz/$log and fuzz/artifacts/$target/"
  else
    echo "$target: ok, ${execs:-?} executions, ${cpu} s CPU, corpus ${corpus} inputs (+ $(find "seeds/$target" -type f | wc -l) seeds)"
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
