"""Small Triton model repositories for the scheduler and ensemble tests (tests/test_dynamic_batching.py,
tests/test_ensemble.py).

Every model here is a real Python-backend model (`config.pbtxt` + `1/model.py`) that runs unchanged on
triton_mini and on the real tritonserver. The workhorse is RECORDER: it copies each input to the output of the same
position and appends one JSON line per `execute()` to `<model dir>/executions_<instance>.jsonl` with the wall-clock
start/end, the number of requests, their ids and input shapes. It sleeps `parameters.sleep_ms`, or longer when a
request asks for it: a first input value >= 1000 means "sleep value-1000 ms" (the trick of the spec's models).

`ExecutionProbe` is in-process only: it wraps the `execute` of a loaded model's instances so a test can wait for an
execution to start (an Event) and hold the instance busy until it says so, instead of sleeping to synchronise.
"""
import contextlib, json, threading
from pathlib import Path

from triton_servers import http

RECORDER = '''import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        params = cfg.get("parameters", {})
        self.sleep = float(params.get("sleep_ms", {}).get("string_value", "0")) / 1000.0
        self.inputs = [i["name"] for i in cfg["input"]]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in cfg["output"]]
        self.log = os.path.join(args["model_repository"], "executions_%s.jsonl" % args["model_instance_name"])
        self.instance = args["model_instance_name"]

    def execute(self, requests):
        start = time.time()
        arrays = [[pb_utils.get_input_tensor_by_name(r, n) for n in self.inputs] for r in requests]
        arrays = [[t.as_numpy() if t is not None else None for t in ts] for ts in arrays]
        sleep = self.sleep
        for xs in arrays:
            x = xs[0]
            if x is not None and x.size and x.dtype.kind in "iuf" and x.flat[0] >= 1000:
                sleep = max(sleep, (float(x.flat[0]) - 1000) / 1000.0)
        if sleep:
            time.sleep(sleep)
        rec = {"start": start, "end": time.time(), "n": len(requests), "instance": self.instance,
               "ids": [r.request_id() for r in requests],
               "shapes": [[list(x.shape) if x is not None else None for x in xs] for xs in arrays]}
        with open(self.log, "a") as f:
            f.write(json.dumps(rec) + "\\n")
        return [pb_utils.InferenceResponse([pb_utils.Tensor(name, x.astype(dt))
                                            for (name, dt), x in zip(self.outputs, xs) if x is not None])
                for xs in arrays]
'''

# The ensemble steps of the spec's `ens` diamond, plus knobs: `op` (add1: x+1, mul2: x*2, sum: P+Q, addv: x+version),
# sleep_ms, and an error mode chosen by the first input value (-1: raise in execute, -2: NOT_FOUND error response,
# -3: error response with the default code). Records executions like RECORDER.
STEP = '''import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        p = cfg.get("parameters", {})
        self.op = p.get("op", {}).get("string_value", "add1")
        self.sleep = float(p.get("sleep_ms", {}).get("string_value", "0")) / 1000.0
        self.inputs = [i["name"] for i in cfg["input"]]
        self.output = cfg["output"][0]["name"]
        self.version = int(args["model_version"])
        self.log = os.path.join(args["model_repository"], "executions_%s.jsonl" % args["model_instance_name"])

    def execute(self, requests):
        start = time.time()
        time.sleep(self.sleep)
        out = []
        for r in requests:
            xs = [pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in self.inputs]
            mode = float(xs[0].flat[0]) if xs[0].size else 0.0
            if mode == -1:
                raise ValueError("boom from %s" % self.op)
            if mode == -2:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("not found msg", pb_utils.TritonError.NOT_FOUND)))
                continue
            if mode == -3:
                out.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError("custom error msg")))
                continue
            if self.op == "addv":
                y = xs[0] + self.version
            else:
                y = xs[0] + 1 if self.op == "add1" else xs[0] * 2 if self.op == "mul2" else xs[0] + xs[1]
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor(self.output, y.astype(xs[0].dtype))]))
        rec = {"start": start, "end": time.time(), "n": len(requests), "ids": [r.request_id() for r in requests],
               "shapes": [list(pb_utils.get_input_tensor_by_name(r, self.inputs[0]).as_numpy().shape) for r in requests]}
        with open(self.log, "a") as f:
            f.write(json.dumps(rec) + "\\n")
        return out
'''

# Two outputs from one input (the spec's m4two): O1 = x + 1, O2 = x + 2.
TWO_OUTPUTS = '''import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        res = []
        for r in requests:
            x = r.inputs()[0].as_numpy()
            res.append(pb_utils.InferenceResponse([pb_utils.Tensor("O1", x + 1), pb_utils.Tensor("O2", x + 2)]))
        return res
'''


def write_model(repo, name, config, model_py=RECORDER, versions=(1,)) -> Path:
    "Write `<repo>/<name>/config.pbtxt` and `<version>/model.py` (no model file for ensembles: model_py=None)."
    d = Path(repo) / name
    d.mkdir(parents=True, exist_ok=True)
    (d / 'config.pbtxt').write_text(f'name: "{name}"\n' + config.strip() + '\n')
    for v in versions:
        (d / str(v)).mkdir(exist_ok=True)
        if model_py is not None: (d / str(v) / 'model.py').write_text(model_py)
    return d


def io(kind, name, dtype='TYPE_FP32', dims=(2,), extra=''):
    "One `input [...]`/`output [...]` entry."
    return f'{kind} [ {{ name: "{name}" data_type: {dtype} dims: [ {", ".join(map(str, dims))} ] {extra}}} ]'


