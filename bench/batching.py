#!/usr/bin/env python
"""Why batches form as they do: real Triton and triton-mini serving mlp_batched under the same wrk load, their
batch-size distributions (from each server's /v2/models/<model>/stats batch_stats, before and after the load),
and for triton-mini a trace of every batch (bench/batch_trace.py): why it was sent, how long its oldest request
waited, and when requests arrive relative to the previous batch's responses.

    /work/bin/cpuslot --all python bench/batching.py --concurrency 8 --duration 5
    python bench/batching.py --exp-launcher /tmp/old_main_launcher.py   # a third server, traced too if it can be

Prints markdown; writes nothing (paste what matters into bench/results).
"""
import argparse, collections, json, os, signal, statistics, sys, tempfile, shutil, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as R

def batch_counts(port, model):
    "batch size -> executions so far, from the statistics extension."
    st = json.loads(R.http(port, f'/v2/models/{model}/stats')[1])['model_stats'][0]
    return {int(b['batch_size']): int(b['compute_infer']['count']) for b in st.get('batch_stats', [])}, st

def pct(xs, q): return sorted(xs)[min(len(xs) - 1, int(q / 100 * len(xs)))] if xs else float('nan')

def summarize_trace(T) -> list:
    bs, settled, arr = T['batches'], T['settled'], sorted(T['arrivals'])
    out = [f'{len(bs)} batches, {len(arr)} arrivals traced']
    for why in ('preferred', 'delay', 'other'):
        sel = [b for b in bs if b['why'] == why]
        if not sel: continue
        w = [b['waited_us'] for b in sel]
        out.append(f'- sent as `{why}`: {len(sel)} ({100 * len(sel) / len(bs):.1f}%), sizes '
                   f'{dict(sorted(collections.Counter(b["size"] for b in sel).items()))}, oldest waited p50 {pct(w, 50):.0f} / '
                   f'p99 {pct(w, 99):.0f} / max {max(w):.0f} µs, after a timed wait {sum(b["timed_wait"] for b in sel)}, '
                   f'rule evaluations (wake-ups) per batch {statistics.mean(b.get("evals", 1) for b in sel):.2f}')
    # arrivals relative to the end of the previous batch's delivery (the worker is free from then on)
    ends = sorted(e for _, _, e in settled)
    import bisect
    gaps, during = [], 0
    starts = sorted(s for s, _, _ in settled)
    for a in arr:
        i = bisect.bisect_right(ends, a) - 1
        j = bisect.bisect_right(starts, a) - 1
        if j >= 0 and j > i: during += 1            # arrived while a batch was executing or being delivered
        elif i >= 0: gaps.append((a - ends[i]) / 1e3)
    out.append(f'- arrivals while a batch executes or is delivered: {during} ({100 * during / max(len(arr), 1):.1f}%); '
               f'the others come p50 {pct(gaps, 50):.0f} / p90 {pct(gaps, 90):.0f} / p99 {pct(gaps, 99):.0f} µs after the previous batch was delivered')
    gcs = T.get('gc', [])
    if gcs:
        by_gen = collections.defaultdict(list)
        for s0, e0, g in gcs: by_gen[g].append((e0 - s0) / 1e3)
        out.append('- garbage collections: ' + ', '.join(f'gen{g} {len(v)} (p50 {pct(v, 50):.0f} / max {max(v):.0f} µs)' for g, v in sorted(by_gen.items())))
        late = [b for b in bs if b['why'] == 'delay' and b['size'] > 1]
        hit = sum(any(b['t'] - b['waited_us'] * 1e3 - 1e6 <= e0 and s0 <= b['t'] for s0, e0, _ in gcs) for b in late)
        if late: out.append(f'- delay-expired batches of 2+ with a collection while they waited: {hit} of {len(late)}')
    ex = [(e - s) / 1e3 for s, e, _ in settled]; dl = [(d - e) / 1e3 for _, e, d in settled]
    if ex: out.append(f'- execute p50 {pct(ex, 50):.0f} µs, delivering the responses p50 {pct(dl, 50):.0f} / p99 {pct(dl, 99):.0f} µs')
    return out

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--model', default='mlp_batched')
    p.add_argument('--concurrency', type=int, nargs='+', default=[8])
    p.add_argument('--duration', type=int, default=5)
    p.add_argument('--warmup', type=int, default=2)
    p.add_argument('--rounds', type=int, default=1)
    p.add_argument('--only', action='append', choices=('triton', 'mini', 'exp'))
    p.add_argument('--exp-launcher', metavar='SCRIPT')
    p.add_argument('--keep', metavar='DIR', help='copy the traces (JSON) here')
    p.add_argument('--mini-launcher', metavar='SCRIPT', default=str(Path(__file__).with_name('batch_trace.py')))
    args = p.parse_args(argv)
    R.configure(args.model)
    R.MINI_LAUNCHER = str(Path(args.mini_launcher).resolve())
    kinds = args.only or ['triton', 'mini'] + (['exp'] if args.exp_launcher else [])
    if args.exp_launcher: R.EXP_LAUNCHER = str(Path(args.exp_launcher).resolve())
    lines = []
    with tempfile.TemporaryDirectory(prefix='triton_mini_batching_') as tmp:
        work = Path(tmp); repo = work / 'repo'
        shutil.copytree(R.HERE / 'repo', repo)
        script = R.write_load(work)
        for rnd in range(args.rounds):
            for c in args.concurrency:
                for kind in kinds:
                    trace = work / f'{kind}-{c}.json'
                    os.environ['BATCH_TRACE'] = str(trace)
                    server = R.Server(kind, repo, work, 0)
                    try:
                        R.wrk(server.port, c, args.warmup, 1, script)
                        if kind != 'triton': os.kill(server.proc.pid, signal.SIGUSR1)
                        time.sleep(0.2)
                        before, _ = batch_counts(server.port, args.model)
                        r = R.wrk(server.port, c, args.duration, 1, script)
                        after, st = batch_counts(server.port, args.model)
                    finally: server.stop()
                    dist = {b: after.get(b, 0) - before.get(b, 0) for b in sorted(after)}
                    dist = {b: n for b, n in dist.items() if n}
                    execs = sum(dist.values()); inf = sum(b * n for b, n in dist.items())
                    lines += [f'### {R.NAMES[kind]}, c={c} (round {rnd + 1})', '',
                              f'{r["rps"]:,.0f} req/s, p50 {r["p50_us"] / 1e3:.2f} ms, p99 {r["p99_us"] / 1e3:.2f} ms; '
                              f'{execs:,} executions, mean batch {inf / max(execs, 1):.2f}', '',
                              'batch sizes (share of executions): ' + ', '.join(f'{b}: {100 * n / execs:.1f}%' for b, n in dist.items()), '']
                    b8 = next((b for b in st.get('batch_stats', []) if int(b['batch_size']) == max(dist, default=0)), None)
                    if b8: lines += [f'per execution of {b8["batch_size"]} (since start, µs): ' + ', '.join(
                        f'{k} {int(b8[k]["ns"]) / max(int(b8[k]["count"]), 1) / 1e3:.0f}' for k in ('compute_input', 'compute_infer', 'compute_output')), '']
                    if trace.exists():
                        lines += summarize_trace(json.loads(trace.read_text())) + ['']
                        if args.keep: shutil.copy(trace, Path(args.keep) / f'{kind}-c{c}-r{rnd + 1}.json')
                    print('\n'.join(lines[-8:]), flush=True)
    print('\n'.join(lines))

if __name__ == '__main__':
    main()
