#!/usr/bin/env python3
"""Instructions and CPU time per run, agent-core against its floors and rig.

Every figure is a difference of two run lengths: a client does exactly N runs, then
exactly 2N, and (X(2N) - X(N)) / N is the cost of one run, with the process's start-up,
the runtime's set-up and the first connections cancelling out.

- instructions: callgrind's `Collected` count (user space, every thread of the client;
  valgrind serializes the threads, so the count does not depend on the machine's load);
- CPU time: the client's user + system time (getrusage of the finished child), without
  valgrind, median of --reps repetitions; this one does depend on the load: compare the
  ratios of one run of this script, not absolute times from different runs.

The clients (bench/peers binaries, built first:
`cargo build --release --locked -p mock-server -p ours -p bare -p rig-bench`):

  ours          agent-core, `run_agent`           bare         bare reqwest (the floor)
  ours-stream   agent-core, `run_agent_stream`    bare-stream  bare reqwest + SSE parsing
  rig           rig-core

In process (no server; a scripted model): ours and rig (bare has no in-process mode).
Over HTTP: every client against one mock server started here (outside valgrind), at
each --concurrency.

Usage:

  bench/peers/instructions.py                       # everything, N = 1,000 (HTTP)
  bench/peers/instructions.py --only ours bare --concurrency 64 --no-cpu
  BIN=path/to/release bench/peers/instructions.py --json out.jsonl

Prints one JSON line per measurement to --json (if given) and the table to stdout.
"""

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = ["ours", "ours-stream", "bare", "bare-stream", "rig"]
INPROC = {"ours", "rig"}
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def start_mock(binary):
    """Starts the mock server on a free port; returns (process, base URL)."""
    proc = subprocess.Popen(
        [binary, "--port", "0", "--delay-ms", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline().strip()
    if not line.startswith("listening "):
        proc.kill()
        sys.exit(f"the mock server did not start (it printed {line!r})")
    return proc, "http://%s/v1" % line.split(" ", 1)[1]


def scenario_args(mode, url, concurrency, runs):
    if mode == "inproc":
        return ["inproc", "--runs", str(runs), "--warmup", "0"]
    return ["http", "--url", url, "--concurrency", str(concurrency), "--runs", str(runs)]


def check_line(client, out):
    """The client's JSON line; exits when the client did not do its runs."""
    try:
        line = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        sys.exit(f"{client}: no JSON line in its output: {out[-500:]!r}")
    return line


def instructions(bin_dir, client, args, tmp):
    out_file = os.path.join(tmp, "callgrind.out")
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}"]
        + [os.path.join(bin_dir, f"{client}-bench")]
        + args,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(f"{client} {' '.join(args)} failed under valgrind:\n{proc.stderr[-2000:]}")
    check_line(client, proc.stdout)
    found = COLLECTED.findall(proc.stderr)
    if not found:
        sys.exit(f"{client}: no 'Collected' line from callgrind:\n{proc.stderr[-2000:]}")
    return int(found[-1])


def cpu_seconds(bin_dir, client, args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [os.path.join(bin_dir, f"{client}-bench")] + args, capture_output=True, text=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{client} {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    check_line(client, proc.stdout)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", default=CLIENTS, choices=CLIENTS)
    p.add_argument("--concurrency", nargs="+", type=int, default=[1, 64])
    p.add_argument("--runs", type=int, default=1000, help="N for HTTP under callgrind (and 2N)")
    p.add_argument("--inproc-runs", type=int, default=2000, help="N in process (and 2N)")
    p.add_argument("--cpu-runs", type=int, default=20000, help="N for CPU time (and 2N)")
    p.add_argument("--cpu-concurrency", type=int, default=64)
    p.add_argument("--reps", type=int, default=3, help="repetitions of the CPU-time pair")
    p.add_argument("--no-cpu", action="store_true", help="instructions only")
    p.add_argument("--json", help="append one JSON line per measurement to this file")
    opts = p.parse_args()

    bin_dir = os.environ.get("BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(HERE, "target")), "release"
    )
    for client in opts.only:
        if not os.path.exists(os.path.join(bin_dir, f"{client}-bench")):
            sys.exit(f"{bin_dir}/{client}-bench is missing: build the bench/peers binaries first")

    mock, url = start_mock(os.path.join(bin_dir, "mock-server"))
    os.environ["AGENT_DISPATCH_URL"] = url
    results = {}
    records = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            plan = [("inproc", 0, opts.inproc_runs)]
            plan += [("http", c, opts.runs) for c in opts.concurrency]
            for mode, conc, n in plan:
                for client in opts.only:
                    if mode == "inproc" and client not in INPROC:
                        continue
                    counts = [
                        instructions(bin_dir, client, scenario_args(mode, url, conc, k), tmp)
                        for k in (n, 2 * n)
                    ]
                    per_run = (counts[1] - counts[0]) / n
                    key = (mode, conc, client, "instr")
                    results[key] = per_run
                    record = {"measure": "instructions", "mode": mode, "concurrency": conc,
                              "client": client, "runs": [n, 2 * n], "totals": counts,
                              "per_run": round(per_run)}
                    records.append(record)
                    print(json.dumps(record), file=sys.stderr)
            if not opts.no_cpu:
                n, conc = opts.cpu_runs, opts.cpu_concurrency
                samples = {c: [] for c in opts.only}
                for _ in range(opts.reps):
                    for client in opts.only:  # interleaved: the load hits every client alike
                        secs = [cpu_seconds(bin_dir, client, scenario_args("http", url, conc, k))
                                for k in (n, 2 * n)]
                        samples[client].append((secs[1] - secs[0]) / n * 1e6)
                for client, us in samples.items():
                    results[("http", conc, client, "cpu")] = statistics.median(us)
                    results[("http", conc, client, "cpu_samples")] = us
                    record = {"measure": "cpu_us", "mode": "http", "concurrency": conc,
                              "client": client, "runs": [n, 2 * n],
                              "per_run_samples": [round(u, 2) for u in us],
                              "per_run_median": round(statistics.median(us), 2)}
                    records.append(record)
                    print(json.dumps(record), file=sys.stderr)
    finally:
        mock.kill()

    if opts.json:
        with open(opts.json, "a") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    report(results, opts)


def ratio(a, b):
    return f"{a / b:.3f}" if a is not None and b else "-"


def report(results, opts):
    get = results.get
    print(f"# instructions per run (callgrind, runs N and 2N; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    print()
    print("| mode | client | instr/run | against its floor |")
    print("|---|---|---:|---:|")
    floors = {"ours": "bare", "ours-stream": "bare-stream"}
    for mode, conc in [("inproc", 0)] + [("http", c) for c in opts.concurrency]:
        label = "in process" if mode == "inproc" else f"HTTP c={conc}"
        for client in opts.only:
            v = get((mode, conc, client, "instr"))
            if v is None:
                continue
            if mode == "inproc":
                rig = get((mode, conc, "rig", "instr"))
                against = f"rig / ours = {ratio(rig, v)}" if client == "ours" and rig else ""
            elif client in floors:
                against = ratio(v, get((mode, conc, floors[client], "instr")))
            elif client == "rig":
                against = f"{ratio(v, get((mode, conc, 'ours', 'instr')))} x ours"
            else:
                against = "(floor)"
            print(f"| {label} | {client} | {v:,.0f} | {against} |")
        s, p = get((mode, conc, "ours-stream", "instr")), get((mode, conc, "ours", "instr"))
        bs, bp = get((mode, conc, "bare-stream", "instr")), get((mode, conc, "bare", "instr"))
        if mode == "http" and None not in (s, p, bs, bp):
            print(f"| {label} | streamed / plain: ours {s / p:.3f}, floor {bs / bp:.3f} | | {s / p / (bs / bp):.3f} |")
    if not opts.no_cpu:
        conc = opts.cpu_concurrency
        print()
        print(f"# CPU time per run (user + system, HTTP c={conc}, runs {opts.cpu_runs} and {2 * opts.cpu_runs}, median of {opts.reps})")
        print()
        print("| client | us/run | against its floor | samples (a wide spread: the machine was busy) |")
        print("|---|---:|---:|---|")
        for client in opts.only:
            v = get(("http", conc, client, "cpu"))
            floor = floors.get(client)
            against = ratio(v, get(("http", conc, floor, "cpu"))) if floor else "(floor)" if client.startswith("bare") else f"{ratio(v, get(('http', conc, 'ours', 'cpu')))} x ours"
            spread = ", ".join(f"{u:.2f}" for u in get(("http", conc, client, "cpu_samples")))
            print(f"| {client} | {v:.2f} | {against} | {spread} |")


if __name__ == "__main__":
    main()
