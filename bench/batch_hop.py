#!/usr/bin/env python
"""What one dynamically batched hop costs, step by step, in one process (no second process, no scheduler): a batch
of N mlp_batched requests (FP32 [1,64]) through the stub's wire, each step timed alone, against the thread mode's
`execute` of the same batch.

    python bench/batch_hop.py                 # N = 1 2 4 8, median of 2000 batches each, µs per batch
    python bench/batch_hop.py --sizes 8 --reps 5000

Steps (what the server's worker and the stub do for one batch, the socket's own cost included once each way):
- parent send: `request_to_wire` for each request, pickle `execute`, `sendmsg`;
- stub recv: `recv_message` (the unpickle);
- stub run: `Stub._run_one` (rebuild N InferenceRequests, the model's execute, the `done` tuple);
- stub send: pickle `done` (N responses), `sendmsg`;
- parent recv: `recv_message` of `done`.
`thread execute` is `PythonModelInstance.execute` on the server's own requests (what the thread mode runs).
"""
import argparse, statistics, sys, time
from pathlib import Path
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def instance():
    from triton_mini.backend import InstanceArgs
    from triton_mini.config_parser import parse_config
    from triton_mini.model_config_utils import autofill_config
    from triton_mini.python_backend import PythonModelInstance
    import shutil, tempfile
    d = Path(tempfile.mkdtemp(prefix='batch_hop_')) / 'mlp_batched'   # a copy: the repo's model.py is a link out of the model's folder
    shutil.copytree(ROOT / 'bench' / 'repo' / 'mlp_batched', d)
    cfg = autofill_config(parse_config((d / 'config.pbtxt').read_text()), 'mlp_batched', backend='python')
    return PythonModelInstance(InstanceArgs('mlp_batched', 1, d, cfg, 'mlp_batched_0'))


def batch(n:int) -> list:
    from triton_mini.backend import InferenceRequest
    rng = np.random.default_rng(1)
    return [InferenceRequest('mlp_batched', {'INPUT0': rng.standard_normal((1, 64)).astype(np.float32)}, id='',
                             arrival_ns=time.monotonic_ns()) for _ in range(n)]


def measure(n:int, reps:int) -> dict:
    from triton_mini import stub_process as sp
    inst = instance()
    parent, child = sp.channel_pair()
    side_a, side_b = sp.channel_pair()
    stub = sp.Stub(child, side_b); stub.instance = inst
    reqs = batch(n)
    t = {k: [] for k in ('parent send', 'stub recv', 'stub run', 'stub send', 'parent recv', 'hop total', 'thread execute')}
    clock = time.perf_counter_ns
    for i in range(reps):
        t0 = clock()
        msg = ('execute', i, [sp.request_to_wire(r) for r in reqs])
        sp.send_message(parent, msg)
        t1 = clock(); got = sp.recv_message(child)
        t2 = clock(); done = stub._run_one(*got[1:])
        t3 = clock(); sp.send_message(child, done)
        t4 = clock(); back = sp.recv_message(parent)
        t5 = clock()
        for r in reqs: r._done = False
        out = inst.execute(reqs)
        t6 = clock()
        for k, a, b in (('parent send', t0, t1), ('stub recv', t1, t2), ('stub run', t2, t3), ('stub send', t3, t4),
                        ('parent recv', t4, t5), ('hop total', t0, t5), ('thread execute', t5, t6)):
            t[k].append((b - a) / 1e3)
    assert len(back[2]) == n and np.array_equal(back[2][0].outputs['OUTPUT0'], out[0].outputs['OUTPUT0'])
    return {k: statistics.median(v) for k, v in t.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--sizes', type=int, nargs='+', default=[1, 2, 4, 8])
    p.add_argument('--reps', type=int, default=2000)
    args = p.parse_args(argv)
    rows = {n: measure(n, args.reps) for n in args.sizes}
    keys = list(next(iter(rows.values())))
    print('| step (median µs per batch) | ' + ' | '.join(f'N={n}' for n in rows) + ' |')
    print('|---|' + '---|' * len(rows))
    for k in keys: print(f'| {k} | ' + ' | '.join(f'{rows[n][k]:.1f}' for n in rows) + ' |')


if __name__ == '__main__':
    sys.path.insert(0, str(ROOT))
    main()
