"""Differential, stateful fuzzing of model control: random sequences of repository and model requests sent to
real Triton 2.51 and to triton-mini, answers compared after every step.

Both servers run in model-control-mode explicit on copies of tests/models/conformance_explicit (nothing loaded at
start). Each step is one of: load (no body, `{}`, a config override mutated from the model's own config, files,
malformed parameters), unload (with or without `unload_dependents`), the repository index, a model's or a version's
readiness, metadata, config, statistics, an inference. Both servers get the same steps in the same order, so their
states should stay the same; after a load or an unload both are settled (no model LOADING/UNLOADING) before the
next step. Answers are compared as tests/test_conformance.py compares them (status, content type, JSON as a client
reads it; statistics' timings and protobuf maps normalised). Prints the differences grouped by (operation, Triton's
status, triton-mini's status) with the first example, and writes them to bench/results/fuzz_repository-<seed>.jsonl.
A tool for finding fidelity gaps, not a pass/fail check.

    python bench/fuzz_repository_vs_triton.py --steps 300 --seed 1
"""
from __future__ import annotations
import argparse, base64, collections, copy, json, random, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
from conformance.cases import Case                                   # noqa: E402
from test_conformance import Obj, canonical, comparable, http_request, pretty   # noqa: E402
from triton_servers import MiniProcess, RealTriton, copy_models, start_together   # noqa: E402
from differential import report                                            # noqa: E402

MODELS = ['simple', 'multi', 'pipe', 'seqm', 'bad_syntax', 'init_raises', 'no_version_dir', 'ens_unknown_model']
EXTRA = ['fresh', 'nope', 'Simple', 'simple/1']   # loadable only from files, unknown, odd names ('..' is refused on purpose)
IO = {'simple': ('IN', 'FP32', [2], 'OUT'), 'pipe': ('IN', 'FP32', [2], 'OUT'), 'multi': ('X', 'INT32', [1], 'V'),
      'seqm': ('X', 'FP32', [1], 'TOTAL'), 'fresh': ('X', 'INT32', [1], 'Y')}
BASE = {
    'simple': {'name': 'simple', 'backend': 'python', 'max_batch_size': 4,
               'input': [{'name': 'IN', 'data_type': 'TYPE_FP32', 'dims': [2]}],
               'output': [{'name': 'OUT', 'data_type': 'TYPE_FP32', 'dims': [2]}]},
    'multi': {'name': 'multi', 'backend': 'python', 'max_batch_size': 0, 'version_policy': {'all': {}},
              'input': [{'name': 'X', 'data_type': 'TYPE_INT32', 'dims': [1]}],
              'output': [{'name': 'V', 'data_type': 'TYPE_INT32', 'dims': [1]}]},
    'pipe': {'name': 'pipe', 'platform': 'ensemble', 'max_batch_size': 4,
             'input': [{'name': 'IN', 'data_type': 'TYPE_FP32', 'dims': [2]}],
             'output': [{'name': 'OUT', 'data_type': 'TYPE_FP32', 'dims': [2]}],
             'ensemble_scheduling': {'step': [
                 {'model_name': 'simple', 'model_version': -1, 'input_map': {'IN': 'IN'}, 'output_map': {'OUT': 'mid'}},
                 {'model_name': 'simple', 'model_version': -1, 'input_map': {'IN': 'mid'}, 'output_map': {'OUT': 'OUT'}}]}},
    'fresh': {'name': 'fresh', 'backend': 'python', 'max_batch_size': 0,
              'input': [{'name': 'X', 'data_type': 'TYPE_INT32', 'dims': [1]}],
              'output': [{'name': 'Y', 'data_type': 'TYPE_INT32', 'dims': [1]}]},
}
FRESH_PY = b'''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([42], dtype=np.int32))]) for _ in requests]
'''
BROKEN_PY = b'def execute(:\n'


