"""Differential, stateful fuzzing of system shared memory: random sequences of region registrations,
unregistrations, status requests and inferences that read inputs from regions and write outputs to them, sent to
real Triton 2.51 and to triton-mini, answers compared after every step.

Both servers serve tests/models/conformance (model-control-mode none) on this machine, so they map the same POSIX
shared-memory objects: three input objects filled with known FP32 values, and one output object per server (the
requests name `{OUT}`, replaced by each server's own key; answers are compared with the key put back). After an
inference that wrote to the output region, the bytes each server wrote are part of its answer. Prints the
differences grouped by (operation, Triton's status, triton-mini's status) with the first example, and writes them
to bench/results/fuzz_shm-<seed>.jsonl. A tool for finding fidelity gaps, not a pass/fail check.

    python bench/fuzz_shm_vs_triton.py --steps 300 --seed 1
"""
from __future__ import annotations
import argparse, collections, json, os, random, sys, tempfile
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
from conformance.cases import Case                                        # noqa: E402
from test_conformance import Obj, canonical, comparable, http_request, pretty   # noqa: E402
from triton_servers import MiniProcess, RealTriton, copy_models, start_together   # noqa: E402
from differential import report                                            # noqa: E402

SHM = '/v2/systemsharedmemory'
NAMES = ['in0', 'in1', 'in2', 'out', 'out', 'r%20x', '']
OUT_SIZE = 256


def objects(tag:str) -> dict:
    "The shared-memory objects: inputs filled with FP32 0, 1, 2, ...; one zeroed output object per server."
    made = {}
    for i, size in enumerate((64, 256, 4096)):
        m = shared_memory.SharedMemory(name=f'fz{tag}_in{i}', create=True, size=size)
        m.buf[:size] = np.arange(size // 4, dtype=np.float32).tobytes()
        made[f'in{i}'] = m
    for who in ('t', 'm'): made[who] = shared_memory.SharedMemory(name=f'fz{tag}_out_{who}', create=True, size=OUT_SIZE)
    return made


def register_body(r:random.Random, keys:list) -> dict:
    body = {'key': r.choice(keys + ['{OUT}', '{OUT}', '/fz_nope', 'nokey', '']),
            'offset': r.choice([0, 0, 0, 4, 16, 60, 64, 300, -1, 2 ** 40, '4']),
            'byte_size': r.choice([16, 32, 64, 64, 256, 4096, 0, 5000, -1, 2 ** 40])}
    for k in list(body):
        if r.random() < 0.07: del body[k]
    return body


def shm_params(r:random.Random) -> dict:
    p = {'shared_memory_region': r.choice(NAMES[:4] + ['nope']),
         'shared_memory_byte_size': r.choice([16, 16, 16, 8, 32, 0, -1, 300]),
         'shared_memory_offset': r.choice([0, 0, 0, 4, 16, 48, 64, 240, 256, -4])}
    for k in ('shared_memory_byte_size', 'shared_memory_offset'):
        if r.random() < 0.15: del p[k]
    return p


def infer_body(r:random.Random) -> dict:
    inputs = []
    for name in ('INPUT0', 'INPUT1'):
        t = {'name': name, 'datatype': 'FP32', 'shape': [1, 4]}
        if r.random() < 0.6: t['parameters'] = shm_params(r)
        else: t['data'] = [1.5, 2.5, 3.5, 4.5]
        if r.random() < 0.05: t['data'] = [1, 2, 3, 4]   # data and a region both
        inputs.append(t)
    body = {'inputs': inputs}
    if r.random() < 0.7:
        body['outputs'] = [{'name': n, 'parameters': shm_params(r) if r.random() < 0.7 else {'binary_data': r.random() < 0.3}}
                           for n in r.sample(['OUTPUT0', 'OUTPUT1'], r.randint(1, 2))]
    return body


def step(r:random.Random, keys:list) -> tuple:
    "(operation, method, path, body)"
    name = r.choice(NAMES)
    k = r.random()
    if k < 0.30: return 'register', 'POST', f'{SHM}/region/{name}/register', register_body(r, keys)
    if k < 0.40: return 'unregister', 'POST', f'{SHM}/region/{name}/unregister', None
    if k < 0.44: return 'unregister_all', 'POST', f'{SHM}/unregister', None
    if k < 0.52: return 'status', 'GET', f'{SHM}/region/{name}/status', None
    if k < 0.58: return 'status_all', 'GET', f'{SHM}/status', None
    return 'infer', 'POST', '/v2/models/add_sub/infer', infer_body(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--steps', type=int, default=300)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--show', type=int, default=30, help='how many groups to print')
    ap.add_argument('--first', type=int, default=5, help='how many differences to print in step order first')
    a = ap.parse_args()
    r = random.Random(a.seed)
    tag = f'{os.getpid()}'
    shm = objects(tag)
    keys = [f'/{shm[f"in{i}"].name}' for i in range(3)]
    out_key = {'t': f'/{shm["t"].name}', 'm': f'/{shm["m"].name}'}
    root = Path(tempfile.mkdtemp())
    triton, mine = start_together(
        lambda: RealTriton(copy_models(root / 'triton', 'conformance'), '--exit-timeout-secs=3', grpc=False, metrics=False),
        lambda: MiniProcess(copy_models(root / 'mine', 'conformance'), '--exit-timeout-secs=3', grpc=False, metrics=False))
    rows, groups, same = [], collections.defaultdict(list), 0
    try:
        for i in range(a.steps):
            op, method, path, body = step(r, keys)
            answers = []
            for who, server in (('t', triton), ('m', mine)):
                shm[who].buf[:OUT_SIZE] = bytes(OUT_SIZE)
                sent = None if body is None else json.loads(json.dumps(body).replace('{OUT}', out_key[who]))
                case = Case(f'step{i}', method, path, sent)
                got = comparable(http_request(server.http_port, method, path, case.body_bytes()), case)
                if op == 'infer' and dict(got).get('status') == 200: got.append(('out_region', bytes(shm[who].buf[:64]).hex(' ', 4)))
                text = json.dumps(got).replace(out_key[who], '{OUT}').replace(str(root / ('triton' if who == 't' else 'mine')), '<repo>')
                answers.append(json.loads(text, object_pairs_hook=Obj))
            theirs, ours = answers
            if canonical(theirs) == canonical(ours): same += 1; continue
            groups[(op, dict(theirs).get('status'), dict(ours).get('status'))].append(i)
            rows.append({'step': i, 'op': op, 'method': method, 'path': path, 'body': body,
                         'triton': pretty(theirs), 'triton_mini': pretty(ours)})
    finally:
        triton.stop(); mine.stop()
        for m in shm.values(): m.close(); m.unlink()
    (HERE / 'results').mkdir(exist_ok=True)
    (HERE / 'results' / f'fuzz_shm-{a.seed}.jsonl').write_text(''.join(json.dumps(x) + '\n' for x in rows))
    report(rows, groups, a.steps, same, a.first, a.show)


if __name__ == '__main__':
    main()
