"""python_backend's documented features (issue 28), each as its README shows it and as Triton 2.51 behaves:

- **async execute**: a decoupled model's `async def execute` is left running (Triton's stub, since 24.04), so one
  instance serves overlapping requests; a coroutine that raises is logged with its traceback and its request gets
  nothing. A model that is *not* decoupled is awaited batch by batch (measured: 4 requests x 1 s took 4 s on Triton).
- **Python-based backends**: `--backend-directory DIR` with `DIR/<backend>/model.py`; every model with
  `backend: "<backend>"` runs that file, even one with a model.py of its own; its config has `runtime: "model.py"`.
- **model packages**: `from . import helper` / `from .helper import x` in a version folder of several files.
- **pybind11's conversions** in `pb_utils`: bytes for str, numpy integers and bool for ints, sequences for lists,
  and the TypeError for what pybind refuses (floats for ints, a str for a list, negative unsigned values...).

The fast tests run triton_mini in process (thread and process mode); the `oracle` tests serve the same folders with
the real Triton and with `triton-mini` and compare answers, configs and log lines.
"""
import json, queue, re, shutil, textwrap, threading, time
from pathlib import Path

import numpy as np
import pytest

from triton_mini.backend import InferenceRequest
from triton_mini.server import TritonServer

from triton_servers import MiniProcess, RealTriton, http, settled, start_together, wait_until
from triton_qa import oracle_python_backend

IO = 'input [{name: "IN" data_type: TYPE_INT32 dims: [1]}] output [{name: "OUT" data_type: TYPE_INT32 dims: [1]}]'
SLEEP = 0.5

MODELS = {
    # name: (config.pbtxt, {file in the version folder: source})
    'adec': (f'backend: "python" {IO} model_transaction_policy {{decoupled: true}} instance_group [{{count: 1 kind: KIND_CPU}}]', {'model.py': f'''
        import asyncio
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            async def execute(self, requests):
                for request in requests:
                    x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                    sender = request.get_response_sender()
                    if x[0] == -1:
                        raise ValueError("boom in async execute")
                    await asyncio.sleep({SLEEP})
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return None
        '''}),
    'and': (f'backend: "python" {IO} instance_group [{{count: 1 kind: KIND_CPU}}]', {'model.py': f'''
        import asyncio
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            async def execute(self, requests):
                out = []
                for request in requests:
                    x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                    if x[0] == -1:
                        raise ValueError("boom in async execute")
                    await asyncio.sleep({SLEEP})
                    out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
                return out
        '''}),
    'pkg': (f'backend: "python" {IO}', {'helper.py': 'VALUE = 7\ndef times(x): return x * VALUE\n', 'model.py': '''
        import numpy as np
        import triton_python_backend_utils as pb_utils
        from . import helper
        from .helper import VALUE

        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", (helper.times(pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()) + VALUE).astype(np.int32))]) for r in requests]
        '''}),
    'viabe': (f'backend: "mybe" {IO}', {}),
    'ownpy': (f'backend: "mybe" {IO}', {'model.py': '''
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 100)]) for r in requests]
        '''}),
    'bls': ('backend: "python" input [{name: "IN" data_type: TYPE_INT32 dims: [1]}] output [{name: "OUT" data_type: TYPE_STRING dims: [-1]}]', {'model.py': '''
        import numpy as np
        import triton_python_backend_utils as pb_utils

        def attempt(label, fn):
            try:
                r = fn()
                if isinstance(r, pb_utils.InferenceResponse):
                    if r.has_error(): return f"{label}: response error: {r.error().message()}"
                    return f"{label}: ok {pb_utils.get_output_tensor_by_name(r, 'OUT').as_numpy().tolist()}"
                return f"{label}: ok {r!r}"
            except Exception as e:
                return f"{label}: {type(e).__name__}: {e}"

        class TritonPythonModel:
            def execute(self, requests):
                out = []
                for request in requests:
                    t = pb_utils.Tensor("IN", pb_utils.get_input_tensor_by_name(request, "IN").as_numpy())
                    R = pb_utils.InferenceRequest
                    def call(**kw):
                        return lambda: R(**{"model_name": "pkg", "requested_output_names": ["OUT"], "inputs": [t], **kw}).exec()
                    res = [
                        attempt("bytes name", call(model_name=b"pkg")),
                        attempt("tuple lists", call(requested_output_names=("OUT",), inputs=(t,))),
                        attempt("np version", call(model_version=np.int64(1))),
                        attempt("np flags timeout", call(flags=np.uint32(0), timeout=np.int32(0))),
                        attempt("float version", call(model_version=1.0)),
                        attempt("str version", call(model_version="1")),
                        attempt("int name", call(model_name=1)),
                        attempt("bytes output names", call(requested_output_names=[b"OUT"])),
                        attempt("str output names", call(requested_output_names="OUT")),
                        attempt("bytes request_id", call(request_id=b"rid")),
                        attempt("bool version", call(model_version=True)),
                        attempt("np bool flags", call(flags=np.bool_(False))),
                        attempt("np float version", call(model_version=np.float64(1))),
                        attempt("np str name", call(model_name=np.str_("pkg"))),
                        attempt("np bytes name", call(model_name=np.bytes_(b"pkg"))),
                        attempt("bytes tensor name", lambda: pb_utils.Tensor(b"X", np.zeros(1)).name()),
                        attempt("tuple outputs", lambda: len(pb_utils.InferenceResponse(output_tensors=(t,)).output_tensors())),
                        attempt("bytes error", lambda: pb_utils.TritonError(b"msg").message()),
                        attempt("tensor list", lambda: pb_utils.Tensor("X", [1, 2]).name()),
                        attempt("big flags", call(flags=2**40)),
                        attempt("neg flags", call(flags=-1)),
                        attempt("neg timeout", call(timeout=-1)),
                        attempt("generator names", call(requested_output_names=(n for n in ["OUT"]))),
                        attempt("set names", call(requested_output_names={"OUT"})),
                        attempt("ndarray names", call(requested_output_names=np.array(["OUT"]))),
                    ]
                    out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(res, dtype=object))]))
                return out
        '''}),
}