def mutate_config(r:random.Random, cfg:dict) -> dict:
    "One to three changes to a model config (JSON form), most of them ones Triton refuses or handles specially."
    cfg = copy.deepcopy(cfg)
    for _ in range(r.randint(1, 3)):
        k = r.randrange(14)
        if k == 0: cfg['max_batch_size'] = r.choice([-1, 0, 1, 2, 8, 2 ** 31, '4', 3.5])
        elif k == 1: cfg['version_policy'] = r.choice([{'latest': {'num_versions': r.choice([0, 1, 2, 5])}}, {'all': {}},
                                                      {'specific': {'versions': r.sample([1, 2, 3, -1], r.randint(1, 2))}},
                                                      {'latest': {}, 'all': {}}, {}])
        elif k == 2: cfg['instance_group'] = [{'kind': r.choice(['KIND_CPU', 'KIND_GPU', 'KIND_MODEL', 'KIND_AUTO', 'KIND_X']),
                                              'count': r.choice([0, 1, 2, -1])}]
        elif k == 3: cfg['dynamic_batching'] = r.choice([{}, {'max_queue_delay_microseconds': r.choice([0, 100, -5])},
                                                         {'preferred_batch_size': r.choice([[2], [8], [0], [2, 2]])}])
        elif k == 4 and cfg.get('input'): cfg['input'] = [] if r.random() < 0.5 else cfg['input'] * 2
        elif k == 5 and cfg.get('output'): cfg['output'][0]['dims'] = r.choice([[-1], [0], [], [2, 2], [-2], [1]])
        elif k == 6 and cfg.get('input'): cfg['input'][0]['data_type'] = r.choice(['TYPE_STRING', 'TYPE_INT8', 'TYPE_BOGUS', 'TYPE_INVALID', 3])
        elif k == 7: cfg['name'] = r.choice(['other', '', cfg.get('name', '') + 'x']) if r.random() < 0.7 else cfg.pop('name', None) and cfg.get('x')
        elif k == 8: cfg['backend'] = r.choice(['onnxruntime', 'pytorch', 'nope', '', 'python'])
        elif k == 9: cfg['parameters'] = r.choice([{'k': {'string_value': 'v'}}, {'k': 'v'}, {'EXECUTION_ENV_PATH': {'string_value': '/nope.tar.gz'}}])
        elif k == 10: cfg[r.choice(['no_such_field', 'maxBatchSize', 'platform'])] = r.choice([1, 'ensemble', 'x'])
        elif k == 11: cfg['sequence_batching'] = r.choice([{}, {'max_sequence_idle_microseconds': 1000}, {'direct': {}, 'oldest': {}}])
        elif k == 12: cfg['model_warmup'] = [{'name': 'w', 'batch_size': 1, 'inputs': {'IN': {'data_type': 'TYPE_FP32', 'dims': [2], 'zero_data': True}}}]
        elif k == 13 and 'ensemble_scheduling' in cfg:
            step = cfg['ensemble_scheduling']['step'][r.randrange(2)]
            step[r.choice(['model_name', 'model_version'])] = r.choice(['nope', 'multi', 7, 'pipe'])
    return cfg


def load_body(r:random.Random, model:str):
    k = r.randrange(10)
    if k == 0: return None
    if k == 1: return {}
    if k <= 5 and model in BASE:
        return {'parameters': {'config': json.dumps(mutate_config(r, BASE[model]) if r.random() < 0.8 else BASE[model])}}
    if k == 6:   # files: a model.py (good or broken) with or without a config
        files = {f'file:{r.choice(["1", "2", "3", "0"])}/model.py': base64.b64encode(r.choice([FRESH_PY, BROKEN_PY])).decode()}
        if r.random() < 0.7: files['config'] = json.dumps(dict(BASE['fresh'], name=model))
        if r.random() < 0.2: files[r.choice(['file:../x.py', 'file:/abs.py', 'file:1/../../y'])] = 'eA=='
        if r.random() < 0.2: files['file:1/model.py'] = 'not base64!'
        return {'parameters': files}
    if k == 7: return {'parameters': r.choice([5, [], {'config': 5}, {'config': ''}, {'unload_dependents': True}, {'x': 1}])}
    if k == 8: return r.choice(['{"parameters": ', '[]', '{"parameters": {"config": "{\\"name\\": \\"' + model + '\\"}"}}'])
    return {'parameters': {'config': json.dumps({'name': model})}}


def infer_body(r:random.Random, model:str):
    name, dt, dims, out = IO.get(model, ('IN', 'FP32', [2], 'OUT'))
    batch = [] if model in ('multi', 'fresh') else [r.choice([1, 2])]
    shape = batch + dims
    n = 1
    for d in shape: n *= d
    body = {'inputs': [{'name': name, 'datatype': dt, 'shape': shape, 'data': list(range(n))}]}
    if model == 'seqm':
        body['parameters'] = {'sequence_id': r.randint(1, 3), 'sequence_start': r.random() < 0.5}
        body['inputs'].append({'name': 'START', 'datatype': 'FP32', 'shape': batch + [1], 'data': [1] * batch[0]})
    return body


