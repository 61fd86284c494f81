#!/usr/bin/env python
"""Where shared memory starts to beat the socket on the stub hop (issue 42): one message with one FP32 tensor of each
size, sent from a thread and received, then the receiver's `done` that hands its block back (as a batch's answer
would), through a socket pair with and without regions; best of N, µs per round trip.

    python bench/stub_shm_threshold.py            # sizes 4 KiB .. 4 MiB
"""
import statistics, sys, threading, time
import numpy as np
from triton_mini import stub_process as sp
from triton_mini.portability import anonymous_shm

def pair(shm:bool):
    a, b = sp.channel_pair()
    if shm:
        ra, rb = (sp.Region(anonymous_shm(64 << 20), 64 << 20) for _ in range(2))
        a.out, a.inn, b.out, b.inn = ra, rb, rb, ra
    return a, b

def round_trip(a, b, x, reps:int) -> float:
    "Best µs of: a sends x, b receives it and drops it, b answers 'done', a receives."
    best = float('inf')
    def peer():
        for _ in range(reps):
            got = sp.recv_message(b); del got
            sp.send_message(b, 'done')
    t = threading.Thread(target=peer); t.start()
    for _ in range(reps):
        t0 = time.perf_counter(); sp.send_message(a, ('execute', x)); sp.recv_message(a); best = min(best, time.perf_counter() - t0)
    t.join()
    return best * 1e6

def main():
    sizes = [4 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20, 4 << 20]
    print('| tensor | socket µs | shared memory µs | socket / shm |\n|---|---|---|---|')
    for n in sizes:
        x = np.ones(n // 4, np.float32)
        sp.STUB_SHM_MIN = 0
        res = {}
        for shm in (False, True):
            a, b = pair(shm)
            res[shm] = statistics.median(round_trip(a, b, x, 200 if n < (1 << 20) else 50) for _ in range(3))
            a.close(); b.close()
        print(f'| {n >> 10} KiB | {res[False]:,.1f} | {res[True]:,.1f} | {res[False] / res[True]:.2f}x |', flush=True)

if __name__ == '__main__': main()