MYBE = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_info(f"mybe backend initialize {args['model_name']}")
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 10)]) for r in requests]
'''


def write_repo(root:Path) -> tuple:
    "The models and the backend directory (with `mybe/model.py`): (repository, backend directory)."
    repo, backends = root / 'models', root / 'backends'
    for name, (config, files) in MODELS.items():
        (repo / name / '1').mkdir(parents=True)
        (repo / name / 'config.pbtxt').write_text(config)
        for f, src in files.items(): (repo / name / '1' / f).write_text(textwrap.dedent(src))
    (backends / 'mybe').mkdir(parents=True)
    (backends / 'mybe' / 'model.py').write_text(MYBE)
    return repo, backends


@pytest.fixture(scope='module')
def folders(tmp_path_factory): return write_repo(tmp_path_factory.mktemp('pyb'))


@pytest.fixture(scope='module', params=['thread', 'process'])
def server(request, folders):
    repo, backends = folders
    s = TritonServer(repo, backend_directory=backends, python_backend_mode=request.param)
    s.start()
    yield s
    s.stop()


def one(server, model, v) -> list:
    return server.infer(model, {'IN': np.array([v], np.int32)}).outputs['OUT'].tolist()


# ------------------------------------------------------------------------------------------------------------- fast

def test_model_package_relative_imports(server):
    assert one(server, 'pkg', 3) == [28]                  # helper.times(3) + VALUE


def test_python_based_backend_runs_for_its_models(server):
    assert one(server, 'viabe', 3) == [30]
    assert one(server, 'ownpy', 3) == [30]                # the backend's model.py wins over the model's own (as Triton)
    cfg = server.model_config('viabe')
    assert (cfg.backend, cfg.runtime, cfg.default_model_filename) == ('mybe', 'model.py', '')
    assert server.model_metadata('viabe')['platform'] == 'mybe'


def test_unknown_backend_without_directory_fails_as_before(folders, tmp_path):
    repo, _ = folders
    s = TritonServer(repo, model_control_mode='explicit')
    s.start()
    try:
        with pytest.raises(Exception, match="unable to find backend library for backend 'mybe'"): s.load_model('viabe')
    finally: s.stop()


def decoupled_run(server, values, timeout=10) -> tuple:
    "Submit one request per value to `adec` at once: ({value: (out, seconds)}, seconds until the last final response)."
    got, done, t0 = {}, threading.Event(), time.monotonic()
    expected = [v for v in values if v != -1]
    def callback(req, resp, final):
        if final and resp is not None:
            got[int(req.id)] = (resp.outputs['OUT'].tolist() if resp.error is None else resp.error.message, time.monotonic() - t0)
        if len(got) == len(expected): done.set()
    for v in values:
        server.submit(InferenceRequest('adec', {'IN': np.array([v], np.int32)}, id=str(v), response_callback=callback))
    done.wait(timeout)
    return got, time.monotonic() - t0


def test_decoupled_async_execute_overlaps_on_one_instance(server):
    got, took = decoupled_run(server, [1, 2, 3, 4])
    assert {k: v[0] for k, v in got.items()} == {1: [1], 2: [2], 3: [3], 4: [4]}
    assert took < 3 * SLEEP, f'4 requests of {SLEEP} s on one instance took {took:.2f} s: not concurrent'


def test_decoupled_async_execute_that_raises_is_logged(server, caplog):
    caplog.set_level('ERROR')
    got, _ = decoupled_run(server, [-1, 5])
    assert {k: v[0] for k, v in got.items()} == {5: [5]}  # -1: no response at all (as Triton)
    boom = lambda: [r.getMessage() for r in caplog.records if 'boom in async execute' in r.getMessage()]
    wait_until(boom, 10, 'the traceback in the log')
    lines = boom()
    assert lines and lines[0].startswith('Traceback (most recent call last):\n  File "') and \
        lines[0].endswith('in execute\n    raise ValueError("boom in async execute")\nValueError: boom in async execute\n'), lines


def test_async_execute_of_a_model_that_is_not_decoupled_is_awaited_in_turn(server):
    results, t0 = [], time.monotonic()
    threads = [threading.Thread(target=lambda v=v: results.append(one(server, 'and', v))) for v in (1, 2)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert sorted(results) == [[1], [2]] and time.monotonic() - t0 >= 2 * SLEEP * 0.9
    with pytest.raises(Exception, match=r"^Failed to process the request\(s\) for model 'and_0_0', message: ValueError: boom in async execute"):
        one(server, 'and', -1)


def test_pybind_argument_conversions(server):
    lines = server.infer('bls', {'IN': np.array([3], np.int32)}).outputs['OUT'].tolist()
    got = dict((l.decode() if isinstance(l, bytes) else l).split(': ', 1) for l in lines)
    for ok in ('bytes name', 'tuple lists', 'np version', 'np flags timeout', 'bytes output names', 'bytes request_id',
               'bool version', 'np bool flags', 'np str name', 'np bytes name', 'ndarray names'):
        assert got[ok] == 'ok [28]', (ok, got[ok])
    assert (got['bytes tensor name'], got['tuple outputs'], got['bytes error']) == ("ok 'X'", 'ok 1', "ok 'msg'")
    for refused in ('float version', 'str version', 'int name', 'str output names', 'np float version', 'tensor list',
                    'big flags', 'neg flags', 'neg timeout', 'generator names', 'set names'):
        assert got[refused].startswith('TypeError: __init__(): incompatible constructor arguments.'), (refused, got[refused])


def test_cli_backend_directory(folders):
    repo, backends = folders
    with MiniProcess(repo, f'--backend-directory={backends}', '--log-verbose=1') as mini:
        status, _, body = http(mini.http_port, 'POST', '/v2/models/viabe/infer',
                               {'inputs': [{'name': 'IN', 'datatype': 'INT32', 'shape': [1], 'data': [4]}]})
        assert status == 200 and json.loads(body)['outputs'][0]['data'] == [40]
        assert 'ignoring flags' not in mini.output


# ----------------------------------------------------------------------------------------------------------- oracle

def normalised(line:str) -> str:
    "A bls result line without what differs by construction: object addresses, our Tensor repr, numpy 2's scalar repr."
    line = re.sub(r'np\.\w+\(([^()]*)\)', r'\1', line)      # the oracle's numpy<2 prints np.float64(1.0) as 1.0
    line = re.sub(r'<c_python_backend_utils\.Tensor object at 0x[0-9a-f]+>|Tensor\(\'IN\', int32\[1\]\)', '<Tensor>', line)
    return re.sub(r' at 0x[0-9a-f]+>', '>', line)


@pytest.fixture(scope='module')
def both(tmp_path_factory):
    "The real Triton and triton-mini serving the same folders; the oracle's backend directory adds its own `python/`."
    root = tmp_path_factory.mktemp('pyb_oracle')
    repo, backends = write_repo(root)
    real_backends = root / 'real_backends'
    shutil.copytree(backends, real_backends)
    (real_backends / 'python').symlink_to(oracle_python_backend())
    real, mini = start_together(lambda: RealTriton(repo, f'--backend-directory={real_backends}'),
                                lambda: MiniProcess(repo, f'--backend-directory={backends}'))
    yield {'real': real, 'mini': mini}
    for s in (real, mini): s.stop()


def http_infer(server, model, v):
    status, _, body = http(server.http_port, 'POST', f'/v2/models/{model}/infer',
                           {'inputs': [{'name': 'IN', 'datatype': 'INT32', 'shape': [1], 'data': [v]}]})
    body = json.loads(body)
    return (status, body['outputs'][0]['data']) if status == 200 else (status, body['error'])


@pytest.mark.oracle
@pytest.mark.parametrize('model,value', [('pkg', 3), ('viabe', 3), ('ownpy', 3), ('and', -1), ('bls', 3)])
def test_answers_like_triton(both, model, value):
    real, mini = (http_infer(both[k], model, value) for k in ('real', 'mini'))
    if model == 'bls': real, mini = ([normalised(l) for l in r[1]] for r in (real, mini))
    assert mini == real


@pytest.mark.oracle
def test_python_based_backend_config_like_triton(both):
    keys = ('backend', 'runtime', 'default_model_filename', 'platform')
    real, mini = (json.loads(http(both[k].http_port, 'GET', '/v2/models/viabe/config')[2]) for k in ('real', 'mini'))
    assert {k: mini[k] for k in keys} == {k: real[k] for k in keys}
    real, mini = (json.loads(http(both[k].http_port, 'GET', '/v2/models/viabe')[2]) for k in ('real', 'mini'))
    assert mini == real


def grpc_stream(port, values, wait:float) -> tuple:
    "Send `values` to `adec` on one gRPC stream: ({value: data}, seconds until the last response)."
    import tritonclient.grpc as grpcclient
    c, q, t0 = grpcclient.InferenceServerClient(f'127.0.0.1:{port}'), queue.Queue(), time.monotonic()
    c.start_stream(callback=lambda result, error: q.put((time.monotonic() - t0, result, error)))
    for v in values:
        i = grpcclient.InferInput('IN', [1], 'INT32'); i.set_data_from_numpy(np.array([v], np.int32))
        c.async_stream_infer('adec', [i], request_id=str(v))
    got, last = {}, 0.0
    try:
        while True:
            t, r, e = q.get(timeout=wait)
            if r is not None: got[int(r.get_response().id)] = r.as_numpy('OUT').tolist(); last = t
    except queue.Empty: pass
    threading.Thread(target=c.close, daemon=True).start()   # a request that never ends keeps its stream open
    return got, last


@pytest.mark.oracle
def test_decoupled_async_execute_like_triton(both):
    for k in ('real', 'mini'):
        got, last = grpc_stream(both[k].grpc_port, [1, 2, -1, 3, 4], wait=4 * SLEEP + 1)
        assert got == {1: [1], 2: [2], 3: [3], 4: [4]} and last < 3 * SLEEP, (k, got, last)
    def logged(server):
        return [l.split('] ', 1)[1] for l in server.lines if 'boom in async execute' in l and 'Traceback' in l]
    for k in ('real', 'mini'): wait_until(lambda: logged(both[k]), 10, f'the traceback in the log of {k}')
    real, mini = settled(lambda: logged(both['real'])), settled(lambda: logged(both['mini']))
    assert real and mini == real[:len(mini)] and len(mini) == len(real)


# ------------------------------------------------------------------------------------------------------ BLS timeout

SLOW = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.4)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                for r in requests]
'''
SLOW_CONFIG = '''backend: "python"
max_batch_size: 1
input [{ name: "IN" data_type: TYPE_INT32 dims: [1] }]
output [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }]
instance_group [{ count: 1 kind: KIND_CPU }]
dynamic_batching { default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 10000000 allow_timeout_override: true } }
'''
CALLER = '''
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        out = []
        for r in requests:
            calls = [pb_utils.InferenceRequest(model_name="slow", requested_output_names=["OUT"], timeout=100000,
                                               inputs=[pb_utils.Tensor("IN", np.array([[i]], np.int32))]) for i in range(2)]
            got = await asyncio.gather(*(c.async_exec() for c in calls))
            text = [g.error().message() if g.has_error() else "ok %d" % pb_utils.get_output_tensor_by_name(g, "OUT").as_numpy()[0][0]
                    for g in got]
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", np.array(text, dtype=np.object_))]))
        return out
'''
CALLER_CONFIG = '''backend: "python"
input [{ name: "IN" data_type: TYPE_INT32 dims: [1] }]
output [{ name: "TEXT" data_type: TYPE_STRING dims: [2] }]
'''


@pytest.mark.oracle
@pytest.mark.parametrize('mode', ['thread', 'process'])
def test_bls_timeout_like_triton(tmp_path, real_triton, mini_process, mode):
    "A BLS request's `timeout` (µs) is the callee's queue timeout: the call that waits behind a busy instance is rejected."
    repo = tmp_path / 'models'
    for name, model, config in (('slow', SLOW, SLOW_CONFIG), ('caller', CALLER, CALLER_CONFIG)):
        (repo / name / '1').mkdir(parents=True)
        (repo / name / '1' / 'model.py').write_text(model)
        (repo / name / 'config.pbtxt').write_text(config)
    answers = [http_infer(s, 'caller', 0) for s in (real_triton(repo), mini_process(repo, f'--python-backend-mode={mode}'))]
    def outcome(answer):
        "Which of the two concurrent calls gets the instance first is a race on both servers (Triton 2.51 ran call 1 first in a CI run)."
        status, texts = answer
        return status, sorted('ok' if t == f'ok {i}' else t for i, t in enumerate(texts))
    assert outcome(answers[0]) == (200, ['Request timeout expired', 'ok']), answers
    assert outcome(answers[1]) == outcome(answers[0]), answers