def step(r:random.Random) -> tuple:
    "(operation, method, path, body, normalize)"
    model = r.choice(MODELS * 3 + EXTRA)
    version = r.choice(['', '', '/versions/1', '/versions/2', '/versions/3'])
    k = r.random()
    if k < 0.30: return 'load', 'POST', f'/v2/repository/models/{model}/load', load_body(r, model), ()
    if k < 0.42:
        body = r.choice([None, {}, {'parameters': {'unload_dependents': r.choice([True, False, 'yes', 1])}}])
        return 'unload', 'POST', f'/v2/repository/models/{model}/unload', body, ()
    if k < 0.52: return 'index', 'POST', '/v2/repository/index', r.choice([None, {}, {'ready': True}, {'ready': False}]), ()
    if k < 0.62: return 'ready', 'GET', f'/v2/models/{model}{version}/ready', None, ()
    if k < 0.70: return 'metadata', 'GET', f'/v2/models/{model}{version}', None, ()
    if k < 0.77: return 'config', 'GET', f'/v2/models/{model}{version}/config', None, ('proto_maps',)
    if k < 0.82: return 'stats', 'GET', f'/v2/models/{model}{version}/stats', None, ('timings',)
    if k < 0.85: return 'health', 'GET', '/v2/health/ready', None, ()
    return 'infer', 'POST', f'/v2/models/{model}{version}/infer', infer_body(r, model), ()


def settle(ports, timeout:float=60):
    "Wait until no model is LOADING or UNLOADING on either server."
    deadline = time.monotonic() + timeout
    for port in ports:
        while time.monotonic() < deadline:
            index = json.loads(http_request(port, 'POST', '/v2/repository/index').body)
            if not any(e.get('state') in ('LOADING', 'UNLOADING') for e in index): break
            time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--steps', type=int, default=300)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--show', type=int, default=40, help='how many groups to print')
    ap.add_argument('--first', type=int, default=5, help='how many differences to print in step order first')
    ap.add_argument('--trace', action='store_true', help='print every step and both statuses')
    a = ap.parse_args()
    r = random.Random(a.seed)
    root = Path(tempfile.mkdtemp())
    flags = ('--model-control-mode=explicit', '--exit-timeout-secs=3')
    triton, mine = start_together(
        lambda: RealTriton(copy_models(root / 'triton', 'conformance_explicit'), *flags, grpc=False, metrics=False, wait='live'),
        lambda: MiniProcess(copy_models(root / 'mine', 'conformance_explicit'), *flags, grpc=False, metrics=False, wait='live',
                            env={'PYTHONDONTWRITEBYTECODE': ''}))   # Triton's stubs write __pycache__, which dates the folder
    groups, rows, same = collections.defaultdict(list), [], 0
    try:
        for i in range(a.steps):
            op, method, path, body, normalize = step(r)
            case = Case(f'step{i}', method, path, body, normalize=normalize)
            theirs = comparable(http_request(triton.http_port, method, path, case.body_bytes()), case)
            ours = comparable(http_request(mine.http_port, method, path, case.body_bytes()), case)
            theirs, ours = (json.loads(json.dumps(x).replace(str(root / who), '<repo>'), object_pairs_hook=Obj)
                            for x, who in ((theirs, 'triton'), (ours, 'mine')))
            if op in ('load', 'unload'): settle((triton.http_port, mine.http_port))
            if a.trace:
                st = (dict(theirs).get('status'), dict(ours).get('status'))
                print(f'{i:4d} {op:8s} {method} {path} {json.dumps(body)[:150] if body is not None else ""} -> {st}'
                      + ('' if canonical(theirs) == canonical(ours) else '  DIFFERENT'))
            if canonical(theirs) == canonical(ours): same += 1; continue
            status = (dict(theirs).get('status'), dict(ours).get('status'))
            groups[(op, *status)].append(i)
            rows.append({'step': i, 'op': op, 'method': method, 'path': path, 'body': body,
                         'triton': pretty(theirs), 'triton_mini': pretty(ours)})
    finally:
        triton.stop(); mine.stop()
    (HERE / 'results').mkdir(exist_ok=True)
    (HERE / 'results' / f'fuzz_repository-{a.seed}.jsonl').write_text(''.join(json.dumps(x) + '\n' for x in rows))
    report(rows, groups, a.steps, same, a.first, a.show)


if __name__ == '__main__':
    main()
