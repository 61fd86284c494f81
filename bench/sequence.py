#!/usr/bin/env python
"""Sequence steps per second: real Triton 2.51 and triton-mini serving the same Python sequence model, same run.

The model is tests/models/sequence/seq_string with 8 instances x max_batch_size 8 (64 direct slots): a running
sum kept by the model, keyed by correlation id (idle timeout 600 s). `--threads` client threads each drive `--sequences` sequences
interleaved, `--steps` requests each, over HTTP (keep-alive, one connection per thread), one request in flight
per thread. Each server runs alone, both in the same invocation, rounds interleaved (Triton, mini, ...); every
sum is checked. The table reports the median steps/s and the ratio mini / Triton.

    python bench/sequence.py                       # 8 threads x 8 sequences x 50 steps, 3 rounds
"""
from __future__ import annotations
import argparse, http.client as httplib, json, shutil, statistics, subprocess, sys, tempfile, threading, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
from triton_servers import RealTriton, free_port, http   # noqa: E402

MODEL = HERE.parent / 'tests' / 'models' / 'sequence' / 'seq_string'


def repository(tmp:Path) -> Path:
    root = tmp / 'models'
    shutil.copytree(MODEL, root / 'seq_string')
    cfg = root / 'seq_string' / 'config.pbtxt'
    cfg.write_text(cfg.read_text().replace('max_batch_size: 2', 'max_batch_size: 8').replace('count: 1', 'count: 8')
                   .replace('sequence_batching {', 'sequence_batching {\n  max_sequence_idle_microseconds: 600000000'))   # a busy machine must not idle sequences out
    return root


class Mini:
    "triton-mini as its own process (python -m triton_mini), like the oracle."
    def __init__(self, repo:Path):
        self.http_port = free_port()
        self.proc = subprocess.Popen([sys.executable, '-m', 'triton_mini', f'--model-repository={repo}', '--http-port',
                                      str(self.http_port), '--grpc-port', str(free_port()), '--metrics-port', str(free_port())],
                                     cwd=repo.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while True:
            try:
                if http(self.http_port, 'GET', '/v2/health/ready', timeout=5)[0] == 200: return
            except OSError: pass
            if time.monotonic() > deadline: raise RuntimeError('triton-mini did not start')
            time.sleep(0.2)

    def stop(self):
        self.proc.terminate(); self.proc.wait(30)


def drive(port:int, threads:int, sequences:int, steps:int) -> float:
    "Steps per second of one run; raises if any sum is wrong."
    errors, done = [], []
    def client(t):
        conn = httplib.HTTPConnection('127.0.0.1', port, timeout=120)
        try:
            for step in range(steps):
                for sid in range(t * sequences + 1, (t + 1) * sequences + 1):
                    body = json.dumps({'parameters': {'sequence_id': sid, 'sequence_start': step == 0, 'sequence_end': step == steps - 1},
                                       'inputs': [{'name': 'IN', 'datatype': 'INT32', 'shape': [1, 1], 'data': [step]}]})
                    conn.request('POST', '/v2/models/seq_string/infer', body)
                    doc = json.loads(conn.getresponse().read())
                    if 'error' in doc: errors.append(doc['error']); continue
                    got = doc['outputs'][[o['name'] for o in doc['outputs']].index('SUM')]['data'][0]
                    if got != step * (step + 1) // 2: errors.append((sid, step, got))
                    done.append(1)
        except Exception as e: errors.append(e)
        finally: conn.close()
    ts = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for t in ts: t.start()
    for t in ts: t.join()
    elapsed = time.perf_counter() - start
    if errors or len(done) != threads * sequences * steps: raise AssertionError(f'wrong or failed steps: {errors[:3]}, {len(done)} done')
    return threads * sequences * steps / elapsed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--threads', type=int, default=8); p.add_argument('--sequences', type=int, default=8)
    p.add_argument('--steps', type=int, default=50); p.add_argument('--rounds', type=int, default=3)
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp())
    repo = repository(tmp)
    rates = {'triton': [], 'mini': []}
    for _ in range(a.rounds):
        for name, cls in (('triton', RealTriton), ('mini', Mini)):
            server = cls(repo)
            try: rates[name].append(drive(server.http_port, a.threads, a.sequences, a.steps))
            finally: server.stop()
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f'| server | steps/s (median of {a.rounds}) | rounds |\n|---|---|---|')
    for k in ('triton', 'mini'): print(f"| {k} | {med[k]:.0f} | {', '.join(f'{r:.0f}' for r in rates[k])} |")
    print(f"\nratio mini / Triton: {med['mini'] / med['triton']:.2f}  "
          f"({a.threads} threads x {a.sequences} sequences x {a.steps} steps, HTTP JSON, 64 direct slots)")


if __name__ == '__main__': main()
