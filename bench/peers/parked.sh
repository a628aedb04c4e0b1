#!/usr/bin/env bash
# The parked scenario of run.sh alone, repeated: memory per parked run of agent-core
# (`ours`) and of its floor (`bare`), measured exactly as run.sh measures it, without
# the in-process and HTTP scenarios.
#
#   bench/peers/parked.sh                 5 interleaved repetitions of bare and ours, N=10,000
#   REPS=3 RUNS=2000 bench/peers/parked.sh
#   ONLY="ours" BIN=path/to/release bench/peers/parked.sh
#
# Each repetition runs `BIN parked --url SLOW --runs N --warmup-url FAST` for each
# framework (SLOW: the mock with --delay-ms 5000, FAST: no delay) and prints its JSON
# line with `kib_per_run` = (peak_kib - idle_kib) / N and the slow server's peak number
# of requests in flight (all N runs parked at once when it equals N). The binaries are
# not built here: build them first (`cargo build --release --locked -p mock-server -p
# ours -p bare`). Lines go to stdout; a summary (each value and the median) to stderr.
set -euo pipefail
cd "$(dirname "$0")"

REPS=${REPS:-5}
RUNS=${RUNS:-10000}
ONLY=${ONLY:-bare ours}
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release}
MOCK=${MOCK:-$BIN/mock-server}

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

OUT=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$OUT"
}
trap cleanup EXIT

start_server() {
    local var=$1 delay=$2 out=$3
    "$MOCK" --port 0 --delay-ms "$delay" > "$out" 2> "$out.err" &
    PIDS+=($!)
    for _ in $(seq 100); do
        if grep -q '^listening ' "$out" 2>/dev/null; then
            printf -v "$var" 'http://%s/v1' "$(sed -n 's/^listening //p' "$out")"
            return
        fi
        sleep 0.05
    done
    echo "mock server did not start: $(cat "$out.err")" >&2
    exit 1
}
start_server FAST 0 "$OUT/fast"
start_server SLOW 5000 "$OUT/slow"
SLOW_ROOT=${SLOW%/v1}
export AGENT_DISPATCH_URL="$FAST"

declare -A VALUES
for rep in $(seq "$REPS"); do
    for fw in $ONLY; do
        curl -s -X POST "$SLOW_ROOT/stats/reset" > /dev/null
        line=$("$BIN/$fw-bench" parked --url "$SLOW" --runs "$RUNS" --warmup-url "$FAST")
        stats=$(curl -s "$SLOW_ROOT/stats")
        kib=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%.2f" % ((r["peak_kib"] - r["idle_kib"]) / r["runs"]))' "$line")
        echo "{\"rep\":$rep,\"kib_per_run\":$kib,\"server\":$stats,\"client\":$line}"
        VALUES[$fw]="${VALUES[$fw]:-} $kib"
    done
done
for fw in $ONLY; do
    python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[2:]]; print(f"{sys.argv[1]}: KiB/run {v} median {statistics.median(v):.2f}")' "$fw" ${VALUES[$fw]} >&2
done
