"""Throughput of 1 vs 2 Ray Serve replicas of a CPU-bound Python model (issue 16): not a timed test.

    python bench/ray_replicas.py                  # 2 CPUs, 4 client threads, 10 s per point, ~1 min
    python bench/ray_replicas.py --seconds 20 --iterations 500000

Starts a local Ray cluster (num_cpus=2), deploys `cpu_bound` (triton_mini.ray_serve.cpu_bound_model: a pure-Python
loop that holds the GIL, one instance) with 1 replica, then 2 (the same application redeployed), and sends
tritonclient.http infer calls from client threads for --seconds at each point. Prints req/s and the ratio."""
import argparse, socket, sys, tempfile, threading, time
from pathlib import Path

import numpy as np
import ray
from ray import serve
import tritonclient.http as httpclient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from triton_mini.ray_serve import RayTriton, cpu_bound_model

def measure(url, seconds, clients):
    done, stop = [0] * clients, threading.Event()
    def client(i):
        c = httpclient.InferenceServerClient(url, network_timeout=60)
        x = httpclient.InferInput('INPUT0', [4], 'FP32'); x.set_data_from_numpy(np.zeros(4, np.float32))
        while not stop.is_set(): c.infer('cpu_bound', [x]); done[i] += 1
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads: t.start()
    time.sleep(2); base = sum(done); t0 = time.monotonic()   # 2 s warm-up
    time.sleep(seconds); n = sum(done) - base; dt = time.monotonic() - t0
    stop.set()
    for t in threads: t.join()
    return n / dt

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=float, default=10); ap.add_argument('--clients', type=int, default=4)
    ap.add_argument('--iterations', type=int, default=3_000_000)
    a = ap.parse_args()
    repo = Path(tempfile.mkdtemp()); cpu_bound_model(repo, iterations=a.iterations)
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={'env_vars': {'PYTHONPATH': str(ROOT)}})
    try:
        rates = {}
        for n in (1, 2):
            rt = RayTriton.run(repo, port=port, num_replicas=n)
            rates[n] = measure(rt.url.removeprefix('http://'), a.seconds, a.clients)
            print(f'{n} replica(s): {rates[n]:.1f} req/s', flush=True)
        print(f'ratio 2/1: {rates[2] / rates[1]:.2f}x  ({a.clients} clients, {a.iterations} iterations per request, '
              f'{a.seconds:.0f} s per point, 2 CPUs)')
    finally:
        serve.shutdown(); ray.shutdown()

if __name__ == '__main__': main()
