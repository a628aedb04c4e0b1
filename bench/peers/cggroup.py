#!/usr/bin/env python3
"""The streaming path's own cost, grouped by crate: ((S2 - S1) - (P2 - P1)) / N.

P1, P2 are callgrind outputs of a plain client (N and 2N runs), S1, S2 of its streamed
counterpart (same lengths); every function's self cost enters its group (allocation,
memcpy, serde_json, sse-stream, agent-core, the HTTP stack, the runtime, the rest) by
the source file callgrind names for it, so code inlined into a caller counts where its
lines are. Compare the totals of two clients; the split between groups is a guide (a
floor's derived serde structs are in "the rest", agent-core's hand-written visitors in
"agent-core").

    valgrind --tool=callgrind --callgrind-out-file=cg.ours.1000 \
        target/release/ours-bench http --url URL --concurrency 64 --runs 1000
    ... the same for ours-stream, bare, bare-stream, and --runs 2000
    python3 cggroup.py cg.ours.1000 cg.ours.2000 cg.ours-stream.1000 cg.ours-stream.2000 1000

Needs `callgrind_annotate` (valgrind) on the PATH.
"""
import collections
import re
import subprocess
import sys

LINE = re.compile(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)")


def load(path):
    """Self cost per function (file:function, the binary's name dropped)."""
    out = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--threshold=100", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cost = collections.Counter()
    for line in out.splitlines():
        m = LINE.match(line)
        if m and "=>" not in line and "PROGRAM" not in line and "annotated" not in line:
            name = re.sub(r" \[[^]]*\]$", "", m.group(2).strip())
            cost[name] += int(m.group(1).replace(",", ""))
    return cost


def group(key):
    file, _, name = key.partition(":")
    if ("memcpy" in key) or ("memmove" in key):
        return "memcpy"
    if re.search(r"libc\.so|malloc|free|realloc|_int_|__rust_alloc|__rdl|alloc::alloc", key):
        return "allocation"
    if "serde_json" in file or "serde_core" in file:
        return "serde_json"
    if "sse-stream" in file:
        return "sse-stream"
    if "agent-core" in file or "agent_core" in name:
        return "agent-core"
    if any(s in file for s in ("hyper", "reqwest", "http-", "tower")):
        return "http stack"
    if "tokio" in file or "futures" in file:
        return "runtime"
    return "rest"


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    p1, p2, s1, s2 = (load(f) for f in sys.argv[1:5])
    runs = int(sys.argv[5])
    groups = collections.Counter()
    for key in set(p1) | set(p2) | set(s1) | set(s2):
        groups[group(key)] += ((s2[key] - s1[key]) - (p2[key] - p1[key])) / runs
    for name, value in groups.most_common():
        print(f"{value:10.0f}  {name}")
    print(f"{sum(groups.values()):10.0f}  total")


if __name__ == "__main__":
    main()
