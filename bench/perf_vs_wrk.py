"""Is `triton-mini perf` the bottleneck it measures? The same server, model and concurrency, loaded by a native load
generator and by `triton-mini perf` in turn (issue 46): req/s and p50 side by side, and their ratios. HTTP is loaded
by `wrk`, gRPC (ModelInfer, unary) by `h2load`; each posts the very bytes perf posts.

    python bench/perf_vs_wrk.py                          # identity, HTTP, triton-mini, c = 1 8, 2 rounds (~2 min)
    python bench/perf_vs_wrk.py --model-ms 1 --servers mini triton --protocols http grpc --perf-flags=--async
                                                         # issue 46's check: a model that takes >= 1 ms, both servers
    python bench/perf_vs_wrk.py --model-ms 1 --servers mini triton --protocols grpc --perf-grpc grpcio h2
                                                         # perf's synchronous gRPC client: grpcio's, then its own

`--model-ms N` serves `slow`, generated at run time: identity's config and an echo that sleeps N ms in `execute` (one
instance), so the server is not the one limit a fast model would make it. The server (triton-mini on bench/repo, or
real Triton 2.51 with `--servers triton`) runs under `taskset -c 0`; wrk (one thread), h2load (one thread) and
`triton-mini perf` (all its worker processes) under `taskset -c 1`, so each load generator has one core, as in
bench/run.py. perf's figures are its stable windows (perf_analyzer's rule, 10%); wrk's and h2load's are one run of
`--seconds`. Needs `wrk`, `h2load` (gRPC) and `taskset`. Prints a table; `--save` writes it to
bench/results/<date>-perf-vs-native.md.
"""
import argparse, csv, datetime, os, shutil, statistics, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as bench   # noqa: E402  (bench/run.py: Server, wrk, LUA)
import grpc_run      # noqa: E402  (bench/grpc_run.py: h2load, frame, infer_request)

import numpy as np  # noqa: E402
from triton_mini.perf import http_request  # noqa: E402


SLOW_MODEL = """import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        time.sleep(%r)   # a model that takes --model-ms
        return [pb_utils.InferenceResponse([pb_utils.Tensor('OUTPUT0', pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy())])
                for r in requests]
"""

def make_repo(work:Path, model_ms:float) -> str:
    "The repository both servers load: bench/repo's identity, or `slow` (identity that sleeps model_ms) when > 0."
    shutil.copytree(HERE / 'repo' / 'identity', work / 'repo' / 'identity')   # a copy, as bench/run.py does
    if not model_ms: return 'identity'
    slow = work / 'repo' / 'slow'
    (slow / '1').mkdir(parents=True)
    (slow / 'config.pbtxt').write_text((HERE / 'repo' / 'identity' / 'config.pbtxt').read_text().replace('name: "identity"', 'name: "slow"'))
    (slow / '1' / 'model.py').write_text(SLOW_MODEL % (model_ms / 1000))
    return 'slow'


def wrk_script(work:Path, model:str) -> Path:
    "A wrk Lua script posting perf's own request body with its headers."
    path, body, headers = http_request(model, '', {'INPUT0': np.random.default_rng(0).random((1, 16)).astype(np.float32)})
    (work / 'body.bin').write_bytes(body)
    extra = '\n'.join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    script = work / 'perf_body.lua'
    script.write_text(bench.LUA % (work / 'body.bin', extra))
    return script


def h2load_body(work:Path, model:str) -> Path:
    "h2load's `-d` file: one framed ModelInferRequest for the model's FP32 [1,16] input."
    req = grpc_run.infer_request()
    req.model_name = model
    (body := work / 'unary.bin').write_bytes(grpc_run.frame(req))
    return body


def native(server, protocol:str, c:int, seconds:int, work:Path, load:dict) -> dict:
    "wrk (HTTP) or h2load (gRPC) at c requests in flight: req/s, p50 and p99 in µs."
    if protocol == 'http': return bench.wrk(server.port, c, seconds, 1, load['http'])
    r = grpc_run.h2load(server.grpc_port, 'ModelInfer', load['grpc'], c, seconds, 1, log=work / 'h2load.log')
    if r['failed']: raise RuntimeError(f'h2load: {r["failed"]} calls failed')
    return {'rps': r['calls_per_s'], 'p50_us': r.get('p50_us', float('nan')), 'p99_us': r.get('p99_us', float('nan'))}


