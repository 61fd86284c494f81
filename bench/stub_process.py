"""Python models in stub processes (`--python-backend-mode=process`) against the thread mode, in one run.

Two figures issue 13 asks for:
- parallelism: a CPU-bound pure-Python model (a loop of `--work` additions per request) with `instance_group
  { count: 1 }` and `{ count: 2 }`, driven by 4 client threads through the in-process API for `--duration` s;
  requests/s of each, and count 2 / count 1 (the target: >= 1.7x in process mode on 2 cores; the thread mode
  stays near 1x, one GIL);
- the cost of the process hop: the identity model (FP32 [1,16]) at concurrency 1, median and p99 latency in each
  mode; the difference of medians is the per-request IPC cost.

    python bench/stub_process.py                 # ~1 min; prints a table, writes results/<date>-stub-process.md
    python bench/stub_process.py --no-save --duration 3

Not a timed test: the figures are ratios measured side by side, on whatever else the machine is doing.
"""
import argparse, datetime, os, statistics, sys, tempfile, threading, time
from pathlib import Path

import numpy as np

from triton_mini.server import TritonServer

ROOT = Path(__file__).resolve().parent
BUSY = '''
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])
            s = 0
            for i in range(n): s += i
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("S", np.array([s], np.int64))]))
        return out
'''
BUSY_CONFIG = '''backend: "python"
input [{{ name: "N" data_type: TYPE_INT64 dims: [1] }}]
output [{{ name: "S" data_type: TYPE_INT64 dims: [1] }}]
instance_group [{{ count: {count} kind: KIND_CPU }}]
'''
IDENTITY = '''
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                for r in requests]
'''
IDENTITY_CONFIG = '''backend: "python"
max_batch_size: 8
input [{ name: "IN" data_type: TYPE_FP32 dims: [16] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [16] }]
'''


def repository() -> Path:
    repo = Path(tempfile.mkdtemp(prefix='stub_bench_'))
    for name, model, config in (('busy1', BUSY, BUSY_CONFIG.format(count=1)), ('busy2', BUSY, BUSY_CONFIG.format(count=2)),
                                ('identity', IDENTITY, IDENTITY_CONFIG)):
        (repo / name / '1').mkdir(parents=True)
        (repo / name / '1' / 'model.py').write_text(model)
        (repo / name / 'config.pbtxt').write_text(config)
    return repo


def throughput(server, model, work, clients, duration) -> float:
    "Requests/s of `clients` closed-loop threads for `duration` s."
    done, stop = [0] * clients, time.monotonic() + duration
    def client(i):
        x = {'N': np.array([work], np.int64)}
        while time.monotonic() < stop:
            server.infer(model, x); done[i] += 1
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads: t.start()
    for t in threads: t.join()
    return sum(done) / duration


def latencies(server, n) -> list:
    x = {'IN': np.ones((1, 16), np.float32)}
    for _ in range(200): server.infer('identity', x)   # warm up
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns(); server.infer('identity', x); out.append((time.perf_counter_ns() - t0) / 1000)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--duration', type=float, default=8)
    p.add_argument('--work', type=int, default=200_000, help='additions per request of the CPU-bound model')
    p.add_argument('--requests', type=int, default=3000, help='identity requests per mode, one at a time')
    p.add_argument('--no-save', action='store_true')
    a = p.parse_args()
    repo, rows = repository(), {}
    for mode in ('thread', 'process'):
        with TritonServer(repo, python_backend_mode=mode) as s:   # started on entry, stopped on exit
            r1 = throughput(s, 'busy1', a.work, 4, a.duration)
            r2 = throughput(s, 'busy2', a.work, 4, a.duration)
            lat = sorted(latencies(s, a.requests))
            rows[mode] = (r1, r2, statistics.median(lat), lat[int(len(lat) * 0.99)])
    load = os.getloadavg()[0]
    lines = ['| mode | count 1 req/s | count 2 req/s | count 2 / count 1 | identity p50 µs | identity p99 µs |',
             '|---|---|---|---|---|---|']
    for mode, (r1, r2, p50, p99) in rows.items():
        lines.append(f'| {mode} | {r1:.1f} | {r2:.1f} | {r2 / r1:.2f}x | {p50:.0f} | {p99:.0f} |')
    ipc = rows['process'][2] - rows['thread'][2]
    text = '\n'.join(lines) + (f'\n\nPer-request cost of the process hop (difference of identity medians): {ipc:.0f} µs. '
                               f'CPU-bound model: {a.work:,} additions per request, 4 client threads, {a.duration:g} s each; '
                               f'load average at the end {load:.2f} on {os.cpu_count()} cores.\n')
    print(text)
    if not a.no_save:
        out = ROOT / 'results' / f'{datetime.date.today()}-stub-process.md'
        out.write_text(f'# Stub processes vs threads ({datetime.datetime.now():%Y-%m-%d %H:%M})\n\n`python bench/stub_process.py`\n\n' + text)
        print('wrote', out)


if __name__ == '__main__': main()
