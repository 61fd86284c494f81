#!/usr/bin/env python
"""Where a served request's CPU goes, thread by thread: triton-mini (thread and process mode) under wrk.

Starts triton-mini as bench/run.py does (whole tree pinned to one core, wrk on the other), loads it at each
concurrency, and reads every thread's `/proc/<pid>/task/<tid>/schedstat` (ns on the CPU, times scheduled in)
and `status` (context switches) before and after: CPU µs and wake-ups per request, for the event loop, the
instance's worker thread, the stub's threads, ... Run it under `/work/bin/cpuslot --all`.

    python bench/served_hop.py                          # thread and process, c = 1 8 64, 5 s each
    python bench/served_hop.py --runs thread process process:bench/pipeline_depth.py   # label = mode[:launcher]
    python bench/served_hop.py --workload binary256k    # the 256 KB binary tensor (identity_big) instead of the small JSON one
    python bench/served_hop.py --runs process@../base process --rounds 2   # label = mode[:launcher][@checkout]: another tree's
                                                        # triton_mini (before/after in one run, runs interleaved over rounds)
"""
from __future__ import annotations
import argparse, collections, sys, tempfile, shutil
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench   # bench/run.py: Server, wrk, descendants

def is_stub(cmdline:list) -> bool:
    "A stub process: exec'd (`stub_main` in its command line) or forked by the fork server (its title `triton_mini stub MODEL INSTANCE`)."
    return any(b'stub_main' in c for c in cmdline) or cmdline[0].startswith(b'triton_mini stub ')

def threads(pid:int) -> dict:
    "(process name, thread name) -> [cpu ns, timeslices, voluntary switches, involuntary switches], summed."
    out = collections.defaultdict(lambda: [0, 0, 0, 0])
    for p in bench.descendants(pid):
        root = Path(f'/proc/{p}')
        try: comm = (root / 'cmdline').read_bytes().split(b'\0')
        except OSError: continue
        proc = 'stub' if is_stub(comm) else 'server' if p == pid else None
        if proc is None: continue
        for t in (root / 'task').iterdir():
            try:
                name = (t / 'comm').read_text().strip()
                ns, _, slices = map(int, (t / 'schedstat').read_text().split())
                st = dict(l.split(':\t') for l in (t / 'status').read_text().splitlines() if ':\t' in l)
            except (OSError, ValueError): continue
            name = 'main (event loop)' if proc == 'server' and t.name == str(p) else 'main' if t.name == str(p) else name
            v = out[proc, name]
            v[0] += ns; v[1] += slices; v[2] += int(st['voluntary_ctxt_switches']); v[3] += int(st['nonvoluntary_ctxt_switches'])
    return out

def measure(server, c:int, seconds:int, script:Path) -> tuple:
    before = threads(server.proc.pid)
    r = bench.wrk(server.port, c, seconds, 1, script)
    after = threads(server.proc.pid)
    n = r['requests']
    rows = {k: [(after[k][i] - before.get(k, [0] * 4)[i]) / n for i in range(4)] for k in after}
    return r, rows

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--runs', nargs='+', default=['thread', 'process'], help='MODE or MODE:LAUNCHER (a --mini-launcher script)')
    p.add_argument('--concurrency', type=int, nargs='+', default=[1, 8, 64])
    p.add_argument('--duration', type=int, default=5)
    p.add_argument('--mini-flags', default='')
    p.add_argument('--workload', default='identity', help="a bench/run.py matrix workload (identity, binary256k, json256k, ...)")
    p.add_argument('--rounds', type=int, default=1, help='run every label this many times, interleaved (drift hits all alike)')
    args = p.parse_args(argv)
    lines, summary = [], collections.defaultdict(list)   # (run, c) -> [(req/s, CPU µs, switches) per round]
    with tempfile.TemporaryDirectory(prefix='served_hop_') as tmp:
        work = Path(tmp); repo = work / 'repo'
        shutil.copytree(bench.HERE / 'repo', repo)
        bench.configure(args.workload)   # bench/run.py's model, body and wrk headers for the workload
        script = bench.write_load(work)
        for rnd in range(args.rounds):
            for run in args.runs:
                spec, _, root = run.partition('@')
                mode, _, launcher = spec.partition(':')
                bench.MINI_LAUNCHER = str(Path(launcher or bench.HERE / 'thread_names.py').resolve())   # threads named: split by thread
                bench.MINI_FLAGS = [f'--python-backend-mode={mode}', *args.mini_flags.split()]
                if root: bench.ROOTS['mini'] = Path(root).resolve()
                else: bench.ROOTS.pop('mini', None)
                server = bench.Server('mini', repo, work, 0)
                try:
                    bench.wrk(server.port, 8, 2, 1, script)
                    for c in args.concurrency:
                        r, rows = measure(server, c, args.duration, script)
                        total = sum(v[0] for v in rows.values()) / 1000
                        switches = sum(v[2] + v[3] for v in rows.values())
                        summary[run, c].append((r['rps'], total, switches))
                        lines.append(f'\n### {run}, round {rnd + 1}, c={c}: {r["rps"]:,.0f} req/s, p50 {r["p50_us"]:.0f} µs; '
                                     f'CPU {total:.1f} µs per request on the server core, {switches:.2f} context switches per request\n')
                        lines.append('| process | thread | CPU µs / request | times scheduled in / request | voluntary switches / request | involuntary / request |')
                        lines.append('|---|---|---|---|---|---|')
                        for (proc, name), v in sorted(rows.items(), key=lambda kv: -kv[1][0]):
                            if v[0] < 100 and v[1] < 0.01: continue
                            lines.append(f'| {proc} | {name} | {v[0] / 1000:.1f} | {v[1]:.2f} | {v[2]:.2f} | {v[3]:.2f} |')
                        bad = f', {r["non2xx"] + r["socket_errors"]} answers not 2xx' if r['non2xx'] or r['socket_errors'] else ''
                        print(f'{run} round {rnd + 1} c={c}: {r["rps"]:,.0f} req/s, {total:.1f} µs CPU/request{bad}', flush=True)
                finally: server.stop()
    print('\n'.join(lines))
    print('\n| run | c | req/s (median of rounds) | server CPU µs / request | context switches / request | rounds (req/s) |')
    print('|---|---|---|---|---|---|')
    for (run, c), rs in summary.items():
        med = lambda i: sorted(x[i] for x in rs)[len(rs) // 2]
        print(f'| {run} | {c} | {med(0):,.0f} | {med(1):.1f} | {med(2):.2f} | {" / ".join(f"{x[0]:,.0f}" for x in rs)} |')

if __name__ == '__main__':
    main()
