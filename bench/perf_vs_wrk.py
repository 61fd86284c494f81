"""Is `triton-mini perf` the bottleneck it measures? The same server, model and concurrency, loaded by `wrk` and by
`triton-mini perf` in turn (issue 46): req/s and p50 side by side, and their ratios.

    python bench/perf_vs_wrk.py                          # identity, c = 1 8, 2 rounds (~2 min)
    python bench/perf_vs_wrk.py --concurrency 1 4 16 --rounds 3 --seconds 5

The server (triton-mini on bench/repo, HTTP, `identity`: FP32 [1,16] echoed by a Python model) runs under
`taskset -c 0`; wrk (one thread) and `triton-mini perf` (all its worker processes) under `taskset -c 1`, so each load
generator has one core, as in bench/run.py. wrk posts the very bytes `triton-mini perf` posts (the binary tensor
extension body tritonclient builds), with the same headers, so the server does the same work for both. perf's
figures are its stable windows (perf_analyzer's rule, 10%); wrk's are one run of `--seconds`.
Needs `wrk` and `taskset`. Prints a table; `--save` writes it to bench/results/<date>-perf.md.
"""
import argparse, csv, datetime, os, shutil, statistics, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as bench   # noqa: E402  (bench/run.py: Server, wrk, LUA)

import numpy as np  # noqa: E402
from triton_mini.perf import http_request  # noqa: E402


def wrk_script(work:Path) -> Path:
    "A wrk Lua script posting perf's own request body with its headers."
    path, body, headers = http_request('identity', '', {'INPUT0': np.random.default_rng(0).random((1, 16)).astype(np.float32)})
    (work / 'body.bin').write_bytes(body)
    extra = '\n'.join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    script = work / 'perf_body.lua'
    script.write_text(bench.LUA % (work / 'body.bin', extra))
    return script


def perf(port:int, c:int, core:int, work:Path, interval_ms:int) -> dict:
    out = work / f'perf-{c}.csv'
    cmd = ['taskset', '-c', str(core), sys.executable, '-m', 'triton_mini', 'perf', '-m', 'identity', '-u', f'127.0.0.1:{port}',
           '--concurrency-range', str(c), '-p', str(interval_ms), '-f', str(out), '--input-data', 'random']
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode: raise RuntimeError(r.stderr)
    row = next(csv.DictReader(open(out)))
    return {'rps': float(row['Inferences/Second']), 'p50_us': float(row['p50 latency']), 'p99_us': float(row['p99 latency']),
            'stable': 'Warning: failed to obtain stable' not in r.stdout}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--concurrency', type=int, nargs='+', default=[1, 8])
    p.add_argument('--rounds', type=int, default=2)
    p.add_argument('--seconds', type=int, default=5, help='wrk duration; perf measurement interval is the same')
    p.add_argument('--save', action='store_true')
    args = p.parse_args(argv)
    missing = [t for t in ('wrk', 'taskset') if not shutil.which(t)]
    if missing: sys.exit(f'needs {" and ".join(missing)}: not installed')
    work = Path(tempfile.mkdtemp(prefix='perf-vs-wrk-'))
    script = wrk_script(work)
    bench.MODEL = 'identity'
    bench.BODY = bench.body_for('identity')
    shutil.copytree(HERE / 'repo' / 'identity', work / 'repo' / 'identity')   # a copy, as bench/run.py does
    server = bench.Server('mini', work / 'repo', work, core=0)
    res = {(tool, c): [] for tool in ('wrk', 'perf') for c in args.concurrency}
    try:
        for rnd in range(args.rounds):
            for c in args.concurrency:
                bench.wrk(server.port, c, 2, 1, script)                                        # warm-up
                res['wrk', c].append(bench.wrk(server.port, c, args.seconds, 1, script))
                res['perf', c].append(perf(server.port, c, 1, work, args.seconds * 1000 // 2))
                print(f'round {rnd + 1} c={c}: wrk {res["wrk", c][-1]["rps"]:.0f} req/s p50 {res["wrk", c][-1]["p50_us"]:.0f} us; '
                      f'perf {res["perf", c][-1]["rps"]:.0f} req/s p50 {res["perf", c][-1]["p50_us"]:.0f} us', flush=True)
    finally: server.stop()
    med = lambda tool, c, k: statistics.median(r[k] for r in res[tool, c])
    lines = [f'# triton-mini perf vs wrk ({datetime.date.today()}, {bench.cpu_model()}, load before {os.getloadavg()[0]:.2f})', '',
             f'`python bench/perf_vs_wrk.py --concurrency {" ".join(map(str, args.concurrency))} --rounds {args.rounds} --seconds {args.seconds}`: '
             'triton-mini (HTTP, `identity`, FP32 [1,16], Python backend) on core 0; wrk (1 thread) or `triton-mini perf` on core 1, '
             'the same request bytes. Medians over rounds.', '',
             '| c | wrk req/s | perf req/s | perf / wrk | wrk p50 us | perf p50 us | perf / wrk | wrk p99 us | perf p99 us |',
             '|---|---|---|---|---|---|---|---|---|']
    for c in args.concurrency:
        w, q = {k: med('wrk', c, k) for k in ('rps', 'p50_us', 'p99_us')}, {k: med('perf', c, k) for k in ('rps', 'p50_us', 'p99_us')}
        lines.append(f"| {c} | {w['rps']:.0f} | {q['rps']:.0f} | {q['rps'] / w['rps']:.2f} | {w['p50_us']:.0f} | {q['p50_us']:.0f} | "
                     f"{q['p50_us'] / w['p50_us']:.2f} | {w['p99_us']:.0f} | {q['p99_us']:.0f} |")
    unstable = [c for c in args.concurrency if not all(r['stable'] for r in res['perf', c])]
    if unstable: lines += ['', f'perf did not reach stability (10%) in some rounds at c = {unstable}.']
    text = '\n'.join(lines) + '\n'
    print(text)
    if args.save:
        out = HERE / 'results' / f'{datetime.date.today()}-perf.md'
        out.write_text(text); print(f'written to {out}')


if __name__ == '__main__': main()