def perf(port:int, protocol:str, model:str, c:int, core:int, work:Path, interval_ms:int, flags:list, grpc_client=None) -> dict:
    out = work / f'perf-{c}.csv'
    cmd = ['taskset', '-c', str(core), sys.executable, '-m', 'triton_mini', 'perf', '-m', model, '-u', f'127.0.0.1:{port}',
           '-i', protocol, '--concurrency-range', str(c), '-p', str(interval_ms), '-f', str(out), '--input-data', 'random', *flags]
    env = {**os.environ, 'TRITON_MINI_PERF_GRPC': grpc_client} if grpc_client else None   # perf's synchronous gRPC client
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode: raise RuntimeError(r.stderr)
    row = next(csv.DictReader(open(out)))
    return {'rps': float(row['Inferences/Second']), 'p50_us': float(row['p50 latency']), 'p99_us': float(row['p99 latency']),
            'stable': 'Warning: failed to obtain stable' not in r.stdout}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--concurrency', type=int, nargs='+', default=[1, 8])
    p.add_argument('--rounds', type=int, default=2)
    p.add_argument('--seconds', type=int, default=5, help='wrk/h2load duration; perf measurement interval is half of it')
    p.add_argument('--model-ms', type=float, default=0, help='serve `slow`, an identity that sleeps this long (0: identity)')
    p.add_argument('--servers', nargs='+', default=['mini'], choices=('mini', 'triton'))
    p.add_argument('--protocols', nargs='+', default=['http'], choices=('http', 'grpc'))
    p.add_argument('--perf-flags', default='', help="more flags for triton-mini perf, one string: --perf-flags=--async")
    p.add_argument('--perf-grpc', nargs='+', default=[None], choices=('grpcio', 'h2'),
                   help="perf's gRPC client (TRITON_MINI_PERF_GRPC), each in turn against the same native run: grpcio h2")
    p.add_argument('--save', action='store_true')
    args = p.parse_args(argv)
    needs = ['taskset'] + ['wrk'] * ('http' in args.protocols) + ['h2load'] * ('grpc' in args.protocols)
    missing = [t for t in needs if not shutil.which(t)]
    if missing: sys.exit(f'needs {" and ".join(missing)}: not installed')
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix='perf-vs-wrk-'))
    model = make_repo(work, args.model_ms)
    load = {'http': wrk_script(work, model), 'grpc': h2load_body(work, model) if 'grpc' in args.protocols else None}
    bench.MODEL, bench.BODY = model, bench.body_for('identity')
    bench.ECHO_MODELS.add(model)
    bench.MINI_GRPC = 'grpc' in args.protocols
    flags = args.perf_flags.split()
    keys = [(s, proto, c) for s in args.servers for proto in args.protocols for c in args.concurrency]
    clients = lambda proto: args.perf_grpc if proto == 'grpc' else [None]
    res = {('native', *k): [] for k in keys} | {('perf', *k, v): [] for k in keys for v in clients(k[1])}
    for rnd in range(args.rounds):
        for kind in args.servers:   # servers take turns each round, as in bench/run.py
            server = bench.Server(kind, work / 'repo', work, core=0)
            try:
                for proto in args.protocols:
                    port = server.port if proto == 'http' else server.grpc_port
                    for c in args.concurrency:
                        native(server, proto, c, 2, work, load)                                   # warm-up
                        res['native', kind, proto, c].append(native(server, proto, c, args.seconds, work, load))
                        n = res['native', kind, proto, c][-1]
                        for v in clients(proto)[::1 if rnd % 2 == 0 else -1]:   # the clients take turns going first
                            res['perf', kind, proto, c, v].append(q := perf(port, proto, model, c, 1, work, args.seconds * 1000 // 2, flags, v))
                            print(f'round {rnd + 1} {kind} {proto} c={c}: native {n["rps"]:.0f} req/s p50 {n["p50_us"]:.0f} us; '
                                  f'perf{" (" + v + ")" if v else ""} {q["rps"]:.0f} req/s p50 {q["p50_us"]:.0f} us', flush=True)
            finally: server.stop()
    med = lambda k, key: statistics.median(r[key] for r in res[k])
    names = {'mini': 'triton-mini', 'triton': 'real Triton 2.51'}
    tools = {'http': 'wrk', 'grpc': 'h2load'}
    what = f'`slow` (identity sleeping {args.model_ms:g} ms, one instance)' if args.model_ms else '`identity` (FP32 [1,16] echoed)'
    lines = [f'# triton-mini perf vs wrk and h2load ({datetime.datetime.now():%Y-%m-%d %H:%M}, {bench.cpu_model()}, '
             f'load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after)', '',
             f'`python bench/perf_vs_wrk.py {" ".join(argv if argv is not None else sys.argv[1:])}`: {what}, Python backend, '
             'the server on core 0; the native tool (wrk, or h2load for gRPC ModelInfer; one thread) or '
             f'`triton-mini perf{" " + args.perf_flags if args.perf_flags else ""}` on core 1, the same request bytes. '
             'Medians over rounds; `perf / native` within 0.85-1.15 is issue 46\'s criterion.', '',
             '| server | protocol | c | native req/s | perf req/s | perf / native | native p50 us | perf p50 us | perf / native | native p99 us | perf p99 us |',
             '|---|---|---|---|---|---|---|---|---|---|---|']
    for k, v in ((k, v) for k in keys for v in clients(k[1])):
        w, q = ({key: med(rk, key) for key in ('rps', 'p50_us', 'p99_us')} for rk in (('native', *k), ('perf', *k, v)))
        lines.append(f"| {names[k[0]]} | {k[1]} ({tools[k[1]]}{', perf ' + v if v else ''}) | {k[2]} | {w['rps']:.0f} | {q['rps']:.0f} | {q['rps'] / w['rps']:.2f} | "
                     f"{w['p50_us']:.0f} | {q['p50_us']:.0f} | {q['p50_us'] / w['p50_us']:.2f} | {w['p99_us']:.0f} | {q['p99_us']:.0f} |")
    unstable = [k[1:] for k in res if k[0] == 'perf' and not all(r['stable'] for r in res[k])]
    if unstable: lines += ['', f'perf did not reach stability (10%) in some rounds at: {unstable}.']
    text = '\n'.join(lines) + '\n'
    print(text)
    if args.save:
        out = bench.result_path('-perf-vs-native', '.md')
        out.parent.mkdir(exist_ok=True); out.write_text(text); print(f'written to {out}')


if __name__ == '__main__': main()
