#!/usr/bin/env bash
# Queue throughput: runs per second through the JetStream queue with 1, 2 and 4
# `agent-worker` processes, each run the peer benchmarks' triage scenario (two round
# trips and one tool) against their fast mock server (bench/peers/mock-server).
#
#   bench/worker/run.sh                  2,000 runs per worker count, 1 2 4 workers
#   RUNS=500 WORKERS="1 2" bench/worker/run.sh
#
# Needs NATS with JetStream (NATS_URL, default nats://127.0.0.1:4222) and PostgreSQL
# (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test). Builds the mock
# server (bench/peers workspace) and agent-worker's binary and `queue_bench` example
# (release). Each worker count gets its own namespace and schema, dropped afterwards.
# A measurement is the wall time of `run_batch_queued`: submitting every job, the
# workers' runs (two HTTP round trips, a stored record, a published result, an ack per
# run), and reading every record back; every run's value is checked.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=${RUNS:-2000}
WORKERS=${WORKERS:-1 2 4}
IN_FLIGHT=${IN_FLIGHT:-32}
NATS=${NATS_URL:-nats://127.0.0.1:4222}
PG=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}

echo "== build (release)" >&2
(cd "$ROOT/bench/peers" && cargo build --release -q -p mock-server)
(cd "$ROOT" && cargo build --release -q -p agent-worker --bin agent-worker --example queue_bench)
WORKER="$ROOT/target/release/agent-worker"
PRODUCER="$ROOT/target/release/examples/queue_bench"

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

"$ROOT/bench/peers/target/release/mock-server" --port 0 > "$TMP/mock" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do
    grep -q '^listening ' "$TMP/mock" 2>/dev/null && break
    sleep 0.05
done
ADDR=$(sed -n 's/^listening //p' "$TMP/mock")
if [[ -z "$ADDR" ]]; then echo "the mock server did not start" >&2; cat "$TMP/mock" >&2; exit 1; fi
URL="http://$ADDR/v1"

echo "workers  runs  seconds  runs/s"
for W in $WORKERS; do
    NS="bench_w${W}_$$"
    # The schema first: processes opening a new schema together race to create it.
    psql "$PG" -q -c "CREATE SCHEMA IF NOT EXISTS \"$NS\"" > /dev/null
    WPIDS=()
    for _ in $(seq "$W"); do
        "$WORKER" --store "$PG" --schema "$NS" --nats "$NATS" --namespace "$NS" \
            --max-in-flight "$IN_FLIGHT" --mock-url "$URL" > /dev/null 2>> "$TMP/workers.err" &
        WPIDS+=($!)
        PIDS+=($!)
    done
    LINE=$("$PRODUCER" --store "$PG" --schema "$NS" --nats "$NATS" --namespace "$NS" \
        --agent triage --runs "$RUNS" --delete-streams 2> "$TMP/receipt") || {
        echo "the batch failed; workers said:" >&2; cat "$TMP/workers.err" "$TMP/receipt" >&2; exit 1; }
    for pid in "${WPIDS[@]}"; do kill -TERM "$pid"; wait "$pid" || true; done
    echo "$LINE" >> "$TMP/raw.jsonl"
    python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(f\"{$W:>7}  {d['runs']:>4}  {d['seconds']:>7.2f}  {d['runs_per_s']:>6.0f}\")" "$LINE"
    psql "$PG" -q -c "DROP SCHEMA IF EXISTS \"$NS\" CASCADE" > /dev/null 2>&1 || true
done
