#!/usr/bin/env python3
"""Sorts the samples of a `perf script -F comm,tid,ip,sym` dump of the checkpoint bench
into the categories of BENCHMARKS.md ("Checkpoint cost of durable runs", "After group
commit"): each sample goes to the first category its call stack matches.

    python3 bench/checkpoint/perf_categories.py sqlite.script
"""
import sys, collections
samples=[]; cur=None
for line in open(sys.argv[1], errors='replace'):
    if not line.strip():
        if cur: samples.append(cur); cur=None
        continue
    if not line.startswith('\t') and not line.startswith(' '):
        cur={'comm':line.split()[0],'frames':[]}
    elif cur is not None:
        parts=line.strip().split(None,1)
        cur['frames'].append(parts[1] if len(parts)>1 else parts[0])
if cur: samples.append(cur)
rules=[
 ("SQLite engine (sqlite3_step: VDBE, B-tree, WAL write incl. its pwrite syscalls)", lambda f: any('sqlite3_step' in x for x in f)),
 ("SQLite statement prepare/finalize/reset/bind (sqlx statement handling)", lambda f: any(x.startswith('sqlite3') or 'sqlx_sqlite::statement' in x for x in f)),
 ("checkpoint state serialized as JSON (Snapshot::serialize, whole transcript per save)", lambda f: any('Snapshot>::serialize' in x or 'runner::snapshot::Snapshot' in x or 'for agent_core::runner::checkpoint::Snapshot' in x for x in f)),
 ("futex wait/wake + context switches (thread hand-offs)", lambda f: any(x in ('do_futex','__x64_sys_futex','schedule','__schedule','finish_task_switch.isra.0') or x.startswith('futex_') for x in f)),
 ("checkpoint writer task: batch building, sqlx query/arguments/rows (no SQLite, no futex)", lambda f: any('checkpoint_writer::' in x for x in f)),
 ("sqlx SQLite worker thread, rest (command channel, result rows)", lambda f: any('sqlx_sqlite::connection::worker' in x for x in f)),
 ("agent-core checkpoint/ledger code, rest (save_checkpoint, Ledger::execute, store calls)", lambda f: any('save_checkpoint' in x or 'ledger::Ledger' in x or 'agent_store::checkpoints' in x or 'runner::checkpoint' in x for x in f)),
 ("malloc/free elsewhere", lambda f: bool(f) and any(k in f[0] for k in ('malloc','free','realloc','unlink_chunk','_int_'))),
 ("tokio scheduler, rest", lambda f: any('tokio::runtime' in x for x in f[:8])),
]
cnt=collections.Counter(); comm=collections.Counter()
for s in samples:
    comm[s['comm']]+=1
    for name,r in rules:
        if r(s['frames']): cnt[name]+=1; break
    else: cnt['other (run loop, base passes, startup)']+=1
n=len(samples)
print("samples",n, dict(comm))
for k,v in cnt.most_common(): print(f"{100*v/n:5.1f}%  {k}")

