#!/usr/bin/env bash
# Peer benchmarks: agent-core vs rig vs PydanticAI, side by side in one run.
#
#   bench/peers/run.sh            full run (about 7 minutes on 2 cores)
#   bench/peers/run.sh --quick    short run for iteration (about 2 minutes)
#   REPS_OVERRIDE=10 bench/peers/run.sh  more repetitions (a busy machine)
#   ONLY="ours bare" bench/peers/run.sh   only these frameworks (names: ours
#                                         ours-stream rig pydantic-ai bare bare-stream
#                                         openai-py; not in the default set:
#                                         ours-anthropic ours-stream-anthropic, the
#                                         same runs on the Anthropic Messages wire)
#
# Builds every Rust crate of bench/peers (release), makes the Python venv
# (bench/peers/.venv, pinned by pydantic/requirements.txt) if missing, starts two
# mock servers on loopback (fast: no delay; slow: 5000 ms per response), runs each
# scenario for each framework, and prints one table (also written, with the raw JSON
# lines, under bench/peers/results/<timestamp>/).
#
# Scenarios (see README.md beside this script):
#   in-process  sequential runs against a scripted in-process model; median us/run
#   http        closed loop at concurrency 1 and 64 against the fast server; runs/s
#   parked      N runs started at once against the slow server; peak RSS (VmHWM)
#
# Repetitions are interleaved (every framework once, then again) and medians taken.
set -euo pipefail
cd "$(dirname "$0")"

QUICK=0
if [[ "${1:-}" == "--quick" ]]; then QUICK=1; fi

if [[ $QUICK == 1 ]]; then
    REPS=1
    INPROC_OURS=20000; INPROC_RIG=2000; INPROC_PY=100
    HTTP_SECONDS=2; HTTP_WARMUP=0.5
    PARKED_RUNS=2000; PY_PARKED_RUNS=300
else
    REPS=5
    INPROC_OURS=100000; INPROC_RIG=10000; INPROC_PY=500
    HTTP_SECONDS=5; HTTP_WARMUP=1
    PARKED_RUNS=10000; PY_PARKED_RUNS=1000
fi
# PydanticAI parks 1,000 runs, not 10,000: its HTTP stack (the openai SDK on
# httpx2/httpcore2) assigns requests to pooled connections by scanning them all on
# every event, so 10,000 concurrent requests cost minutes of CPU before the first
# one is sent (openai-py alone did not finish 10,000 in 300 s here). The floor it is
# compared with (openai-py) parks the same number.
REPS=${REPS_OVERRIDE:-$REPS}
PARKED_RUNS=${PARKED_RUNS_OVERRIDE:-$PARKED_RUNS}
PY_PARKED_RUNS=${PY_PARKED_RUNS_OVERRIDE:-$PY_PARKED_RUNS}

# 10,000 parked runs hold 10,000 sockets in the client and as many in the server.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

RESULTS="results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RESULTS"
RAW="$RESULTS/raw.jsonl"
: > "$RAW"

ONLY=${ONLY:-ours ours-stream rig pydantic-ai bare bare-stream openai-py}

echo "== build (release)" >&2
PKGS=(-p mock-server)
for fw in $ONLY; do
    case $fw in
        ours|ours-stream|ours-anthropic|ours-stream-anthropic) PKGS+=(-p ours) ;;
        rig) PKGS+=(-p rig-bench) ;;
        bare|bare-stream) PKGS+=(-p bare) ;;
        pydantic-ai|openai-py) NEED_PY=1 ;;
        *) echo "unknown framework $fw in ONLY" >&2; exit 2 ;;
    esac
done
cargo build --release --locked --quiet "${PKGS[@]}"
BIN=${CARGO_TARGET_DIR:-target}/release

if [[ ${NEED_PY:-0} == 1 && ! -x .venv/bin/python ]]; then
    echo "== python venv" >&2
    python3 -m venv .venv
    .venv/bin/pip install --quiet -r pydantic/requirements.txt
