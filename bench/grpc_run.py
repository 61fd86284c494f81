#!/usr/bin/env python
"""gRPC throughput of real Triton and triton-mini serving bench/repo/identity (FP32 [1,16]), side by side.

The servers are bench/run.py's (its Server class: the whole process tree pinned to one core); the load generator is
h2load (nghttp2's HTTP/2 benchmark, C), pinned to the other core, POSTing a prebuilt gRPC message:

* unary: `/inference.GRPCInferenceService/ModelInfer`, one length-prefixed ModelInferRequest per HTTP/2 stream,
  exactly what tritonclient.grpc's `infer` sends (the tensor in `raw_input_contents`). Concurrency c is c streams in
  flight over min(c, 4) connections (h2load `-c` connections x `-m` streams each).
* streaming: `/inference.GRPCInferenceService/ModelStreamInfer`, one bidirectional gRPC stream per client that writes
  `--stream-messages` requests back to back (tritonclient's `async_stream_infer` does not wait for answers either),
  then closes its side; the server answers each, then ends the stream and the client opens the next. c is the number
  of such streams at once; inferences/s = streams/s x messages per stream.

h2load counts an HTTP 200 as a success even when the gRPC status in the trailers is an error, so each server is
first checked with tritonclient.grpc (unary and stream answers equal the input) and every measurement checks that
the response bytes per call are those of the real answers. The client's CPU time (getrusage of h2load) is reported:
well under one core means the load generator was not the bottleneck.

    python bench/grpc_run.py                                 # Triton and triton-mini, c = 1 8 64, 3 rounds of 10 s
    python bench/grpc_run.py --only mini --rounds 1 --duration 5 --no-save
    python bench/grpc_run.py --base /path/to/checkout        # + triton-mini from another checkout ("before") as `base`
    python bench/grpc_run.py --mini-flags='--python-backend-mode=process'
    python bench/grpc_run.py --ceiling                       # + bench/grpc_bare.py: what grpc.aio alone reaches
    python bench/grpc_run.py --only triton --only bare --only h2bare --only h2lib   # + own HTTP/2 echo (grpc_h2_bare.py)

`bench/run.py --matrix` runs the same load as its workloads grpc_unary and grpc_stream (`workload` below), so the
README's table judges issue 14's gRPC targets from the matrix JSON.
"""
from __future__ import annotations
import argparse, collections, datetime, json, os, re, resource, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run   # bench/run.py: Server, pin_tree, result_path, cpu_model, git_rev

SERVICE = '/inference.GRPCInferenceService/'
STREAM_MESSAGES = 32   # --stream-messages: requests each ModelStreamInfer stream writes (bench/run.py --matrix uses this)
DATA = [float(i % 7) for i in range(16)]

def frame(message) -> bytes:
    "A gRPC length-prefixed message: not compressed (0), 4-byte big-endian length, the protobuf."
    data = message.SerializeToString()
    return b'\x00' + len(data).to_bytes(4, 'big') + data

def infer_request():
    "The ModelInferRequest tritonclient.grpc sends for identity's FP32 [1,16] input."
    import numpy as np
    from tritonclient.grpc import service_pb2 as pb
    req = pb.ModelInferRequest(model_name='identity')
    req.inputs.add(name='INPUT0', datatype='FP32', shape=[1, 16])
    req.raw_input_contents.append(np.array([DATA], dtype=np.float32).tobytes())
    return req

def write_bodies(work:Path, stream_messages:int) -> dict:
    "h2load's `-d` files: one framed ModelInferRequest (unary), `stream_messages` of them back to back (stream)."
    bodies = {'unary': work / 'unary.bin', 'stream': work / 'stream.bin'}
    bodies['unary'].write_bytes(frame(infer_request()))
    bodies['stream'].write_bytes(frame(infer_request()) * stream_messages)
    return bodies

def check(port:int) -> dict:
    "Answer sizes (bytes of data per unary call / per stream message) after checking both RPCs answer the input."
    import numpy as np, queue
    import tritonclient.grpc as tc
    x = np.array([DATA], dtype=np.float32)
    client = tc.InferenceServerClient(f'127.0.0.1:{port}')
    inp = tc.InferInput('INPUT0', [1, 16], 'FP32'); inp.set_data_from_numpy(x)
    r = client.infer('identity', [inp])
    if not np.array_equal(r.as_numpy('OUTPUT0'), x): raise RuntimeError(f'unary answered {r.get_response()}')
    unary = 5 + r.get_response().ByteSize()
    got = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    client.async_stream_infer('identity', [inp])
    result, error = got.get(timeout=10)
    client.stop_stream(); client.close()
    if error is not None or not np.array_equal(result.as_numpy('OUTPUT0'), x): raise RuntimeError(f'stream answered {error}')
    from tritonclient.grpc import service_pb2 as pb
    return {'unary': unary, 'stream': 5 + pb.ModelStreamInferResponse(infer_response=result.get_response()).ByteSize()}


