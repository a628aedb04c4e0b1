"""Turns the JSON lines of one run.sh run into the markdown tables of BENCHMARKS.md.

Usage: python report.py results/<stamp>/raw.jsonl

Medians over repetitions. Ratios:
- in-process: framework time / ours (how many times slower than agent-core);
- HTTP: framework runs/s / bare reqwest runs/s (and, for PydanticAI, / its own
  client's, openai-py); for streaming, also paired ratios: per repetition, the
  streamed runs/s over the plain runs/s measured right before it (the same minute of
  a shared machine), then the median of those;
- parked: KiB per run = (VmHWM after the runs - VmRSS before them) / runs; above the
  floor = that minus the floor's KiB per run (bare reqwest for the Rust frameworks,
  openai-py for PydanticAI).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from typing import Any

ORDER = ['ours', 'ours-stream', 'ours-anthropic', 'ours-stream-anthropic', 'rig', 'pydantic-ai', 'bare', 'bare-stream', 'openai-py']
LABEL = {
    'ours': 'agent-core',
    'ours-stream': 'agent-core, streamed (run_agent_stream)',
    'ours-anthropic': 'agent-core, Anthropic wire',
    'ours-stream-anthropic': 'agent-core, streamed, Anthropic wire',
    'rig': 'rig 0.44',
    'pydantic-ai': 'PydanticAI 2.68',
    'bare': 'bare reqwest (floor)',
    'bare-stream': 'bare reqwest, streamed (floor of streaming)',
    'openai-py': 'openai-py client (PydanticAI floor)',
}
FLOOR = {'ours': 'bare', 'ours-stream': 'bare-stream', 'ours-anthropic': 'bare', 'ours-stream-anthropic': 'bare-stream', 'rig': 'bare', 'bare': 'bare', 'bare-stream': 'bare-stream', 'pydantic-ai': 'openai-py', 'openai-py': 'openai-py'}


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return 'n/a'
    return f'{value:,.{digits}f}'


def paired(http: dict[tuple[str, int], list[float]], num: str, den: str, c: int) -> list[float]:
    """Per repetition, `num` runs/s over `den` runs/s (run.sh measures them one after the
    other within each repetition)."""
    a, b = http.get((num, c), []), http.get((den, c), [])
    return [x / y for x, y in zip(a, b) if y]


def paired_streaming(http: dict[tuple[str, int], list[float]]) -> None:
    """Streamed over plain at c=64, paired per repetition, for agent-core and for the
    bare floor; and agent-core's streamed/plain over the floor's (what agent-core's own
    streaming machinery costs beyond reading the same events)."""
    ours = paired(http, 'ours-stream', 'ours', 64)
    bare = paired(http, 'bare-stream', 'bare', 64)
    if not ours and not bare:
        return
    print('Streaming at c=64, paired per repetition (the median, and each repetition in order):')
    print()
    print('| ratio | median | per repetition |')
    print('|---|---:|---|')
    for label, values in (
        ('agent-core: run_agent_stream / run_agent', ours),
        ('floor: bare reqwest streamed / bare reqwest', bare),
    ):
        if values:
            each = ', '.join(f'{v:.2f}' for v in values)
            print(f'| {label} | {fmt(median(values), 3)} | {each} |')
    if ours and bare:
        beyond = [o / b for o, b in zip(ours, bare) if b]
        each = ', '.join(f'{v:.2f}' for v in beyond)
        print(f'| agent-core\'s ratio / the floor\'s | {fmt(median(beyond), 3)} | {each} |')
    print()


def main(path: str) -> None:
    rows: list[dict[str, Any]] = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))

    notes: list[str] = []
    pending: dict[tuple[str, str], str] = {}
    inproc: dict[str, list[float]] = defaultdict(list)
    http: dict[tuple[str, int], list[float]] = defaultdict(list)
    parked: dict[str, dict[str, Any]] = {}
    server: dict[str, dict[str, Any]] = {}
    for r in rows:
        fw, scenario = r['framework'], r['scenario']
        if 'pending' in r:
            pending[(fw, scenario)] = r['pending']
            continue
        if r.get('failed'):
            notes.append(f'{fw} {scenario}: the process failed')
            continue
        if r.get('errors'):
            notes.append(f'{fw} {scenario}: {r["errors"]} failed runs, first: {r.get("first_error")}')
        if scenario == 'inproc':
            inproc[fw].append(r['us_per_run'])
        elif scenario == 'http':
            http[(fw, r['concurrency'])].append(r['runs_per_s'])
        elif scenario == 'parked':
            parked[fw] = r
        elif scenario == 'parked-server':
            server[fw] = r['server']

    def pending_cell(fw: str, scenario: str) -> str | None:
        return 'pending' if (fw, scenario) in pending else None

    # In-process.
    print('### In-process: the scripted two-call run (median us per run)')
    print()
    print('| framework | us/run | x slower than agent-core | target |')
    print('|---|---:|---:|---|')
    ours = median(inproc.get('ours', []))
    targets = {'rig': 10, 'pydantic-ai': 500}
    for fw in ORDER:
        if fw not in inproc and (fw, 'inproc') not in pending:
            continue
        value = median(inproc.get(fw, []))
        ratio = value / ours if value is not None and ours else None
        target = ''
        if fw in targets and ratio is not None:
            ok = ratio >= targets[fw]
            target = f'>= {targets[fw]}x: {"met" if ok else "MISSED"}'
        print(
            f'| {LABEL[fw]} | {pending_cell(fw, "inproc") or fmt(value, 1)} | '
            f'{fmt(ratio, 2) if fw != "ours" else "1.0"} | {target} |'
        )
    print()

    # HTTP.
    print('### HTTP: the same run against the shared Rust mock server (median runs/s)')
    print()
    print('| framework | c=1 runs/s | c=1 / bare | c=64 runs/s | c=64 / bare | c=64 / own floor | target |')
    print('|---|---:|---:|---:|---:|---:|---|')
    bare = {c: median(http.get(('bare', c), [])) for c in (1, 64)}
    for fw in ORDER:
        if not any((fw, c) in http for c in (1, 64)) and (fw, 'http') not in pending:
            continue
        cells = []
        for c in (1, 64):
            value = median(http.get((fw, c), []))
            ratio = value / bare[c] if value is not None and bare[c] else None
            cells += [pending_cell(fw, 'http') or fmt(value), fmt(ratio, 2)]
        own = median(http.get((FLOOR[fw], 64), []))
        value64 = median(http.get((fw, 64), []))
        own_ratio = value64 / own if value64 is not None and own else None
        target = ''
        if fw == 'ours':
            ratio64 = value64 / bare[64] if value64 is not None and bare[64] else None
            target = '>= 0.5 of bare at c=64: ' + (
                'pending' if ratio64 is None else ('met' if ratio64 >= 0.5 else 'MISSED')
            )
        if fw == 'ours-stream':
            # Paired per repetition where both were measured (see below), else medians.
            ratio = median(paired(http, 'ours-stream', 'ours', 64))
            if ratio is None:
                plain = median(http.get(('ours', 64), []))
                ratio = value64 / plain if value64 is not None and plain else None
            target = f'>= 0.95 of agent-core at c=64 (paired: {fmt(ratio, 3)}): ' + (
                'pending' if ratio is None else ('met' if ratio >= 0.95 else 'MISSED')
            )
        if fw == 'bare-stream' and bare[64] and value64 is not None:
            target = f'streaming itself: {fmt(value64 / bare[64], 3)} of bare at c=64'
        print(f'| {LABEL[fw]} | {" | ".join(cells)} | {fmt(own_ratio, 2)} | {target} |')
    print()
    paired_streaming(http)

    # Parked.
    print('### Parked: N runs at once on the slow mock (5000 ms per response)')
    print()
    print(
        '| framework | N | peak in flight (server) | idle RSS MiB | peak RSS MiB | KiB/run | floor | '
        'KiB/run above floor | target |'
    )
    print('|---|---:|---:|---:|---:|---:|---|---:|---|')

    def per_run(fw: str) -> float | None:
        r = parked.get(fw)
        if not r or not r.get('runs'):
            return None
        return (r['peak_kib'] - r['idle_kib']) / r['runs']

    for fw in ORDER:
        if fw not in parked and (fw, 'parked') not in pending:
            continue
        if (fw, 'parked') in pending:
            print(f'| {LABEL[fw]} | | | | pending | pending | {LABEL[FLOOR[fw]]} | pending | <= 8 KiB above bare |')
            continue
        r = parked[fw]
        mine, floor = per_run(fw), per_run(FLOOR[fw])
        above = mine - floor if mine is not None and floor is not None and FLOOR[fw] != fw else None
        target = ''
        if fw == 'ours':
            target = '<= 8 KiB above bare: ' + ('met' if above is not None and above <= 8 else 'MISSED')
        peak_inflight = server.get(fw, {}).get('peak_inflight')
        print(
            f'| {LABEL[fw]} | {r["runs"]:,} | {fmt(peak_inflight)} | {fmt(r["idle_kib"] / 1024, 1)} | '
            f'{fmt(r["peak_kib"] / 1024, 1)} | {fmt(mine, 1)} | {LABEL[FLOOR[fw]] if FLOOR[fw] != fw else "-"} | '
            f'{fmt(above, 1) if above is not None else "-"} | {target} |'
        )
    print()
    for (fw, scenario), why in sorted(pending.items()):
        notes.append(f'{fw} {scenario}: pending: {why}')
    if notes:
        print('Notes:')
        for note in dict.fromkeys(notes):
            print(f'- {note}')


if __name__ == '__main__':
    main(sys.argv[1])