fi
PY=(.venv/bin/python pydantic/bench.py)

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# start_server VAR DELAY_MS OUTFILE: starts a mock server, sets VAR to its base URL.
# (Not in a subshell, so the cleanup trap knows its pid.)
start_server() {
    local var=$1 delay=$2 out=$3
    "$BIN/mock-server" --port 0 --delay-ms "$delay" > "$out" 2> "$out.err" &
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
start_server FAST 0 "$RESULTS/mock-fast.out"
start_server SLOW 5000 "$RESULTS/mock-slow.out"
FAST_ROOT=${FAST%/v1}
SLOW_ROOT=${SLOW%/v1}
# The dispatch/ route of agent-core reads this (ours also passes it as base_url).
export AGENT_DISPATCH_URL="$FAST"
echo "fast mock: $FAST   slow mock: $SLOW" >&2
# The machine may be shared: keep what else was running, and the load, with the results.
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
ps -eo pcpu,etime,comm --sort=-pcpu | head -8 > "$RESULTS/top-before.txt"

# bench FRAMEWORK ARGS...: runs one measurement, appends its JSON line.
bench() {
    local fw=$1; shift
    [[ " $ONLY " == *" $fw "* ]] || return 0
    local line
    case $fw in
        ours|ours-stream|rig|bare|bare-stream) line=$("$BIN/$fw-bench" "$@") || line="{\"framework\":\"$fw\",\"scenario\":\"$1\",\"failed\":true}" ;;
        ours-anthropic|ours-stream-anthropic) line=$(PEERS_WIRE=anthropic "$BIN/${fw%-anthropic}-bench" "$@") || line="{\"framework\":\"$fw\",\"scenario\":\"$1\",\"failed\":true}" ;;
        pydantic-ai|openai-py) line=$("${PY[@]}" "$fw" "$@") || line="{\"framework\":\"$fw\",\"scenario\":\"$1\",\"failed\":true}" ;;
    esac
    echo "$line" >> "$RAW"
    echo "  $line" >&2
}

echo "== in-process ($REPS reps)" >&2
for rep in $(seq "$REPS"); do
    bench ours inproc --runs "$INPROC_OURS"
    bench ours-stream inproc --runs "$INPROC_OURS"
    bench rig inproc --runs "$INPROC_RIG"
    bench pydantic-ai inproc --runs "$INPROC_PY"
done

for c in 1 64; do
    echo "== http, concurrency $c ($REPS reps)" >&2
    for rep in $(seq "$REPS"); do
        for fw in bare bare-stream ours ours-stream ours-anthropic ours-stream-anthropic rig openai-py pydantic-ai; do
            bench "$fw" http --url "$FAST" --concurrency "$c" \
                --seconds "$HTTP_SECONDS" --warmup-seconds "$HTTP_WARMUP"
        done
    done
done

echo "== parked (slow server, 5000 ms per response)" >&2
for fw in bare ours rig openai-py pydantic-ai; do
    case $fw in openai-py|pydantic-ai) n=$PY_PARKED_RUNS ;; *) n=$PARKED_RUNS ;; esac
    [[ " $ONLY " == *" $fw "* ]] || continue
    curl -s -X POST "$SLOW_ROOT/stats/reset" > /dev/null
    bench "$fw" parked --url "$SLOW" --runs "$n" --warmup-url "$FAST"
    stats=$(curl -s "$SLOW_ROOT/stats")
    echo "{\"framework\":\"$fw\",\"scenario\":\"parked-server\",\"server\":$stats}" >> "$RAW"
    echo "  server: $stats" >&2
done

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/^Mem:/{print $2}') GiB"
    echo "rustc: $(rustc --version)"
    echo "agent-core: ${AGENT_CORE_REV:-$(git -C ../.. rev-parse --short HEAD 2>/dev/null || echo unknown)}; frameworks: $ONLY"
    if [[ ${NEED_PY:-0} == 1 ]]; then echo "python: $(.venv/bin/python --version 2>&1)"; fi
    echo "mode: $([[ $QUICK == 1 ]] && echo quick || echo full), $REPS reps"
    echo "load average (1/5/15 min) before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 report.py "$RAW"
} | tee "$RESULTS/table.md"
echo "(raw results: bench/peers/$RAW)" >&2
