#!/usr/bin/env python
"""Do instances share the work of a CPU-bound Python model? Issue 42's check: `count: 2` of a pure-Python model that
spends its time computing (no sleeping, no numpy releasing the GIL) gives >= 1.7x the throughput of `count: 1` on a
2-core machine, in the served default (each instance a stub process), as in real Triton. Thread mode is measured
beside it: its instances share one GIL, so a second one adds nothing.

    python bench/instance_scaling.py                 # triton-mini process and thread mode, real Triton; 2 rounds x 8 s
    python bench/instance_scaling.py --only mini-process --rounds 1 --no-save

The model runs a Python loop of `--work` iterations per request (about 20 ms at the default). Clients: 4 threads of
plain HTTP/1.1 keep-alive (twice the instances, so an instance never waits for a client); their own CPU is small next
to the model's (tens of requests a second). The servers take turns over the rounds so the machine's drift hits all;
the median of rounds is reported. Writes bench/results/<date>-instance-scaling.md.
"""
import argparse, datetime, http.client, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, threading, time
from pathlib import Path

HERE = Path(__file__).resolve().parent; ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from run import ORACLE   # the oracle launcher, as bench/run.py finds it

MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])
            total = 0
            for i in range(n): total += i * i % 7        # pure Python: holds the GIL the whole time
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("TOTAL", np.array([total], np.int64))]))
        return out
'''
CONFIG = '''name: "burn"
backend: "python"
max_batch_size: 0
input [ { name: "N" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "TOTAL" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { count: COUNT kind: KIND_CPU } ]
'''


def free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


def make_repo(root:Path, count:int) -> Path:
    repo = root / f'repo_{count}'
    (repo / 'burn' / '1').mkdir(parents=True)
    (repo / 'burn' / '1' / 'model.py').write_text(MODEL)
    (repo / 'burn' / 'config.pbtxt').write_text(CONFIG.replace('COUNT', str(count)))
    return repo


def start(kind:str, repo:Path, log:Path):
    port = free_port()
    if kind == 'triton':
        oracle = [sys.executable, ORACLE] if ORACLE.endswith('.py') else [ORACLE]
        argv = [*oracle, f'--model-repository={repo}', f'--http-port={port}', f'--grpc-port={free_port()}', f'--metrics-port={free_port()}']
        env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    else:
        argv = [sys.executable, '-m', 'triton_mini', f'--model-repository={repo}', f'--http-port={port}', '--allow-grpc=false',
                '--allow-metrics=false', f"--python-backend-mode={kind.split('-')[1]}"]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(argv, env=env, cwd=log.parent, start_new_session=True, stdout=open(log, 'w'), stderr=subprocess.STDOUT)   # not a clone's folder: its triton_python_backend_utils.py would shadow Triton's
    deadline = time.monotonic() + 120
    while True:
        try:
            c = http.client.HTTPConnection('127.0.0.1', port, timeout=1); c.request('GET', '/v2/models/burn/ready')
            if c.getresponse().status == 200: return proc, port
        except OSError: pass
        if proc.poll() is not None or time.monotonic() > deadline: raise RuntimeError(f'{kind} did not start:\n' + '\n'.join(l for l in log.read_text().splitlines() if l[:1] in 'EW' or 'error' in l.lower())[-3000:])
        time.sleep(0.1)


def stop(proc):
    os.killpg(proc.pid, signal.SIGTERM)
    try: proc.wait(60)
    except subprocess.TimeoutExpired: os.killpg(proc.pid, signal.SIGKILL); proc.wait()


def load(port:int, work:int, clients:int, seconds:float) -> float:
    "Requests per second that `clients` threads got answered in `seconds` (after one warm-up request each)."
    body = json.dumps({'inputs': [{'name': 'N', 'shape': [1], 'datatype': 'INT64', 'data': [work]}]}).encode()
    counts, stop_at = [0] * clients, [None]
    def client(i):
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
        def one():
            c.request('POST', '/v2/models/burn/infer', body, {'Content-Type': 'application/json'})
            r = c.getresponse(); data = r.read()
            assert r.status == 200, data
        one()
        barrier.wait()
        while time.monotonic() < stop_at[0]: one(); counts[i] += 1
    barrier = threading.Barrier(clients + 1)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads: t.start()
    stop_at[0] = time.monotonic() + 3600
    barrier.wait(); t0 = time.monotonic(); stop_at[0] = t0 + seconds
    for t in threads: t.join()
    return sum(counts) / (time.monotonic() - t0)


KINDS = {'mini-process': 'triton-mini, stub processes (served default)', 'mini-thread': 'triton-mini, thread mode',
         'triton': 'real Triton 2.51'}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--only', nargs='+', choices=list(KINDS), default=list(KINDS))
    ap.add_argument('--counts', type=int, nargs='+', default=[1, 2])
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--seconds', type=float, default=8)
    ap.add_argument('--clients', type=int, default=4)
    ap.add_argument('--work', type=int, default=300_000)
    ap.add_argument('--no-save', action='store_true')
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix='inst_scale_'))
    got = {}
    load_before = os.getloadavg()[0]
    try:
        repos = {n: make_repo(root, n) for n in args.counts}
        for r in range(args.rounds):
            for kind in args.only:
                for n in args.counts:
                    proc, port = start(kind, repos[n], root / f'{kind}-{n}.log')
                    try: rps = load(port, args.work, args.clients, args.seconds)
                    finally: stop(proc)
                    got.setdefault((kind, n), []).append(rps)
                    print(f'round {r + 1}: {KINDS[kind]}, count {n}: {rps:.1f} req/s', flush=True)
    finally: shutil.rmtree(root, ignore_errors=True)
    lo, hi = min(args.counts), max(args.counts)
    lines = [f'| server | ' + ' | '.join(f'count {n}, req/s' for n in args.counts) + f' | count {hi} / count {lo} |',
             '|---|' + '---|' * (len(args.counts) + 1)]
    for kind in args.only:
        med = {n: statistics.median(got[kind, n]) for n in args.counts}
        lines.append(f'| {KINDS[kind]} | ' + ' | '.join(f'{med[n]:.1f} ({", ".join(f"{v:.1f}" for v in got[kind, n])})' for n in args.counts)
                     + f' | {med[hi] / med[lo]:.2f}x |')
    text = ('\n'.join(lines) + f'\n\nMedians of {args.rounds} rounds (each round in brackets), {args.clients} clients, '
            f'{args.work:,} loop iterations a request, {args.seconds:g} s each; load average {load_before:.2f} before, '
            f'{os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores.\n')
    print(text)
    if not args.no_save:
        out = HERE / 'results' / f'{datetime.date.today()}-instance-scaling.md'
        cmd = ' '.join(['python bench/instance_scaling.py', *sys.argv[1:]])
        out.write_text(f'# Instances that share the work of a CPU-bound Python model ({datetime.datetime.now():%Y-%m-%d %H:%M})\n\n'
                       f'`{cmd}`\n\n' + text)


if __name__ == '__main__': main()