# ---------------------------------------------------------------------------------------------------------
# Load

def layout(c:int) -> tuple:
    "(connections, streams per connection) for c calls in flight."
    conns = min(c, 4)
    return conns, max(c // conns, 1)

def h2load(port:int, rpc:str, body:Path, c:int, seconds:float, core:int, log:Path|None=None) -> dict:
    conns, streams = layout(c)
    cmd = ['taskset', '-c', str(core), 'h2load', f'-c{conns}', f'-m{streams}', '-t1', '-w24', '-W24', f'-D{seconds:g}',
           '-H', 'content-type: application/grpc', '-H', 'te: trailers', '-d', str(body),
           *([f'--log-file={log}'] if log else []), f'http://127.0.0.1:{port}{SERVICE}{rpc}']
    before, load = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r'finished in ([\d.]+)(m?s), ([\d.]+) req/s', out)
    req = re.search(r'requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout', out)
    data = re.search(r'\((\d+)\) data', out)
    if not (m and req and data): raise RuntimeError(f'h2load printed no summary:\n{out}')
    secs = float(m[1]) / (1000 if m[2] == 'ms' else 1)
    r = {'calls': int(req[4]), 'failed': int(req[5]) + int(req[6]) + int(req[7]), 'seconds': secs, 'data_bytes': int(data[1]),
         'client_cpu': (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / secs, 'load': load,
         'connections': conns, 'streams': streams}
    r['calls_per_s'] = float(m[3])   # calls finished / the -D duration
    if log is not None and log.exists():
        lat = sorted(int(l.split('\t')[2]) for l in log.read_text().splitlines() if l.count('\t') >= 2)
        if lat: r['p50_us'], r['p99_us'] = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        log.unlink()
    return r

def measure(server, sizes, args, work:Path, bodies:dict) -> dict:
    out = {}
    for rpc in args.rpc:
        per = sizes['unary'] if rpc == 'unary' else sizes['stream'] * args.stream_messages
        for c in args.concurrency:
            r = h2load(server.grpc_port, 'ModelInfer' if rpc == 'unary' else 'ModelStreamInfer', bodies[rpc], c,
                       args.duration, args.client_core, work / 'h2load.log')
            # an error answer is trailers only (no data), and h2load also counts the data of calls cut off at the end
            r['bytes_ok'] = r['calls'] > 0 and r['data_bytes'] >= r['calls'] * per
            r['rps'] = r['calls_per_s'] * (1 if rpc == 'unary' else args.stream_messages)
            out[rpc, c] = r
            print(f'  {rpc:<6} c={c:<3} {r["rps"]:9.0f} infer/s  p50 {r.get("p50_us", 0) / 1000:7.2f} ms  '
                  f'p99 {r.get("p99_us", 0) / 1000:7.2f} ms  failed {r["failed"]}  bytes {"ok" if r["bytes_ok"] else "WRONG"}  '
                  f'client CPU {100 * r["client_cpu"]:.0f}%  load {r["load"]:.2f}', flush=True)
    return out

class BareServer:
    "bench/grpc_bare.py (the grpc.aio ceiling) or grpc_h2_bare.py (own HTTP/2 loop) pinned like run.Server, with the same attributes."
    SCRIPTS = {'bare': ['grpc_bare.py'], 'h2bare': ['grpc_h2_bare.py'], 'h2lib': ['grpc_h2_bare.py', '--h2']}
    def __init__(self, workdir:Path, core:int, kind:str='bare'):
        import socket
        self.kind, self.grpc_port = kind, run.free_port()
        self.log = workdir / f'{kind}.log'
        script, *extra = self.SCRIPTS[kind]
        self.proc = subprocess.Popen(['taskset', '-c', str(core), sys.executable, str(HERE / script), str(self.grpc_port), *extra],
                                     start_new_session=True, stdout=open(self.log, 'w'), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try: socket.create_connection(('127.0.0.1', self.grpc_port), 1).close(); break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline: raise RuntimeError(self.log.read_text()[-2000:])
                time.sleep(0.2)
        self.pinned = run.pin_tree(self.proc.pid, core)
    stop = run.Server.stop

def run_all(args, work:Path, repo:Path, bodies:dict) -> dict:
    results = collections.defaultdict(list)
    for rnd in range(1, args.rounds + 1):
        for kind in args.only:
            server = BareServer(work, args.server_core, kind) if kind in BareServer.SCRIPTS else run.Server(kind, repo, work, args.server_core)
            try:
                sizes = check(server.grpc_port)
                print(f'round {rnd}/{args.rounds} {run.NAMES[kind]}: pinned {server.pinned[0]} processes / '
                      f'{server.pinned[1]} threads to core {args.server_core}; answers checked', flush=True)
                h2load(server.grpc_port, 'ModelInfer', bodies['unary'], 8, args.warmup, args.client_core)   # warm-up
                for key, r in measure(server, sizes, args, work, bodies).items(): results[(kind, *key)].append(r)
            finally: server.stop()
    return results


# ---------------------------------------------------------------------------------------------------------
# bench/run.py --matrix: the gRPC workloads

def summary(rs:list) -> dict:
    "One matrix row (server, rpc, concurrency): medians over rounds, as run.summary gives for wrk; p50/p99 only if h2load logged them."
    med = lambda key: statistics.median(r[key] for r in rs)
    out = {'rps': med('rps')}
    if all('p50_us' in r for r in rs): out.update(p50_ms=med('p50_us') / 1000, p99_ms=med('p99_us') / 1000)
    return dict(out, errors=sum(r['failed'] for r in rs), answers_ok=all(r['bytes_ok'] for r in rs),
                client_cpu=max(r['client_cpu'] for r in rs), rps_rounds=[r['rps'] for r in rs])

def workload(args, work:Path, repo:Path, rpc:str) -> dict:
    "`rpc` ('unary' or 'stream') for bench/run.py --matrix: run_all with run's settings, {server: {c: summary}}."
    opts = argparse.Namespace(**vars(args))
    opts.rpc, opts.stream_messages = [rpc], STREAM_MESSAGES
    results = run_all(opts, work, repo, write_bodies(work, STREAM_MESSAGES))
    return {k: {str(c): summary(results[k, rpc, c]) for c in args.concurrency} for k in args.only}


# ---------------------------------------------------------------------------------------------------------
# Report

def report(args, results, load_before, load_after) -> str:
    med = lambda k, rpc, c, key: statistics.median(r.get(key, float('nan')) for r in results[k, rpc, c])
    lines = [f'# gRPC benchmark {datetime.datetime.now():%Y-%m-%d %H:%M}', '',
             f'identity Python model, FP32 [1,16] over gRPC (bench/grpc_run.py); each server pinned to core {args.server_core}, '
             f'h2load (1 thread) to core {args.client_core}; {args.rounds} interleaved round(s) of {args.duration:g} s per '
             f'measurement; medians over rounds. unary: c calls in flight over min(c, 4) connections. stream: c '
             f'ModelStreamInfer streams, each writing {args.stream_messages} requests back to back; infer/s counts '
             f'inferences. p50/p99: per call (unary) or per whole stream.', '',
             f'Machine: {os.cpu_count()} cores, {run.cpu_model()}; load average (1 min) {load_before:.2f} before, '
             f'{load_after:.2f} after; triton-mini at {run.git_rev()}'
             + (f', flags `{" ".join(run.MINI_FLAGS)}`' if run.MINI_FLAGS else '')
             + (f'; base = triton-mini from {args.base_label}' if args.base else '') + '.', '',
             '| rpc | c | server | infer/s | p50 ms | p99 ms | failed | answers | h2load CPU | infer/s per round |',
             '|---|---|---|---|---|---|---|---|---|---|']
    for rpc in args.rpc:
        for c in args.concurrency:
            for kind in args.only:
                rs = results[kind, rpc, c]
                lines.append(f'| {rpc} | {c} | {run.NAMES[kind]} | {med(kind, rpc, c, "rps"):,.0f} | '
                             f'{med(kind, rpc, c, "p50_us") / 1000:.2f} | {med(kind, rpc, c, "p99_us") / 1000:.2f} | '
                             f'{sum(r["failed"] for r in rs)} | {"ok" if all(r["bytes_ok"] for r in rs) else "WRONG"} | '
                             f'{100 * max(r["client_cpu"] for r in rs):.0f}% | {", ".join(format(r["rps"], ",.0f") for r in rs)} |')
    for a, b in (('mini', 'triton'), ('exp', 'triton'), ('exp', 'mini'), ('bare', 'triton'), ('mini', 'bare'),
                 ('h2bare', 'triton'), ('h2bare', 'bare'), ('h2lib', 'triton'), ('h2lib', 'bare')):
        if a not in args.only or b not in args.only: continue
        lines += ['', f'| rpc | c | infer/s {a} / {b} |', '|---|---|---|']
        for rpc in args.rpc:
            for c in args.concurrency:
                lines.append(f'| {rpc} | {c} | {med(a, rpc, c, "rps") / med(b, rpc, c, "rps"):.3g}x |')
    lines += ['', '<details><summary>raw h2load results</summary>', '', '```json',
              json.dumps({f'{k} {rpc} c={c}': v for (k, rpc, c), v in results.items()}, indent=1), '```', '</details>']
    return '\n'.join(lines) + '\n'


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--only', choices=('triton', 'mini', 'exp', 'bare', 'h2bare', 'h2lib'), action='append', help='run just this server (repeatable)')
    p.add_argument('--rpc', choices=('unary', 'stream'), action='append', help='default both')
    p.add_argument('--concurrency', type=int, nargs='+', default=[1, 8, 64])
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--duration', type=int, default=10)
    p.add_argument('--warmup', type=int, default=3)
    p.add_argument('--stream-messages', type=int, default=STREAM_MESSAGES, help='requests each stream writes before closing its side')
    p.add_argument('--server-core', type=int, default=0)
    p.add_argument('--client-core', type=int, default=1)
    p.add_argument('--base', metavar='CHECKOUT', help='add triton-mini from this checkout as `mini` ("before"); this '
                   "checkout's triton-mini becomes `exp` (\"after\")")
    p.add_argument('--mini-flags', default='', metavar='FLAGS', help="more flags for triton-mini, e.g. '--python-backend-mode=process'")
    p.add_argument('--exp-flags', default='', metavar='FLAGS', help="add this checkout's triton-mini with these flags as `exp`, "
                   "e.g. --exp-flags='--python-backend-mode=process'")
    p.add_argument('--ceiling', action='store_true', help='add bench/grpc_bare.py (grpc.aio echoing the input, nothing else) as `bare`')
    p.add_argument('--no-save', action='store_true')
    args = p.parse_args(argv)
    args.rpc = args.rpc or ['unary', 'stream']
    run.MINI_GRPC, run.MINI_FLAGS = True, args.mini_flags.split()
    if args.base:
        base = Path(args.base).resolve()
        rev = subprocess.run(['git', '-C', str(base), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
        args.base_label = f'{rev}'
        run.ROOTS['mini'] = base
        run.NAMES['mini'], run.NAMES['exp'] = f'triton-mini before ({rev})', 'triton-mini after (this checkout)'
        args.only = args.only or ['triton', 'mini', 'exp']
    if args.exp_flags:
        run.EXTRA_FLAGS['exp'] = args.exp_flags.split()
        run.NAMES['exp'] = f'triton-mini {args.exp_flags}'
        args.only = args.only or ['triton', 'mini', 'exp']
    args.only = args.only or ['triton', 'mini']
    if args.ceiling and 'bare' not in args.only: args.only.append('bare')
    run.NAMES['bare'] = 'bare grpc.aio echo (ceiling)'
    run.NAMES['h2bare'] = 'bare own HTTP/2 loop echo (grpc_h2_bare.py)'
    run.NAMES['h2lib'] = 'bare h2-package echo (grpc_h2_bare.py --h2)'
    for tool in ('h2load', 'taskset'):
        if shutil.which(tool) is None: sys.exit(f'{tool} not found (apt-get install {"nghttp2-client" if tool == "h2load" else "util-linux"})')
    with tempfile.TemporaryDirectory(prefix='triton_mini_grpc_bench_') as tmp:
        work = Path(tmp)
        repo = work / 'repo'
        shutil.copytree(HERE / 'repo', repo)
        before = os.getloadavg()[0]
        results = run_all(args, work, repo, write_bodies(work, args.stream_messages))
        text = report(args, results, before, os.getloadavg()[0])
        print('\n' + text.split('<details>')[0])
        if not args.no_save:
            out = run.result_path('-grpc'); out.write_text(text); print(f'written to {out.relative_to(run.ROOT)}')

if __name__ == '__main__':
    main()