def recorder_config(mbs=8, dtype='TYPE_INT32', dims=(-1,), batching='', instances=1, sleep_ms=0, extra=''):
    "A RECORDER config: input X, output Y, `batching` is e.g. 'dynamic_batching { ... }'."
    return '\n'.join([f'backend: "python"', f'max_batch_size: {mbs}', io('input', 'X', dtype, dims, extra),
                      io('output', 'Y', dtype, dims), batching,
                      f'instance_group [ {{ count: {instances} kind: KIND_CPU }} ]',
                      f'parameters: {{ key: "sleep_ms" value: {{ string_value: "{sleep_ms}" }} }}'])


def step_config(op, inputs=('IN',), output='OUT', mbs=4, sleep_ms=0, batching='', dims=(2,)):
    "A STEP model config."
    ins = ', '.join(f'{{ name: "{n}" data_type: TYPE_FP32 dims: [ {", ".join(map(str, dims))} ] }}' for n in inputs)
    return '\n'.join([f'backend: "python"', f'max_batch_size: {mbs}', f'input [ {ins} ]',
                      io('output', output, dims=dims), batching,
                      f'parameters: [ {{ key: "op" value: {{ string_value: "{op}" }} }}, '
                      f'{{ key: "sleep_ms" value: {{ string_value: "{sleep_ms}" }} }} ]'])


def ensemble_config(steps, inputs=(('X', 'TYPE_FP32', (2,)),), outputs=(('Y', 'TYPE_FP32', (2,)),), mbs=4, extra=''):
    """An ensemble config; steps are (model, {model input: tensor}, {model output: tensor}[, version])."""
    def tensors(kind, specs):
        return f'{kind} [ ' + ', '.join(f'{{ name: "{n}" data_type: {t} dims: [ {", ".join(map(str, d))} ] }}'
                                         for n, t, d in specs) + ' ]'
    def step(s):
        model, ins, outs = s[:3]
        version = s[3] if len(s) > 3 else -1
        maps = [f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in ins.items()]
        maps += [f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in outs.items()]
        return f'{{ model_name: "{model}" model_version: {version} {" ".join(maps)} }}'
    return '\n'.join(['platform: "ensemble"', f'max_batch_size: {mbs}', tensors('input', inputs) if inputs else '',
                      tensors('output', outputs) if outputs else '', extra,
                      'ensemble_scheduling { step [ ' + ', '.join(step(s) for s in steps) + ' ] }' if steps is not None else ''])


def read_executions(model_dir) -> list:
    "Every execute() a RECORDER/STEP model logged (all instances), sorted by start time."
    recs = []
    for f in Path(model_dir).glob('executions_*.jsonl'):
        recs += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return sorted(recs, key=lambda r: r['start'])


def clear_executions(model_dir):
    for f in Path(model_dir).glob('executions_*.jsonl'): f.unlink()


class ExecutionProbe:
    """Wraps `execute` of every instance of a loaded triton_mini model (in-process only).

    `started` counts executions that have begun (with a Condition to wait on), `hold()` makes the next execution
    block until the `with` block ends, so a test can keep an instance busy while it queues requests.
    """
    def __init__(self, server, model, version=-1):
        self.model = server.repository.get(model, version)
        self.cond, self.started, self.batches = threading.Condition(), 0, []
        self._hold, self._originals = None, []
        for inst in self.model.instances:
            orig = inst.execute
            self._originals.append((inst, 'execute' in vars(inst), orig))
            inst.execute = lambda requests, orig=orig, inst=inst: self._execute(inst, orig, requests)

    def _execute(self, inst, orig, requests):
        with self.cond:
            self.started += 1
            self.batches.append((inst.name, [r.id for r in requests]))
            hold, self._hold = self._hold, None
            self.cond.notify_all()
        if hold is not None: hold.wait(30)
        return orig(requests)

    def wait_started(self, n, timeout=10):
        "Block until `n` executions have started in total."
        with self.cond:
            if not self.cond.wait_for(lambda: self.started >= n, timeout):
                raise AssertionError(f'only {self.started} executions started, expected {n}')

    @contextlib.contextmanager
    def hold(self):
        "The next execution (of any instance) blocks until the block exits."
        release = threading.Event()
        with self.cond: self._hold = release
        try: yield release
        finally: release.set()

    def restore(self):
        "Put the instances' own execute back."
        for inst, own, orig in self._originals:
            if own: inst.execute = orig
            else: del inst.execute


def run_threads(fns, timeout=30):
    "Run each fn in its own thread, all released together by a Barrier; returns [(result, exception)] in order."
    barrier, out = threading.Barrier(len(fns)), [None] * len(fns)
    def call(i, fn):
        barrier.wait()
        try: out[i] = (fn(), None)
        except BaseException as e: out[i] = (None, e)
    threads = [threading.Thread(target=call, args=(i, fn), daemon=True) for i, fn in enumerate(fns)]
    for t in threads: t.start()
    for t in threads: t.join(timeout)
    if any(t.is_alive() for t in threads): raise AssertionError('a caller thread did not finish')
    return out


# ---- HTTP clients for these models (the servers come from tests/triton_servers.py) ----

def http_call(port, method, path, body=None, timeout=60):
    "(status, text) of one HTTP request to 127.0.0.1:port."
    status, _, text = http(port, method, path, body, timeout)
    return status, text


def http_infer(port, model, data, shape, rid='', params=None, datatype='INT32', name='X'):
    "KServe v2 infer with one input; returns (status, parsed body or error text)."
    body = {'inputs': [{'name': name, 'shape': list(shape), 'datatype': datatype, 'data': list(data)}]}
    if rid: body['id'] = rid
    if params: body['parameters'] = params
    status, text = http_call(port, 'POST', f'/v2/models/{model}/infer', body)
    try: return status, json.loads(text)
    except ValueError: return status, text
