"""What one synchronous `triton-mini perf -i grpc` call costs its sending thread: CPU time per call (user + system of
that thread, so another process's load does not count) and calls/s, for grpcio's caller and perf's own HTTP/2 one
(TRITON_MINI_PERF_GRPC=grpcio|h2), taking turns against one running server.

    python bench/perf_grpc_client_cpu.py localhost:8001 --model identity --rounds 3 --seconds 3

The model gets one FP32 [1,16] input named INPUT0 (bench/repo's identity).
"""
import argparse, resource, statistics, time

import numpy as np
from triton_mini.perf import grpc_caller, grpc_h2_caller, grpc_request


def thread_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('url')
    p.add_argument('--model', default='identity')
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--seconds', type=float, default=3)
    args = p.parse_args(argv)
    req = grpc_request(args.model, '', {'INPUT0': np.ones((1, 16), np.float32)})
    callers = {'grpcio': grpc_caller(args.url), 'h2': grpc_h2_caller(args.url)}
    got = {name: [] for name in callers}
    for rnd in range(args.rounds):
        for name, call in list(callers.items())[::1 if rnd % 2 == 0 else -1]:
            call(req)                                                 # connected, warm
            c0, t0, n, lat = thread_cpu(), time.perf_counter(), 0, []
            while time.perf_counter() - t0 < args.seconds:
                r = call(req); lat.append(r[3] - r[0]); n += 1
            got[name].append(((thread_cpu() - c0) / n * 1e6, n / (time.perf_counter() - t0), float(np.median(lat)) * 1e6))
            print(f'round {rnd + 1} {name}: {got[name][-1][0]:.0f} us CPU a call, {got[name][-1][1]:.0f} calls/s, p50 {got[name][-1][2]:.0f} us', flush=True)
    print('| client | CPU a call (us, median) | calls/s (median) | p50 us (median) |\n|---|---|---|---|')
    for name, rows in got.items():
        print(f'| {name} | ' + ' | '.join(f'{statistics.median(r[i] for r in rows):.0f}' for i in range(3)) + ' |')


if __name__ == '__main__': main()
