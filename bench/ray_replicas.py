"""Throughput of 1 vs 2 Ray Serve replicas of a CPU-bound Python model (issue 16): not a timed test.

    python bench/ray_replicas.py                  # 2 CPUs, 4 client threads, 10 s per point, ~1 min
    python bench/ray_replicas.py --seconds 20 --iterations 500000
    python bench/ray_replicas.py --replicas 1,2,3 --json bench/results/ray-replicas.json   # the notebook's picture

Starts a local Ray cluster (num_cpus=2), deploys `cpu_bound` (triton_mini.ray_serve.cpu_bound_model: a pure-Python
loop that holds the GIL, one instance) with 1 replica, then 2 (the same application redeployed), and sends
tritonclient.http infer calls from client threads for --seconds at each point. Prints req/s and the ratios to one
replica; --json also writes them (with the settings and the machine's CPU count) for 12_ray_serve's picture."""
import argparse, json, os, socket, sys, tempfile, threading, time
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
    ap.add_argument('--replicas', default='1,2', help='comma-separated replica counts, measured in this order')
    ap.add_argument('--json', help='also write the figures to this file')
    a = ap.parse_args()
    repo = Path(tempfile.mkdtemp()); cpu_bound_model(repo, iterations=a.iterations)
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={'env_vars': {'PYTHONPATH': str(ROOT)}})
    try:
        rates = {}
        for n in [int(x) for x in a.replicas.split(',')]:
            rt = RayTriton.run(repo, port=port, num_replicas=n)
            rates[n] = measure(rt.url.removeprefix('http://'), a.seconds, a.clients)
            print(f'{n} replica(s): {rates[n]:.1f} req/s', flush=True)
        one = rates.get(1)
        if one: print('ratios to 1 replica: ' + ', '.join(f'{n}: {r / one:.2f}x' for n, r in rates.items()) +
                      f'  ({a.clients} clients, {a.iterations} iterations per request, {a.seconds:.0f} s per point, 2 CPUs)')
        if a.json:
            Path(a.json).write_text(json.dumps({'req_per_s': {str(n): r for n, r in rates.items()}, 'clients': a.clients,
                'iterations': a.iterations, 'seconds': a.seconds, 'ray_num_cpus': 2, 'machine_cpus': os.cpu_count(),
                'date': time.strftime('%Y-%m-%d')}, indent=1) + '\n')
    finally:
        serve.shutdown(); ray.shutdown()

if __name__ == '__main__': main()
